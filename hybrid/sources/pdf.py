"""PDF text, page by page, with PDFium (pypdfium2: Apache-2.0/BSD; not AGPL).

A PDF becomes a note whose sections are its pages: ``# Page N`` and that page's text, so chunks
never span two pages and a hit's page is its section (:func:`page_of`). PDFium runs in the
converter worker (:mod:`hybrid.sources.worker`) under a memory and time bound; there pages are
read one at a time and closed, so a large PDF costs the memory of one page plus the text kept so
far (capped at ``MAX_TEXT_CHARS``). A PDF that cannot be read (encrypted, damaged, or without a
text layer: a scan) raises :class:`Unreadable`, one over the bounds ConvertError; the indexer
reports either as one warning and skips the PDF.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hybrid.sources.markdown import FENCE_RE, Note
from hybrid.sources.sandbox import ConvertError, Limits, convert, convert_limits

PAGE_HEADING = "Page "
MAX_TEXT_CHARS = 20_000_000  # text kept from one PDF; later pages are left out with a warning
_HYPHEN_BREAK = re.compile(r"(?<=[a-z])-\n(?=[a-z])")
_HEADING_LIKE = re.compile(r"^\s{0,3}#")
_JUNK_TITLE = re.compile(r"^(untitled|microsoft word - .*|document\d*|\s*)$", re.I)


class Unreadable(ConvertError):
    """The PDF has no text to index: encrypted, damaged, or only images (a scan)."""


def page_of(heading: str) -> int | None:
    """The 1-based page a PDF chunk's heading (``Page N``) names, else None."""
    if heading.startswith(PAGE_HEADING):
        num = heading[len(PAGE_HEADING):].split(" ", 1)[0]
        if num.isdigit():
            return int(num)
    return None


@dataclass
class PdfText:
    """What the converter read of a PDF."""
    pages: int                       # pages in the PDF
    texts: list[tuple[int, str]]     # (page number, cleaned text) of the pages read, in order
    title: str                       # its metadata title ("" when none or a placeholder)
    cut_from: int | None = None      # the page the text cap cut short (the last read), else None


def pdf_text(source: str | bytes, path: str, max_chars: int = MAX_TEXT_CHARS,
             limits: Limits | None = None) -> PdfText:
    """The text of the PDF at ``source`` (a file path or its bytes), page by page, read by the
    converter worker under ``limits``: at most ``max_chars`` in all, the page that passes them
    cut short (``cut_from``). Raises :class:`Unreadable` for a PDF PDFium cannot open,
    ConvertError over the limits."""
    args = {"path": source} if isinstance(source, str) else {}
    reply = convert("pdf", path, limits or convert_limits(), b"" if isinstance(source, str) else source,
                    max_chars=max_chars, **args)
    if not reply["ok"]:
        why = str(reply.get("message") or "")
        if reply.get("kind") == "encrypted":
            raise Unreadable(path, "encrypted PDF (needs a password)")
        raise Unreadable(path, f"damaged or not a PDF ({why})")
    pages, texts, title = reply.get("pages"), reply.get("texts"), reply.get("title")
    if not isinstance(pages, int) or not isinstance(title, str) or not isinstance(texts, list) \
            or len(texts) > pages or not all(isinstance(t, str) for t in texts):
        raise ConvertError(path, "the converter sent a malformed reply")
    title = "" if _JUNK_TITLE.match(title.strip()) else " ".join(title.split())[:300]
    return PdfText(pages, [(i, clean(t)) for i, t in enumerate(texts, 1)], title,
                   len(texts) if reply.get("cut") is True and texts else None)


def clean(text: str) -> str:
    """PDFium's page text as lines: one newline style, no NULs or form feeds, words broken by a
    hyphen at a line end joined, and no line that markdown would read as a heading or a code
    fence (those are ours: the page headings)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "").replace("\x0c", "\n")
    text = _HYPHEN_BREAK.sub("", text)
    lines = []
    for line in text.split("\n"):
        line = line.rstrip()
        if _HEADING_LIKE.match(line) or FENCE_RE.match(line):
            line = "\\" + line.lstrip()
        lines.append(line)
    return "\n".join(lines).strip("\n")


def pdf_note(path: str, source: str | bytes, limits: Limits | None = None) -> Note:
    """The note of the PDF at ``source`` (a file path or its bytes; its ``warnings`` say what
    was left out). Raises :class:`Unreadable` when no page has text, ConvertError when
    reading it is over ``limits``."""
    got = pdf_text(source, path, MAX_TEXT_CHARS, limits)
    warnings: list[str] = []
    lines: list[str] = []
    kept = chars = 0
    cut_from = got.cut_from
    for number, text in got.texts:
        if number == cut_from or chars + len(text) > MAX_TEXT_CHARS:
            cut_from = number  # no page is kept in part
            break
        if not text.strip():
            continue
        if lines:
            lines.append("")
        lines += [f"# {PAGE_HEADING}{number}", "", *text.split("\n")]
        kept += 1
        chars += len(text)
    if cut_from is not None:
        warnings.append(f"{path}: text beyond {MAX_TEXT_CHARS:,} characters left out "
                        f"(from page {cut_from} on)")
    if not kept:
        raise Unreadable(path, f"no text layer in {got.pages} page(s) (a scan or images only)"
                         if got.pages else "a PDF without pages")
    stem = path.rsplit("/", 1)[-1]
    return Note(path=path, title=got.title or stem[:-4], lines=lines, body_start=1,
                properties={"pages": got.pages}, warnings=warnings)
