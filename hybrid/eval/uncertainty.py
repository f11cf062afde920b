"""How sure a ``hybrid eval`` figure is: 95 % bootstrap confidence intervals of each run's
metrics, and paired comparisons of the best run with each other one.

A labelled set of a few dozen queries is a small sample: 8 queries cannot separate nDCG@10 0.785
from 0.812. Every interval here is a percentile bootstrap over the queries (Efron & Tibshirani,
*An Introduction to the Bootstrap*, 1993, ch. 13), and a comparison resamples the **per-query
differences** of the two runs (the paired bootstrap of Koehn, "Statistical significance tests
for machine translation evaluation", EMNLP 2004): the same queries are drawn for both runs, so a
difference that holds on nearly every query is detected with far fewer queries than two
independent intervals would need. Resampling uses a fixed seed, so a report is reproducible.

The minimum detectable difference (MDD) is ``2.8 · sd(d) / √n``: the true difference a paired
test at the 5 % level finds four times in five (z 1.96 + 0.84) with these ``n`` queries and this
spread ``sd(d)`` of per-query differences. Numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SEED = 28
LEVEL = 0.95
MDD_Z = 2.8            # z(0.975) + z(0.80): two-sided 5 % test, 80 % power
MAX_DRAWS = 2_000_000  # resamples × queries per bootstrap: bounds time and memory on big sets
BLOCK = 1000           # resamples drawn at a time


def resamples(n: int) -> int:
    """How many bootstrap resamples for ``n`` queries: 10,000, fewer for very large sets
    (never under 1,000), so a BEIR-sized set does not take minutes."""
    return max(1000, min(10_000, MAX_DRAWS // max(n, 1)))


def bootstrap_means(values: np.ndarray, seed: int = SEED) -> np.ndarray:
    """The means of bootstrap resamples of ``values`` (one per query). Every call with the same
    ``n`` and ``seed`` draws the same query indices, so two runs' resamples are paired."""
    n = len(values)
    rng = np.random.default_rng(seed)
    out = []
    total = resamples(n)
    for start in range(0, total, BLOCK):
        idx = rng.integers(0, n, size=(min(BLOCK, total - start), n))
        out.append(values[idx].mean(axis=1))
    return np.concatenate(out)


def interval(values: Sequence[float], level: float = LEVEL) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean of ``values``."""
    v = np.asarray(values, dtype=np.float64)
    if len(v) == 0:
        return (math.nan, math.nan)
    means = bootstrap_means(v)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return (float(lo), float(hi))


@dataclass(frozen=True)
class Comparison:
    """The best run against another on one metric, over the same ``n`` queries."""
    metric: str
    best: str
    other: str
    best_value: float
    other_value: float
    low: float      # confidence interval of best − other
    high: float
    mdd: float      # minimum detectable difference (nan with fewer than 2 queries)
    n: int
    level: float = LEVEL

    @property
    def difference(self) -> float:
        return self.best_value - self.other_value

    @property
    def separated(self) -> bool:
        """Is the best run better beyond chance (the interval of the difference above 0)?"""
        return self.low > 0

    @property
    def identical(self) -> bool:
        return self.low == self.high == 0

    def ci_text(self) -> str:
        level = f"{self.level:.0%}" if round(self.level, 4) == LEVEL else f"{self.level:.1%}"
        return f"{level} CI [{self.low:.2f}, {self.high:.2f}]"

    def verdict(self) -> str:
        if self.identical:
            return "identical on every query"
        return "separated" if self.separated else "cannot separate"

    def sentence(self) -> str:
        """One plain line: ``8 queries cannot separate 0.812 from 0.785: difference 0.027, 95%
        CI [-0.04, 0.09]`` (or ``… separate …`` when they can)."""
        if self.identical:
            return f"{self.best} and {self.other} score the same {self.metric} on every one of the {self.n} queries"
        verb = "separate" if self.separated else "cannot separate"
        return (f"{self.n} queries {verb} {self.best_value:.3f} from {self.other_value:.3f}: "
                f"difference {self.difference:.3f}, {self.ci_text()}")

    def to_dict(self) -> dict:
        return {"metric": self.metric, "best": self.best, "other": self.other,
                "best_value": round(self.best_value, 4), "other_value": round(self.other_value, 4),
                "difference": round(self.difference, 4), "ci": [round(self.low, 4), round(self.high, 4)],
                "level": self.level, "mdd": None if math.isnan(self.mdd) else round(self.mdd, 4),
                "separated": self.separated, "queries": self.n}


def compare(metric: str, best: str, other: str, a: Sequence[float], b: Sequence[float],
            level: float = LEVEL) -> Comparison:
    """Paired bootstrap of ``a − b`` (per-query values of two runs, in the same query order)."""
    va, vb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    d = va - vb
    n = len(d)
    if n and not d.any():
        low = high = 0.0
    else:
        means = bootstrap_means(d)
        tail = (1 - level) / 2 * 100
        low, high = (float(x) for x in np.percentile(means, [tail, 100 - tail]))
    mdd = MDD_Z * float(np.std(d, ddof=1)) / math.sqrt(n) if n > 1 else math.nan
    return Comparison(metric, best, other, float(va.mean()) if n else math.nan,
                      float(vb.mean()) if n else math.nan, low, high, mdd, n, level)
