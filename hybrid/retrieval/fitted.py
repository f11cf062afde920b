"""Parameters fitted per store: the kind of lexical arm a vault's store has decides which.

The two stores rank keywords differently: the local store with tantivy (one BM25 per field,
summed), a PostgreSQL store with BM25F in SQL (one BM25 over the fields, title and headings
weighted). The parameters fitted on the keyword arm's rankings (the fusion weights, the RRF
constant, the adaptive-fusion curve) are fitted once per kind, by
``eval/bench/fit_store.py`` on the tune split of the labelled sets, and kept in
``hybrid/data/fitted.json`` as the values where a kind departs from the shipped defaults (the
local store's: the settings' defaults and :mod:`hybrid.retrieval.fuse`'s curve). A search uses
the fit of its vaults' stores (``LexicalArm.store_kind``);
vaults of both kinds searched together use the local fit.

A fusion setting a user changed (``rrf_k``, ``weight_lexical``, ``weight_vector`` other than
their shipped defaults, in the config or for a handle) is used as set, on every store: the fit
replaces only the shipped defaults.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hybrid.core.settings import Settings

LOCAL = "local"
FUSION_SETTINGS = ("rrf_k", "weight_lexical", "weight_vector")


@dataclass(frozen=True)
class Fusion:
    """How one store kind's arms are fused."""
    rrf_k: float
    weight_lexical: float
    weight_vector: float
    coverage_full: float   # adaptive fusion: full BM25 weight at or above this coverage
    coverage_none: float   # ... the floor at or below this one
    coverage_floor: float  # the BM25 weight kept when the best hits cover little of the query

    def coverage_weight(self, cov: float) -> float:
        """Multiplier of the BM25 weight (:func:`hybrid.retrieval.fuse.coverage_weight`)."""
        from hybrid.retrieval import fuse
        return fuse.coverage_weight(cov, self.coverage_full, self.coverage_none, self.coverage_floor)


@functools.cache
def table() -> dict[str, dict[str, Any]]:
    """``{store kind: {"fusion": {...}, ...}}`` as fitted (hybrid/data/fitted.json)."""
    from hybrid.core.files import package_data
    return json.loads(package_data("fitted.json"))["stores"]


def kind_of(kinds: Iterable[str]) -> str:
    """The fit a search over stores of these kinds uses: theirs when they agree and a fit
    exists for it, else the local one."""
    found = set(kinds)
    if len(found) == 1:
        (kind,) = found
        if kind in table():
            return kind
    return LOCAL


@functools.cache
def _shipped() -> Settings:
    from hybrid.core.settings import Settings
    return Settings()


def fusion(kind: str, settings: Settings) -> Fusion:
    """The fusion parameters of ``kind``: the kind's fitted values where it has them (the local
    fit is the settings' defaults and :mod:`hybrid.retrieval.fuse`'s curve), a fusion setting
    changed from its default winning over them."""
    from hybrid.retrieval import fuse
    shipped = _shipped()
    values: dict[str, float] = {name: getattr(settings, name) for name in FUSION_SETTINGS}
    values |= {"coverage_full": fuse.COVERAGE_FULL, "coverage_none": fuse.COVERAGE_NONE,
               "coverage_floor": fuse.COVERAGE_FLOOR}
    for name, value in table().get(kind, {}).get("fusion", {}).items():
        if name not in FUSION_SETTINGS or getattr(settings, name) == getattr(shipped, name):
            values[name] = value
    return Fusion(**{f.name: float(values[f.name]) for f in dataclasses.fields(Fusion)})
