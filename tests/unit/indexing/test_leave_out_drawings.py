"""Leaving out in drawings, and titles (issue #47). Excalidraw drawings ignored `%% hybrid: skip %%`
markers, `exclude_sections` and `exclude_blocks`: the text left out was searchable and showed in
snippets and agents' `get_note`. Now the text a drawing is indexed as (the owner's markdown, then
the drawing's text under a heading naming it) is left out of as a note is, except that the
heading hybrid writes to name the drawing is matched by no pattern. And a heading inside a
left-out region became the note's title: a title is never taken from left-out text. Real files,
real indexes on both stores, a real MCP session, the hash embedder."""
import anyio
import pytest
from drawings import drawing_file, text_element
from helpers import ALL_STORES, set_chunking_version, write
from mcp import Client
from mcp_types import Implementation

from hybrid.faces.mcp import build_server
from hybrid.sources import sections
from hybrid.sources.excalidraw import drawing_note
from hybrid.sources.markdown import parse_note
from hybrid.sources.sections import LeaveOut, kept_text, leave_out

STORES = ALL_STORES
BOARD, SEALED = "sketches/Board.excalidraw.md", "sketches/Sealed.excalidraw.md"
OWN = """Back of the card: the pelargon rollout.

%% hybrid: skip %%
template boilerplate tessaract
%% hybrid: end %%

```dataview
LIST vortigram
```

## Journal prompts

zumbrafrage prompt"""
TEXTS = {"a1": "Kanban lanes for glimmerwort",
         "a2": "%% hybrid: skip %%\nkrellbox plan in the corner\n%% hybrid: end %%",
         "a3": "quokka lane visible"}
ELEMENTS = [text_element(i, t, 0, 100 * n) for n, (i, t) in enumerate(TEXTS.items())]
NOTES = {
    BOARD: drawing_file(TEXTS, ELEMENTS, own=OWN),
    SEALED: drawing_file({}, [text_element("s1", "okapi enclosure", 0, 0), text_element(
        "s2", "%% hybrid: skip %%\noxblenditch\n%% hybrid: end %%", 0, 100)],
        text_section=False),  # compressed only: markers in the drawing itself
    "titled.md": "%% hybrid: skip %%\n# Farnwhistle secret\n%% hybrid: end %%\n\n# Garden plan\n\n"
                 "herons and pelicans\n",
    "untitled.md": "---\ntags: [x]\n---\nsprockets before any heading\n\n# Journal prompts\n\nGlonkwise musings\n",
}
GONE = ("tessaract", "zumbrafrage", "vortigram", "krellbox", "oxblenditch", "Farnwhistle", "Glonkwise")
RULE = LeaveOut(("journal prompts", "Board", "Sealed"), ("dataview",))


def call(h, tool, args):
    async def main():
        async with Client(build_server(h), client_info=Implementation(name="probe", version="1")) as c:
            return await c.call_tool(tool, args)
    return anyio.run(main)


def chunk_texts(h) -> list[str]:
    store = h.session.store(h.config.vault("v"))
    return [r.text for r in store.catalog.chunks(store.catalog.all_chunk_ids()).values()]


def test_a_drawing_is_left_out_of_as_a_note_and_its_own_heading_is_no_section_of_the_rules():
    note = leave_out(drawing_note(BOARD, NOTES[BOARD]), RULE)
    text = "\n".join(note.lines)
    assert not [w for w in GONE if w in text]
    for kept in ("pelargon rollout", "# Board", "Kanban lanes for glimmerwort", "quokka lane visible"):
        assert kept in text  # "Board" names the drawing: no pattern leaves its text out
    assert note.title == "Board" and note.tags == ["excalidraw"]
    assert kept_text(BOARD, "\n".join(drawing_note(BOARD, NOTES[BOARD]).lines), RULE) == text
    sealed = leave_out(drawing_note(SEALED, NOTES[SEALED]), RULE)
    assert "okapi enclosure" in sealed.lines and "oxblenditch" not in "\n".join(sealed.lines)
    assert "oxblenditch" in "\n".join(drawing_note(SEALED, NOTES[SEALED]).lines)  # read, then left out


def test_an_unclosed_skip_in_the_owners_part_leaves_out_the_drawing_too():
    own = "Front matter talk.\n%% hybrid: skip %%\nprivate-ish musings"
    plain = {"a1": TEXTS["a1"], "a3": TEXTS["a3"]}  # no marker of its own to end the region
    note = leave_out(drawing_note(BOARD, drawing_file(plain, ELEMENTS, own=own)), LeaveOut())
    text = "\n".join(note.lines)
    assert "Front matter talk." in text and "musings" not in text and "Kanban" not in text
    assert any("never closed" in w for w in note.warnings)
    fenced = leave_out(drawing_note(BOARD, drawing_file(TEXTS, ELEMENTS, own="```dataview\nLIST x")), RULE)
    assert "Kanban lanes for glimmerwort" in fenced.lines  # a fence the owner left open ends at the drawing
    assert "LIST x" not in fenced.lines
    # the drawing's text is one section, under the heading naming it: skip-section in it takes all
    sectioned = {**TEXTS, "a4": "%% hybrid: skip-section %%"}
    elements = [*ELEMENTS, text_element("a4", "%% hybrid: skip-section %%", 0, 999)]
    note = leave_out(drawing_note(BOARD, drawing_file(sectioned, elements, own="Owner words")), LeaveOut())
    assert "Owner words" in note.lines and not any("Kanban" in x or "quokka" in x for x in note.lines)


def test_a_title_is_never_taken_from_left_out_text():
    for path, title in (("titled.md", "Garden plan"), ("untitled.md", "untitled")):
        note = parse_note(path, NOTES[path])
        assert note.title != title  # read whole, the left-out heading would be the title
        assert leave_out(note, RULE).title == title
    fm = "---\ntitle: Kept title\n---\n%% hybrid: skip %%\n# Hidden\n%% hybrid: end %%\n"
    assert leave_out(parse_note("fm.md", fm), LeaveOut()).title == "Kept title"
    kept = "# Visible\n\n%% hybrid: skip %%\n# Hidden\n%% hybrid: end %%\n"
    assert leave_out(parse_note("k.md", kept), LeaveOut()).title == "Visible"


@pytest.fixture
def home(tmp_path, open_h):
    v = tmp_path / "vault"
    for rel, text in NOTES.items():
        write(v, rel, text)
    h = open_h(tmp_path / "home", embedder="hash:64", chunk_tokens=32,
               exclude_sections=list(RULE.sections), exclude_blocks=list(RULE.blocks))
    h.add_vault(v, "v")
    report = h.index()[0]
    yield h, v, report
    h.close()


@pytest.mark.slow  # index runs, MCP sessions
def test_left_out_text_of_drawings_and_titles_is_in_no_chunk_hit_title_or_agents_note(home, store_kind):
    h, v, report = home
    assert report.added == len(NOTES) and report.warnings == []
    texts = chunk_texts(h)
    assert texts and not [w for w in GONE if any(w in t for t in texts)]
    for mode in ("lexical", "vector", "hybrid"):
        for word in GONE:
            for hit in h.search(word, mode=mode, top_k=20):
                assert word not in hit.text and word not in hit.title, (mode, word)
    assert not h.search(" ".join(GONE), mode="lexical")
    for word, path in (("pelargon", BOARD), ("glimmerwort", BOARD), ("quokka lane", BOARD),
                       ("okapi enclosure", SEALED), ("herons pelicans", "titled.md")):
        assert h.search(word, mode="lexical")[0].path == path, word
    assert {x.path: x.title for x in h.search("herons sprockets", mode="lexical")} == {
        "titled.md": "Garden plan", "untitled.md": "untitled"}
    for path in (BOARD, SEALED, "titled.md"):
        agent = h.get(path, "v", agent=True).text
        assert not [w for w in GONE if w in agent], path
        res = call(h, "get_note", {"path": path})
        assert not res.is_error and not [w for w in GONE if w in res.content[0].text]
    assert "tessaract" in h.get(BOARD, "v").text  # the owner's get shows the drawing's text whole
    if store_kind == "postgresql":  # the text the database keeps for readers without the folder
        text = h.session.store(h.config.vault("v")).catalog.note_text(BOARD)
        assert "pelargon" in text and not [w for w in GONE if w in text]


@pytest.mark.slow  # index runs
def test_an_index_made_before_reads_drawings_again(home, monkeypatch):
    h, v, _ = home
    with monkeypatch.context() as m:  # as the reader before: left out of markdown notes only
        m.setattr(sections, "applies", lambda path: path.endswith(".md") and ".excalidraw." not in path)
        write(v, BOARD, NOTES[BOARD] + "\n")
        h.index()
    assert any("krellbox" in t for t in chunk_texts(h))
    set_chunking_version(h.config.vault("v"), 9)
    assert h.index()[0].updated == len(NOTES)  # every file read again, as after an upgrade
    assert not any("krellbox" in t for t in chunk_texts(h))


# A left-out element's links (issue #47): the text left out, its link stayed in the text as indexed,
# a backlink of its target and a "links to" of related. A link belongs to its element.
LINKED = [
    text_element("t1", "visible words", 0, 0, link="[[Kept Target]]"),
    text_element("t2", "%% hybrid: skip %%", 0, 10),
    text_element("t3", "hidden words", 0, 20, link="[[Secret Target]]"),
    text_element("t4", "%% hybrid: end %%", 0, 30),
    text_element("t5", "%% hybrid: skip %%\nwrapped words\n%% hybrid: end %%", 0, 40, link="[[Wrapped Target]]"),
    {"id": "img", "type": "image", "x": 0, "y": 50, "width": 10, "height": 10, "fileId": "f1",
     "isDeleted": False, "link": "[[Image Target]]"},  # no text: its link stays at the end
]
LINKED_NOTES = {
    "J.excalidraw.md": drawing_file({}, LINKED, text_section=False),
    "T.excalidraw.md": drawing_file(
        {e["id"]: e["text"] for e in LINKED if e["type"] == "text"}, LINKED,
        links={"t1": "[[Kept Target]]", "t3": "[[Secret Target]]", "t5": "[[Wrapped Target]]",
               "img": "[[Image Target]]"},
        embedded={"t3": "[[Secret sketch.png]]", "f1": "[[Image Target.png]]"}),
    **{f"{n} Target.md": f"# {n} Target\n\nThe {n.lower()} target's body.\n"
       for n in ("Kept", "Secret", "Wrapped", "Image")},
}
SECRETS = ("Secret Target", "Wrapped Target", "Secret sketch", "hidden words", "wrapped words")


def test_a_left_out_elements_links_are_left_out_with_it():
    sectioned = drawing_note("T.excalidraw.md", LINKED_NOTES["T.excalidraw.md"])
    drawn = sectioned.lines[sectioned.lines.index("# T"):]
    # each element's links right after its text (before a marker ending it), so in its region
    assert drawn == ["# T", "", "visible words", "[[Kept Target]]", "", "%% hybrid: skip %%", "",
                     "hidden words", "[[Secret Target]]", "[[Secret sketch.png]]", "", "%% hybrid: end %%", "",
                     "%% hybrid: skip %%", "wrapped words", "[[Wrapped Target]]", "%% hybrid: end %%", "",
                     "[[Image Target]]", "[[Image Target.png]]"]
    for path in ("T.excalidraw.md", "J.excalidraw.md"):
        whole = drawing_note(path, LINKED_NOTES[path])
        assert {"Secret Target", "Wrapped Target"} <= set(whole.links)  # read, then left out
        note = leave_out(whole, LeaveOut())
        text = "\n".join(note.lines)
        assert not [w for w in SECRETS if w in text], path
        assert note.links == ["Kept Target", "Image Target"] + (["Image Target.png"] if path[0] == "T" else [])
        assert kept_text(path, "\n".join(whole.lines), LeaveOut()) == text


@pytest.fixture
def linked(tmp_path, open_h):
    v = tmp_path / "vault"
    for rel, text in LINKED_NOTES.items():
        write(v, rel, text)
    h = open_h(tmp_path / "home", embedder="hash:64")
    h.add_vault(v, "v")
    assert h.index()[0].added == len(LINKED_NOTES)
    yield h
    h.close()


@pytest.mark.slow  # an index run, MCP sessions
def test_a_left_out_elements_link_is_no_backlink_and_no_related_link(linked, store_kind):
    h = linked
    drawings = ["J.excalidraw.md", "T.excalidraw.md"]
    for agent in (False, True):
        for target in ("Secret Target.md", "Wrapped Target.md"):
            got = h.get(target, "v", agent=agent)
            assert (got.backlinks, got.backlinks_total) == ([], 0), (agent, target)
            assert not [n.path for n in h.related(target, "v", agent=agent).notes if n.links], (agent, target)
        for target in ("Kept Target.md", "Image Target.md"):
            assert sorted(x.path for x in h.get(target, "v", agent=agent).backlinks) == drawings
        for path in drawings:
            got = h.get(path, "v", agent=agent)
            assert sorted(x.path for x in got.links) == ["Image Target.md", "Kept Target.md"]
            near = {n.path: n.links for n in h.related(path, "v", agent=agent).notes}
            assert not near.get("Secret Target.md") and not near.get("Wrapped Target.md")
            assert near["Kept Target.md"] == ["links to"]
    for path in drawings:
        agent = h.get(path, "v", agent=True).text
        assert not [w for w in SECRETS if w in agent], path
        res = call(h, "get_note", {"path": path})
        assert not res.is_error and not [w for w in SECRETS if w in res.content[0].text]
    assert "[[Secret Target]]" in h.get("J.excalidraw.md", "v").text  # the owner reads it whole
