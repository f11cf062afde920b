"""Rank fusion as small pure functions.

Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009): a document's fused score is
the sum over rankings of ``weight / (k + rank)``, ranks starting at 1. It needs no score
calibration between BM25 and cosine similarity, which is why it is the default.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

from hybrid.core.tokens import HIRAGANA_RE, STOPWORDS

K = TypeVar("K", bound=Hashable)


def rrf(rankings: Sequence[Sequence[K]], k: float = 60.0,
        weights: Sequence[float] | None = None) -> list[tuple[K, float]]:
    """Fuse best-first rankings; returns (key, score) best-first. Ties keep first-seen order."""
    if k < 0:
        raise ValueError("k must be >= 0")
    weights = list(weights) if weights is not None else [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError("one weight per ranking")
    scores: dict[K, float] = {}
    for ranking, w in zip(rankings, weights):
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + w / (k + rank)
    return sorted(scores.items(), key=lambda kv: -kv[1])


def ranks(ranking: Sequence[K]) -> dict[K, int]:
    """1-based rank of each key in a best-first ranking."""
    return {key: i for i, key in enumerate(ranking, start=1)}


def merge_by_score(lists: Sequence[Sequence[tuple[K, float]]], limit: int) -> list[tuple[K, float]]:
    """Merge several (key, score) lists of one arm (e.g. one per vault) by score."""
    merged = [item for lst in lists for item in lst]
    merged.sort(key=lambda kv: -kv[1])
    return merged[:limit]


def demote(scores: Sequence[tuple[K, float]], penalties: Mapping[K, float]) -> list[tuple[K, float]]:
    """Multiply each score by ``1 - penalty`` and re-sort (used by the recency prior)."""
    out = [(key, s * (1.0 - penalties.get(key, 0.0))) for key, s in scores]
    out.sort(key=lambda kv: -kv[1])
    return out


# Adaptive fusion: the BM25 weight as a function of query coverage (see ``coverage_weight``).
COVERAGE_FULL = 0.6    # at or above: full BM25 weight
COVERAGE_NONE = 0.3    # at or below: the floor
COVERAGE_FLOOR = 0.1   # the BM25 weight kept when the best hits cover little of the query

Analyze = Callable[[str], Iterable[str]]


def content_stems(text: str, analyze: Analyze) -> set[str]:
    """The stems of ``text``'s words that are not English function words, nor CJK bigrams of
    Hiragana alone (particles and endings: ``はど``, ``いる``). CJK text gives its bigrams,
    as the lexical arm reads it (``analyze``), so they compare with a passage's."""
    words = [w for w in re.findall(r"[^\W_]+", text.lower()) if w not in STOPWORDS]
    return {s for s in analyze(" ".join(words)) if not HIRAGANA_RE.fullmatch(s)} if words else set()


def coverage(want: set[str], texts: Iterable[str], analyze: Analyze) -> float:
    """The largest share of the stems ``want`` that any one of ``texts`` contains (1.0 when
    ``want`` is empty)."""
    if not want:
        return 1.0
    return max((covered(want, analyze(t)) for t in texts), default=0.0)


def covered(want: set[str], stems: Iterable[str]) -> float:
    """The share of the stems ``want`` (not empty) that are among ``stems``."""
    return len(want.intersection(stems)) / len(want)


def coverage_weight(cov: float, full: float = COVERAGE_FULL, none: float = COVERAGE_NONE,
                    floor: float = COVERAGE_FLOOR) -> float:
    """Multiplier of the BM25 weight for a query whose best BM25 hits cover ``cov`` of its
    content words: 1 at ``full`` and above, ``floor`` at ``none`` and below, linear between.
    The defaults were chosen with ``hybrid eval`` on the tuning splits (eval/reports/), on the
    local store; a PostgreSQL store has its own (:mod:`hybrid.retrieval.fitted`)."""
    if cov >= full:
        return 1.0
    if cov <= none:
        return floor
    return floor + (cov - none) / (full - none) * (1.0 - floor)
