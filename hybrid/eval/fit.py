"""``hybrid eval fit``: fit one store kind's fusion parameters (:mod:`hybrid.retrieval.fitted`) on
the tune split of labelled sets, check them on the held-out split, and write
``hybrid/data/fitted.json``.

The vaults are indexed into a scratch home, in the store given (a PostgreSQL one fits the
``postgresql`` kind; none, the local kind), with the default settings, one embedder whose query
vectors are kept (a grid asks for the same query many times) and ``duplicate_similarity`` 0 as in
``hybrid eval``. Each query is scored as ``hybrid eval`` scores it
(:func:`hybrid.eval.run.aggregate`, ranx nDCG@10, answer@1 = a top-grade note first), in hybrid
mode: lexical mode does not fuse, so no fusion parameter moves it.

The fit maximises, over the sets' tune halves, the mean of nDCG@10 + answer@1, over
:data:`GRID`. It is kept only when it loses nothing held out and gains something (on every
set, hybrid nDCG@10 and answer@1 at least as high as before, one higher: :func:`verdict`);
otherwise the kind keeps what the file says (the PostgreSQL fit of issue #31 moved held-out
figures both ways, so none ships: eval/reports/postgres/issue31-fit.md). The file lists for each
kind only what departs from the shipped defaults (the local store's: the settings' defaults and
:mod:`hybrid.retrieval.fuse`'s curve).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hybrid.embedders.base import Wrapped
from hybrid.eval.sets import HELDOUT, TUNE, Loaded
from hybrid.retrieval import fitted

DEPTH = 100  # as hybrid eval
MODE = "hybrid"
GRID: dict[str, tuple] = {  # weight_lexical stays 1 (only the ratio counts)
    "rrf_k": (5.0, 10.0, 20.0),
    "weight_vector": (1.0, 1.5, 2.0),
    "curve": ((0.6, 0.3, 0.1), (0.7, 0.4, 0.1), (0.5, 0.2, 0.1), (0.8, 0.5, 0.05)),  # full / none / floor
}
Figures = dict[str, dict[str, tuple[float, float]]]  # set -> split ("all", tune, heldout) -> (nDCG@10, answer@1)
Log = Callable[[str], None]


def candidates(grid: dict[str, tuple] = GRID) -> Iterator[dict[str, float]]:
    """Every point of ``grid`` as the fusion parameters of :class:`hybrid.retrieval.fitted.Fusion`."""
    for k, wv, (full, none, floor) in itertools.product(grid["rrf_k"], grid["weight_vector"], grid["curve"]):
        yield {"rrf_k": k, "weight_lexical": 1.0, "weight_vector": wv,
               "coverage_full": full, "coverage_none": none, "coverage_floor": floor}


def shipped_fusion() -> dict[str, float]:
    """The local store's fusion: the settings' defaults and :mod:`hybrid.retrieval.fuse`'s curve."""
    from hybrid.core.settings import Settings
    from hybrid.retrieval import fuse
    s = Settings()
    return {"rrf_k": s.rrf_k, "weight_lexical": s.weight_lexical, "weight_vector": s.weight_vector,
            "coverage_full": fuse.COVERAGE_FULL, "coverage_none": fuse.COVERAGE_NONE,
            "coverage_floor": fuse.COVERAGE_FLOOR}


def departures(params: dict[str, float]) -> dict[str, float]:
    """What of ``params`` departs from the shipped defaults: what the file lists."""
    ship = shipped_fusion()
    return {k: v for k, v in params.items() if v != ship[k]}


@contextmanager
def trying(kind: str, fusion: dict[str, float] | None) -> Iterator[None]:
    """Searches of stores of ``kind`` fuse with ``fusion`` (None: as the file says) until the
    block ends; the fitted table is put back as it was."""
    table = fitted.table()
    before = table.get(kind)
    if fusion is not None:
        table[kind] = {**(before or {}), "fusion": dict(fusion)}
    try:
        yield
    finally:
        if before is None:
            table.pop(kind, None)
        else:
            table[kind] = before


class QueryCache(Wrapped):
    """An embedder whose query vectors are kept: a grid asks for the same query many times."""

    def __init__(self, inner):
        super().__init__(inner)
        self.memo: dict = {}

    def embed_query(self, text: str, reach: bool = False) -> Any:
        key = (text, reach)
        if key not in self.memo:
            self.memo[key] = super().embed_query(text, reach)
        return self.memo[key]


def score(h, vault: str, loaded: Loaded, split: str | None = None) -> dict[str, dict[str, Any]]:
    """Per query of ``loaded`` (of one split, or all): nDCG@10 and answer@1 in hybrid mode."""
    from hybrid.eval.run import NO_HIT, aggregate, answer_at, ranx_module
    ranx = ranx_module()
    # a question nobody judged yet is left out, as `hybrid eval` leaves it out
    queries = [q for q in loaded.queries if (split is None or q.split == split) and loaded.qrels.get(q.qid)]
    run = {}
    for q in queries:
        hits = h.search(q.text, vaults=[vault], top_k=DEPTH, mode=MODE, passages=True)
        run[q.qid] = aggregate(hits, loaded.qrels[q.qid]) or {NO_HIT: 0.0}
    qr = ranx.Qrels({q.qid: dict(loaded.qrels[q.qid]) for q in queries})
    nd = ranx.evaluate(qr, ranx.Run(run), "ndcg@10", return_mean=False, make_comparable=True)
    ndcg = dict(zip(qr.keys(), map(float, nd)))
    return {q.qid: {"ndcg": ndcg[q.qid], "a1": float(answer_at(run[q.qid], loaded.qrels[q.qid], 1)),
                    "split": q.split} for q in queries}


def mean(per: dict[str, dict], key: str, split: str | None = None) -> float:
    vals = [v[key] for v in per.values() if split is None or v["split"] == split]
    return sum(vals) / len(vals) if vals else float("nan")


def figures(h, sets: Sequence[tuple[str, Loaded]]) -> Figures:
    """Each set's mean nDCG@10 and answer@1 on all its queries, the tune and the held-out ones."""
    out: Figures = {}
    for vault, loaded in sets:
        per = score(h, vault, loaded)
        out[loaded.set.name] = {split or "all": (mean(per, "ndcg", split), mean(per, "a1", split))
                                for split in (None, TUNE, HELDOUT)}
    return out


def grid_search(h, kind: str, sets: Sequence[tuple[str, Loaded]], grid: dict[str, tuple] = GRID,
                log: Log | None = None) -> tuple[dict[str, float], list[dict]]:
    """The candidate that ranks best on the tune splits (mean over the sets of nDCG@10 +
    answer@1; the first of equals), and every candidate's tune figures."""
    tried: list[dict[str, Any]] = []
    for cand in candidates(grid):
        with trying(kind, cand):
            per_set = {}
            for vault, loaded in sets:
                per = score(h, vault, loaded, TUNE)
                per_set[loaded.set.name] = (mean(per, "ndcg"), mean(per, "a1"))
        objective = sum(n + a for n, a in per_set.values()) / len(per_set)
        tried.append({"params": cand, "tune": per_set, "objective": objective})
        if log:
            log(f"{cand} -> {objective:.4f}")
    best = max(tried, key=lambda t: t["objective"])
    return best["params"], tried


def verdict(before: Figures, after: Figures, eps: float = 1e-9) -> tuple[bool, list[str]]:
    """Whether a fit is kept: on every set's held-out split, nDCG@10 and answer@1 at least as
    high as before and one of them higher somewhere. Returns it and what fell (or that nothing
    rose)."""
    fell, rose = [], False
    for name, splits in before.items():
        for metric, was, now in zip(("nDCG@10", "answer@1"), splits[HELDOUT], after[name][HELDOUT]):
            if now < was - eps:
                fell.append(f"{name} held out {metric} {was:.3f} -> {now:.3f}")
            rose = rose or now > was + eps
    if not fell and not rose:
        fell.append("no held-out figure rose")
    return not fell, fell


def fitted_file(base: dict, kind: str, fusion: dict[str, float]) -> dict:
    """``base`` (a fitted.json) with ``kind``'s fusion set to what of ``fusion`` departs from
    the shipped defaults (none: the kind's entry without a fusion)."""
    data = json.loads(json.dumps(base))
    entry = {k: v for k, v in data.setdefault("stores", {}).get(kind, {}).items() if k != "fusion"}
    if dep := departures(fusion):
        entry["fusion"] = dep
    data["stores"][kind] = entry
    return data


def fit(h, kind: str, sets: Sequence[tuple[str, Loaded]], base: dict, grid: dict[str, tuple] = GRID,
        log: Log | None = None) -> dict:
    """Fit ``kind``'s fusion on handle ``h``'s vaults (``sets``: each set with its vault's
    name); ``base``: the fitted.json the fit starts from (searches use it as it is before and
    after). Returns ``{"kind", "fitted", "kept", "why", "before", "after", "tried", "file"}``:
    ``file`` is ``base`` with the fit when it is kept, else ``base`` unchanged."""
    table = fitted.table()
    saved = dict(table)
    table.clear()
    table.update(json.loads(json.dumps(base["stores"])))
    try:
        current = {**shipped_fusion(), **table.get(kind, {}).get("fusion", {})}
        before = figures(h, sets)
        best, tried = grid_search(h, kind, sets, grid, log)
        with trying(kind, best):
            after = figures(h, sets)
    finally:
        table.clear()
        table.update(saved)
    kept, why = verdict(before, after)
    return {"kind": kind, "fitted": best, "kept": kept, "why": why, "before": before, "after": after,
            "tried": tried, "file": fitted_file(base, kind, best if kept else current)}


def summary(result: dict) -> str:
    """The fit in a few lines and a table (nDCG@10 / answer@1 per set and split)."""
    lines = [f"fitted ({result['kind']}): {result['fitted']}",
             "kept" if result["kept"] else f"not kept: {'; '.join(result['why'])}", "",
             "| set | split | before | fitted |", "|---|---|---|---|"]
    for name, splits in result["before"].items():
        for split, (n, a) in splits.items():
            n2, a2 = result["after"][name][split]
            lines.append(f"| {name} | {split} | {n:.3f} / {a:.3f} | {n2:.3f} / {a2:.3f} |")
    return "\n".join(lines)


def shipped_file() -> dict:
    from hybrid.core.files import package_data
    return json.loads(package_data("fitted.json"))


def write(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
