"""Leaving noisy parts of a note out of the index, before anything is chunked or embedded.

Three ways, applied to the kinds Obsidian opens as markdown, notes (``.md``) and Excalidraw
drawings (``.excalidraw.md``), and only to the body (the front block is always read):

- **By heading** (setting ``exclude_sections``, a vault adds its own): a heading whose text
  matches a pattern is left out with its section, subsections included, up to the next heading
  of the same or a higher level. A pattern is the heading's text, compared without regard to
  case or runs of spaces (``journal prompts`` matches ``## Journal  Prompts``); ``*`` stands
  for any run of characters and ``?`` for one (``Journal prompts*``); nothing else is special.
- **By code block language** (setting ``exclude_blocks``, a vault adds its own): a fenced block
  whose info string's first word matches (same patterns: ``dataview*`` covers ``dataviewjs``),
  fences included: embedded ``query``, ``dataview`` or ``tasks`` blocks.
- **By marker in the note**, always honoured, written as Obsidian comments (``%% … %%``, which
  Obsidian does not render), each alone on its line::

      %% hybrid: skip %%           leave out from here …
      %% hybrid: end %%            … to here (both marker lines included)
      %% hybrid: skip-section %%   leave out the section this line is in: from its heading
                                   (subsections included) to the next heading of the same or a
                                   higher level; above the first heading, the lines before it

A marker or heading inside a code fence is an example, not a rule. Bad input is warned about,
naming the file and line, and never leaks: a ``skip`` that no ``end`` closes leaves out the rest
of the note; an ``end`` with no ``skip`` before it and a marker of an unknown kind (a typo,
``%% hybrid: skp %%``) are ignored with a warning.

Left-out lines become empty lines rather than disappearing, so every line number left (a
chunk's range, a citation, ``get_note``'s lines) still points at the same line of the file. The
note's front block and tags are read from the whole file (a ``#private`` tag anywhere still
hides the note from agents); its title and links only from what is kept: a heading left out is
no title, and a backlink's line must be one an agent may read.

A drawing is left out of as the text it is indexed as (:mod:`hybrid.sources.excalidraw`): its
front block, the owner's markdown, then its text elements under a heading naming the drawing,
each element's link targets after its text (so left out with it), then the links of elements
with no text. So a region runs on from the owner's markdown into the drawing's text
(an unclosed ``skip`` leaves out the rest, the drawing's text too), a ``skip-section`` in the
owner's markdown ends where the drawing's text begins (its heading is level 1), markers in the
drawing's text elements work in reading order, and ``skip-section`` there leaves out all of the
drawing's text (one section). That heading is hybrid's, not the owner's: no ``exclude_sections``
pattern matches it (a drawing named "Template ideas" keeps its text under ``Template*``). The
drawing's own heading and fence lines are text, escaped (a tag starting a line is not), so only
the owner's headings and blocks are matched.

Bookmarks, Slack days, web pages, PDFs and the other kinds are not left out of: their text is
written by others (a page's author, anyone in a Slack channel), whose markers must not hide
text from the owner's index, nor an unclosed one blank a day of messages.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from hybrid.sources import KIND, kind_of
from hybrid.sources.excalidraw import drawing_heading
from hybrid.sources.markdown import (
    FENCE_RE,
    HEADING_RE,
    MARKER_RE,
    Note,
    file_title,
    first_h1,
    front_block,
    heading_text,
    note_links,
)

if TYPE_CHECKING:
    from hybrid.core.config import Vault

log = logging.getLogger("hybrid")

MARKER = "hybrid"
MARKER_KINDS = ("skip", "end", "skip-section")
LEAD_LEVEL = 7  # the lines above the first heading: any heading ends them


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


def pattern_regex(patterns: Iterable[str]) -> re.Pattern[str] | None:
    """One regex matching (whole) a normalised text that any of ``patterns`` matches; None for
    no pattern. ``*`` is any run of characters, ``?`` one, everything else itself."""
    parts = []
    for p in patterns:
        key = _key(p)
        if key:
            parts.append("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in key))
    return re.compile("|".join(f"(?:{p})" for p in parts), re.S) if parts else None


@dataclass(frozen=True)
class LeaveOut:
    """What to leave out of a vault's notes (besides what their markers say)."""
    sections: tuple[str, ...] = ()
    blocks: tuple[str, ...] = ()
    _headings: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)
    _blocks: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_headings", pattern_regex(self.sections))
        object.__setattr__(self, "_blocks", pattern_regex(self.blocks))

    @classmethod
    def of(cls, vault: Vault) -> LeaveOut:
        """The rule of ``vault``: the settings' patterns and the vault's own (kept in that order)."""
        return cls(tuple(dict.fromkeys(vault.exclude_sections)), tuple(dict.fromkeys(vault.exclude_blocks)))

    def __bool__(self) -> bool:
        return self._headings is not None or self._blocks is not None

    def meta(self) -> dict[str, list[str]]:
        """The rule as the catalog records it with the chunking parameters (nothing when
        empty, so an index made before these settings existed is not re-chunked)."""
        out = {}
        if self._headings is not None:
            out["leave_out_sections"] = sorted({_key(p) for p in self.sections if _key(p)})
        if self._blocks is not None:
            out["leave_out_blocks"] = sorted({_key(p) for p in self.blocks if _key(p)})
        return out

    def heading(self, text: str) -> bool:
        return self._headings is not None and self._headings.fullmatch(_key(text)) is not None

    def block(self, info: str) -> bool:
        words = info.split()
        return self._blocks is not None and bool(words) and \
            self._blocks.fullmatch(_key(words[0])) is not None


NOTHING = LeaveOut()


def left_out(lines: Sequence[str], body_start: int, rule: LeaveOut, path: str = "",
             unmatched: int | None = None) -> tuple[list[tuple[int, int]], list[str]]:
    """The 0-based, end-exclusive line ranges of ``lines`` (a note's, its body from 1-based
    ``body_start``) that ``rule`` and the note's markers leave out, in order, and warnings
    naming ``path`` and the line for markers that do not make sense (see the module
    docstring). The heading on 0-based line ``unmatched`` (a drawing's, hybrid's own) is
    matched by no pattern."""
    out: list[tuple[int, int]] = []
    warnings: list[str] = []
    first = body_start - 1
    if not rule and not any("%%" in line for line in lines[first:]):
        return out, warnings  # the common case: one cheap scan
    fence: str | None = None        # the opening fence's backticks or tildes, inside one
    fence_at, fence_out = 0, False  # where it opened, whether it is left out
    skip_at: int | None = None      # an open `skip` marker's line
    section: tuple[int, int] | None = None  # (first line, level) of a section left out, open
    heading = (first, LEAD_LEVEL)   # (line, level) of the section each line is in
    quoted: tuple[int, str, int, bool] | None = None  # a fence in a quote or callout: depth, fence, line, out
    for i in range(first, len(lines)):
        line = lines[i]
        if quoted is not None:  # it closes with its fence, or where the quote around it ends
            depth, qfence, qat, qout = quoted
            q = QUOTED_FENCE_RE.match(line)
            inside = _quote_depth(line) >= depth
            closes = q is not None and q.group(1).count(">") == depth and q.group(2)[0] == qfence[0] \
                and len(q.group(2)) >= len(qfence) and not q.group(3).strip()
            if inside and not closes:
                continue
            if qout:
                out.append((qat, i + 1 if closes else i))
            quoted = None
            if closes:
                continue
        opens = FENCE_RE.match(line)
        if fence is not None:
            if opens and opens.group(1)[0] == fence[0] and len(opens.group(1)) >= len(fence) \
                    and not line.strip()[len(opens.group(1)):].strip():
                if fence_out:
                    out.append((fence_at, i + 1))
                fence = None
            continue
        if opens:
            fence, fence_at = opens.group(1), i
            fence_out = rule.block(line.strip()[len(fence):])
            continue
        if ">" in line[:8] and (q := QUOTED_FENCE_RE.match(line)):  # `> ```dataview` in a callout
            quoted = (q.group(1).count(">"), q.group(2), i, rule.block(q.group(3).strip()))
            continue
        if "%%" in line and (marker := MARKER_RE.fullmatch(line)):
            kind = marker.group(1).lower()
            if skip_at is not None and kind != "end":
                continue  # inside a region left out, only its end counts
            if kind == "skip":
                skip_at = i
            elif kind == "end":
                if skip_at is None:
                    warnings.append(f"{path}: line {i + 1}: `%% hybrid: end %%` with no "
                                    "`%% hybrid: skip %%` before it; ignored")
                else:
                    out.append((skip_at, i + 1))
                    skip_at = None
            elif kind == "skip-section":
                if section is None:
                    section = heading
            else:
                warnings.append(f"{path}: line {i + 1}: unknown marker `{line.strip()[:80]}` "
                                f"(known: {', '.join(f'hybrid: {k}' for k in MARKER_KINDS)}); "
                                "ignored, the text around it is indexed")
            continue
        m = HEADING_RE.match(line)
        if m:
            level = len(m.group(1))
            if section is not None and level <= section[1]:
                out.append((section[0], i))
                section = None
            heading = (i, level)
            if section is None and i != unmatched and rule.heading(heading_text(m.group(2))):
                section = heading
    end = len(lines)
    if fence is not None and fence_out:  # a fence never closed runs to the end, as the chunker reads it
        out.append((fence_at, end))
    if quoted is not None and quoted[3]:
        out.append((quoted[2], end))
    if skip_at is not None:
        warnings.append(f"{path}: line {skip_at + 1}: `%% hybrid: skip %%` is never closed by "
                        "`%% hybrid: end %%`; the rest of the note is left out")
        out.append((skip_at, end))
    if section is not None:
        out.append((section[0], end))
    return sorted(out), warnings


# a fenced block's opening line inside a block quote or callout: `> ```dataview`, `>> ~~~tasks`
QUOTED_FENCE_RE = re.compile(r"^\s{0,3}((?:>[ \t]?)+)[ \t]{0,3}(`{3,}|~{3,})(.*)$")


def _quote_depth(line: str) -> int:
    """How many ``>`` open ``line`` (a block quote's or callout's nesting)."""
    m = re.match(r"^\s{0,3}((?:>[ \t]?)*)", line)
    return m.group(1).count(">") if m else 0


def _blanked(lines: list[str], ranges: list[tuple[int, int]]) -> list[str]:
    kept = list(lines)
    for a, b in ranges:
        kept[a:b] = [""] * (b - a)
    return kept


def applies(path: str) -> bool:
    """Whether leaving out applies to the document at ``path``: the kinds Obsidian opens as
    markdown, notes and drawings (a PDF's page headings, a web page's or a Slack day's are not
    the owner's)."""
    return KIND[kind_of(path)].markdown


def _unmatched(path: str, lines: Sequence[str]) -> int | None:
    """The line of the heading hybrid writes to name a drawing (see the module docstring)."""
    return drawing_heading(path, lines) if kind_of(path) == "excalidraw" else None


def leave_out(note: Note, rule: LeaveOut) -> Note:
    """``note`` with what ``rule`` and its markers leave out blanked (same number of lines),
    its title and links taken from what is kept, and a warning for each marker that makes no
    sense."""
    if not applies(note.path):
        return note
    ranges, warnings = left_out(note.lines, note.body_start, rule, note.path,
                                _unmatched(note.path, note.lines))
    if not ranges and not warnings:
        return note
    lines = _blanked(note.lines, ranges)
    body = lines[note.body_start - 1:]
    links = note_links(body, note.properties) if ranges else note.links
    title, title_line = note.title, note.title_line
    if title_line is not None and any(a <= title_line < b for a, b in ranges):
        h1 = first_h1(body)  # the next heading that may be the title, else the file's name
        title, title_line = (h1[1], note.body_start - 1 + h1[0]) if h1 else (file_title(note.path), None)
    return replace(note, lines=lines, links=links, title=title, title_line=title_line,
                   warnings=[*note.warnings, *warnings])


def kept_text(path: str, text: str, rule: LeaveOut) -> str:
    """``text`` (the document ``path`` as read: a drawing's as rendered) with what ``rule``
    and its markers leave out blanked: what an agent may read of it, line for line as
    indexed."""
    if not applies(path):
        return text
    lines = text.split("\n")
    _, body_start, _ = front_block(lines)
    ranges, warnings = left_out(lines, body_start, rule, path, _unmatched(path, lines))
    for w in warnings:
        log.debug("%s", w)
    return "\n".join(_blanked(lines, ranges)) if ranges else text
