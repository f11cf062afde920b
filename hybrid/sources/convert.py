"""Any document's bytes → a :class:`hybrid.sources.markdown.Note`, by kind (:func:`hybrid.sources.kind_of`).

Markdown, bookmarks and Slack days (both rendered as markdown by their sources) are parsed as
notes; plain text keeps its lines as they are; a saved web page is reduced to its main text as
markdown by trafilatura (Apache-2.0), so its headings become sections; a PDF is read page by page
(:mod:`hybrid.sources.pdf`); a canvas card by card (:mod:`hybrid.sources.canvas`); an Excalidraw
drawing as its text elements and links (:mod:`hybrid.sources.excalidraw`); a Word document by
heading (:mod:`hybrid.sources.docx`); an image as the text OCR reads in it
(:mod:`hybrid.sources.ocr`). Line numbers in citations count lines of this text, which
is also what ``hybrid get`` shows for the document.

PDFs, web pages and Word documents are parsed by third-party code (PDFium, lxml, python-docx)
in the converter worker
(:mod:`hybrid.sources.worker`), under ``convert_max_memory_mb`` and ``convert_timeout``; a
document over either bound raises :class:`ConvertError` naming it and the bound. Markdown,
plain text, canvases (JSON) and drawings are parsed here, by our own parsers, each linear (or
n log n) in the file and bounded in what it may expand it to (a compressed drawing: to
``max_file_bytes`` characters); each module says how.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from hybrid.sources import KIND, KIND_LIST, kind_of
from hybrid.sources.excalidraw import drawing_note
from hybrid.sources.markdown import BinaryFile, Note, decode, parse_note
from hybrid.sources.sandbox import ConvertError, Limits, convert, convert_limits, expand_limit

if TYPE_CHECKING:
    from hybrid.sources.ocr import Carried

# (vault-relative path, its bytes or None, its file's absolute path, the converter's bounds)
Reader = Callable[[str, bytes | None, str | None, Limits | None], Note]
# (vault-relative path, its decoded text, the characters a reader may expand it to)
TextParser = Callable[[str, str, int], Note]

__all__ = ["to_note", "text_note", "html_note", "main_text", "judged_fields"]


def to_note(path: str, data: bytes | None, abspath: str | None = None,
            limits: Limits | None = None, carried: Carried = ()) -> Note:
    """The note of the document at vault-relative ``path``: from ``data``, or (a PDF, read
    page by page) from the file ``abspath``. Raises BinaryFile or ConvertError (a PDF's
    Unreadable among them) for a document with no text to index or over ``limits``.
    ``carried``: the headings a picture that is a page of a series starts under
    (:func:`hybrid.sources.ocr.image_note`)."""
    if carried and kind_of(path) == "image":
        from hybrid.sources.ocr import image_note
        return image_note(path, _streamed(path, data, abspath), limits, carried)
    return READERS[kind_of(path)](path, data, abspath, limits)


def _pdf(path: str, data: bytes | None, abspath: str | None, limits: Limits | None) -> Note:
    from hybrid.sources.pdf import pdf_note
    return pdf_note(path, _streamed(path, data, abspath), limits)


def _image(path: str, data: bytes | None, abspath: str | None, limits: Limits | None) -> Note:
    from hybrid.sources.ocr import image_note
    return image_note(path, _streamed(path, data, abspath), limits)


def _streamed(path: str, data: bytes | None, abspath: str | None) -> str | bytes:
    """What a kind read from its file is read from: its bytes when given, else its file."""
    source = abspath if data is None else data
    if source is None:
        raise ValueError(f"{path}: nothing to read")
    return source


def _web(path: str, data: bytes | None, abspath: str | None, limits: Limits | None) -> Note:
    return html_note(path, _given(path, data), limits)


def _decoded(parse: TextParser) -> Reader:
    """The reader of a kind kept as text: its bytes decoded (invalid UTF-8 replaced and
    reported among the note's warnings), then ``parse`` d."""
    def read(path: str, data: bytes | None, abspath: str | None, limits: Limits | None) -> Note:
        text, warnings = decode(_given(path, data), path)
        note = parse(path, text, expand_limit(limits))
        note.warnings[:0] = warnings
        return note
    return read


def _canvas(path: str, data: bytes | None, abspath: str | None, limits: Limits | None) -> Note:
    from hybrid.sources.canvas import canvas_note
    return canvas_note(path, _given(path, data))


def _docx(path: str, data: bytes | None, abspath: str | None, limits: Limits | None) -> Note:
    from hybrid.sources.docx import docx_note
    return docx_note(path, _given(path, data), limits)


def _given(path: str, data: bytes | None) -> bytes:
    if data is None:
        raise ValueError(f"{path}: nothing to read")
    return data


# How each reading kept as text is parsed, from its decoded text: bookmarks and Slack days are
# rendered as markdown by their sources. parse_note is looked up at each call (a test's seam).
TEXT_PARSERS: dict[str, TextParser] = {
    "markdown": lambda path, text, most: parse_note(path, text),
    "text": lambda path, text, most: text_note(path, text),
    "drawing": drawing_note,
}
# The readers, by the name a kind's record binds (hybrid.core.kinds.Kind.reads).
READINGS: dict[str, Reader] = {
    **{name: _decoded(parse) for name, parse in TEXT_PARSERS.items()},
    "pdf": _pdf, "web": _web, "canvas": _canvas, "docx": _docx, "image": _image,
}
# How each document kind is read, from its record.
READERS: dict[str, Reader] = {k.name: READINGS[k.reads] for k in KIND_LIST}


def text_note(path: str, text: str) -> Note:
    """Plain text, line for line; its title is the file name."""
    stem = path.rsplit("/", 1)[-1]
    return Note(path=path, title=stem.rsplit(".", 1)[0] or stem, lines=text.split("\n"), body_start=1)


def html_note(path: str, data: bytes, limits: Limits | None = None) -> Note:
    """A saved web page's main text (navigation, ads and footers left out) as markdown.
    Raises ConvertError when it has no text (saying why: nested too deep to parse, or none)."""
    if b"\x00" in data[:8192]:
        raise BinaryFile(f"{path}: binary content in an HTML file; skipped")
    html = data.decode("utf-8", errors="replace")
    markdown, title, warnings = _page(html, path, limits)
    note = parse_note(path, markdown)
    stem = path.rsplit("/", 1)[-1]
    note.title = title or (note.title if note.title != stem else stem.rsplit(".", 1)[0])
    note.tags = []  # '#word' in a page's prose is no tag of the owner's
    note.warnings[:0] = warnings
    return note


def main_text(html: str, name: str = "page", limits: Limits | None = None) -> tuple[str, str]:
    """(main text as markdown, page title) of an HTML page (``name``: its path or URL, for
    errors); the whole visible text when no main part is found. ConvertError when it has no
    text at all, or is over ``limits``."""
    text, title, _ = _page(html, name, limits)
    return text, title


def _page(html: str, name: str, limits: Limits | None) -> tuple[str, str, list[str]]:
    """(markdown, title, warnings) of a page, converted by the worker."""
    reply = convert("html", name, limits or convert_limits(), html.encode("utf-8", "surrogatepass"))
    text, title, deep = reply.get("text"), reply.get("title"), reply.get("too_deep")
    if not reply["ok"] or not isinstance(text, str) or not isinstance(title, str) \
            or not isinstance(deep, int):
        raise ConvertError(name, "the converter sent a malformed reply")
    if not text.strip():
        raise ConvertError(name, f"nested too deep to parse (over {deep} levels of elements); no "
                                 "text extracted" if deep else "no text extracted")
    warnings = [f"{name}: nested too deep to parse (over {deep} levels of elements); the text "
                "inside them is left out"] if deep else []
    return text, title[:300], warnings


def judged_fields(rel: str, text: str, max_chars: int | None = None) -> tuple[list[str], dict]:
    """(tags, properties) of the document ``rel`` whose text is ``text`` (its file's, or the
    text it was indexed as), read by the very parser that indexed it (:data:`TEXT_PARSERS`):
    a drawing's tags may be inside its compressed drawing, which a plain note's reading misses.
    Only the kinds whose fields are the owner's have any (markdown, drawings, bookmarks, Slack
    days); other kinds are judged by their path. Bounded as the indexer is: a compressed
    drawing decompresses to at most ``max_chars`` characters (default: the default
    ``max_file_bytes``); ConvertError past it."""
    kind = KIND[kind_of(rel)]
    if not kind.owner_fields:
        return [], {}
    note = TEXT_PARSERS[kind.reads](rel, text, expand_limit(None) if max_chars is None else max_chars)
    return note.tags, note.properties
