"""Word documents (``.docx``) as notes, their headings as sections, with python-docx (MIT).

A ``.docx`` is a zip of XML parts: untrusted input for a third-party parser (a part can
inflate to gigabytes), so it is read in the converter worker (:mod:`hybrid.sources.worker`,
``docx``) under ``convert_max_memory_mb`` and ``convert_timeout``, like a PDF. There its body,
in document order, becomes markdown:

- a paragraph in the Title style is a level-1 heading, one in ``Heading N`` a level-N heading
  (a style named otherwise, as Word's own are in other languages, by the outline level it or
  its style carries), so a hit's heading path is the document's;
- a list paragraph is an item (``-``, indented by its level); other paragraphs are text, a
  line that markdown would read as a heading or a code fence escaped with ``\\``;
- a table is rows of cells (``| a | b |``), its first row as the header.

Headers, footers, footnotes, comments and images are left out. The title is the document's
own (its properties' title, else its first Title paragraph), else the file name; ``#word`` in
its text is no tag of the owner's. A file that is not a zip, or a zip of something else (no
``word/document.xml``), raises :class:`~hybrid.sources.sandbox.ConvertError`: one warning,
the file skipped.
"""

from __future__ import annotations

from hybrid.sources.markdown import Note, parse_note
from hybrid.sources.sandbox import ConvertError, Limits, convert, convert_limits

MAX_TEXT_CHARS = 20_000_000  # text kept from one document; the rest is left out with a warning


def docx_note(path: str, data: bytes, limits: Limits | None = None) -> Note:
    """The note of the Word document ``data``. Raises ConvertError for a file that is no Word
    document, or whose reading is over ``limits``."""
    reply = convert("docx", path, limits or convert_limits(), data, max_chars=MAX_TEXT_CHARS)
    if not reply["ok"]:
        raise ConvertError(path, f"not a Word document ({reply.get('message') or 'unreadable'})")
    text, title = reply.get("text"), reply.get("title")
    if not isinstance(text, str) or not isinstance(title, str):
        raise ConvertError(path, "the converter sent a malformed reply")
    if text.lstrip().startswith("---"):
        text = "\n" + text  # never read as a front block
    note = parse_note(path, text)
    stem = path.rsplit("/", 1)[-1]
    note.title = " ".join(title.split())[:300] or stem[:-len(".docx")] or stem
    note.tags, note.properties = [], {}
    if reply.get("cut") is True:
        note.warnings.append(f"{path}: text beyond {MAX_TEXT_CHARS:,} characters left out")
    return note
