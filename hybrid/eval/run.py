"""What ``hybrid eval`` runs: retrieval configurations over a labelled query set, scored by ranx.

For every distinct chunking (chunk size × overlap × contextual header) the vault is indexed into
a temporary home (the user's indexes are never touched), through one embedding cache shared by
all configurations, so each distinct chunk text is embedded once per model. Each configuration
then retrieves the top 100 chunks per query, and chunks are aggregated to notes: **a note's
rank is the rank of its best chunk** (first occurrence). A query judged at section level
(``path#A > B``) is ranked at section level instead: a chunk counts for a judged section when
that section's heading chain occurs, in order, in the chunk's heading path.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hybrid.app.api import open as open_hybrid
from hybrid.core.errors import HybridError, ModelUnavailable
from hybrid.core.settings import Settings, replace
from hybrid.embedders import make_embedder, make_reranker, options_from
from hybrid.embedders.base import Wrapped
from hybrid.eval.inputs import DEFAULT_METRICS, Problems, Query
from hybrid.eval.uncertainty import Comparison, compare, interval

log = logging.getLogger("hybrid")
MODES = ("lexical", "vector", "hybrid", "rerank")
EXTRA = "eval"  # the optional dependencies scoring needs (pyproject.toml): ranx, and matplotlib for plots
DEPTH = 100
NO_HIT = "__none__"  # the one doc of a query that retrieved nothing (ranx needs a non-empty run)


@dataclass(frozen=True)
class RunConfig:
    mode: str
    chunk_tokens: int
    chunk_overlap: int
    context_header: bool
    rrf_k: float
    weight_lexical: float
    weight_vector: float

    @property
    def chunking(self) -> tuple[int, int, bool]:
        return (self.chunk_tokens, self.chunk_overlap, self.context_header)

    @property
    def name(self) -> str:
        """Run name, also the TREC run file's name: no ``:`` (not allowed in Windows file names),
        so the weights read ``w1-1.5`` (lexical 1, vector 1.5)."""
        base = f"{self.mode}-c{self.chunk_tokens}-o{self.chunk_overlap}-h{int(self.context_header)}"
        if self.mode in ("hybrid", "rerank"):
            base += f"-k{self.rrf_k:g}-w{self.weight_lexical:g}-{self.weight_vector:g}"
        return base


def grid(modes: Sequence[str], chunk_tokens: Sequence[int], overlaps: Sequence[int],
         headers: Sequence[bool], rrf_ks: Sequence[float], weights: Sequence[tuple[float, float]]
         ) -> list[RunConfig]:
    """Every combination; fusion parameters only vary for the modes that fuse."""
    out: dict[str, RunConfig] = {}
    for mode, c, o, h in itertools.product(modes, chunk_tokens, overlaps, headers):
        if mode not in MODES:
            raise HybridError(f"unknown mode {mode!r}: use {', '.join(MODES)}")
        fusing = mode in ("hybrid", "rerank")
        for k, (wl, wv) in itertools.product(rrf_ks if fusing else rrf_ks[:1],
                                             weights if fusing else weights[:1]):
            cfg = RunConfig(mode, c, o, h, k, wl, wv)
            out.setdefault(cfg.name, cfg)
    return list(out.values())


class CachingEmbedder(Wrapped):
    """Wraps an embedder with an in-memory cache for one evaluation, keyed by the embedder's id
    and a hash of the exact text the model reads (chunk text with its context header), so the
    chunkings of a grid embed a text they share once: the vector served again is the one the
    model produced, bit for bit. ``reuse=False`` turns the cache off (to measure what it saves).
    ``source``: the catalog of the evaluated vault's own index (a registered vault), whose cached
    vectors, under this model's id and the hash of the same text (``text_hash``, as the indexer
    keys them), are served before the model is asked: an indexed vault is not embedded again."""

    def __init__(self, inner, reuse: bool = True, source=None):
        super().__init__(inner)
        self.reuse = reuse
        self.source = source
        self.cache: dict[bytes, Any] = {}
        self.embedded = 0    # texts the model embedded
        self.requested = 0   # texts asked for (each chunking's index asks once per new text)
        self.from_index = 0  # texts whose vectors the vault's own index had

    @property
    def reused(self) -> int:
        """Texts served from the cache: embedded already, for an earlier chunking."""
        return self.requested - self.embedded

    def count_tokens(self, texts):
        return self.inner.count_tokens(texts)

    def key(self, text: str) -> bytes:
        return hashlib.blake2b(f"{self.id}\0{text}".encode(), digest_size=16).digest()

    def embed_documents(self, texts, *known):
        import numpy as np
        self.requested += len(texts)
        if not self.reuse or known:  # a mix given halves it has (an upgrade): not cached here
            self.embedded += len(texts)
            return self.inner.embed_documents(texts, *known)
        keys = [self.key(t) for t in texts]
        todo = list(dict.fromkeys(k for k in keys if k not in self.cache))
        first = {k: t for k, t in zip(keys, texts)}
        if todo and self.source is not None:
            todo = self._from_index(todo, first)
        if todo:
            vecs = self.inner.embed_documents([first[k] for k in todo])
            self.embedded += len(todo)
            for k, v in zip(todo, vecs):
                self.cache[k] = v
        return np.stack([self.cache[k] for k in keys]).astype(np.float32)

    def _from_index(self, todo: list[bytes], first: dict[bytes, str]) -> list[bytes]:
        """Serve what the vault's own index holds of ``todo`` (cache keys; ``first``: their
        texts); returns the keys still to embed."""
        import numpy as np

        from hybrid.indexing.reading import text_hash
        hashes = {k: text_hash(first[k]) for k in todo}
        got = self.source.cached_vectors(self.id, hashes.values())
        rest = []
        for k in todo:
            blob = got.get(hashes[k])
            if blob is not None and len(blob) == 4 * self.dim:
                self.cache[k] = np.frombuffer(blob, dtype=np.float32)
                self.from_index += 1
            else:
                rest.append(k)
        return rest



@dataclass
class ConfigResult:
    config: RunConfig
    metrics: dict[str, float]
    per_query: dict[str, dict[str, float]]           # metric -> qid -> score
    answer_at: dict[str, dict[str, bool]]             # "1"/"10" -> qid -> found a top-grade answer
    run: dict[str, dict[str, float]]
    seconds: float

    def answer_at_1(self) -> float:
        return _mean(self.answer_at["1"].values())


@dataclass(frozen=True)
class Miss:
    """A query whose first hit is not a top-grade answer (an answer@1 miss) in one run."""
    qid: str
    text: str
    category: str
    answer_rank: int | None   # rank of the first top-grade answer among the ranked notes; None: not retrieved
    first: str                # what ranked first instead ("" when nothing was retrieved)
    first_grade: int          # its judged grade (0: not judged relevant)
    top_grade: int            # the grade an answer has (the query's highest)


@dataclass
class EvalResult:
    results: list[ConfigResult]
    queries: dict[str, Query]
    qrels: dict[str, dict[str, int]]
    problems: Problems
    skipped_modes: list[str] = field(default_factory=list)
    index_seconds: dict[str, float] = field(default_factory=dict)
    chunks_embedded: int = 0
    chunks_reused: int = 0   # chunk texts an earlier chunking had embedded: served from the cache
    chunks_from_index: int = 0  # chunk texts whose vectors the evaluated vault's own index held
    seconds: float = 0.0
    advice: Any = None  # "apply this setting": a hybrid.eval.advice.Advice, set by the caller
    significance: dict = field(default_factory=dict)
    metrics: tuple[str, ...] = DEFAULT_METRICS

    def categories(self) -> list[str]:
        """The query groups reported apart: each category, then each split as ``split:NAME``
        (so one run gives tuned-on and held-out figures side by side)."""
        cats = sorted({q.category for q in self.queries.values() if q.category})
        splits = sorted({q.split for q in self.queries.values() if q.split})
        return cats + [f"split:{s}" for s in splits]

    def group(self, cat: str) -> list[str]:
        """The qids of one group of :meth:`categories`."""
        return [q for q, v in self.queries.items()
                if (f"split:{v.split}" if cat.startswith("split:") else v.category) == cat]

    def by_category(self, r: ConfigResult, metric: str) -> dict[str, float]:
        out = {}
        for cat in self.categories():
            qids = self.group(cat)
            vals = ([float(r.answer_at[metric[len("answer@"):]][q]) for q in qids]
                    if metric.startswith("answer@") else [r.per_query[metric][q] for q in qids])
            out[cat] = sum(vals) / len(vals) if vals else float("nan")
        return out

    @property
    def primary(self) -> str:
        """The metric comparisons and advice go by: nDCG@10 when measured, else the first."""
        return "ndcg@10" if "ndcg@10" in self.metrics else self.metrics[0]

    def values(self, r: ConfigResult, metric: str) -> list[float]:
        """Run ``r``'s per-query scores of ``metric`` (or ``answer@1``/``answer@10``), in
        query order: what the bootstrap resamples."""
        if metric.startswith("answer@"):
            return [float(r.answer_at[metric[len("answer@"):]][q]) for q in self.queries]
        return [r.per_query[metric][q] for q in self.queries]

    def interval(self, r: ConfigResult, metric: str) -> tuple[float, float]:
        """95 % bootstrap confidence interval of run ``r``'s mean ``metric``."""
        return interval(self.values(r, metric))

    def best(self, metric: str, runs: Sequence[ConfigResult] | None = None) -> ConfigResult | None:
        """The run with the highest mean ``metric`` (the first of equals)."""
        return max(runs if runs is not None else self.results,
                   key=lambda r: _mean(self.values(r, metric)), default=None)

    def comparisons(self, metric: str | None = None) -> list[Comparison]:
        """The best run by ``metric`` (default :attr:`primary`) against each other run: the
        difference, its paired bootstrap interval and the minimum detectable difference."""
        metric = metric or self.primary
        best = self.best(metric)
        if best is None or len(self.results) < 2:
            return []
        top = self.values(best, metric)
        return [compare(metric, best.config.name, r.config.name, top, self.values(r, metric))
                for r in self.results if r is not best]

    def main_run(self) -> ConfigResult | None:
        """The run the misses are listed for: the hybrid run (the best by answer@1 when the
        grid has several), or the best run by answer@1 when no hybrid mode ran."""
        pool = [r for r in self.results if r.config.mode == "hybrid"] or self.results
        return max(pool, key=ConfigResult.answer_at_1, default=None)

    def misses(self, r: ConfigResult) -> list[Miss]:
        """The answer@1 misses of run ``r``, in query order."""
        out = []
        for qid, q in self.queries.items():
            if r.answer_at["1"].get(qid, True):
                continue
            judged = self.qrels[qid]
            top = max(judged.values())
            docs = ranked(r.run.get(qid, {}))
            rank = next((i for i, d in enumerate(docs, 1) if judged.get(d, 0) == top), None)
            first = docs[0] if docs else ""
            out.append(Miss(qid, q.text, q.category, rank, first, judged.get(first, 0), top))
        return out

    def to_dict(self) -> dict:
        from hybrid.eval.uncertainty import LEVEL, SEED, resamples
        main = self.main_run()
        compared = (*self.metrics, "answer@1", "answer@10")
        return {
            "seconds": round(self.seconds, 2),
            "chunks_embedded": self.chunks_embedded,
            "chunk_texts_reused": self.chunks_reused - self.chunks_from_index,
            "chunk_texts_from_index": self.chunks_from_index,
            "index_seconds": self.index_seconds,
            "queries": len(self.queries),
            "skipped": dict(self.problems.counts),
            "skipped_modes": self.skipped_modes,
            "significance": self.significance,
            "uncertainty": {"method": "percentile bootstrap over queries (paired for differences)",
                            "level": LEVEL, "seed": SEED, "resamples": resamples(len(self.queries))},
            "comparisons": {m: [c.to_dict() for c in self.comparisons(m)] for m in compared},
            "apply": self.advice.to_dict() if self.advice else None,
            "configs": [{
                "name": r.config.name, **asdict(r.config),
                "metrics": {k: round(v, 4) for k, v in r.metrics.items()},
                "answer_at_1": round(_mean(r.answer_at["1"].values()), 4),
                "answer_at_10": round(_mean(r.answer_at["10"].values()), 4),
                "ci": {m: [round(x, 4) for x in self.interval(r, m)] for m in compared},
                "categories": {m: {c: round(v, 4) for c, v in self.by_category(r, m).items()}
                               for m in ("ndcg@10", "answer@1", "answer@10")},
                "seconds": round(r.seconds, 2),
            } for r in self.results],
            "answer_at_1_misses": {"run": main.config.name if main else None,
                                   "queries": [asdict(m) for m in self.misses(main)] if main else []},
        }


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else float("nan")


def section_matches(judged: str, path: str, heading_path: Sequence[str]) -> bool:
    """Does a chunk at ``path`` under ``heading_path`` fall inside judged section ``judged``?"""
    note, _, chain = judged.partition("#")
    if note != path or not chain:
        return False
    want = [p.strip() for p in chain.split(">")]
    n = len(want)
    return any(list(heading_path[i:i + n]) == want for i in range(len(heading_path) - n + 1))


def aggregate(hits, judged: dict[str, int]) -> dict[str, float]:
    """Chunk hits (best first) → ranked document ids (note paths, or section ids for a query
    judged at section level); scores are positional so ranx keeps exactly this order."""
    sections = [d for d in judged if "#" in d]
    ranked: list[str] = []
    seen: set[str] = set()
    for h in hits:
        if sections:
            doc = next((s for s in sections if section_matches(s, h.path, h.heading_path)), None)
            if doc is None:
                doc = h.path if h.path in judged else f"{h.path}#{' > '.join(h.heading_path)}"
        else:
            doc = h.path
        if doc not in seen:
            seen.add(doc)
            ranked.append(doc)
    return {doc: float(len(ranked) - i) for i, doc in enumerate(ranked)}


def ranked(run: dict[str, float]) -> list[str]:
    """A query's run (doc -> positional score) as its ranked doc ids, best first."""
    return [d for d in sorted(run, key=lambda d: -run[d]) if d != NO_HIT]


def answer_at(run: dict[str, float], judged: dict[str, int], k: int) -> bool:
    """Is a top-grade answer (a doc of the query's highest judged grade) among the first ``k``?"""
    top = max(judged.values())
    return any(judged.get(d, 0) == top for d in ranked(run)[:k])


Progress = Callable[[str, int, int], None]


def extra_requirements(extra: str = EXTRA) -> list[str]:
    """The requirements of hybrid's optional-dependency group ``extra`` as the installed
    package declares them (``ranx>=0.3.20``, ...): pyproject.toml stays their one place."""
    from importlib.metadata import PackageNotFoundError, requires
    try:
        declared = requires("hybrid") or []
    except PackageNotFoundError:  # run from a source tree that was never installed
        declared = []
    marker = f'extra == "{extra}"'
    return [r.split(";")[0].strip() for r in declared if marker in r.replace("'", '"')]


def ranx_module() -> Any:
    """ranx, which scores every run; it comes with the ``eval`` extra (installed by the
    Quickstart, not by a plain ``pip install``), so without it ``hybrid eval`` stops here,
    before anything is indexed, with the one line that installs it."""
    try:
        import ranx
    except ImportError:
        wanted = " ".join(f"'{r}'" for r in extra_requirements()) or "ranx"
        raise HybridError(f"hybrid eval scores runs with ranx, which is not installed (it is hybrid's "
                          f"{EXTRA!r} extra): pip install {wanted}") from None
    return ranx


def run_eval(vault_path: Path, queries: dict[str, Query], qrels: dict[str, dict[str, int]],
             configs: Sequence[RunConfig], settings: Settings, problems: Problems, *,
             include: Sequence[str] = ("**/*.md",), exclude: Sequence[str] = (),
             metrics: Sequence[str] = DEFAULT_METRICS, significance: bool = False,
             progress: Progress | None = None, workdir: Path | None = None,
             embedder=None, reranker=None, store: str | None = None,
             sources: Sequence[str] = (), reuse_embeddings: bool = True, reuse_from=None) -> EvalResult:
    """Evaluate ``configs`` on the vault at ``vault_path``. ``embedder`` and ``reranker``
    (default: built from ``settings``) let a caller share already loaded models. ``store``: a
    PostgreSQL store (a URL, or ``postgresql`` for ``$HYBRID_DATABASE_URL``) to index into
    instead of local files; the evaluation's vault is dropped from it afterwards. ``sources``:
    search only documents of these kinds (``--source``). ``reuse_embeddings=False``: embed
    every chunking's texts afresh (only to measure what the shared cache saves). ``reuse_from``:
    the catalog of the vault's own index (a registered vault): vectors it holds for the same
    model and text are read, not embedded (see :class:`CachingEmbedder`)."""
    Qrels = ranx_module().Qrels

    t0 = time.perf_counter()
    result = EvalResult([], queries, qrels, problems, metrics=tuple(metrics))
    if not queries:
        raise HybridError("no query has judgements on notes in the vault; nothing to evaluate "
                          "(see the warnings above)")
    from hybrid.store.agent.view import agent_redactor
    options = options_from(settings, redact=agent_redactor().redact)  # text sent elsewhere: redacted
    cached = CachingEmbedder(embedder or make_embedder(settings.embedder, options=options),
                             reuse=reuse_embeddings, source=reuse_from if reuse_embeddings else None)
    if any(c.mode == "rerank" for c in configs) and reranker is None:
        try:
            reranker = make_reranker(settings.rerank_model, options=options)
        except ModelUnavailable as exc:
            log.warning("rerank skipped: %s", exc)
            result.skipped_modes.append("rerank")
            configs = [c for c in configs if c.mode != "rerank"]
    qr = Qrels({q: dict(d) for q, d in qrels.items()})
    by_chunking: dict[tuple, list[RunConfig]] = {}
    for c in configs:
        by_chunking.setdefault(c.chunking, []).append(c)
    for chunking, group in by_chunking.items():
        tokens, overlap, header = chunking
        chunked = replace(settings, chunk_tokens=tokens, chunk_overlap=overlap,
                          context_header=header, recency_months=0)
        home = Path(tempfile.mkdtemp(prefix="hybrid-eval-", dir=workdir))
        h = open_hybrid(home, embedders=[cached], reranker=reranker, **chunked.as_dict())
        name = f"eval-{uuid.uuid4().hex[:12]}" if store else "eval"
        try:
            _index_for_eval(h, vault_path, include, exclude, chunking, result, progress, name, store)
            for cfg in group:
                result.results.append(_score_config(h, cfg, queries, qrels, qr, metrics, problems,
                                                    progress, tuple(sources)))
        finally:
            h.close()
            try:
                if store and name in h.config.vaults:  # the evaluation's vault in a shared database
                    from hybrid.store import backend
                    vault = h.config.vault(name)
                    backend(vault).drop(vault)
            finally:  # its index holds the notes' text: not left behind in a temp folder
                shutil.rmtree(home, ignore_errors=True)
    result.chunks_embedded, result.chunks_reused = cached.embedded, cached.reused
    result.chunks_from_index = cached.from_index
    if significance and len(result.results) > 1:
        result.significance = _significance(result.results, qr, metrics)
    result.seconds = time.perf_counter() - t0
    return result


def _index_for_eval(h, vault_path: Path, include: Sequence[str], exclude: Sequence[str],
                    chunking: tuple[int, int, bool], result: EvalResult,
                    progress: Progress | None, name: str = "eval", store: str | None = None) -> None:
    """Register the evaluated vault in the temporary home and index it with one chunking."""
    tokens, overlap, header = chunking
    h.config.add_vault(vault_path, name, list(include), list(exclude), store)
    ti = time.perf_counter()
    report = h.index([name], progress=progress)[0]
    result.index_seconds[f"c{tokens}-o{overlap}-h{int(header)}"] = round(time.perf_counter() - ti, 2)
    if report.chunks == 0:
        raise HybridError(f"{vault_path}: no notes to index (empty vault, or include globs match nothing)")


def _score_config(h, cfg: RunConfig, queries: dict[str, Query], qrels: dict[str, dict[str, int]],
                  qr, metrics: Sequence[str], problems: Problems,
                  progress: Progress | None, sources: tuple[str, ...] = ()) -> ConfigResult:
    """Run every query under ``cfg`` (its fusion settings applied to the handle) and score the
    note-level run with ranx."""
    ranx = ranx_module()
    tc = time.perf_counter()
    # the ranking is scored with every passage in its place: folding copies under a better hit
    # (hybrid.retrieval.fold) hides a note the judgements may count apart (obsidian-help grades
    # a release note and its byte-identical twin, v1.13.md and v1.13.0.md, separately); what it
    # changes is measured on its own (eval/archive/notes/dups.py, eval/reports/notes/issue30-dups.md)
    h.override(rrf_k=cfg.rrf_k, weight_lexical=cfg.weight_lexical, weight_vector=cfg.weight_vector,
               duplicate_similarity=0)
    run: dict[str, dict[str, float]] = {}
    for i, (qid, q) in enumerate(queries.items(), 1):
        try:
            hits = h.search(q.text, top_k=DEPTH, mode="hybrid" if cfg.mode == "rerank" else cfg.mode,
                            rerank=cfg.mode == "rerank", sources=sources, passages=True)
        except HybridError as exc:
            problems.add("query_errors", f"query {qid!r} ({q.text!r}) failed under {cfg.name}: {exc}")
            hits = []
        run[qid] = aggregate(hits, qrels[qid]) or {NO_HIT: 0.0}
        if progress:
            progress(f"queries {cfg.name}", i, len(queries))
    scores = ranx.evaluate(qr, ranx.Run(run, name=cfg.name), list(metrics), return_mean=False,
                           make_comparable=True)
    order = list(qr.keys())  # ranx returns per-query scores in the qrels' (sorted) order
    per_query = {m: dict(zip(order, map(float, scores[m]))) for m in metrics} \
        if len(metrics) > 1 else {metrics[0]: dict(zip(order, map(float, scores)))}
    means = {m: _mean(per_query[m].values()) for m in metrics}
    ans = {str(k): {q: answer_at(run[q], qrels[q], k) for q in run} for k in (1, 10)}
    return ConfigResult(cfg, means, per_query, ans, run, time.perf_counter() - tc)


def _significance(results: Sequence[ConfigResult], qr, metrics: Sequence[str]) -> dict:
    """Paired t-test p-values of every run against every other (ranx ``compare``)."""
    ranx = ranx_module()
    runs = [ranx.Run(r.run, name=r.config.name) for r in results]
    rep = ranx.compare(qr, runs, metrics=list(metrics), stat_test="student", max_p=0.05, make_comparable=True)
    d = rep.to_dict()
    return {name: {other: {m: float(p) for m, p in ps.items()}
                   for other, ps in d[name]["comparisons"].items()}
            for name in d["model_names"]}
