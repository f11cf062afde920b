"""Tables of eval/reports/postgres/team-mode.md from the raw results of pg_quality.py and pg_scale.py.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/postgres/pg_report.py \\
        [--quality eval/out/bench/pg_quality/results.json]
                                             [--scale eval/out/bench/pg_scale/results.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import common


def quality_table(res: dict) -> str:
    rows = ["| set | store | lexical nDCG@10 | lexical answer@1 | vector nDCG@10 | hybrid nDCG@10 "
            "| hybrid answer@1 | hybrid recall@10 |", "|---|---|---|---|---|---|---|---|"]
    for name, stores in res.items():
        for store, r in stores.items():
            lex, vec, hyb = r["lexical"], r["vector"], r["hybrid"]
            rows.append(f"| {name} ({r['queries']} queries) | {store} | {lex['ndcg@10']:.3f} | "
                        f"{lex['answer@1']:.3f} | {vec['ndcg@10']:.3f} | {hyb['ndcg@10']:.3f} | "
                        f"{hyb['answer@1']:.3f} | {hyb['recall@10']:.3f} |")
    return "\n".join(rows)


WARM_GROUPS = {  # the warm-query tables: (title, modes) each
    "unfiltered": ("lexical", "lexical (common words)", "vector", "hybrid", "hybrid (common words)"),
    "filtered": ("vector+folder-broad", "vector+folder-narrow", "vector+tag", "vector+since",
                 "hybrid+filters", "hybrid+folder-broad", "hybrid+folder-narrow", "hybrid+tag", "hybrid+since"),
}


def scale_tables(res: list[dict]) -> str:
    out = ["| chunks | store | vector search | full index s | peak RSS MB (indexer) | bytes/chunk "
           "| no-op re-index s | one change s |", "|---|---|---|---|---|---|---|---|"]
    for r in res:
        ri = r.get("reindex") or {}
        out.append(f"| {r['chunks']:,} | {r['store']} | {r.get('vector_index', '')} | {r['wall_s']} | "
                   f"{r.get('peak_rss_mb')} | {r['bytes_per_chunk']:,} | {ri.get('noop_s')} | "
                   f"{ri.get('one_change_s')} |")
    for title, modes in WARM_GROUPS.items():
        shown = [m for m in modes if any(m in r["warm"] for r in res)]
        out += ["", f"Warm query latency, {title}, ms p50 / p95 (top 8, the same queries for both stores):", "",
                "| chunks | store | " + " | ".join(shown) + " |", "|---|---|" + "---|" * len(shown)]
        for r in res:
            w = r["warm"]
            cells = " | ".join(f"{w[m]['p50']} / {w[m]['p95']}" if m in w else "" for m in shown)
            out.append(f"| {r['chunks']:,} | {r['store']} | {cells} |")
    recalls = [(r["chunks"], r["recall"]) for r in res if r.get("recall")]
    for n, x in recalls:
        flat = {k: v for k, v in x.items() if not isinstance(v, dict)}
        out += ["", f"HNSW recall@10 against an exact scan at {n:,} chunks: " + ", ".join(
            f"{k} {v}" for k, v in flat.items() if k != "queries") + f" ({flat.get('queries')} queries)."]
        for k, v in x.items():
            if isinstance(v, dict):
                out.append(f"{k}: " + ", ".join(f"{m} {d['recall']} (share {d['share']})" for m, d in v.items()) + ".")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quality", type=Path, default=common.SCRATCH / "pg_quality" / "results.json")
    ap.add_argument("--scale", type=Path, default=common.SCRATCH / "pg_scale" / "results.json")
    args = ap.parse_args()
    if args.quality.exists():
        print(quality_table(json.loads(args.quality.read_text())), end="\n\n")
    if args.scale.exists():
        print(scale_tables(json.loads(args.scale.read_text())))


if __name__ == "__main__":
    main()
