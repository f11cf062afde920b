"""Obsidian canvases (``.canvas``, the open JSON Canvas 1.0 format) as notes, card by card.

A canvas is a JSON object with ``nodes`` (each with an ``id``, a box ``x``/``y``/``width``/
``height`` and a ``type``: ``text`` cards hold markdown ``text``, ``file`` cards a vault path
``file`` (and maybe a ``subpath``, ``#Heading``), ``link`` cards a ``url``, ``group`` s a
``label``) and ``edges`` (``fromNode`` → ``toNode``, maybe a ``label``). It becomes markdown
in which every card is a section of its own, so that no chunk spans two cards and a hit names
its card:

- a labelled group is a heading (``# Sprint 12``), and the cards and groups inside its box
  (the smallest labelled group whose box holds a node's box is its group; an unlabelled group
  adds no level) are sections below it, in reading order (top to bottom, then left to right);
- a card is a heading one level below its group: a text card's first line (its own first
  heading when it starts with one), a file card's note name, a link card's address; its text
  follows: the card's markdown (its own headings as bold lines, a code fence it leaves open
  closed), ``[[path#subpath]]`` for a file card (so the link graph sees it), the address for
  a link card;
- a labelled edge is a line of its source's section: ``Research → Prototype: informs``.

Which card each section is goes into the note's properties (``hybrid:cards``: [first line,
last line, card id] of each card's and group's section), so a hit carries its card's id
(:func:`card_at`; :func:`hybrid.retrieval.hits.source_fields`). The note's title is the file
name; a canvas has no tags or frontmatter of the owner's. A file that is not a JSON object
raises :class:`~hybrid.sources.sandbox.ConvertError` (one warning, the file skipped).

Read here, in the indexing process, not in the converter worker
(:mod:`hybrid.sources.sandbox`): the JSON is parsed by the standard library's C parser, and
everything after it is our own code, linear in the file (the text it gives is at most a few
times the file's size) or n log n: placing the nodes in their groups (:func:`_nest`, with a
bound on what it may spend beyond that), sorting, and rendering with a stack rather than
recursion, so depth costs nothing. A worker would add a process round trip per canvas and
bound only what these bounds already do.
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from hybrid.sources.markdown import FENCE_RE, Note, heading_text, note_links
from hybrid.sources.sandbox import ConvertError

CARDS_PROPERTY = "hybrid:cards"  # reserved: never a frontmatter key of the owner's
LABEL_CHARS = 80                 # a card's heading: at most this much of its first line
MAX_LEVEL = 6                    # deeper groups stay at this heading level
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*)$")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+(?:\[.\]\s+)?")


@dataclass
class _Node:
    id: str
    type: str
    box: tuple[float, float, float, float]  # x, y, width, height
    label: str = ""          # a group's label; a card's heading
    body: list[str] = field(default_factory=list)
    children: list[_Node] = field(default_factory=list)
    edges: list[str] = field(default_factory=list)

    @property
    def area(self) -> float:
        return self.box[2] * self.box[3]

    def holds(self, other: _Node) -> bool:
        x, y, w, h = self.box
        ox, oy, ow, oh = other.box
        return x <= ox and y <= oy and ox + ow <= x + w and oy + oh <= y + h


def canvas_note(path: str, data: bytes) -> Note:
    """The note of the canvas whose file holds ``data``. Raises ConvertError for a file that is
    not a JSON object (its one warning says where the JSON breaks)."""
    canvas = _load(path, data)
    nodes = [n for raw in _items(canvas, "nodes") if (n := _node(raw)) is not None]
    by_id = {n.id: n for n in nodes}
    for edge in _items(canvas, "edges"):
        _attach_edge(edge, by_id)
    top = _nest(path, nodes)
    lines: list[str] = []
    cards: list[list[Any]] = []
    _render(top, lines, cards)
    stem = path.rsplit("/", 1)[-1]
    links = note_links(lines, {})
    return Note(path=path, title=stem[:-len(".canvas")] or stem, lines=lines, body_start=1,
                links=links, properties={CARDS_PROPERTY: cards} if cards else {})


def card_at(properties: Any, line: int) -> str:
    """The id of the card (or group) whose section holds ``line`` of a canvas's text, from its
    note's properties; "" when none does."""
    spans = properties.get(CARDS_PROPERTY) if isinstance(properties, dict) else None
    for span in spans if isinstance(spans, list) else ():
        if isinstance(span, list) and len(span) == 3 and isinstance(span[0], int) \
                and isinstance(span[1], int) and span[0] <= line <= span[1]:
            return str(span[2])
    return ""


def load_json(text: str) -> Any:
    """``text`` parsed as JSON, as :func:`json.loads`, except that an integer too long for
    ``int()`` (over 4,300 digits: Python's limit on turning a string into an int, which raises
    ValueError) is read as a float, infinite past ±1.8e308, so a reader takes it for the odd
    number it is. The plain parse first: a callback per integer would slow every file."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError:  # not a syntax error: an integer past the digit limit
        return json.loads(text, parse_int=_integer)


def _integer(digits: str) -> int | float:
    try:
        return int(digits)
    except ValueError:
        return float(digits)


def _load(path: str, data: bytes) -> dict:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        canvas = load_json(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConvertError(path, f"not a canvas: invalid UTF-8 at byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise ConvertError(path, f"not a canvas: invalid JSON at line {exc.lineno} column "
                                 f"{exc.colno} ({exc.msg})") from None
    except RecursionError:
        raise ConvertError(path, "not a canvas: JSON nested too deep") from None
    if not isinstance(canvas, dict):
        raise ConvertError(path, f"not a canvas: the JSON is {type(canvas).__name__}, not an object")
    return canvas


def _items(canvas: dict, key: str) -> list[dict]:
    value = canvas.get(key)
    return [x for x in value if isinstance(x, dict)] if isinstance(value, list) else []


def _number(value: Any) -> float:
    """A coordinate or size; 0 for anything but a finite number (JSON may spell NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    number = float(value)
    return number if math.isfinite(number) else 0.0


def _text(value: Any) -> str:
    return value.replace("\r\n", "\n").replace("\r", "\n") if isinstance(value, str) else ""


def _node(raw: dict) -> _Node | None:
    """A node as a section to render, or None (no id, or nothing to show)."""
    node_id, kind = raw.get("id"), raw.get("type")
    if not isinstance(node_id, str) or not node_id:
        return None
    box = (_number(raw.get("x")), _number(raw.get("y")), max(_number(raw.get("width")), 0.0),
           max(_number(raw.get("height")), 0.0))  # a negative size (not JSON Canvas) holds nothing
    node = _Node(node_id, str(kind), box)
    if kind == "group":
        node.label = " ".join(_text(raw.get("label")).split())
    elif kind == "file" and _text(raw.get("file")).strip():
        target = _text(raw.get("file")).strip()
        sub = _text(raw.get("subpath")).strip()
        name = target.rsplit("/", 1)[-1]
        name = name[:-3] if name.lower().endswith(".md") else name
        link = target[:-3] if target.lower().endswith(".md") else target
        node.label = _short(name + (sub if sub.startswith("#") else ""))
        node.body = [f"[[{link}{sub if sub.startswith('#') else ''}]]"]
    elif kind == "link" and _text(raw.get("url")).strip():
        url = _text(raw.get("url")).strip()
        node.label, node.body = _short(url), [url]
    elif _text(raw.get("text")).strip():  # a text card (or a kind of node to come that has text)
        node.label, node.body = _card_text(_text(raw.get("text")))
    else:
        return None
    return node


def _card_text(text: str) -> tuple[str, list[str]]:
    """(heading, lines) of a text card: its first line is its heading (without the first
    heading's marks, and then not repeated below); its own headings become bold lines, so the
    card stays one section, and a code fence it leaves open is closed."""
    lines = text.strip("\n").split("\n")
    first = lines[0].strip()
    m = _HEADING.match(lines[0])
    if m:
        label = heading_text(m.group(2))
        start = next((i for i in range(1, len(lines)) if lines[i].strip()), len(lines))
        lines = lines[start:]  # one slice: blank lines after the heading cost no copy each
    else:
        label = _LIST_MARK.sub("", first)
    out: list[str] = []
    fence: str | None = None
    for line in lines:
        f = FENCE_RE.match(line)
        if fence is None and f:
            fence = f.group(1)
        elif fence is not None and f and f.group(1)[0] == fence[0] and len(f.group(1)) >= len(fence):
            fence = None
        elif fence is None and (h := _HEADING.match(line)) and heading_text(h.group(2)):
            line = f"**{heading_text(h.group(2))}**"
        out.append(line)
    if fence is not None:
        out.append(fence)
    if not any(x.strip() for x in out):
        out = [label]  # a card of one heading: its text is that heading
    return _short(label) or "card", out


def _short(label: str) -> str:
    label = " ".join(label.split()).strip("*_` ")
    if len(label) <= LABEL_CHARS:
        return label
    cut = label.rfind(" ", 0, LABEL_CHARS)
    return label[:cut if cut > LABEL_CHARS // 2 else LABEL_CHARS].rstrip() + "…"


def _attach_edge(edge: dict, by_id: dict[str, _Node]) -> None:
    """A labelled edge as a line of its source's section (or its target's, when the source is
    not shown)."""
    label = " ".join(_text(edge.get("label")).split())
    a, b = by_id.get(str(edge.get("fromNode"))), by_id.get(str(edge.get("toNode")))
    if not label or a is None or b is None:
        return
    line = f"{a.label or 'group'} → {b.label or 'group'}: {label}"
    (a if a.label else b).edges.append(line)


def _nest(path: str, nodes: list[_Node]) -> list[_Node]:
    """The top-level nodes, each labelled group holding the nodes whose box its own holds (the
    smallest such group, the first in the file among equal ones; a group only in a larger
    one); every list in reading order.

    Near-linear rather than a scan of every group for every node (20,000 groups made that 44 s):
    the groups are taken from the smallest up, each placing the nodes not placed yet whose box
    it holds, so the first to hold a node is its group. Those are found among the nodes whose
    top-left corner lies in the group's box (:class:`_Corners`: O(log² n) a group, each node
    placed once). What that costs beyond a placement (a corner inside a group whose box does not
    hold the node's) is bounded: over :func:`check_budget` such comparisons the canvas raises
    ConvertError (skipped, and remembered), which no canvas of a few hundred groups can reach."""
    shown = [n for n in nodes if not (n.type == "group" and not n.label)]
    groups = sorted((i for i, n in enumerate(shown) if n.type == "group"),
                    key=lambda i: (shown[i].area, i))
    corners = _Corners([n.box[0] for n in shown], [n.box[1] for n in shown])
    parent: list[_Node | None] = [None] * len(shown)
    budget = check_budget(len(shown))
    boxes: set[tuple[float, float, float, float]] = set()
    for gi in groups:
        g = shown[gi]
        if g.box in boxes:
            continue  # an equal box first in order took all it holds; this one holds the rest of none
        boxes.add(g.box)
        x, y, w, h = g.box
        for ni in corners.inside(x, x + w, y, y + h):
            n = shown[ni]
            if ni != gi and g.holds(n) and (n.type != "group" or g.area > n.area):
                parent[ni] = g
                corners.remove(ni)
                continue
            budget -= 1
            if budget < 0:
                raise ConvertError(path, f"its groups overlap too much to nest the cards (over "
                                         f"{check_budget(len(shown)):,} box comparisons)")
    top: list[_Node] = []
    for n, p in zip(shown, parent, strict=True):  # in the file's order, as ties are read
        (p.children if p is not None else top).append(n)
    for n in shown:
        n.children.sort(key=_reading_order)
    return sorted(top, key=_reading_order)


CHECK_FLOOR = 1_000_000  # box comparisons any canvas may spend beyond its placements …
CHECKS_PER_NODE = 64     # … or this many a node, whichever is more


def check_budget(nodes: int) -> int:
    """How many box comparisons that place nothing a canvas of ``nodes`` nodes may cost."""
    return max(CHECK_FLOOR, CHECKS_PER_NODE * nodes)


class _Corners:
    """The top-left corners of the nodes' boxes, to list those in a rectangle that are still
    there: a static 2-d range tree (the corners sorted by x; level L of it sorted by y within
    each run of 2**L of them), the removed skipped by union-find, so a rectangle costs
    O(log² n) and each corner it lists, and every removal together O(n log n)."""

    def __init__(self, xs: list[float], ys: list[float]) -> None:
        n = len(xs)
        ids = sorted(range(n), key=lambda i: xs[i])
        self.xs = [xs[i] for i in ids]
        self.gone = [False] * n
        self.levels: list[tuple[list[int], list[float], list[int]]] = []
        run = 1
        while True:
            # next[j] == j: not known to be removed; next[j] = k > j: ids[j:k] are all removed
            self.levels.append((ids, [ys[i] for i in ids], list(range(n + 1))))
            if run >= n:
                break
            ids = [i for start in range(0, n, 2 * run)  # two sorted runs: timsort merges them
                   for i in sorted(ids[start:start + 2 * run], key=lambda i: ys[i])]
            run *= 2

    def inside(self, x0: float, x1: float, y0: float, y1: float) -> Iterator[int]:
        """The nodes still there whose corner lies in [x0, x1] × [y0, y1] (removing one while
        they are listed is allowed)."""
        lo, hi = bisect_left(self.xs, x0), bisect_right(self.xs, x1)
        level = 0
        while lo < hi:  # [lo, hi) as the runs of the tree it is made of, bottom up
            if lo & 1:
                yield from self._run(level, lo, y0, y1)
                lo += 1
            if hi & 1:
                hi -= 1
                yield from self._run(level, hi, y0, y1)
            lo, hi, level = lo >> 1, hi >> 1, level + 1

    def _run(self, level: int, k: int, y0: float, y1: float) -> Iterator[int]:
        ids, ys, nxt = self.levels[level]
        start = k << level
        end = start + (1 << level)
        j, stop = bisect_left(ys, y0, start, end), bisect_right(ys, y1, start, end)
        while (j := self._first(ids, nxt, j, stop)) < stop:
            yield ids[j]
            j += 1

    def _first(self, ids: list[int], nxt: list[int], j: int, stop: int) -> int:
        """The first position from ``j`` (before ``stop``) whose node is still there, else
        ``stop`` or beyond; the removed passed on the way are linked past."""
        seen = []
        while j < stop:
            if nxt[j] != j:
                seen.append(j)
                j = nxt[j]
            elif self.gone[ids[j]]:
                seen.append(j)
                j += 1
            else:
                break
        for s in seen:
            nxt[s] = j
        return j

    def remove(self, i: int) -> None:
        self.gone[i] = True


def _reading_order(n: _Node) -> tuple[float, float]:
    return n.box[1], n.box[0]


def _render(top: list[_Node], lines: list[str], cards: list[list[Any]]) -> None:
    """Each node's section, depth first (a stack, not recursion: a chain of 3,000 nested groups
    is as deep as it is long); nesting beyond :data:`MAX_LEVEL` stays at that heading level."""
    stack = [(n, 1) for n in reversed(top)]
    while stack:
        n, level = stack.pop()
        if lines:
            lines.append("")
        first = len(lines) + 1
        lines.append(f"{'#' * min(level, MAX_LEVEL)} {n.label}")
        lines += n.body
        if n.edges:
            if n.body:
                lines.append("")
            lines += n.edges
        cards.append([first, len(lines), n.id])
        stack += [(child, level + 1) for child in reversed(n.children)]
