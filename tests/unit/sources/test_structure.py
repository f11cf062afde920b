"""Headings from type (hybrid.sources.structure): exact sizes from a PDF's text layer, and
OCR's noisy estimates of a line's size, make the same levels."""
from hybrid.sources.structure import type_headings

BODY = "A line of body text long enough to be the body of the document, and more of it."


def doc(sizes: list[tuple[str, float, bool]]) -> list[tuple[int, str, float, bool]]:
    return [(i, t, sz, b) for i, (t, sz, b) in enumerate(sizes)]


def test_levels_by_size_and_bold_one_below():
    lines = doc([("Title", 17, False), (BODY, 10, False), ("Section", 14, True), (BODY, 10, False),
                 ("Subsection", 12, True), (BODY, 10, False), ("Bold run-in", 10, True), (BODY, 10, False),
                 ("A bold sentence ends like one.", 10, True), (BODY, 10, False)])
    assert type_headings(lines) == {0: 1, 2: 2, 4: 3, 6: 4}


def test_measured_sizes_with_noise_keep_their_levels():
    """OCR's x_size varies by a few percent line to line: 12.5, 12.0, 11.7 are one level, 14.2
    and 13.9 another; a body line measured a little large is no heading."""
    lines = doc([("Backups", 16.8, False), (BODY, 10.1, False), ("What gets backed up", 14.2, False),
                 (BODY, 10.3, False), ("restic setup", 13.9, False), (BODY, 10.8, False),
                 ("Nightly backup", 12.5, False), (BODY, 9.8, False), ("Retention", 11.7, False),
                 (BODY, 10.1, False), ("initial setup", 12.0, False), (BODY, 11.3, False)])
    assert type_headings(lines) == {0: 1, 2: 2, 4: 2, 6: 3, 8: 3, 10: 3}


def test_no_headings_when_size_says_nothing():
    assert type_headings(doc([(BODY, 10, False)] * 5)) == {}
    assert type_headings(doc([("Big", 30, False), ("Bigger", 30, False), (BODY, 10, False)])) == {}
    assert type_headings(doc([("12", 14, False), (BODY, 10, False), (BODY, 10, False)])) == {}  # no words
    assert type_headings(doc([("Unknown size", 0, False), (BODY, 0, False)])) == {}
    # a table's row measured large (its cell bars reach above and below the letters): no heading
    assert type_headings(doc([("| OISD small | ~56,000 |", 13.7, False), (BODY, 10, False), (BODY, 10, False)])) == {}


def test_a_recognised_line_is_sized_by_its_x_height_not_its_row():
    """Tesseract's row height (x_size) of a heading with no letter below the line ("Cost") was
    52 px where its siblings' was 60; their x-heights were both 35. A line of capitals and digits
    has no x-height of its own: no size."""
    from hybrid.sources import ocr_ops

    def line(text: str, row: float, up: float, down: float) -> str:
        words = "".join(f"<span class='ocrx_word' title='bbox 0 0 10 10; x_wconf 95'>{w}</span>" for w in text.split())
        return (f"<span class='ocr_line' title='bbox 0 0 10 10; baseline 0 -8; x_size {row}; "
                f"x_descenders {down}; x_ascenders {up}'>{words}</span>")
    hocr = ("<p class='ocr_par' title='bbox 0 0 1 1'>" + line("Restore tests", 60, 13, 12)
            + line("Cost", 52.4, 8, 9.4) + line("NOTE 2025-03-03", 60, 10, 10)
            + line("a body line of text", 42, 8, 9) + "</p>")
    paras, trusted, total = ocr_ops._read_hocr(hocr)
    sizes = [ln[6] for ln in paras[0]]
    assert sizes[0] == sizes[1] == 35 / ocr_ops.X_HEIGHT_EM and sizes[2] == 0
    assert round(sizes[0] / sizes[3], 2) == 1.4 and trusted == total == 10


def test_a_word_ocr_is_unsure_of_is_kept_in_a_line_of_text():
    """Tesseract was 18 % sure of `/etc/pve/lxc/110.conf` in a scanned line of text: it is kept
    with its line; a line with no word over 60 % (a photograph's texture) is dropped whole."""
    from hybrid.sources import ocr_ops

    def line(*words: tuple[str, int]) -> str:
        spans = "".join(f"<span class='ocrx_word' title='bbox 0 0 10 10; x_wconf {c}'>{w}</span>" for w, c in words)
        return f"<span class='ocr_line' title='bbox 0 0 10 10; x_size 30; x_descenders 6; x_ascenders 6'>{spans}</span>"
    hocr = ("<p class='ocr_par' title='bbox 0 0 1 1'>" + line(("#", 91), ("/etc/pve/lxc/110.conf", 18))
            + line(("~:;", 12), ("'|", 40)) + line(("grep", 8), ("the", 96), ("logs", 93)) + "</p>")
    paras, trusted, total = ocr_ops._read_hocr(hocr)
    assert [ln[0] for ln in paras[0]] == ["# /etc/pve/lxc/110.conf", "grep the logs"]
    assert (trusted, total) == (3, 7)
