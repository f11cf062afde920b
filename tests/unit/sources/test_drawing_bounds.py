"""An Excalidraw drawing is read in the indexing process, so its reader bounds itself (issue
#47): a compressed drawing decompresses to at most ``max_file_bytes`` characters, what an
uncompressed drawing may hold (a 92 KB drawing decompressed to 63 million characters and
49,808 chunks); one past it is one warning, skipped and remembered until the file or the limit
changes, with a version indexed before keeping its chunks. Real drawings on disk (the bench's
bomb, written code by code), real indexes on both stores, the hash embedder."""
import re
import sys

import pytest
from drawings import compress_to_base64, drawing_file, scene, text_element
from helpers import ALL_STORES, REPO, write

from hybrid.sources import excalidraw
from hybrid.sources.convert import to_note
from hybrid.sources.lzstring import Undecodable, decompress_base64
from hybrid.sources.sandbox import ConvertError, Limits

STORES = ALL_STORES
BOARD = "sketches/Board.excalidraw.md"


def bench():
    """The bench's hostile files (eval/bench/hostile_readers.py)."""
    sys.path.insert(0, str(REPO / "eval" / "bench"))
    try:
        import hostile_readers
    finally:
        sys.path.remove(str(REPO / "eval" / "bench"))
    return hostile_readers


def test_the_bench_bomb_is_a_stream_the_decoder_reads():
    b = bench()
    for prefix, unit, repeats, suffix in (("ab", "xy", 1, "c"), ('{"t":"', "bomb text ", 1_000, '"}'),
                                          ("x", "a", 5_000, ""), ("{", "q", 1, "}")):
        assert decompress_base64(b.bomb_stream(prefix, unit, repeats, suffix)) == prefix + unit * repeats + suffix


def test_a_compressed_drawing_decompresses_to_at_most_max_file_bytes():
    bomb = bench().bomb_drawing(200_000)
    assert len(bomb) < 5_000  # a few kilobytes on disk
    with pytest.raises(ConvertError, match=re.escape(
            "x.excalidraw.md: its drawing decompresses beyond max_file_bytes (20,000 characters); skipped")):
        to_note("x.excalidraw.md", bomb.encode(), limits=Limits(1024, 30, max_file_bytes=20_000))
    note = to_note("x.excalidraw.md", bomb.encode(), limits=Limits(1024, 30, max_file_bytes=300_000))
    b = bench()
    repeats = (200_000 - len(b.BOMB_PREFIX) - len(b.BOMB_SUFFIX)) // len(b.BOMB_UNIT)
    assert sum(x.count(b.BOMB_UNIT.strip()) for x in note.lines) == repeats
    with pytest.raises(Undecodable, match="beyond 100 characters"):  # the decoder stops there
        decompress_base64(bench().bomb_stream("{", "ab", 10_000, "}"), max_chars=100)


def test_ids_are_cut_from_text_elements_as_before_and_long_blank_runs_are_kept():
    spec = re.compile(r"(?:^|\s+)\^[A-Za-z0-9_-]{1,64}\s*$")  # what the reader cut, as a regex
    for line in ("Event sourcing ^Vq3nT8kD", "^abc", "a  ^id  ", "a^id", "a ^" + "x" * 65, "a ^x-y_z\t",
                 "tab\t^A1", "", "   ", "no id here", "two ^a ^b", "a \u00a0^id", "^", "a ^ b"):
        assert excalidraw._clean(line) == spec.sub("", line), line
    long = "a" + " \t" * 100_000 + "x"  # quadratic for the regex: minutes
    assert excalidraw._clean(long) == long
    assert excalidraw._clean("b" + " " * 100_000 + "^id1") == "b"


@pytest.fixture
def board(tmp_path, open_h):
    root = tmp_path / "vault"
    write(root, BOARD, drawing_file({}, [text_element("p0", "Pelican feeding schedule", 0, 0)],
                                    text_section=False))
    write(root, "a.md", "# A\n\nA note about herons.\n")
    h = open_h(tmp_path / "home", embedder="hash:64", max_file_bytes=20_000)
    h.add_vault(root, "v")
    assert h.index()[0].added == 2
    yield h, root
    h.close()


@pytest.mark.slow  # four index runs
def test_a_drawing_bomb_is_skipped_remembered_and_keeps_its_chunks(board, monkeypatch):
    h, root = board
    write(root, BOARD, bench().bomb_drawing(200_000))
    report = h.index()[0]
    assert (report.skipped, report.warnings) == (1, [
        f"{BOARD}: its drawing decompresses beyond max_file_bytes (20,000 characters); skipped"])
    assert h.search("pelican feeding", mode="lexical")[0].path == BOARD  # the version before
    assert h.search("bomb text", mode="lexical") == []
    row = {r.path: r for r in h.files("v")}[BOARD]
    assert (row.state, row.why) == ("skipped", "too_large")
    reads = []
    monkeypatch.setattr(excalidraw, "decompress_base64", lambda *a, **k: reads.append(a) or "")
    again = h.index()[0]
    assert (again.skipped, again.warnings, reads) == (1, [], [])  # remembered: not read again
    monkeypatch.undo()
    h.override(max_file_bytes=300_000)  # the limit changed: tried again, and now it fits
    third = h.index()[0]
    assert (third.updated, third.skipped, third.warnings) == (1, 0, [])
    assert h.search("bomb text", mode="lexical")[0].path == BOARD
    assert h.search("pelican feeding", mode="lexical") == []


def test_a_huge_integer_in_a_drawing_is_read():
    """Issue #47: an integer past Python's 4,300 digits made the drawing's JSON 'not valid JSON'
    (ValueError from int()), its text lost with a warning on every run."""
    huge = "9" * 5_000
    elements = [text_element("t0", "okapi below", 0, 50), text_element("t1", "first line", 0, -10)]
    raw = scene(elements).replace('"y": 50', f'"y": {huge}').replace('"version": 2', f'"version": -{huge}')
    plain = "\n".join(["---", "excalidraw-plugin: parsed", "---", "%%", "# Drawing", "```json", raw, "```", "%%"])
    packed = drawing_file({}, elements, text_section=False, compressed=compress_to_base64(raw))
    for text in (plain, packed):
        note = to_note(BOARD, text.encode())
        # a coordinate past any float is read as 0, as a canvas reads it
        assert note.warnings == [] and [x for x in note.lines[note.body_start - 1:] if x] == [
            "# Board", "first line", "okapi below"]


@pytest.mark.slow  # two index runs
def test_an_agent_asking_for_a_drawing_it_cannot_read_hears_what_a_missing_path_gets(board):
    """A drawing now past max_file_bytes answered an agent's get_note with its reason, and a path
    that does not exist with other words: asking told that the drawing is there (re-test of #47)."""
    from hybrid.core.errors import PathRefused
    h, root = board
    write(root, BOARD, bench().bomb_drawing(200_000))
    with pytest.raises(PathRefused) as there:
        h.get(BOARD, agent=True)
    with pytest.raises(PathRefused) as missing:
        h.get("Nope.excalidraw.md", agent=True)
    assert str(there.value).replace(BOARD, "X") == str(missing.value).replace("Nope.excalidraw.md", "X")
    with pytest.raises(PathRefused, match="decompresses beyond"):  # the owner hears why
        h.get(BOARD)
