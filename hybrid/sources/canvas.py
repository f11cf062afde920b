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
"""

from __future__ import annotations

import json
import re
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
    top = _nest(nodes)
    lines: list[str] = []
    cards: list[list[Any]] = []
    for n in top:
        _render(n, 1, lines, cards)
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


def _load(path: str, data: bytes) -> dict:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        canvas = json.loads(data.decode("utf-8"))
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
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _text(value: Any) -> str:
    return value.replace("\r\n", "\n").replace("\r", "\n") if isinstance(value, str) else ""


def _node(raw: dict) -> _Node | None:
    """A node as a section to render, or None (no id, or nothing to show)."""
    node_id, kind = raw.get("id"), raw.get("type")
    if not isinstance(node_id, str) or not node_id:
        return None
    box = (_number(raw.get("x")), _number(raw.get("y")), _number(raw.get("width")),
           _number(raw.get("height")))
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
        label, lines = heading_text(m.group(2)), lines[1:]
        while lines and not lines[0].strip():
            lines = lines[1:]
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


def _nest(nodes: list[_Node]) -> list[_Node]:
    """The top-level nodes, each labelled group holding the nodes whose box its own holds (the
    smallest such group); every list in reading order."""
    groups = sorted((n for n in nodes if n.type == "group" and n.label), key=lambda g: g.area)
    top: list[_Node] = []
    for n in nodes:
        if n.type == "group" and not n.label:
            continue
        parent = next((g for g in groups if g is not n and g.holds(n)
                       and (g.area > n.area or n.type != "group")), None)
        (parent.children if parent is not None else top).append(n)
    for n in nodes:
        n.children.sort(key=_reading_order)
    return sorted(top, key=_reading_order)


def _reading_order(n: _Node) -> tuple[float, float]:
    return n.box[1], n.box[0]


def _render(n: _Node, level: int, lines: list[str], cards: list[list[Any]]) -> None:
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
    for child in n.children:
        _render(child, level + 1, lines, cards)
