"""What the approximate index and compact vector storage cost in retrieval quality (issue #5),
measured with the same machinery as `hybrid eval`, on real MiniLM embeddings.

For each labelled set (the bundled sample set; the obsidian-help set when ../shared is there)
and each vector layout — exact float32 (the default below ``ann_threshold``), exact float16,
exact sq8, IVF float32, IVF float16, IVF sq8 (IVF forced with ``ann_threshold = 1``) — it runs the
vector and hybrid modes and reports nDCG@10 and recall@10, plus how many of the exact float32
run's top-10 notes each layout keeps (note-level agreement@10, vector mode). Every chunk text
is embedded once per set and shared by all layouts.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/speed/storage_quality.py [--out eval/reports/speed/storage.md]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
LAYOUTS = {
    "exact float32": {"ann_threshold": 0, "vector_storage": "float32"},
    "exact float16": {"ann_threshold": 0, "vector_storage": "float16"},
    "exact sq8": {"ann_threshold": 0, "vector_storage": "sq8"},
    "IVF float32": {"ann_threshold": 1, "vector_storage": "float32"},
    "IVF float16": {"ann_threshold": 1, "vector_storage": "float16"},
    "IVF sq8": {"ann_threshold": 1, "vector_storage": "sq8"},
}


def sets() -> list[tuple[str, Path, Path, Path]]:
    from hybrid.eval.inputs import sample_set
    out = [("sample", *sample_set())]
    shared = ROOT.parent / "shared" / "vaults" / "obsidian-help"
    if shared.is_dir():
        out.append(("obsidian-help", shared, ROOT / "qrels" / "obsidian-help.queries.jsonl",
                    ROOT / "qrels" / "obsidian-help.qrels.json"))
    return out


def agreement(run: dict, base: dict, k: int = 10) -> float:
    def top(r):
        return set(sorted(r, key=lambda d: -r[d])[:k])
    vals = [len(top(run[q]) & top(base[q])) / max(1, len(top(base[q]))) for q in base if q in run]
    return sum(vals) / max(1, len(vals))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "eval" / "reports" / "speed" / "storage.md")
    args = ap.parse_args()
    import hybrid
    from hybrid.core.settings import replace
    from hybrid.embedders import make_embedder
    from hybrid.eval.inputs import Problems, load_qrels, load_queries, reconcile
    from hybrid.eval.run import CachingEmbedder, grid, run_eval
    from hybrid.sources.walk import discover
    base = hybrid.open().settings
    model = CachingEmbedder(make_embedder("minilm"))
    rows = []
    for name, vault, qpath, rpath in sets():
        problems = Problems()
        queries, qrels = load_queries(qpath, problems), load_qrels(rpath, problems)
        notes = {e.path for e in discover(vault, ["**/*.md"], [])}
        queries, qrels = reconcile(queries, qrels, notes, problems, str(rpath))
        configs = grid(["vector", "hybrid"], [base.chunk_tokens], [base.chunk_overlap],
                       [base.context_header], [base.rrf_k], [(base.weight_lexical, base.weight_vector)])
        base_run = None
        for layout, extra in LAYOUTS.items():
            settings = replace(base, **extra)
            res = run_eval(vault, queries, qrels, configs, settings, problems, embedder=model)
            by_mode = {r.config.mode: r for r in res.results}
            if base_run is None:
                base_run = by_mode["vector"].run
            rec = {"set": name, "layout": layout, "queries": len(queries)}
            for mode, r in by_mode.items():
                rec[f"{mode}_ndcg10"] = round(r.metrics["ndcg@10"], 4)
                rec[f"{mode}_recall10"] = round(r.metrics["recall@10"], 4)
            rec["vector_agreement10"] = round(agreement(by_mode["vector"].run, base_run), 4)
            rows.append(rec)
            print(json.dumps(rec), flush=True)
    lines = ["# Vector layouts: quality cost", "",
             "Command: `PYTHONPATH=eval/bench .venv/bin/python eval/archive/speed/storage_quality.py`. "
             "Real all-MiniLM-L6-v2 embeddings, "
             "default chunking and fusion; `IVF` forces the approximate index (`ann_threshold = 1`) on vaults "
             "far smaller than where it switches on by default, so its nprobe calibration works with few lists. "
             "Agreement@10 = share of the exact float32 vector run's top-10 notes the layout also returns.", "",
             "| set | layout | vector nDCG@10 | hybrid nDCG@10 | vector R@10 | hybrid R@10 | vector agreement@10 |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['set']} ({r['queries']} q) | {r['layout']} | "
                     f"{r['vector_ndcg10']:.3f} | {r['hybrid_ndcg10']:.3f} | "
                     f"{r['vector_recall10']:.3f} | {r['hybrid_recall10']:.3f} | {r['vector_agreement10']:.3f} |")
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
