"""Tag-first: a short query that names a tag (``journal``, ``networking`` for
``home-lab/networking``, ``home lab`` for ``home-lab``) gets the notes carrying that tag above
everything fusion ranked but exact-first's pins. Words reach tags in the lexical arm already
(a chunk's tags are in its headings field), but a note tagged ``#journal`` need not say
"journal" anywhere else, and the vector arm, which reads only the text, would rank notes that
talk about journals above it. A stage of :mod:`hybrid.retrieval.pipeline`, after exact-first."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from hybrid.retrieval import fuse
from hybrid.store.base import ChunkRow

TAG_LIFT = 0.75  # under exact-first's lift (1.0): a named identifier still goes first
MAX_WORDS = 3    # content words: a longer query asks about more than a tag
Analyze = Callable[[str], Iterable[str]]


def tag_first(fused: Sequence[tuple], rows: dict, text: str, analyze: Analyze) -> tuple[list, list]:
    """(ranking, lifted keys): ``fused`` with the notes carrying a tag the query names first, in
    fused order, their scores lifted by :data:`TAG_LIFT` (those exact-first lifted, at 1 or
    more, keep their place above). A query names a tag when its content words, stemmed
    (:func:`hybrid.retrieval.fuse.content_stems`), are those of the tag, of one of its
    segments (``a/b``: ``a``, ``b``) or of either with ``-`` and ``_`` read as spaces."""
    want = frozenset(fuse.content_stems(text, analyze))
    if not want or len(want) > MAX_WORDS:
        return list(fused), []
    lifted = [k for k, s in fused if s < 1.0 and want in tag_stems(rows[k], analyze)]
    if not lifted:
        return list(fused), []
    chosen = set(lifted)
    pinned = [(k, s) for k, s in fused if s >= 1.0]
    rest = [(k, s) for k, s in fused if s < 1.0 and k not in chosen]
    return pinned + [(k, TAG_LIFT + s) for k, s in fused if k in chosen] + rest, lifted


def tag_stems(row: ChunkRow, analyze: Analyze) -> frozenset[frozenset[str]]:
    """The stem sets a query must equal to name one of ``row``'s tags (kept with the row)."""
    def make(r: ChunkRow) -> frozenset[frozenset[str]]:
        out = set()
        for tag in r.tags:
            for part in [tag, *tag.split("/")]:
                words = SEPARATOR_RE.sub(" ", part.lower()).strip()
                if words:
                    out.add(frozenset(analyze(words)))
        return frozenset(out)
    return row.derived(("tag-stems",), make)


SEPARATOR_RE = re.compile(r"[/_\-]+")
