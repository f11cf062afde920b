"""Excalidraw drawings (``*.excalidraw.md`` as the Obsidian plugin writes them) indexed as their
text elements and link targets, titled by the file name; the plugin's banner, data headings and
drawing JSON never indexed; a compressed drawing without a Text Elements section decompressed
(LZ-String, checked against vectors from the lz-string library itself), one that does not
decompress one warning with the rest of the file indexed; the owner's front block still judged
by the agent view. Real tantivy and FAISS indexes, the hash embedder."""
import random

import pytest
from drawings import BANNER, compress_to_base64, drawing_file, scene, text_element
from helpers import ALL_STORES, write

from hybrid.sources import kind_of
from hybrid.sources.convert import judged_fields
from hybrid.sources.excalidraw import drawing_heading, drawing_note
from hybrid.sources.lzstring import Undecodable, decompress_base64

STORES = ALL_STORES

# compressToBase64 of lz-string 1.5.0 (npm), the library the plugin uses
VECTORS = {
    "Hello, world": "BIUwNmD2A0AEDukBOYAmQ===",
    "Sprint 12 → ship 🚀 the importer, é漢":
        "MoBwTglgdgLgBARgEx0EmEcDOALCI6F4NwAL24YsBTOCAWxAHswYywAaOAS8CJ7IA===",
    '{"type":"excalidraw","elements":[{"type":"text","text":"abababababab"}]}':
        "N4IgLgngDgpiBcIYA8DGBDANgSwCYCd0B3EAGiUxgFsYA7MAZwQG1RJYFwUwyvkfE6AEbDRI8SAC+AXUlA==",
}
ELEMENTS = [
    text_element("Vq3nT8kD", "Event sourcing keeps every change", 120, 40),
    text_element("h2LmQ0aZ", "# Read models\nare rebuilt from the log", 500, 40),
    text_element("c7RwX1pE", "see [[Architecture]]", 120, 400, link="[[Decision log]]"),
    text_element("zz9Deleted", "obsolete wombat", 0, 0, deleted=True),
]
TEXTS = {"Vq3nT8kD": "Event sourcing keeps every change",
         "h2LmQ0aZ": "# Read models\nare rebuilt from the log", "c7RwX1pE": "see [[Architecture]]"}
DRAWING = drawing_file(TEXTS, ELEMENTS, links={"c7RwX1pE": "[[Decision log]]"},
                       embedded={"4f1a9c0e2b7d": "[[whiteboard photo.png]]"},
                       own="Back of the card: **CQRS** pairs well with it.")


def test_lz_string_decoder_matches_the_library():
    for text, packed in VECTORS.items():
        assert decompress_base64(packed) == text
        assert compress_to_base64(text) == packed  # the tests' encoder is the library's too
    rng = random.Random(33)
    alphabet = 'ab \n{}":,é漢😀'
    for n in (1, 2, 3, 7, 50, 400, 3000):
        text = "".join(rng.choice(alphabet) for _ in range(n))
        packed = compress_to_base64(text)
        spread = "\n\n".join(packed[i:i + 64] for i in range(0, len(packed), 64))
        assert decompress_base64(spread) == text  # the plugin's line breaks are ignored
    good = VECTORS["Hello, world"]
    for bad, why in ((good[:8], "ends in the middle"), ("BIU*NmD2", "'\\*' is not a base64"),
                     ("", "no data"), ("BBgB", "code 6 refers to no entry")):
        with pytest.raises(Undecodable, match=why):
            decompress_base64(bad)
    with pytest.raises(Undecodable, match="beyond 100 characters"):
        decompress_base64(compress_to_base64("ab" * 1000), max_chars=100)


def test_a_drawing_is_its_text_elements_and_links():
    note = drawing_note("sketches/System design.excalidraw.md", DRAWING)
    text = "\n".join(note.lines)
    assert note.title == "System design" and note.tags == ["excalidraw"]
    assert note.properties["excalidraw-plugin"] == "parsed"  # the front block as the owner keeps it
    for gone in ("EXCALIDRAW VIEW", "Excalidraw Data", "Text Elements", "Element Links", "compressed-json",
                 "%%", "^Vq3nT8kD", "^c7RwX1pE", ELEMENTS[0]["id"] + "\n", compress_to_base64(scene(ELEMENTS))[:64]):
        assert gone not in text, gone
    body = note.lines[note.body_start - 1:]
    assert body == ["", "Back of the card: **CQRS** pairs well with it.", "", "# System design", "",
                    "Event sourcing keeps every change", "", "\\# Read models", "are rebuilt from the log", "",
                    "see [[Architecture]]", "[[Decision log]]", "", "[[whiteboard photo.png]]"]
    # an element's link follows its text (so it is left out with it, issue #47); the embedded
    # image's, of no text element, comes last
    assert note.links == ["Architecture", "Decision log", "whiteboard photo.png"]
    assert kind_of("sketches/System design.excalidraw.md") == "excalidraw"
    assert kind_of("notes/excalidraw.md") == "note"


def test_without_text_elements_the_drawing_itself_is_read():
    compressed_only = drawing_file({}, ELEMENTS, text_section=False)
    note = drawing_note("Old.excalidraw.md", compressed_only)
    assert note.warnings == []
    body = [x for x in note.lines[note.body_start - 1:] if x]
    assert body == ["# Old", "Event sourcing keeps every change", "\\# Read models", "are rebuilt from the log",
                    "see [[Architecture]]", "[[Decision log]]"]  # reading order; the deleted one left out
    older = "\n".join(["---", "excalidraw-plugin: parsed", "---", "# Text Elements", "Kanban lanes ^a1",
                       "", "%%", "# Drawing", "```json", scene(ELEMENTS), "```", "%%"])
    assert [x for x in drawing_note("Older.excalidraw.md", older).lines[3:] if x] == ["# Older", "Kanban lanes"]


def test_a_drawing_that_does_not_decompress_is_one_warning_and_the_rest_is_kept():
    broken = drawing_file({}, ELEMENTS, text_section=False, own="Whiteboard about the otter migration",
                          compressed=compress_to_base64(scene(ELEMENTS))[:90])
    note = drawing_note("Broken.excalidraw.md", broken)
    assert note.warnings == ["Broken.excalidraw.md: its drawing does not decompress (the data ends in the "
                             "middle of the stream); indexed the rest of the file without the drawing's text"]
    assert "Whiteboard about the otter migration" in note.lines and BANNER not in note.lines
    not_json = drawing_file({}, ELEMENTS, text_section=False, compressed=compress_to_base64("{not json"))
    assert "is not valid JSON" in drawing_note("J.excalidraw.md", not_json).warnings[0]


@pytest.fixture
def sketches(tmp_path, fake):
    root = tmp_path / "vault"
    write(root, "sketches/System design.excalidraw.md", DRAWING)
    write(root, "sketches/Compressed.excalidraw.md", drawing_file(
        {}, [text_element("p0", "Pelican feeding schedule", 0, 0)], text_section=False))
    write(root, "sketches/Broken.excalidraw.md", drawing_file(
        {}, ELEMENTS, text_section=False, own="Whiteboard about the otter migration",
        compressed=compress_to_base64(scene(ELEMENTS))[:90]))
    write(root, "sketches/Plain.excalidraw.md", "\n".join([  # an uncompressed drawing, older layout
        "---", "excalidraw-plugin: parsed", "---", "# Text Elements", "Kanban lanes ^a1", "", "%%",
        "# Drawing", "```json", scene(ELEMENTS), "```", "%%"]))
    write(root, "Architecture.md", "# Architecture\n\nServices talk through the log.\n")
    fake.add_vault(root, "v")
    return fake, root, fake.index()[0]


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_drawings_on_a_real_index(sketches):
    h, root, report = sketches
    assert report.added == 5 and report.skipped == 0
    assert report.warnings == ["sketches/Broken.excalidraw.md: its drawing does not decompress (the data ends "
                               "in the middle of the stream); indexed the rest of the file without the "
                               "drawing's text"]
    hit = h.search("event sourcing change", mode="lexical")[0]
    assert (hit.path, hit.source, hit.title) == ("sketches/System design.excalidraw.md", "excalidraw", "System design")
    assert hit.heading_path == ["System design"] and "^" not in hit.text
    assert hit.uri == f"obsidian://open?vault={root.name}&file=sketches%2FSystem%20design.excalidraw"
    assert "Event sourcing" in h.get(hit.citation).text
    # the plugin's banner and the drawing's JSON: never indexed
    assert h.search("switch MORE OPTIONS menu decompress palette", mode="lexical") == []
    assert all("OPTIONS" not in x.text and "elements" not in x.text
               for x in h.search("switch view MORE OPTIONS menu", mode="hybrid", top_k=20))
    assert h.search("strokeColor fontFamily versionNonce", mode="lexical") == []
    assert h.search("obsolete wombat", mode="lexical") == []
    linked = h.search("Decision log", mode="lexical", sources=["excalidraw"])[0]
    assert linked.path == "sketches/System design.excalidraw.md"  # a link target is text of the drawing
    assert h.search("pelican feeding", mode="lexical")[0].path == "sketches/Compressed.excalidraw.md"
    assert h.search("otter migration", mode="lexical")[0].path == "sketches/Broken.excalidraw.md"
    assert h.status()[0].sources == {"note": 1, "excalidraw": 4}
    assert h.search("kanban lanes", mode="lexical")[0].title == "Plain"
    assert {x.path for x in h.search("services log", sources=["note"], mode="lexical")} == {"Architecture.md"}
    got = h.get("sketches/System design.excalidraw.md").text
    assert "EXCALIDRAW VIEW" not in got and "# System design" in got


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_a_private_drawing_is_hidden_from_agents(sketches):
    h, root, _ = sketches
    assert h.search("event sourcing", agent=True, mode="lexical")
    write(root, "sketches/System design.excalidraw.md", DRAWING.replace("tags: [excalidraw]", "private: true"))
    h.index()
    assert h.search("event sourcing", agent=True, mode="lexical") == []
    assert h.search("event sourcing", mode="lexical")[0].title == "System design"
    with pytest.raises(Exception, match="not a note you can read"):
        h.get("sketches/System design.excalidraw.md", agent=True)


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_drawings_indexed_as_notes_before_are_read_again(tmp_path, fake, monkeypatch):
    from helpers import set_chunking_version

    from hybrid.sources import convert
    root = tmp_path / "vault"
    write(root, "Board.excalidraw.md", DRAWING)
    fake.add_vault(root, "v")
    with monkeypatch.context() as m:  # as an index made before drawings were a kind of their own
        m.setitem(convert.READERS, "excalidraw", convert.READERS["note"])
        fake.index()
    assert fake.search("switch MORE OPTIONS menu", mode="lexical")[0].title == "Excalidraw Data"
    set_chunking_version(fake.config.vault("v"), 8)
    assert fake.index()[0].updated == 1  # the upgrade re-reads it
    assert fake.search("switch MORE OPTIONS menu", mode="lexical") == []
    assert fake.search("event sourcing", mode="lexical")[0].title == "Board"


def test_a_tag_starting_a_line_of_the_drawing_stays_a_tag():
    """Issue #47: `#private okapi …` at the start of a text element was escaped as if it were a
    heading (`\\#private`), so the drawing carried no private tag and agents saw it. In Obsidian
    `#word` is a tag; only what markdown reads as a heading (1-6 `#` then a space, or nothing)
    or a fence is escaped."""
    words = "#private okapi drawing words"
    sectioned = drawing_file({"e0": words}, [text_element("e0", words, 0, 0)])
    compressed = drawing_file({}, [text_element("e0", words, 0, 0)], text_section=False)
    for path, text in (("Plan.excalidraw.md", sectioned), ("Old.excalidraw.md", compressed)):
        note = drawing_note(path, text)
        assert "private" in note.tags and words in note.lines, path
        assert judged_fields(path, text)[0] == note.tags  # the agent view's re-judging reads the same
    heads = ["# Read models", "#", "###### six", "#\tTabbed", "#\u00a0spaced", "   ## indented", "```python",
             "~~~", "#tag words", "####### seven", "#1984 was a year", "\\# kept as written", "x # y"]
    note = drawing_note("Heads.excalidraw.md", drawing_file({}, [
        text_element(f"h{i}", t, 0, 10 * i) for i, t in enumerate(heads)], text_section=False))
    body = [x for x in note.lines[note.body_start - 1:] if x]
    assert body == ["# Heads", "\\# Read models", "\\#", "\\###### six", "\\#\tTabbed", "\\#\u00a0spaced",
                    "\\## indented", "\\```python", "\\~~~", "#tag words", "####### seven",
                    "#1984 was a year", "\\# kept as written", "x # y"]
    assert note.tags == ["excalidraw", "tag"]
    assert drawing_heading(note.path, note.lines) == note.lines.index("# Heads")  # still the last heading


def test_a_tag_anywhere_in_the_drawings_text_counts_for_privacy():
    """A multi-line text element whose first line reads like a data heading (`## Embedded
    Files`) ended the Text Elements section early, and the elements after it, a `#private` one
    among them, were dropped: the drawing was not private (found by the re-test of issue #47).
    Tags come from the whole file as written, as a note's come from the whole note."""
    texts = {"e0": "## Embedded Files\nokapi words", "e1": "#private quagga words"}
    text = drawing_file(texts, [text_element(i, t, 0, 10 * n) for n, (i, t) in enumerate(texts.items())])
    note = drawing_note("Decoy.excalidraw.md", text)
    assert "private" in note.tags
    assert judged_fields("Decoy.excalidraw.md", text)[0] == note.tags


def test_a_text_element_that_starts_like_a_data_heading_is_text():
    """A multi-line element `## Embedded Files` / `okapi words ^e0` is an element, not the start
    of the Embedded Files section: the elements after it are indexed too."""
    texts = {"e0": "## Embedded Files\nokapi words", "e1": "quagga words"}
    text = drawing_file(texts, [text_element(i, t, 0, 10 * n) for n, (i, t) in enumerate(texts.items())],
                        embedded={"img1": "[[Photo.png]]"})
    body = drawing_note("Decoy.excalidraw.md", text).lines
    assert "okapi words" in body and "quagga words" in body and "\\## Embedded Files" in body
    assert "[[Photo.png]]" in body  # the real section is still read


def test_which_lines_end_a_text_element_is_read_in_one_pass():
    """A heading-like line is an element's first line when the lines to the next blank one end
    with an ``^id``; found for every line at once (each looked ahead alone: quadratic, 40,000
    such lines took 109 s to index in the second re-test of issue #47)."""
    from hybrid.sources.excalidraw import _element_ends
    lines = ["## Element Links", "## Element Links", "words ^a1", "", "## Embedded Files", "x: [[N]]", "",
             "plain", "last ^z9"]
    assert _element_ends(lines) == [True, True, True, False, False, False, False, True, True]
    many = ["## Element Links"] * 40_000 + ["endword ^last"]
    assert all(_element_ends(many))
