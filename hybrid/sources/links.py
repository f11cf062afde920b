"""Where a note links: each link of a markdown note's body with its place, the heading path
above it and the words of its paragraph (a caption), for the pictures a note shows
(:mod:`hybrid.indexing.context`). The links themselves, as the ledger records them, are
:func:`hybrid.sources.markdown.note_links`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from hybrid.sources.markdown import (
    CODE_SPAN_RE,
    FENCE_RE,
    HEADING_RE,
    MDLINK_RE,
    WIKILINK_RE,
    Note,
    heading_text,
)


@dataclass(frozen=True)
class LinkPlace:
    """Where a note links to (or embeds) a file: the ``target`` as written, the ``headings``
    above it, and the ``words`` of its paragraph, each link there read as the text it shows
    (an embed without any: nothing)."""
    target: str
    headings: tuple[str, ...]
    words: str


PLACE_WORDS = 300  # characters kept of a link's paragraph
_SIZE_RE = re.compile(r"\d+(?:x\d+)?")  # `![[photo.png|300]]`, `|300x200`: a size, not words
_MD_SHOWN_RE = re.compile(r"!?\[([^\[\]\n]*)\]\([^()\n]*\)")


def _shown(m: re.Match[str]) -> str:
    whole = m.group(0)
    shown = whole[whole.index("|") + 1:-2].strip() if "|" in whole else ""
    if _SIZE_RE.fullmatch(shown):
        shown = ""
    if whole.startswith("!"):
        return f" {shown} "
    return f" {shown or m.group(1).strip()} "


def link_places(note: Note) -> list[LinkPlace]:
    """Each link of ``note``'s body outside code, in order, with its place
    (:class:`LinkPlace`): the heading path as the chunker reads it, and its paragraph's words;
    for a paragraph that is little more than the link (an embed on a line of its own), the
    words of the paragraphs just before and after it in its section too (a caption)."""
    paras: list[tuple[tuple[str, ...], str]] = []  # (heading path, text) of each paragraph
    stack: list[tuple[int, str]] = []
    para: list[str] = []
    fence: str | None = None

    def close() -> None:
        if para:
            text = "\n".join(para)
            paras.append((tuple(t for _, t in stack), CODE_SPAN_RE.sub(" ", text) if "`" in text else text))
            para.clear()

    for line in note.lines[note.body_start - 1:]:
        mark = FENCE_RE.match(line)
        if fence is not None:
            if mark and mark.group(1)[0] == fence[0] and len(mark.group(1)) >= len(fence) \
                    and not line.strip()[len(mark.group(1)):].strip():
                fence = None
            continue
        if mark:
            close()
            fence = mark.group(1)
            continue
        heading = HEADING_RE.match(line)
        if heading:
            close()
            level = len(heading.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, heading_text(heading.group(2)) or "#" * level))
        elif not line.strip():
            close()
        else:
            para.append(line)
    close()
    out: list[LinkPlace] = []
    for i, (heads, text) in enumerate(paras):
        if "[[" not in text and "](" not in text:
            continue
        targets = [m.strip() for m in WIKILINK_RE.findall(text)]
        if "](" in text:
            from urllib.parse import unquote
            targets += [unquote(m).strip() for m in MDLINK_RE.findall(text)]
        if not targets:
            continue
        words = _words(text)
        if len(words.split()) < 4:  # the link alone: its caption is the paragraph around it
            before = _words(paras[i - 1][1]) if i and paras[i - 1][0] == heads else ""
            after = _words(paras[i + 1][1]) if i + 1 < len(paras) and paras[i + 1][0] == heads else ""
            words = " ".join(w for w in (before, words, after) if w)
        out.extend(LinkPlace(t, heads, words[:PLACE_WORDS]) for t in dict.fromkeys(t for t in targets if t))
    return out


def _words(text: str) -> str:
    """A paragraph's words, each link as the text it shows."""
    return " ".join(_MD_SHOWN_RE.sub(lambda m: f" {m.group(1)} ", WIKILINK_RE.sub(_shown, text)).split())
