"""How the cross-encoder's judgement is blended with the fusion order (pure functions).

The judgement is blended with the fusion order instead of replacing it (see :func:`blend`), so
that a confident exact match that fusion put first is not pushed down by a model that has never
seen the identifier. The model itself is built by ``hybrid.embedders.make_reranker``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# Weight kept by the fusion order at a given fused rank (1-based). The top of the fused list
# is usually right already; the cross-encoder gets more say further down.
FUSION_WEIGHT = ((3, 0.75), (10, 0.6), (10**9, 0.4))


def fusion_weight(rank: int) -> float:
    return next(w for limit, w in FUSION_WEIGHT if rank <= limit)


def blend(ce_scores: Sequence[float], depth: int = 30) -> list[float]:
    """Blend cross-encoder logits with fused positions. The candidate at fused rank r gets
    ``w(r) * max(0, 1 - (r - 1) / depth) + (1 - w(r)) * sigmoid(logit)``; both terms lie in
    [0, 1]; ``w`` is 0.75 for ranks 1–3, 0.6 for 4–10 and 0.4 below."""
    out = []
    for i, logit in enumerate(ce_scores):
        r = i + 1
        w = fusion_weight(r)
        prob = 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, float(logit)))))
        out.append(w * max(0.0, 1.0 - (r - 1) / max(depth, 1)) + (1.0 - w) * prob)
    return out


def pinned(query_literals: Sequence[str], texts: Sequence[str]) -> int:
    """How many leading candidates to keep in place: the fused top hit stays first when the
    query has literals (identifiers with inner punctuation, quoted phrases) and that hit
    contains every one of them verbatim. A cross-encoder has rarely seen an identifier like
    ``orders-created``; the lexical arm matched it exactly."""
    if not query_literals or not texts:
        return 0
    top = texts[0].lower()
    return 1 if all(lit.lower() in top for lit in query_literals) else 0
