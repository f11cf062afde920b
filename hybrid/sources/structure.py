"""Headings from type: which lines of a converted document are headings, when all that is
known of them is how large (and how bold) they are set.

Used for a PDF's text layer (:mod:`hybrid.sources.pdf`: font sizes from PDFium) and for text
recognised in a picture or a scanned page (:mod:`hybrid.sources.ocr`: each line's x-height,
:func:`hybrid.sources.ocr_ops._size`). The body size is the size most characters are set in; a line set clearly larger
(:data:`HEADING_RATIO`), short and made of words, is a heading, the larger the higher; the
headings' sizes, largest first, start a new level only where one is more than
:data:`SAME_SIZE` below the one before it, so a measured size's noise (OCR's estimate of a
line's type) does not make levels of its own. A whole line in bold set a little larger than the
body is a heading by its size too (OCR's measure of a size is noisy: a 12 pt heading over 10 pt
text measured 11.2); one in bold at body size (within :data:`BOLD_SAME`), short and not ending
like a sentence, is a heading one below those. When most lines would be headings (a slide deck
of large type), size says nothing and none is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Sequence

HEADING_RATIO = 1.15  # a line this much larger than the body text is a heading
SAME_SIZE = 0.06      # a size more than 6 % below the next larger one starts a heading level
MAX_HEADING_CHARS = 200
MAX_BOLD_HEADING_CHARS = 120
BOLD_SAME = 0.075    # a bold line within 7.5 % of the body's size is set at body size (0.75 pt of 10)
MAX_LEVELS = 4  # heading sizes told apart (larger ones: level 1 …); bold body lines are one below


def type_headings(lines: Sequence[tuple[Hashable, str, float, bool]],
                  ratio: float = HEADING_RATIO) -> dict[Hashable, int]:
    """{key: level (1 the highest)} of the lines ``(key, text, size, bold)`` that are headings
    (size 0: unknown, never a heading by size); ``ratio``: how much larger than the body a
    heading is set."""
    return headings_among(lines, (), ratio)[0]


def headings_among(lines: Sequence[tuple[Hashable, str, float, bool]], carried: Sequence[float],
                   ratio: float = HEADING_RATIO) -> tuple[dict[Hashable, int], list[int], float]:
    """:func:`type_headings` of ``lines`` under headings in force from before them (a page of
    a series of pictures: :mod:`hybrid.sources.series`) set in ``carried`` sizes (each over its
    own page's body size): (the lines' headings' levels, the carried ones' levels, all set by
    size together; the lines' body size, 0 when none is known)."""
    lines = [(k, t.strip(), sz, b) for k, t, sz, b in lines if t.strip()]
    body = body_size([(t, sz) for _, t, sz, _ in lines])
    if not body:
        return {}, list(map(size_levels(carried).__getitem__, carried)), 0.0
    carried = [r * body for r in carried]
    near = BOLD_SAME * body  # a bold line within this of the body's size is set at body size
    big = [(k, sz) for k, t, sz, b in lines
           if (sz >= body * ratio or (b and sz > body + near)) and len(t) <= MAX_HEADING_CHARS and wordy(t)]
    if len(big) > 0.5 * len(lines):  # a deck of large type: size says nothing
        big = []
    level_of = size_levels([*(sz for _, sz in big), *(sz for sz in carried if sz > body + near)])
    below = min(max(level_of.values(), default=0) + 1, MAX_LEVELS + 1)  # bold at body size
    out: dict[Hashable, int] = {k: level_of[sz] for k, sz in big}
    bold = [k for k, t, sz, b in lines
            if b and sz > 0 and abs(sz - body) <= near and len(t) <= MAX_BOLD_HEADING_CHARS and wordy(t)
            and not t.endswith((".", ",", ";", ":")) and k not in out]
    if bold and len(bold) <= 0.3 * len(lines):
        out.update({k: below for k in bold})
    return out, [level_of.get(sz, below) for sz in carried], body


def body_size(lines: Sequence[tuple[str, float]]) -> float:
    """The size most of the characters of ``lines`` ``(text, size)`` are set in (0: none known)."""
    sizes: Counter[float] = Counter()
    for t, sz in lines:
        if sz > 0 and t.strip():
            sizes[round(sz * 2) / 2] += len(t.strip())
    return sizes.most_common(1)[0][0] if sizes else 0.0


def size_levels(sizes: Iterable[float]) -> dict[float, int]:
    """{size: heading level} of headings set in ``sizes``: the largest level 1, and a new level
    only where a size is more than :data:`SAME_SIZE` below the one before it; at most
    :data:`MAX_LEVELS`."""
    level_of: dict[float, int] = {}
    prev = 0.0
    for sz in sorted(set(sizes), reverse=True):
        level_of[sz] = 1 if not level_of else level_of[prev] + (sz < prev * (1 - SAME_SIZE))
        prev = sz
    return {sz: min(level, MAX_LEVELS) for sz, level in level_of.items()}


def wordy(text: str) -> bool:
    """Has at least two letters (a page number or a rule is no heading), and is not a table's
    row (two or more cell bars: ``| Permit | $120 |``)."""
    return sum(c.isalpha() for c in text) >= 2 and text.count("|") < 2
