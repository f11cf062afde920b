"""Tables of eval/reports/team-mode.md from the raw results of pg_quality.py and pg_scale.py.

    .venv/bin/python eval/bench/pg_report.py [--quality eval/out/bench/pg_quality/results.json]
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


def scale_tables(res: list[dict]) -> str:
    out = ["| chunks | store | vector search | full index s | peak RSS MB (indexer) | bytes/chunk "
           "| no-op re-index s | one change s |", "|---|---|---|---|---|---|---|---|"]
    for r in res:
        out.append(f"| {r['chunks']:,} | {r['store']} | {r['vector_index']} | {r['wall_s']} | {r['peak_rss_mb']} | "
                   f"{r['bytes_per_chunk']:,} | {r['reindex']['noop_s']} | {r['reindex']['one_change_s']} |")
    out += ["", "Warm query latency in ms, p50 / p95 (top 8, each arm 100 candidates, the same 200 queries "
                "for both stores; `hybrid+filters` adds `folder: work`):", "",
            "| chunks | store | lexical | vector | hybrid | hybrid+filters |", "|---|---|---|---|---|---|"]
    for r in res:
        w = r["warm"]
        cells = " | ".join(f"{w[m]['p50']} / {w[m]['p95']}" for m in ("lexical", "vector", "hybrid", "hybrid+filters"))
        out.append(f"| {r['chunks']:,} | {r['store']} | {cells} |")
    recalls = [(r["chunks"], r["recall"]) for r in res if r.get("recall")]
    if recalls:
        out += ["", "HNSW recall@10 against an exact scan of the same vectors: " + "; ".join(
            f"{n:,} chunks: {x['document vectors']} with stored document vectors as queries, "
            f"{x['MiniLM queries']} with the bench's MiniLM queries against its hashed documents "
            f"({x['queries']} queries each)" for n, x in recalls) + "."]
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
