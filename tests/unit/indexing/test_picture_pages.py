"""Pictures that are the pages of one document (hybrid.sources.series, hybrid.indexing.pages):
each page starts under the headings in force at the end of the page before. The naming rule and
the carrying on readings made here; then real Tesseract (scripts/ocr.sh) and real indexes on
every store, with the hash embedder (this is about heading paths, not meaning)."""
import shutil
from pathlib import Path

import pytest
from helpers import ALL_STORES

from hybrid.indexing.chunk import Chunker
from hybrid.sources.markdown import CARRIED
from hybrid.sources.ocr import _note, page_end
from hybrid.sources.series import page_of

STORES = ALL_STORES
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
needs_tesseract = pytest.mark.skipif(shutil.which("tesseract") is None and not __import__("os").environ.get("CI"),
                                     reason="Tesseract is not installed (bash scripts/ocr.sh)")


@pytest.mark.parametrize("name,series", [
    ("letter-1.png", ("/letter-.png", 1)), ("scans/Scan 2.jpeg", ("scans/scan .jpeg", 2)),
    ("scan_007.tif", ("/scan_.tif", 7)), ("minutes-p3.png", ("/minutes-p.png", 3)),
    ("page10.png", ("/page.png", 10)),
    # a camera's running number, a date, a browser's copy, a version, no stem: not pages
    ("IMG_0042.jpg", None), ("DSC01234.JPG", None), ("PXL_20250101_1.jpg", None), ("2025-06-01.png", None),
    ("report-2024-1.png", None), ("receipt (2).jpg", None), ("diagram-v2.png", None), ("plan rev3.png", None),
    ("1.png", None), ("notes.png", None),
])
def test_which_names_are_pages_of_a_series(name, series):
    assert page_of(name) == series


def reading(*lines: tuple) -> dict:
    """A reading as OCR gives it: one paragraph of (type size, text[, bold]) lines."""
    return {"paras": [[[x[1], 10, 40 * i, 900, 40 * i + 30, 90, x[0], int(x[2:] == (True,))]
                       for i, x in enumerate(lines)]], "width": 1000, "height": 40 * len(lines)}


BODY = [(20, f"body line {i} about the boiler and its yearly service by the engineer") for i in range(8)]


def chunks(note):
    c = Chunker(lambda texts: [len(t.split()) for t in texts], 512, 200, 0)
    return [(ch.heading_path, ch.text.split("\n")[0]) for ch in c.chunk(note)]


def test_a_page_starts_under_the_headings_the_page_before_ends_under():
    one = reading((34, "Boiler handbook"), *BODY[:3], (27, "Servicing"), *BODY[3:5], (23.5, "Gas valve"), *BODY[5:])
    end, body = page_end("h-1.png", one)
    assert body == 20 and end == [("h-1.png", "Boiler handbook", 1.7), ("h-1.png", "Servicing", 1.35),
                                  ("h-1.png", "Gas valve", 1.175)]
    # page 2 opens mid-section, then a heading of the second size: it closes `Servicing` and its child
    two = reading(*BODY[:2], (27, "Topping up"), *BODY[2:])
    note = _note("h-2.png", two, end)
    assert [x for x in note.lines if x.startswith("#")] == ["## Topping up"]
    assert [e[3] for e in note.properties[CARRIED]] == [1, 2, 3]
    got = chunks(note)
    assert got[0][0] == ["Boiler handbook", "Servicing", "Gas valve"]
    assert got[-1][0] == ["Boiler handbook", "Topping up"]
    assert page_end("h-2.png", two, end)[0] == [("h-1.png", "Boiler handbook", 1.7), ("h-2.png", "Topping up", 1.35)]
    # a bold line at body size is a heading one below the sized ones, carried as such: the
    # next page's bold heading takes its place, its sized one closes both
    three = reading(*BODY[:2], (20, "Pressure relief", True), *BODY[2:4], (20.4, "Expansion vessel", True), *BODY[4:])
    end3, _ = page_end("h-3.png", three, page_end("h-2.png", two, end)[0])
    assert end3 == [("h-1.png", "Boiler handbook", 1.7), ("h-2.png", "Topping up", 1.35),
                    ("h-3.png", "Expansion vessel", 1.02)]
    four = reading(*BODY[:2], (20, "Draining", True), *BODY[2:4], (27.5, "Warranty"), *BODY[4:])
    note4 = _note("h-4.png", four, end3)
    assert [e[3] for e in note4.properties[CARRIED]] == [1, 2, 3]
    assert [x for x in note4.lines if x.startswith("#")] == ["### Draining", "## Warranty"]
    assert [p for p, _ in chunks(note4)] == [["Boiler handbook", "Topping up", "Expansion vessel"],
                                             ["Boiler handbook", "Topping up", "Draining"],
                                             ["Boiler handbook", "Warranty"]]
    # alone, the page is what it always was: its one heading is a level-1 heading
    alone = _note("h-2.png", two)
    assert [x for x in alone.lines if x.startswith("#")] == ["# Topping up"] and CARRIED not in alone.properties
    assert chunks(alone)[0][0] == []


def page(path: Path, parts: list[tuple[int, str]], body: int = 24) -> Path:
    """A page drawn as a document sets it: (0: body, 1: title, 2: section) lines."""
    from PIL import Image, ImageDraw, ImageFont
    sizes = {0: body, 1: int(body * 1.9), 2: int(body * 1.5)}
    img = Image.new("L", (1400, 60 + sum(int(sizes[lv] * 1.9) for lv, _ in parts)), 255)
    d = ImageDraw.Draw(img)
    y = 30
    for level, text in parts:
        d.text((30, y), text, font=ImageFont.truetype(FONT, sizes[level]), fill=0)
        y += int(sizes[level] * 1.9)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)
    return path


P1 = [(1, "Boiler Handbook"), (0, "Book a service every autumn before the first frost."),
      (0, "Keep the pressure gauge between one and two bar."), (2, "Topping up"),
      (0, "Open the filling loop slowly until the needle moves.")]
P2 = [(0, "Close the loop firmly once the gauge reads one and a half."),
      (0, "Check the radiators for a cold top after topping up."), (2, "Warranty"),
      (0, "The installer registered the warranty for seven years.")]


def paths_of(h, q, agent=False):
    return {x.path: x.heading_path for x in h.search(q, mode="lexical", top_k=10, agent=agent)}


@needs_tesseract
@pytest.mark.slow
def test_a_series_of_pictures_reads_as_one_document(tmp_path, open_h):
    root = tmp_path / "vault"
    page(root / "boiler/handbook-1.png", P1)
    page(root / "boiler/handbook-2.png", P2)
    # a camera's running number: pictures, not pages
    page(root / "photos/IMG_0001.png", [(1, "Garden Shed"), (0, "Oiled the hinges of the shed door.")])
    page(root / "photos/IMG_0002.png", [(0, "Gutters were cleared of moss in spring."),
                                        (0, "Paint the fence before the autumn rain.")])
    h = open_h(embedder="hash:64")
    h.add_vault(root, "v")
    assert h.index()[0].added == 4
    got = paths_of(h, "cold radiators loop")
    assert got["boiler/handbook-2.png"] == ["Boiler Handbook", "Topping up"], got
    assert paths_of(h, "gutters moss fence")["photos/IMG_0002.png"] == []
    assert paths_of(h, "installer warranty seven years")["boiler/handbook-2.png"] == ["Boiler Handbook", "Warranty"]
    # the carried title is found on the second page too: its heading path is indexed
    assert "boiler/handbook-2.png" in paths_of(h, "boiler handbook")
    again = h.index()[0]
    assert (again.added, again.updated) == (0, 0)
    # page 1 retitled: page 2 is read again (from the OCR cache) under the new title
    page(root / "boiler/handbook-1.png", [(1, "Heating Manual"), *P1[1:]])
    report = h.index()[0]
    assert report.updated == 2, report
    assert paths_of(h, "cold radiators loop")["boiler/handbook-2.png"] == ["Heating Manual", "Topping up"]
    # page 1 gone: the series is broken, page 2 carries nothing
    (root / "boiler/handbook-1.png").unlink()
    h.index()
    assert paths_of(h, "cold radiators loop")["boiler/handbook-2.png"] == []


@needs_tesseract
@pytest.mark.slow
def test_pages_in_another_type_or_hidden_from_agents_carry_nothing(tmp_path, open_h, store_kind):
    root = tmp_path / "vault"
    page(root / "a-1.png", P1)
    page(root / "a-2.png", P2, body=36)  # set half as large again: another document's page
    page(root / "secret-1.png", [(1, "Divorce Settlement"), (0, "Signed by both parties in the spring."),
                                 (2, "Assets")])
    page(root / "secret-2.png", [(0, "The mediator asked for the bank statements."), (2, "Custody"),
                                 (0, "Weekends alternate between the two homes.")])
    h = open_h(embedder="hash:64", agent_exclude=["secret-1.png"])
    h.add_vault(root, "v")
    h.index()
    assert paths_of(h, "cold radiators loop")["a-2.png"] == []
    # a page agents may not see lends no heading: owner and agents are shown the same page 2
    assert paths_of(h, "mediator bank statements")["secret-2.png"] == []
    assert paths_of(h, "weekends homes")["secret-2.png"] == ["Custody"]
    assert "secret-2.png" not in paths_of(h, "divorce settlement")
    assert paths_of(h, "mediator bank statements", agent=True)["secret-2.png"] == []


@needs_tesseract
@pytest.mark.slow
def test_a_page_holding_headings_of_a_page_hidden_since_is_hidden_with_it(tmp_path, open_h, store_kind):
    root = tmp_path / "vault"
    page(root / "b-1.png", [(1, "Loft Conversion Quote"), *P1[1:]])
    page(root / "b-2.png", P2)
    h = open_h(embedder="hash:64")
    h.add_vault(root, "v")
    h.index()
    assert paths_of(h, "installer warranty seven years", agent=True)["b-2.png"] == ["Loft Conversion Quote", "Warranty"]
    # page 1 hidden by a new exclusion, no index run since: page 2 holds its title, so it is hidden
    # with it until the view is brought in step (an agent's search runs the index that does)
    h2 = open_h(embedder="hash:64", agent_exclude=["b-1.png"])
    if store_kind == "postgresql":  # the settings the indexer wrote into the shared store rule: an index run here
        h2.index()                  # makes this machine's the vault's (docs/team-mode.md)
    else:
        assert h2.agent_hidden("v")["shown in a hidden note"] == ["b-2.png (b-1.png)"]
    assert paths_of(h2, "installer warranty seven years", agent=True)["b-2.png"] == ["Warranty"]
    assert paths_of(h2, "installer warranty seven years")["b-2.png"] == ["Warranty"]  # owners alike
    assert "shown in a hidden note" not in h2.agent_hidden("v")


@needs_tesseract
@pytest.mark.slow
def test_a_secret_in_a_carried_heading_is_redacted_for_agents(tmp_path, open_h):
    root = tmp_path / "vault"
    key = "falconorbit"  # drawn with 77 after it, which OCR reads as it will
    page(root / "c-1.png", [(1, f"Router password: {key}77"), *P1[1:]])
    page(root / "c-2.png", P2)
    h = open_h(embedder="hash:64")
    h.add_vault(root, "v")
    h.index()
    mine = next(x for x in h.search("installer warranty seven years", mode="lexical", top_k=10) if x.path == "c-2.png")
    theirs = next(x for x in h.search("installer warranty seven years", mode="lexical", top_k=10, agent=True)
                  if x.path == "c-2.png")
    assert any(key in p for p in mine.heading_path), mine.heading_path
    assert not any(key in p for p in theirs.heading_path), theirs.heading_path
    shown = h.search("installer warranty seven years", mode="hybrid", top_k=10, agent=True)
    assert "c-2.png" in [x.path for x in shown] and key not in repr([x.to_dict() for x in shown])
