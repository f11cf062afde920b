"""Who links to a note, and what it links to, for ``get`` / MCP ``get_note``.

From the vault's :class:`~hybrid.store.graph.LinkGraph` (links resolved as Obsidian resolves
them): the notes linking here (*backlinks*), each with the first line of it that holds the link
(read from disk, so the line number cites the file as it is now), and the notes this one links
to (*links*: a ``[[Name]]`` in the text resolved to the path ``get`` reads).

For an agent, the graph is first taken without the notes hidden from agents, and a listed note
is one the agent could read itself: a note made private on disk since it was indexed is left
out too (judged again as it is now where its file changed: one ``stat`` per unchanged file),
and a backlink's line is redacted as ``get_note`` redacts. So neither list names a note the
agent may not see, whichever way the link points.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hybrid.store.graph import LinkGraph

MAX_LISTED = 100    # notes listed per direction at most (a hub note can have thousands)
LINE_CHARS = 200    # a backlink's line is cut to this many characters


@dataclass
class LinkedNote:
    path: str
    title: str
    line: int | None = None   # a backlink: the first line of the linking note holding the link
    text: str | None = None   # that line (its first LINE_CHARS characters)


@dataclass
class NoteLinks:
    backlinks: list[LinkedNote]
    links: list[LinkedNote]
    backlinks_total: int      # may be more than listed (MAX_LISTED)
    links_total: int


# (path) -> the note's text as the caller may read it, or None when it may not read it
ReadText = Callable[[str], "str | None"]


def note_links(graph: LinkGraph, path: str, read_text: ReadText,
               hidden: Collection[int] = (), limit: int = MAX_LISTED) -> NoteLinks | None:
    """The links of the note at ``path`` in ``graph`` (the owner's), seen without the notes
    ``hidden``; None when the note is not in the graph (not indexed). ``read_text(path)``: a
    linking note's text (None: not readable, and then it is not listed)."""
    fid = graph.by_path(path)
    if fid is None or fid in hidden:
        return None
    seen = graph.without(hidden)
    back: list[LinkedNote] = []
    for other in seen.backlinks(fid)[:limit]:
        note = graph.notes[other]
        text = read_text(note.path)
        if text is None:
            continue
        line, shown = link_line(graph, text, fid, note.path)
        back.append(LinkedNote(note.path, note.title, line, shown))
    outs = [LinkedNote(graph.notes[i].path, graph.notes[i].title) for i in seen.outlinks(fid)[:limit]]
    return NoteLinks(back, outs, len(seen.backlinks(fid)), len(seen.outlinks(fid)))


def link_line(graph: LinkGraph, text: str, target: int, source: str = "") -> tuple[int | None, str | None]:
    """(1-based line, its text) of the first link in ``text`` (the note at path ``source``)
    that resolves to note ``target`` in ``graph``; (None, None) when no line holds one (the
    note changed since it was indexed)."""
    from urllib.parse import unquote

    from hybrid.sources.markdown import CODE_SPAN_RE, FENCE_RE, MDLINK_RE, WIKILINK_RE
    in_fence = False
    for n, line in enumerate(text.split("\n"), 1):
        if FENCE_RE.match(line):
            in_fence = not in_fence
        if in_fence or ("[[" not in line and "](" not in line):
            continue
        prose = CODE_SPAN_RE.sub(" ", line) if "`" in line else line  # code is an example, not a link
        found = [m.strip() for m in WIKILINK_RE.findall(prose)]
        found += [unquote(m).strip() for m in MDLINK_RE.findall(prose)] if "](" in prose else []
        if any(graph.resolve(t, source) == target for t in found if t):
            return n, line.strip()[:LINE_CHARS]
    return None, None


def describe(note, shown: int = MAX_LISTED) -> list[str]:
    """The links of ``note`` (a :class:`~hybrid.app.reader.NoteText` with them attached) as
    lines of text: who links here (with the line), then what it links to; at most ``shown``
    of each. Empty when they are not known."""
    if note.backlinks is None or note.links is None:
        return []
    out = [f"linked from {_count(note.backlinks_total)}" + (":" if note.backlinks else "")]
    for b in note.backlinks[:shown]:
        where = f":{b.line}" if b.line else ""
        out.append(f"  {b.path}{where}" + (f"  {b.text}" if b.text else ""))
    out += _more(note.backlinks_total, min(shown, len(note.backlinks)))
    out.append(f"links to {_count(note.links_total)}" + (":" if note.links else ""))
    out += [f"  {n.path}" for n in note.links[:shown]]
    out += _more(note.links_total, min(shown, len(note.links)))
    return out


def _count(n: int | None) -> str:
    return "no note" if not n else f"{n} note{'s' if n != 1 else ''}"


def _more(total: int | None, listed: int) -> list[str]:
    return [f"  … and {total - listed} more"] if total and total > listed else []
