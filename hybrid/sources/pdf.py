"""PDF text, page by page, with PDFium (pypdfium2: Apache-2.0/BSD; not AGPL).

A PDF becomes a note whose sections are its pages: ``# Page N`` and that page's text, so chunks
never span two pages and a hit's page is its section (:func:`page_of`). Pages are read one at a
time and closed, so a large PDF costs the memory of one page plus the text kept so far (capped
at ``MAX_TEXT_CHARS``). A PDF that cannot be read (encrypted, damaged, or without a text layer:
a scan) raises :class:`Unreadable`, which the indexer reports as one warning and skips.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..notes import FENCE_RE, Note

PAGE_HEADING = "Page "
MAX_TEXT_CHARS = 20_000_000  # text kept from one PDF; later pages are left out with a warning
_HYPHEN_BREAK = re.compile(r"(?<=[a-z])-\n(?=[a-z])")
_HEADING_LIKE = re.compile(r"^\s{0,3}#")
_JUNK_TITLE = re.compile(r"^(untitled|microsoft word - .*|document\d*|\s*)$", re.I)


class Unreadable(ValueError):
    """The PDF has no text to index: encrypted, damaged, or only images (a scan)."""


def page_of(heading: str) -> int | None:
    """The 1-based page a PDF chunk's heading (``Page N``) names, else None."""
    if heading.startswith(PAGE_HEADING):
        num = heading[len(PAGE_HEADING):].split(" ", 1)[0]
        if num.isdigit():
            return int(num)
    return None


def _open(source: str | bytes, path: str):
    import pypdfium2 as pdfium
    try:
        return pdfium.PdfDocument(source)
    except pdfium.PdfiumError as exc:
        why = str(exc)
        if "password" in why.lower():
            raise Unreadable(f"{path}: encrypted PDF (needs a password); skipped") from None
        raise Unreadable(f"{path}: damaged or not a PDF ({why.strip().splitlines()[0][:120]}); "
                         "skipped") from None


def page_texts(source: str | bytes, path: str) -> Iterator[tuple[int, str]]:
    """(page number, text) of every page, in order, one page in memory at a time."""
    pdf = _open(source, path)
    try:
        for i in range(len(pdf)):
            page = pdf[i]
            try:
                textpage = page.get_textpage()
                try:
                    text = textpage.get_text_range()
                finally:
                    textpage.close()
            finally:
                page.close()
            yield i + 1, clean(text)
    finally:
        pdf.close()


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


def metadata_title(source: str | bytes, path: str) -> str:
    pdf = _open(source, path)
    try:
        title = str(pdf.get_metadata_dict().get("Title") or "").strip()
    except Exception:  # noqa: BLE001 - metadata is optional
        title = ""
    finally:
        pdf.close()
    return "" if _JUNK_TITLE.match(title) else " ".join(title.split())[:300]


def pdf_note(path: str, source: str | bytes) -> Note:
    """The note of the PDF at ``source`` (a file path or its bytes; its ``warnings`` say what
    was left out). Raises :class:`Unreadable` when no page has text."""
    warnings: list[str] = []
    lines: list[str] = []
    pages = kept = chars = 0
    for number, text in page_texts(source, path):
        pages = number
        if not text.strip():
            continue
        if chars + len(text) > MAX_TEXT_CHARS:
            warnings.append(f"{path}: text beyond {MAX_TEXT_CHARS:,} characters left out "
                            f"(from page {number} on)")
            break
        if lines:
            lines.append("")
        lines += [f"# {PAGE_HEADING}{number}", "", *text.split("\n")]
        kept += 1
        chars += len(text)
    if not kept:
        raise Unreadable(f"{path}: no text layer in {pages} page(s) (a scan or images only); "
                         "skipped" if pages else f"{path}: a PDF without pages; skipped")
    stem = path.rsplit("/", 1)[-1]
    title = metadata_title(source, path) or stem[:-4]
    note = Note(path=path, title=title, lines=lines, body_start=1,
                properties={"pages": pages}, warnings=warnings)
    return note
