"""The converter worker's PDF operations (:mod:`hybrid.sources.worker` loads this file by path;
like it, it imports nothing of hybrid): ``pdf``, each page's text as lines with the font size
and weight each line is set in, and the document's outline; ``pdf_ocr``, the text Tesseract
reads off one page without a text layer (a scan), rendered at 300 dpi
(:mod:`hybrid.sources.ocr_ops`). One page per request, so each page's recognition is bounded
by ``convert_timeout`` on its own. What becomes a heading is decided by the parent
(:mod:`hybrid.sources.pdf`), which sees the whole document.

A line's size and weight are sampled from three of its characters (first, middle, last): PDFium
answers per character, and a page of 3,000 characters asked for each would cost milliseconds.
"""

from __future__ import annotations

from types import ModuleType

MAX_OUTLINE = 5000   # outline entries read at most
MAX_LINE_CHARS = 300  # longer lines are never headings: their style is not sampled


def pdf_op(header: dict, payload: bytes) -> dict:
    """Each page's lines as ``[text, size, bold]`` (size 0 where unknown), the page count,
    the outline as ``[level, title, page]`` and the metadata title; ``cut``: the last page was
    cut short at ``max_chars`` in all. ``{"ok": False, "kind": "encrypted" | "damaged"}`` for
    a PDF PDFium cannot open."""
    import pypdfium2 as pdfium
    source = header["path"] if header.get("path") is not None else payload
    try:
        pdf = pdfium.PdfDocument(source)
    except pdfium.PdfiumError as exc:
        why = str(exc).strip()
        kind = "encrypted" if "password" in why.lower() else "damaged"
        return {"ok": False, "kind": kind, "message": why.splitlines()[0][:120] if why else ""}
    try:
        count = len(pdf)
        max_chars = int(header.get("max_chars") or 0)
        pages: list[list[list]] = []
        chars = 0
        cut = False
        for i in range(count):
            page = pdf[i]
            try:
                lines = _page_lines(page)
            finally:
                page.close()
            size = sum(len(t) + 1 for t, _, _ in lines)
            if max_chars and chars + size > max_chars:  # the reply stays within the cap
                kept, left = [], max_chars - chars
                for line in lines:
                    if len(line[0]) + 1 > left:
                        if left > 0:
                            kept.append([line[0][:left], line[1], line[2]])
                        break
                    kept.append(line)
                    left -= len(line[0]) + 1
                pages.append(kept)
                cut = True
                break
            pages.append(lines)
            chars += size
        outline = _outline(pdf, count)
        try:
            title = str(pdf.get_metadata_dict().get("Title") or "")
        except Exception:  # noqa: BLE001 - metadata is optional
            title = ""
    finally:
        pdf.close()
    return {"ok": True, "pages": count, "lines": pages, "title": title[:2000], "cut": cut,
            "outline": outline}


def pdf_ocr_op(header: dict, payload: bytes, ocr: ModuleType) -> dict:
    """The worker's ``pdf_ocr`` operation: the text Tesseract reads off one page
    (``header["page"]``, 1-based) of the PDF at ``header["path"]`` (else ``payload``), rendered
    at 300 dpi and read by ``ocr`` (:mod:`hybrid.sources.ocr_ops`, as the worker loaded it),
    as ``[text, size, bold]`` lines (a blank line between paragraphs; size: the points of the
    line's type, told from its x-height: :func:`hybrid.sources.ocr_ops._size`; bold: 1 for a
    line set in bold, :func:`hybrid.sources.ocr_ops.bold_lines`)."""
    import pypdfium2 as pdfium
    source = header["path"] if header.get("path") is not None else payload
    try:
        pdf = pdfium.PdfDocument(source)
    except pdfium.PdfiumError as exc:
        return {"ok": False, "kind": "damaged", "message": str(exc).strip()[:120]}
    try:
        number = int(header["page"])
        if not 1 <= number <= len(pdf):
            return {"ok": False, "kind": "damaged", "message": f"no page {number}"}
        page = pdf[number - 1]
        try:
            img = ocr.render_page(page, min(int(header.get("max_pixels") or ocr.OCR_MAX_PIXELS),
                                            ocr.OCR_MAX_PIXELS))
            per_point = img.width / max(1.0, page.get_size()[0])  # pixels per point of the render
        finally:
            page.close()
    finally:
        pdf.close()
    try:
        got = ocr.recognise(img, str(header.get("languages") or "eng"), float(header.get("seconds") or 60))
    except ocr.Refused as exc:
        return {"ok": False, "kind": exc.kind, "message": exc.message}
    # each line with the size of its type (from its x-height), in points, for the
    # parent's headings
    lines: list[list] = []
    for para in got["paras"]:
        if lines:
            lines.append(["", 0.0, 0])
        lines += [[text, round(size / per_point, 1), bold] for text, *_, size, bold in para]
    return {"ok": True, "lines": lines, "rotated": got["rotated"]}


def _page_lines(page) -> list[list]:
    """The page's text as ``[text, font size, bold]`` lines."""
    import pypdfium2.raw as raw
    textpage = page.get_textpage()
    try:
        text = textpage.get_text_range()
        n = textpage.count_chars()
        aligned = len(text) == n  # one character index per code unit: styles can be sampled
        out: list[list] = []
        pos = 0
        for line in text.split("\n"):
            start, pos = pos, pos + len(line) + 1
            clean = line.rstrip("\r")
            size, bold = 0.0, False
            if aligned and clean.strip() and len(clean) <= MAX_LINE_CHARS:
                lead = len(clean) - len(clean.lstrip())
                last = len(clean.rstrip()) - 1
                picks = {start + lead, start + (lead + last) // 2, start + last}
                sizes = [raw.FPDFText_GetFontSize(textpage.raw, i) for i in picks]
                weights = [raw.FPDFText_GetFontWeight(textpage.raw, i) for i in picks]
                size = round(sorted(sizes)[len(sizes) // 2], 1)
                bold = all(w >= 600 for w in weights)
            out.append([clean, size, bold])
        return out
    finally:
        textpage.close()


def _outline(pdf, count: int) -> list[list]:
    """The outline (bookmarks) as ``[level (1-based), title, page (1-based)]``, entries that
    name no page of this document left out."""
    out: list[list] = []
    try:
        for mark in pdf.get_toc(max_depth=6):
            if len(out) >= MAX_OUTLINE:
                break
            dest = mark.get_dest()
            index = dest.get_index() if dest is not None else None
            title = " ".join((mark.get_title() or "").split())[:300]
            if index is not None and 0 <= index < count and title:
                out.append([int(mark.level) + 1, title, index + 1])
    except Exception:  # noqa: BLE001 - a broken outline is no outline
        return []
    return out
