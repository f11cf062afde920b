"""What the shared embedding cache of `hybrid eval` saves when several chunkings are indexed:
the same grid run with the cache (chunk texts shared between chunkings embedded once) and without
(every chunking embeds all its texts), with the embed calls, wall time and whether the figures
agree.

    PYTHONPATH=eval/bench python eval/archive/speed/embed_reuse.py [--vault DIR --queries Q --qrels R] \\
        --chunk-tokens 128,256
"""
import argparse
import json
import time
from pathlib import Path

from hybrid.core.settings import Settings
from hybrid.embedders import make_embedder
from hybrid.eval.inputs import Problems, load_qrels, load_queries, reconcile, sample_set
from hybrid.eval.run import grid, run_eval
from hybrid.sources.walk import discover


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vault")
    ap.add_argument("--queries")
    ap.add_argument("--qrels")
    ap.add_argument("--chunk-tokens", default="128,256")
    ap.add_argument("--embedder", default="minilm")
    args = ap.parse_args()
    vault, q, r = sample_set()
    vault, q, r = Path(args.vault or vault), Path(args.queries or q), Path(args.qrels or r)
    settings = Settings(embedder=args.embedder)
    p = Problems()
    notes = {e.path for e in discover(vault, settings.include, settings.exclude)}
    queries, qrels = reconcile(load_queries(q, p), load_qrels(r, p), notes, p, str(r))
    configs = grid(["lexical", "vector", "hybrid"], [int(t) for t in args.chunk_tokens.split(",")],
                   [settings.chunk_overlap], [settings.context_header], [settings.rrf_k],
                   [(settings.weight_lexical, settings.weight_vector)])
    embedder = make_embedder(args.embedder)
    embedder.embed_documents(["warm up"])  # the model loads before either timing
    out = {}
    for reuse in (True, False):
        t = time.perf_counter()
        res = run_eval(vault, queries, qrels, configs, settings, Problems(), include=settings.include,
                       exclude=settings.exclude, metrics=["ndcg@10", "recall@10"], embedder=embedder,
                       reuse_embeddings=reuse)
        out["reuse" if reuse else "fresh"] = {
            "seconds": round(time.perf_counter() - t, 1), "index_seconds": res.index_seconds,
            "texts_embedded": res.chunks_embedded, "texts_reused": res.chunks_reused,
            "figures": {c.config.name: {m: round(v, 4) for m, v in c.metrics.items()} for c in res.results}}
    out["figures_identical"] = out["reuse"]["figures"] == out["fresh"]["figures"]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
