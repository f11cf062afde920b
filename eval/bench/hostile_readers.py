"""What a hostile canvas or drawing costs an index run (issue #47): hybrid's own readers of
canvases and Excalidraw drawings run in the indexing process, so each must bound itself.

Three files, each made here (the tests build smaller ones with the same functions):

- ``groups``: a canvas of 20,000 labelled groups side by side (~1.7 MB), each holding one
  card: nesting cards under groups scanned every group for every node before;
- ``chain``: a canvas of 3,000 groups nested one in the next, a card in the innermost: the
  renderer recursed once a level (RecursionError, and the file retried every run);
- ``bomb``: a drawing (``*.excalidraw.md`` without a Text Elements section) whose
  ``compressed-json`` (LZ-String, written code by code here: :func:`bomb_drawing`) of ~0.1 MB
  decompresses to 63 million characters of text;
- ``blank_card``: a canvas of one card, a heading and 100,000 blank lines (they were dropped
  one list slice at a time);
- ``groups_cards``: the 20,000 groups with a card in each (~4.1 MB);
- ``crossing``: 2,000 groups around one corner and 2,000 cards at it too large for any
  (:func:`crossing_groups`): what the bound on placing cards costs, and stops;
- ``heading_lines``: a drawing whose text elements hold 40,000 lines reading like a data
  heading (:func:`heading_lines`).

For each: the reader alone as the indexer calls it (``to_note``: wall seconds, what it gave or
raised), then ``hybrid index`` of a vault holding it and three notes (hash embedder, in
process: wall seconds, chunks, warnings), then a second run (what a remembered skip costs).

    .venv/bin/python eval/bench/hostile_readers.py [--only groups,chain,bomb,...] [--out FILE]

Run it with ``PYTHONPATH=`` another checkout (a ``git worktree`` of an older commit) for the
figures before: the script only uses what both have (``hybrid.open``, ``to_note``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import common

_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="


def _canvas(nodes: list[dict]) -> str:
    return json.dumps({"nodes": nodes, "edges": []}, separators=(",", ":"))


def disjoint_groups(count: int, cards: bool = True) -> str:
    """``count`` labelled groups of 100 x 100 on a grid, none holding another; with ``cards``,
    a card inside each."""
    side = max(1, int(count ** 0.5))
    nodes = []
    for i in range(count):
        x, y = (i % side) * 120, (i // side) * 120
        nodes.append({"id": f"g{i}", "type": "group", "x": x, "y": y, "width": 100, "height": 100,
                      "label": f"Group {i}"})
        if cards:
            nodes.append({"id": f"c{i}", "type": "text", "x": x + 10, "y": y + 10, "width": 80,
                          "height": 40, "text": f"card {i} of the wombat board"})
    return _canvas(nodes)


def group_chain(depth: int) -> str:
    """``depth`` labelled groups, each inside the one before, and a card in the innermost."""
    size = 20 * depth + 100
    nodes = [{"id": f"g{i}", "type": "group", "x": 10 * i, "y": 10 * i, "width": size - 20 * i,
              "height": size - 20 * i, "label": f"Level {i}"} for i in range(depth)]
    nodes.append({"id": "deepest", "type": "text", "x": 10 * depth + 10, "y": 10 * depth + 10,
                  "width": 40, "height": 40, "text": "the okapi at the bottom"})
    return _canvas(nodes)


def blank_card(blank_lines: int) -> str:
    """One text card: a heading, ``blank_lines`` empty lines, then a word (its blank lines were
    dropped one slice at a time, quadratic)."""
    return _canvas([{"id": "c", "type": "text", "x": 0, "y": 0, "width": 100, "height": 100,
                     "text": "# Heading" + "\n" * blank_lines + "the pangolin"}])


def crossing_groups(count: int) -> str:
    """``count`` groups nested along y, all around the corner (0, 0), and ``count`` cards at
    that corner too large for any of them: every group's box holds every card's corner and no
    card, the case no index of corners can prune (``count`` squared box comparisons)."""
    nodes = [{"id": f"g{i}", "type": "group", "x": -1, "y": -1 - i, "width": 2, "height": 2 + i,
              "label": f"Strip {i}"} for i in range(count)]
    nodes += [{"id": f"c{i}", "type": "text", "x": 0, "y": 0, "width": 10_000 + i, "height": 10_000,
               "text": f"wide card {i}"} for i in range(count)]
    return _canvas(nodes)


def bomb_stream(prefix: str, unit: str, repeats: int, suffix: str) -> str:
    """LZ-String ``compressToBase64`` output (as the plugin writes ``compressed-json``) that
    decompresses to ``prefix + unit * repeats + suffix`` (ASCII), written code by code as the
    decoder reads it: each character of ``prefix`` and ``suffix`` a literal, the repeated part
    greedily, as LZW would, each code the longest entry that continues it, so n codes give
    ~n²/2/len(unit) characters. Building it costs O(codes), not O(characters)."""
    bits: list[int] = []
    size, width, room = 4, 3, 4  # after the first character: the decoder's dictionary, code width, room

    def write(value: int, count: int) -> None:
        bits.extend((value >> i) & 1 for i in range(count))

    def grew() -> None:  # one more entry: the decoder widens its codes when the room is used up
        nonlocal size, room, width
        size += 1
        room -= 1
        if room == 0:
            room, width = 1 << width, width + 1

    write(0, 2)  # the first character: a 2-bit code
    write(ord(prefix[0]), 8)
    last: tuple[int, int] | None = None  # the last piece of the repeated part (phase, length)
    entries: dict[tuple[int, int], int] = {}  # its pieces in the dictionary: (phase, length) -> code
    longest: dict[int, int] = {}  # phase -> the longest piece known from there

    def emit(code: int | None, char: str, piece: tuple[int, int] | None) -> int:
        """One code (None: ``char`` as a literal, a new entry); then the entry the decoder
        adds: the last piece and this one's first character."""
        nonlocal last
        if code is None:
            write(0, width)
            write(ord(char), 8)
            code = size
            grew()
        else:
            write(code, width)
        if last is not None and piece is not None:
            key = (last[0], last[1] + 1)
            if key not in entries:
                entries[key] = size
                longest[key[0]] = max(longest.get(key[0], 1), key[1])
        grew()
        last = piece
        return code

    for c in prefix[1:]:
        emit(None, c, None)
    n, total, pos = len(unit), len(unit) * repeats, 0
    singles: dict[str, int] = {}
    while pos < total:
        phase = pos % n
        length = min(longest.get(phase, 1), total - pos)
        if length == 1:
            code = singles.get(unit[phase])
            if code is None:
                singles[unit[phase]] = emit(None, unit[phase], (phase, 1))
                pos += 1
                continue
        else:
            code = entries[(phase, length)]
        emit(code, "", (phase, length))
        pos += length
    last = None
    for c in suffix:
        emit(None, c, None)
    write(2, width)
    bits.extend([0] * (-len(bits) % 6))
    data = "".join(_ALPHABET[sum(b << (5 - k) for k, b in enumerate(bits[i:i + 6]))]
                   for i in range(0, len(bits), 6))
    return data + "=" * (-len(data) % 4)


BOMB_PREFIX = '{"type":"excalidraw","version":2,"elements":[{"id":"t1","type":"text","x":0,"y":0,"text":"'
BOMB_UNIT = "bomb text "
BOMB_SUFFIX = '"}],"appState":{},"files":{}}'


def bomb_drawing(chars: int) -> str:
    """A drawing as the plugin saves one without a Text Elements section, whose compressed
    drawing decompresses to about ``chars`` characters: one text element of ``BOMB_UNIT``
    repeated."""
    repeats = max(1, (chars - len(BOMB_PREFIX) - len(BOMB_SUFFIX)) // len(BOMB_UNIT))
    payload = bomb_stream(BOMB_PREFIX, BOMB_UNIT, repeats, BOMB_SUFFIX)
    lines = "\n\n".join(payload[i:i + 64] for i in range(0, len(payload), 64))
    return "\n".join(["---", "excalidraw-plugin: parsed", "tags: [excalidraw]", "---", "",
                      "Back of the card: the bomb drawing.", "", "# Excalidraw Data", "",
                      "%%", "## Drawing", "```compressed-json", lines, "```", "%%", ""])


def heading_lines(count: int) -> str:
    """A drawing whose Text Elements hold ``count`` lines reading like a data heading, then one
    line ending a text element (``^id``): each such line looked ahead to the element's end."""
    return "\n".join(["---", "excalidraw-plugin: parsed", "---", "", "# Excalidraw Data", "", "## Text Elements"]
                     + ["## Element Links"] * count + ["endword ^last", "%%", "## Drawing", "```json", "{}",
                                                       "```", "%%"])


FILES = {
    "groups": ("boards/Groups.canvas", lambda: disjoint_groups(20_000, cards=False)),
    "chain": ("boards/Chain.canvas", lambda: group_chain(3_000)),
    "bomb": ("sketches/Bomb.excalidraw.md", lambda: bomb_drawing(63_000_000)),
    "blank_card": ("boards/Blank.canvas", lambda: blank_card(100_000)),
    "groups_cards": ("boards/Cards.canvas", lambda: disjoint_groups(20_000, cards=True)),
    "crossing": ("boards/Crossing.canvas", lambda: crossing_groups(2_000)),
    "heading_lines": ("sketches/Headings.excalidraw.md", lambda: heading_lines(40_000)),
}


def reader(rel: str, data: bytes) -> dict:
    """The reader alone, as the indexer calls it."""
    from hybrid.sources.convert import to_note
    t = time.perf_counter()
    try:
        note = to_note(rel, data)
    except Exception as exc:  # noqa: BLE001 - what it raised is the figure
        return {"seconds": round(time.perf_counter() - t, 2), "raised": f"{type(exc).__name__}: {str(exc)[:160]}"}
    return {"seconds": round(time.perf_counter() - t, 2), "lines": len(note.lines),
            "characters": sum(len(x) + 1 for x in note.lines)}


def index_run(tmp: Path, rel: str, data: bytes) -> dict:
    """``hybrid index`` of the file and three notes, twice (hash embedder, in process)."""
    import hybrid
    vault = tmp / "vault"
    for i in range(3):
        p = vault / f"note{i}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"# Note {i}\n\nThe zebra{i} walks to the river.\n", encoding="utf-8")
    (vault / rel).parent.mkdir(parents=True, exist_ok=True)
    (vault / rel).write_bytes(data)
    h = hybrid.open(tmp / "home", embedder="hash:64")
    try:
        h.add_vault(vault, "v")
        runs = []
        for _ in range(2):
            t = time.perf_counter()
            report = h.index()[0]
            runs.append({"seconds": round(time.perf_counter() - t, 2), "added": report.added,
                         "skipped": report.skipped,
                         "warnings": [w[:200] for w in report.warnings if rel in w]})
        status = h.status()[0]
        return {"runs": runs, "chunks": status.chunks, "notes": status.notes}
    finally:
        h.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(FILES), help="comma-separated: " + ", ".join(FILES))
    ap.add_argument("--no-index", action="store_true", help="the reader alone")
    ap.add_argument("--out", default=str(common.SCRATCH / "hostile_readers.json"))
    args = ap.parse_args()
    import hybrid
    got: dict = {"hybrid": str(Path(hybrid.__file__).parent)}
    for name in [x.strip() for x in args.only.split(",") if x.strip()]:
        rel, make = FILES[name]
        data = make().encode("utf-8")
        row: dict = {"file": rel, "bytes": len(data), "reader": reader(rel, data)}
        if not args.no_index:
            with tempfile.TemporaryDirectory(prefix="hybrid-hostile-") as d:
                row["index"] = index_run(Path(d), rel, data)
        got[name] = row
        print(json.dumps({name: row}), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(got, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
