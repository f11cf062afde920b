"""PDF text, page by page, with PDFium (pypdfium2: Apache-2.0/BSD; not AGPL), its headings, and
its scanned pages read by OCR.

A PDF becomes a note whose top sections are its pages: ``# Page N`` and that page's text, so
chunks never span two pages and a hit's page is its section (:func:`page_of`). PDFium runs in the
converter worker (:mod:`hybrid.sources.worker`, :mod:`hybrid.sources.pdf_ops`) under a memory
and time bound; there pages are read one at a time and closed, so a large PDF costs the memory
of one page plus the text kept so far (capped at ``MAX_TEXT_CHARS``).

**Headings** (:func:`headings`). A PDF's own sections become ``##``… headings inside its pages,
so its chunks carry the heading path a note's would (``Page 3 > Methods > Sampling``): from the
PDF's outline (bookmarks) where it has one, else from type (:mod:`hybrid.sources.structure`: a
line set clearly larger than the body text is a heading, the larger the higher; a whole line in
bold at body size, short, is one below those); a scanned page's from the size Tesseract gives
its lines and the width of their strokes (bold: :func:`hybrid.sources.ocr_ops.bold_lines`). A
section that runs on over a page break has its headings again at the top of the next page.

**Scans** (:func:`recognised_pages`). A page without a text layer is rendered at 300 dpi and
read by Tesseract, one page per request to the worker (each bounded by ``convert_timeout`` on
its own), at most :data:`MAX_OCR_PAGES` a PDF, each result kept by the PDF's content hash
(:class:`hybrid.sources.ocr.Cache`). Without OCR a PDF with no text layer at all raises
:class:`Unreadable` saying how to enable it; one that cannot be read (encrypted, damaged) too,
one over the bounds ConvertError: the indexer reports each as one warning and skips the PDF.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hybrid.sources.markdown import Note
from hybrid.sources.markdown import converted_text as clean
from hybrid.sources.sandbox import ConvertError, Limits, convert, convert_limits
from hybrid.sources.structure import MAX_HEADING_CHARS, MAX_LEVELS, type_headings

PAGE_HEADING = "Page "
MAX_TEXT_CHARS = 20_000_000  # text kept from one PDF; later pages are left out with a warning
MAX_OCR_PAGES = 1000  # scanned pages read by OCR in one PDF; later ones are left out with a warning
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
    # each page's lines as read, with the size and boldness of their type (size 0: unknown)
    styled: list[list[tuple[str, float, bool]]] = field(default_factory=list)
    outline: list[tuple[int, str, int]] = field(default_factory=list)  # (level, title, page)


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
    pages, lines, title, outline = reply.get("pages"), reply.get("lines"), reply.get("title"), reply.get("outline")
    if not isinstance(pages, int) or not isinstance(title, str) or not isinstance(lines, list) \
            or len(lines) > pages or not all(_styled_ok(p) for p in lines) or not isinstance(outline, list):
        raise ConvertError(path, "the converter sent a malformed reply")
    styled = [[(str(t), float(sz), bool(b)) for t, sz, b in page] for page in lines]
    marks = [(int(m[0]), str(m[1]), int(m[2])) for m in outline
             if isinstance(m, list) and len(m) == 3 and isinstance(m[0], int) and isinstance(m[1], str)
             and isinstance(m[2], int) and 1 <= m[2] <= pages]
    title = "" if _JUNK_TITLE.match(title.strip()) else " ".join(title.split())[:300]
    texts = [(i, clean("\n".join(t for t, _, _ in page))) for i, page in enumerate(styled, 1)]
    return PdfText(pages, texts, title, len(texts) if reply.get("cut") is True and texts else None,
                   styled, marks)


def _styled_ok(page: object) -> bool:
    return isinstance(page, list) and all(
        isinstance(x, list) and len(x) == 3 and isinstance(x[0], str)
        and isinstance(x[1], (int, float)) and isinstance(x[2], bool) for x in page)


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", text.lower()).split())


def headings(got: PdfText) -> dict[tuple[int, int], int]:
    """The lines of ``got`` that are headings, as {(page, index of the line on its page):
    level (1 the highest)}: from the outline where the PDF has one, else from type."""
    if got.outline:
        return _outline_headings(got)
    return type_headings([((p, i), t, sz, b) for p, page in enumerate(got.styled, 1)
                          for i, (t, sz, b) in enumerate(page)])  # type: ignore[return-value]


def _outline_headings(got: PdfText) -> dict[tuple[int, int], int]:
    """The outline's entries found as lines of their pages (the first line after the last one
    found whose words are the entry's, or begin it: a heading wrapped over two lines)."""
    out: dict[tuple[int, int], int] = {}
    after: dict[int, int] = {}
    for level, title, page in got.outline:
        if page > len(got.styled):
            continue
        want = _norm(title)
        lines = got.styled[page - 1]
        for i in range(after.get(page, 0), len(lines)):
            have = _norm(lines[i][0])
            if have and (have == want or (want.startswith(have) and len(have) >= len(want) // 2)
                         or (have.startswith(want) and len(have) <= len(want) + 12)):
                out[(page, i)] = min(level, MAX_LEVELS + 1)
                after[page] = i + 1
                break
    return out


def recognised_pages(path: str, source: str | bytes, got: PdfText,
                     limits: Limits) -> tuple[dict[int, list[tuple[str, float, bool]]], list[str]]:
    """({page: lines as ``(text, size, bold)``} read by OCR for the pages of ``got`` without
    text, warnings). Nothing without OCR (``limits.ocr``); each page's result kept by the PDF's
    hash. A line's size is the one its x-height suggests, and it is bold where its strokes are
    thick for it (headings are found from them as from type)."""
    empty = [n for n, page in enumerate(got.styled, 1) if not any(t.strip() for t, _, _ in page)]
    if not empty or not limits.ocr:
        return {}, []
    from hybrid.sources.ocr import ENABLE, Cache
    from hybrid.sources.walk import file_digest
    cache, digest = Cache(limits.ocr_cache, limits.ocr), file_digest(source)
    args = {"path": source} if isinstance(source, str) else {}
    payload = b"" if isinstance(source, str) else source
    out: dict[int, list[tuple[str, float, bool]]] = {}
    failed: list[tuple[int, str]] = []
    warnings: list[str] = []
    for n in empty[:MAX_OCR_PAGES]:
        hit = cache.get(digest, f"p{n}")
        if _ocr_lines_ok(hit):
            out[n] = [(str(t), float(sz), bool(b)) for t, sz, b in hit]
            continue
        try:
            reply = convert("pdf_ocr", path, limits, payload, page=n, languages=limits.ocr,
                            seconds=max(1.0, limits.timeout - 2), **args)
        except ConvertError as exc:
            failed.append((n, exc.reason))
            continue
        if not reply["ok"]:
            if reply.get("kind") == "no-engine":
                warnings.append(f"{path}: its scanned pages are not read: {ENABLE}")
                break
            failed.append((n, str(reply.get("message") or reply.get("kind") or "unreadable")))
            continue
        lines = reply.get("lines")
        if not _ocr_lines_ok(lines) or lines is None:
            failed.append((n, "the converter sent a malformed reply"))
            continue
        cache.put(digest, lines, f"p{n}")
        out[n] = [(str(t), float(sz), bool(b)) for t, sz, b in lines]
    if failed:
        n, why = failed[0]
        warnings.append(f"{path}: {len(failed)} scanned page(s) could not be read by OCR (page {n}: {why})")
    if len(empty) > MAX_OCR_PAGES:
        warnings.append(f"{path}: {len(empty) - MAX_OCR_PAGES:,} scanned pages past the first "
                        f"{MAX_OCR_PAGES:,} not read by OCR")
    return out, warnings


def _ocr_lines_ok(lines: object) -> bool:
    return isinstance(lines, list) and all(
        isinstance(x, list) and len(x) == 3 and isinstance(x[0], str) and isinstance(x[1], (int, float))
        and isinstance(x[2], (int, bool)) for x in lines)


def pdf_note(path: str, source: str | bytes, limits: Limits | None = None) -> Note:
    """The note of the PDF at ``source`` (a file path or its bytes; its ``warnings`` say what
    was left out). Raises :class:`Unreadable` when no page has text, ConvertError when
    reading it is over ``limits``."""
    limits = limits or convert_limits()
    got = pdf_text(source, path, MAX_TEXT_CHARS, limits)
    scanned, warnings = recognised_pages(path, source, got, limits)
    for number, read in scanned.items():
        got.styled[number - 1] = read
    heads = headings(got)
    lines: list[str] = []
    kept = chars = 0
    cut_from = got.cut_from
    stack: list[tuple[int, str]] = []  # the headings in force: (level, text)
    for number, page in enumerate(got.styled, 1):
        text = "\n".join(t for t, _, _ in page)
        if number == cut_from or chars + len(text) > MAX_TEXT_CHARS:
            cut_from = number  # no page is kept in part
            break
        if not text.strip():
            continue
        if lines:
            lines.append("")
        lines += [f"# {PAGE_HEADING}{number}", ""]
        lines += _page_body(page, {i: lv for (p, i), lv in heads.items() if p == number}, stack)
        kept += 1
        chars += len(text)
    if cut_from is not None:
        warnings.append(f"{path}: text beyond {MAX_TEXT_CHARS:,} characters left out "
                        f"(from page {cut_from} on)")
    if not kept:
        if got.pages and not limits.ocr:
            from hybrid.sources.ocr import ENABLE
            raise Unreadable(path, f"no text layer in {got.pages} page(s) (a scan or images only); "
                                   f"{limits.ocr_off or ENABLE}")
        raise Unreadable(path, f"no text layer in {got.pages} page(s), and OCR recognised no text"
                         if got.pages else "a PDF without pages")
    stem = path.rsplit("/", 1)[-1]
    properties: dict = {"pages": got.pages}
    if scanned:
        properties["hybrid:ocr_pages"] = sorted(scanned)
    return Note(path=path, title=got.title or stem[:-4], lines=lines, body_start=1,
                properties=properties, warnings=warnings)


def _page_body(page: list[tuple[str, float, bool]], heads: dict[int, int],
               stack: list[tuple[int, str]]) -> list[str]:
    """One page's lines as markdown: its headings as ``##``… (a level below the page's own),
    the headings in force carried over from the page before when it does not open with one
    of theirs, and runs of text cleaned (:func:`clean`)."""
    out: list[str] = []
    first = next((i for i, (t, _, _) in enumerate(page) if t.strip()), None)
    opens = heads.get(first) if first is not None else None
    for depth, heading in stack:
        if opens is None or depth < opens:
            out += [f"{'#' * min(depth + 1, 6)} {heading}", ""]
    run: list[str] = []
    last_head: int | None = None  # index in ``out`` of a heading just written, for one wrapped
    for i, (text, _, _) in enumerate(page):
        level = heads.get(i)
        if level is None:
            if text.strip():
                last_head = None
            run.append(text)
            continue
        words = " ".join(text.split())
        if last_head is not None and not run_has_text(run) and stack and stack[-1][0] == level:
            stack[-1] = (level, f"{stack[-1][1]} {words}"[:MAX_HEADING_CHARS])  # a wrapped heading
            out[last_head] = f"{'#' * min(level + 1, 6)} {stack[-1][1]}"
            run = []
            continue
        out += _flush(run)
        run = []
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, words[:MAX_HEADING_CHARS]))
        if out and out[-1] != "":
            out.append("")
        out.append(f"{'#' * min(level + 1, 6)} {stack[-1][1]}")
        last_head = len(out) - 1
        out.append("")
    out += _flush(run)
    while out and out[-1] == "":
        out.pop()
    return out


def run_has_text(run: list[str]) -> bool:
    return any(t.strip() for t in run)


def _flush(run: list[str]) -> list[str]:
    text = clean("\n".join(run))
    return text.split("\n") if text.strip() else []
