"""Any document's bytes → a :class:`hybrid.notes.Note`, by kind (:func:`hybrid.sources.kind_of`).

Markdown, bookmarks and Slack days (both rendered as markdown by their sources) are parsed as
notes; plain text keeps its lines as they are; a saved web page is reduced to its main text as
markdown by trafilatura (Apache-2.0), so its headings become sections; a PDF is read page by page
(:mod:`hybrid.sources.pdf`). Line numbers in citations count lines of this text, which is also
what ``hybrid get`` shows for the document.
"""

from __future__ import annotations

import re

from ..notes import BinaryFile, Note, decode, parse_note
from . import kind_of

_TITLE_RE = re.compile(r"<title[^>]*>(.*?)</title>", re.I | re.S)


def to_note(path: str, data: bytes | None, abspath: str | None = None) -> Note:
    """The note of the document at vault-relative ``path``: from ``data``, or (a PDF, read
    page by page) from the file ``abspath``. Raises BinaryFile or pdf.Unreadable for a
    document with no text to index."""
    kind = kind_of(path)
    if kind == "pdf":
        from .pdf import pdf_note
        source = abspath if data is None else data
        if source is None:
            raise ValueError(f"{path}: nothing to read")
        return pdf_note(path, source)
    if data is None:
        raise ValueError(f"{path}: nothing to read")
    if kind == "web":
        return html_note(path, data)
    text, warnings = decode(data, path)
    note = text_note(path, text) if kind == "text" else parse_note(path, text)
    note.warnings[:0] = warnings
    return note


def text_note(path: str, text: str) -> Note:
    """Plain text, line for line; its title is the file name."""
    stem = path.rsplit("/", 1)[-1]
    return Note(path=path, title=stem.rsplit(".", 1)[0] or stem, lines=text.split("\n"), body_start=1)


def html_note(path: str, data: bytes) -> Note:
    """A saved web page's main text (navigation, ads and footers left out) as markdown."""
    if b"\x00" in data[:8192]:
        raise BinaryFile(f"{path}: binary content in an HTML file; skipped")
    html = data.decode("utf-8", errors="replace")
    markdown, title = main_text(html)
    note = parse_note(path, markdown)
    stem = path.rsplit("/", 1)[-1]
    note.title = title or (note.title if note.title != stem else stem.rsplit(".", 1)[0])
    note.tags = []  # '#word' in a page's prose is no tag of the owner's
    return note


def main_text(html: str) -> tuple[str, str]:
    """(main text as markdown, page title) of an HTML page; the whole visible text when no
    main part is found, and ("", title) when the page has no text at all."""
    import trafilatura
    text = trafilatura.extract(html, output_format="markdown", include_comments=False,
                               include_tables=True, favor_recall=True) or ""
    if not text.strip():
        text = trafilatura.html2txt(html) or ""
    title = ""
    try:
        meta = trafilatura.extract_metadata(html)
        title = (meta.title or "") if meta is not None else ""
    except Exception:  # noqa: BLE001 - the title is optional
        title = ""
    if not title:
        m = _TITLE_RE.search(html[:200_000])
        title = " ".join(m.group(1).split()) if m else ""
    if text.lstrip().startswith("---"):
        text = "\n" + text  # never read as frontmatter
    return text, title[:300]
