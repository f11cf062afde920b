"""Excalidraw drawings (``*.excalidraw.md``, as the Obsidian Excalidraw plugin writes them) as notes.

The plugin keeps a drawing in a markdown file: a front block (``excalidraw-plugin: parsed``,
often ``tags: [excalidraw]``), then maybe the owner's own markdown (the "back of the card"),
a banner line (``==⚠  Switch to EXCALIDRAW VIEW in the MORE OPTIONS menu of this document.
⚠==`` …), and its data: ``# Excalidraw Data`` with ``## Text Elements`` (each text element
followed by `` ^id``), ``## Element Links`` and ``## Embedded Files`` (``id: [[Note]]``, or an
address), and, between ``%%`` lines, ``## Drawing``: a ```` ```json```` block, or a
```` ```compressed-json```` one (LZ-String base64, :mod:`hybrid.sources.lzstring`). Older
files put ``# Text Elements`` and ``# Drawing`` at the top level, with no banner.

Indexed as markdown (``hybrid get`` shows it too): the front block as written (its tags and
properties are the owner's, and the agent view reads them), the owner's markdown, then under
a heading naming the drawing its text elements (without their ``^id``; a line that markdown
would read as a heading or a fence escaped with ``\\``), each followed by its link targets
(``[[Note]]``, addresses; from the element's ``link``, or its Element Links and Embedded
Files entries), one line each, then the targets of elements with no text (images, shapes).
A link thus lies in the region its element's text does, and is left out with it
(:mod:`hybrid.sources.sections`). Never the banner, the data headings or the drawing's JSON.
The title is the file name without ``.excalidraw.md``. With no ``Text Elements`` section the text
elements are read from the drawing itself; a drawing that does not decompress or parse is one
warning, and the rest of the file is still indexed.

Read here, in the indexing process, not in the converter worker: everything is our own code,
linear in what it reads and writes (the LZ-String decoder too, :mod:`hybrid.sources.lzstring`,
and the json module's C parser), and what it may write is bounded. A compressed drawing
decompresses to at most ``max_file_bytes`` characters, what the drawing could hold written out
uncompressed (a 92 KB drawing decompressed to 63 million characters, 49,808 chunks); one past
it raises :class:`~hybrid.sources.sandbox.ConvertError`: skipped, and remembered until the
file or the limit changes, as a file over ``max_file_bytes`` is. The worker would bound memory
and time too, but the cap bounds both already, at no process round trip.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from hybrid.sources.canvas import load_json
from hybrid.sources.lzstring import TooLarge, Undecodable, decompress_base64
from hybrid.sources.markdown import (
    FENCE_RE,
    HEADING_RE,
    MARKER_RE,
    Note,
    file_tags,
    front_block,
    heading_text,
    parse_note,
)
from hybrid.sources.sandbox import ConvertError, expand_limit

SUFFIX = ".excalidraw.md"
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*)$")
_BLOCK_ID = re.compile(r"\^[A-Za-z0-9_-]{1,64}")  # the plugin's `` ^id`` ending a text element
_LINK_LINE = re.compile(r"^([^\s:]+):\s*(.+)$")
_DATA = "excalidraw data"
_SECTIONS = {"text elements", "element links", "embedded files", "drawing", "embeddable links"}
# What markdown (and the chunker, HEADING_RE) reads as a heading or a fence: escaped in a
# drawing's text. Not a bare leading '#': `#private okapi` starts with a tag, as in Obsidian.
_ESCAPE = re.compile(r"\s{0,3}(?:#{1,6}(?:\s|$)|```|~~~)")


def is_banner(line: str) -> bool:
    """The plugin's warning to switch views, on a line of its own."""
    return line.lstrip().startswith("==⚠") and "EXCALIDRAW VIEW" in line.upper()


def drawing_note(path: str, text: str, max_chars: int | None = None) -> Note:
    """The note of the drawing whose file holds ``text`` (decoded). A compressed drawing
    decompresses to at most ``max_chars`` characters (default: the default ``max_file_bytes``);
    ConvertError past it."""
    lines = text.split("\n")
    fm, body_start, _ = front_block(lines)
    head = lines[:body_start - 1] if fm is not None else []
    own, sections = _split(lines[len(head):])
    warnings: list[str] = []
    entries = _entries(sections.get("element links", []) + sections.get("embedded files", []))
    elements: list[_Element] = []
    loose: list[str] = []  # links of no text element: an image's, a shape's, an arrow's
    if "text elements" in sections:
        elements = _text_section(sections["text elements"])
    elif sections.get("drawing"):
        elements, loose = _from_drawing(path, sections["drawing"], warnings,
                                        expand_limit(None) if max_chars is None else max_chars)
    by_id: dict[str, list[str]] = {}
    for key, target in entries:
        by_id.setdefault(key, []).append(target)
    texts: list[str] = []
    for eid, lines, links in elements:  # each element's links go with its text (left out with it)
        texts += _with_links(lines, list(dict.fromkeys(links + by_id.pop(eid or "", []))))
    loose = list(dict.fromkeys(loose + [t for targets in by_id.values() for t in targets]))
    title = drawing_title(path)
    body = list(own)
    while body and not body[-1].strip():
        body.pop()
    drawn = _paragraphs(texts)
    drawn += ([""] if drawn and loose else []) + [_escaped(x) for x in loose]
    if drawn:
        fence = _open_fence(body)
        body += ([fence] if fence else []) + ([""] if body else []) + [f"# {title}", ""] + drawn
    note = parse_note(path, "\n".join(head + body))
    note.title, note.title_line = title, None
    note.warnings += warnings
    # privacy from the whole file as written, as a note's: a text element that reads like a data
    # heading must not carry the elements after it, and their tags, out of the tags
    note.tags = list(dict.fromkeys(note.tags + file_tags(lines[len(head):])))
    return note


def drawing_title(path: str) -> str:
    """A drawing's title: its file name without ``.excalidraw.md``."""
    name = path.rsplit("/", 1)[-1]
    return name[:-len(SUFFIX)] if name.lower().endswith(SUFFIX) else name


def drawing_heading(path: str, lines: Sequence[str]) -> int | None:
    """The 0-based line of the heading that names the drawing in its text as indexed
    (:func:`drawing_note`'s ``# Title``), or None when it has none: the last heading of that
    text, since all that follows it is escaped."""
    for i in range(len(lines) - 1, -1, -1):
        if HEADING_RE.match(lines[i]):
            return i if lines[i] == f"# {drawing_title(path)}" else None
    return None


def _open_fence(lines: list[str]) -> str | None:
    """The fence that closes a code block ``lines`` leave open (the owner's markdown ending in
    one), so that the drawing's text after it is not read as code; None when none is open."""
    fence: str | None = None
    for line in lines:
        f = FENCE_RE.match(line)
        if fence is None and f:
            fence = f.group(1)
        elif fence is not None and f and f.group(1)[0] == fence[0] and len(f.group(1)) >= len(fence) \
                and not line.strip()[len(f.group(1)):].strip():
            fence = None
    return fence


def _split(lines: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """(the owner's own lines, {data section name: its lines}) of a drawing's body. The data
    starts at ``# Excalidraw Data``, or at the first data heading of an older file; the
    banner and ``%%`` lines are dropped."""
    own: list[str] = []
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    fence: str | None = None
    ends = _element_ends(lines)
    for at, line in enumerate(lines):
        f = FENCE_RE.match(line)
        if fence is not None:  # inside the drawing's block: its JSON, whatever it holds
            current.append(line)  # type: ignore[union-attr]
            if f and f.group(1)[0] == fence[0] and len(f.group(1)) >= len(fence):
                fence = None
            continue
        if f and current is not None and current is sections.get("drawing"):
            fence = f.group(1)
            current.append(line)
            continue
        if is_banner(line) or line.strip() == "%%":
            continue
        name = _data_heading(line)
        if name is not None and current is not None and current is sections.get("text elements") \
                and at + 1 < len(lines) and ends[at + 1]:
            name = None  # a multi-line text element's first line that reads like a data heading
        if name == _DATA:
            current = sections.setdefault("", [])
            continue
        if name is not None:
            current = sections.setdefault(name, [])
            continue
        (own if current is None else current).append(line)
    sections.pop("", None)
    return own, sections


def _element_ends(lines: list[str]) -> list[bool]:
    """For each line: whether the lines from it to the next blank one end a text element (the
    last of them ends with its `` ^id``), so that a line before them that reads like a data
    heading is that element's first line. One pass from the end: linear in the lines."""
    out = [False] * len(lines)
    ends = False
    for at in range(len(lines) - 1, -1, -1):
        line = lines[at].rstrip()
        if not line:
            ends = False
            continue
        ends = ends or (line.split()[-1].startswith("^") and _BLOCK_ID.fullmatch(line.split()[-1]) is not None)
        out[at] = ends
    return out


def _data_heading(line: str) -> str | None:
    """The name of a data heading (``# Excalidraw Data``, ``## Text Elements`` …), else None.
    A text element that looks like one carries its ``^id``, so it never is one."""
    m = _HEADING.match(line)
    if m is None:
        return None
    name = " ".join(heading_text(m.group(2)).split()).lower()
    return name if name == _DATA or name in _SECTIONS else None


def _clean(line: str) -> str:
    """A line of the Text Elements: its ``^id`` dropped (with the spaces before and after it;
    an id is a word of its own), and escaped where markdown would read it as a heading or a
    fence (a drawing's text is text, not structure)."""
    return _escaped(_cut_id(line)[0])


def _cut_id(line: str) -> tuple[str, str | None]:
    """(``line`` without the ``^id`` ending it, that id) or (``line``, None) when none does.
    String operations, not a regex with ``\\s+`` before the id: that backtracks quadratically
    on a long run of spaces."""
    end = line.rstrip()
    cut = len(end)
    while cut and not end[cut - 1].isspace():
        cut -= 1
    if _BLOCK_ID.fullmatch(end, cut):
        return end[:cut].rstrip(), end[cut + 1:]
    return line, None


# A text element as rendered: (its id, its lines cleaned and escaped, its links' targets)
_Element = tuple[str | None, list[str], list[str]]


def _text_section(lines: list[str]) -> list[_Element]:
    """The elements of the Text Elements section: each runs to the line its ``^id`` ends (the
    blank line the plugin writes between two starts the next); lines after the last id are
    one element of no id."""
    out: list[_Element] = []
    current: list[str] = []
    for line in lines:
        text, eid = _cut_id(line)
        current.append(_escaped(text))
        if eid is not None:
            out.append((eid, current, []))
            current = []
    if current:
        out.append((None, current, []))
    return out


def _with_links(lines: list[str], links: list[str]) -> list[str]:
    """An element's lines with its links' targets right after its last line of text that is
    not a ``%% hybrid: … %%`` marker (its last line when it has none), so that a region left
    out that holds its text holds its links: an element wrapped in its own skip and end
    markers included."""
    if not links:
        return lines
    at = next((i for i in range(len(lines) - 1, -1, -1)
               if lines[i].strip() and not MARKER_RE.fullmatch(lines[i])), len(lines) - 1)
    return lines[:at + 1] + [_escaped(x) for x in links] + lines[at + 1:]


def _escaped(line: str) -> str:
    """``line`` escaped where markdown would read it as a heading (1-6 ``#`` then a space or
    nothing) or a fence; a tag starting it (``#private``) stays a tag."""
    return "\\" + line.lstrip() if _ESCAPE.match(line) else line


def _paragraphs(lines: list[str]) -> list[str]:
    """Lines without runs of blank lines at either end or twice in a row."""
    out: list[str] = []
    for line in lines:
        if line.strip() or (out and out[-1].strip()):
            out.append(line if line.strip() else "")
    while out and not out[-1]:
        out.pop()
    return out


def _entries(lines: list[str]) -> list[tuple[str, str]]:
    """(element or file id, link target) of each entry of the Element Links and Embedded Files
    sections (``id: [[Note]]``, ``id: https://…``)."""
    found = [(m.group(1), m.group(2).strip()) for line in lines if (m := _LINK_LINE.match(line.strip()))]
    return [(i, t) for i, t in found if t]


def _from_drawing(path: str, lines: list[str], warnings: list[str],
                  max_chars: int) -> tuple[list[_Element], list[str]]:
    """The text elements of the drawing's JSON (its ```` ```json```` or ```` ```compressed-json````
    block), in reading order, and the links of its other elements; none and one warning when
    it cannot be read; ConvertError when it decompresses past ``max_chars``."""
    kind, payload = _block(lines)
    if kind is None:
        return [], []
    try:
        raw = decompress_base64(payload, max_chars) if kind == "compressed-json" else payload
        drawing = load_json(raw)
    except TooLarge:  # a bomb, or a drawing larger than it could be written out: skipped
        raise ConvertError(path, f"its drawing decompresses beyond max_file_bytes ({max_chars:,} "
                                 "characters)") from None
    except (Undecodable, ValueError, RecursionError) as exc:
        what = "does not decompress" if isinstance(exc, Undecodable) else "is not valid JSON"
        warnings.append(f"{path}: its drawing {what} ({str(exc)[:120]}); indexed the rest of the "
                        "file without the drawing's text")
        return [], []
    return _drawn_text(drawing)


def _block(lines: list[str]) -> tuple[str | None, str]:
    """(``json`` or ``compressed-json``, the block's text) of the Drawing section's first fenced
    block, or (None, "") when it has none."""
    start = next((i for i, x in enumerate(lines) if FENCE_RE.match(x)), None)
    if start is None:
        return None, ""
    kind = lines[start].strip().lstrip("`~").strip().lower()
    end = next((i for i in range(start + 1, len(lines)) if FENCE_RE.match(lines[i])), len(lines))
    return ("compressed-json" if kind == "compressed-json" else "json"), "\n".join(lines[start + 1:end])


def _drawn_text(drawing: Any) -> tuple[list[_Element], list[str]]:
    """A drawing's live text elements (top to bottom, then left to right), each a paragraph
    with its link, and the links of its other elements (shapes, images, arrows), in order."""
    elements = drawing.get("elements") if isinstance(drawing, dict) else None
    found: list[tuple[float, float, _Element]] = []
    loose: list[str] = []
    for e in elements if isinstance(elements, list) else ():
        if not isinstance(e, dict) or e.get("isDeleted") is True:
            continue
        link = e["link"].strip() if isinstance(e.get("link"), str) else ""
        text = e.get("originalText") if isinstance(e.get("originalText"), str) else e.get("text")
        if e.get("type") != "text" or not isinstance(text, str) or not text.strip():
            if link:
                loose.append(link)
            continue
        eid = e["id"] if isinstance(e.get("id"), str) else None
        lines = [_clean(x) for x in text.replace("\r\n", "\n").split("\n")] + [""]
        found.append((_coordinate(e.get("y")), _coordinate(e.get("x")), (eid, lines, [link] if link else [])))
    return [el for _, _, el in sorted(found, key=lambda t: (t[0], t[1]))], loose


def _coordinate(value: Any) -> float:
    """A position to sort by; 0 for anything but a finite number (NaN, a huge integer)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    number = float(value)
    return number if math.isfinite(number) else 0.0
