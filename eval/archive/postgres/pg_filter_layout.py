"""Where a filtered vector search on PostgreSQL should read its filter columns (issue #31, part B):
joined from ``hybrid_chunks`` or denormalised into ``hybrid_vectors``, under pgvector's HNSW
iterative scan (relaxed and strict order) and an exact scan.

Synthetic and self-contained: ``--rows`` random unit vectors (384 dimensions, as the bench
embedder's) with a path in one of 20 folders, a tag set and a date; a wide ``chunks`` table
(padded text, as hybrid_chunks holds) and a narrow ``vectors`` table, once with the filter
columns and once without. One HNSW index per layout. Reports p50/p95 ms per layout, filter and
scan, and recall@10 of each HNSW scan against the exact filtered top 10.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/postgres/pg_filter_layout.py [--rows 100000] [--queries 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import common

DIM = 384
FOLDERS = [f"f{i:02d}" for i in range(20)]
FILTERS = {  # name: (condition on alias x, share of rows it keeps)
    "none": "TRUE",
    "folder-broad (50%)": "(x.path LIKE 'f0%%')",          # f00..f09
    "folder-narrow (5%)": "(x.path LIKE 'f13/%%')",
    "tag (1%)": "x.tag_set @> ARRAY['t7']::text[]",
    "since (30%)": "x.modified >= 70",
}


def main() -> None:
    import numpy as np
    import psycopg
    from pgvector.psycopg import register_vector
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--work", type=Path, default=Path("/tmp/hybrid-filter-layout"))
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    with common.embedded_pg(args.work / "pgdata") as server:
        conn = psycopg.connect(server.get_uri(), autocommit=True)
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        rng = np.random.default_rng(7)
        n = args.rows
        centres = rng.standard_normal((200, DIM)).astype(np.float32)
        vecs = centres[rng.integers(0, 200, n)] + 0.6 * rng.standard_normal((n, DIM)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        t = time.perf_counter()
        conn.execute("DROP TABLE IF EXISTS vn, vd, ch")
        conn.execute("CREATE TABLE ch (id bigint PRIMARY KEY, path text, tag_set text[], modified float8, "
                     "text text)")
        conn.execute("CREATE TABLE vn (id bigint PRIMARY KEY, vault int, embedding vector)")
        conn.execute("CREATE TABLE vd (id bigint PRIMARY KEY, vault int, path text, tag_set text[], "
                     "modified float8, embedding vector)")
        for t_ in ("vn", "vd"):
            conn.execute(f"ALTER TABLE {t_} ALTER COLUMN embedding SET STORAGE MAIN")
        pad = "lorem ipsum " * 60
        with conn.cursor() as cur:
            with cur.copy("COPY ch FROM STDIN") as cp:
                for i in range(n):
                    cp.write_row((i, f"{FOLDERS[i % 20]}/n{i}.md", [f"t{i % 100}", f"u{i % 7}"], float(i % 100), pad))
            with cur.copy("COPY vn FROM STDIN") as cp:
                for i in range(n):
                    cp.write_row((i, 1, vecs[i]))
            with cur.copy("COPY vd FROM STDIN") as cp:
                for i in range(n):
                    cp.write_row((i, 1, f"{FOLDERS[i % 20]}/n{i}.md", [f"t{i % 100}", f"u{i % 7}"],
                                  float(i % 100), vecs[i]))
        conn.execute("CREATE INDEX ON ch (path text_pattern_ops)")
        conn.execute("CREATE INDEX ON ch USING gin (tag_set)")
        conn.execute("CREATE INDEX ON ch (modified)")
        conn.execute("SET maintenance_work_mem = '512MB'")
        for t_ in ("vn", "vd"):
            conn.execute(f"CREATE INDEX {t_}_hnsw ON {t_} USING hnsw ((embedding::vector({DIM})) "
                         f"vector_cosine_ops) WHERE vault = 1")
        conn.execute("ANALYZE")
        print(f"loaded and indexed {n} rows in {time.perf_counter() - t:.0f} s", flush=True)
        queries = [vecs[i] + 0.3 * rng.standard_normal(DIM).astype(np.float32)
                   for i in rng.integers(0, n, args.queries)]
        expr = f"(v.embedding::vector({DIM}))"
        sqls = {
            "join": (f"SELECT v.id FROM vn v JOIN ch x ON x.id = v.id WHERE v.vault = 1 AND {{cond}} "
                     f"ORDER BY {expr} <=> %s::vector({DIM}) LIMIT 10"),
            "denormalised": (f"SELECT v.id FROM vd v, LATERAL (SELECT v.path, v.tag_set, v.modified) x "
                             f"WHERE v.vault = 1 AND {{cond}} ORDER BY {expr} <=> %s::vector({DIM}) LIMIT 10"),
        }
        results: dict = {}
        for fname, cond in FILTERS.items():
            truth = []
            with conn.transaction():
                conn.execute("SET LOCAL enable_indexscan = off")
                for q in queries:
                    truth.append({r[0] for r in conn.execute(sqls["denormalised"].format(cond=cond), (q,))})
            for layout, sql in sqls.items():
                for scan in ("exact", "relaxed_order", "strict_order"):
                    times, hits = [], 0
                    for q in queries:
                        with conn.transaction():
                            conn.execute("SET LOCAL hnsw.ef_search = 100")
                            if scan == "exact":
                                conn.execute("SET LOCAL enable_indexscan = off")
                            else:
                                conn.execute(f"SET LOCAL hnsw.iterative_scan = {scan}")
                            t = time.perf_counter()
                            got = {r[0] for r in conn.execute(sql.format(cond=cond), (q,))}
                            times.append((time.perf_counter() - t) * 1000)
                        hits += len(got & truth[len(times) - 1])
                    times.sort()
                    row = {"p50": round(statistics.median(times), 1),
                           "p95": round(times[int(0.95 * (len(times) - 1))], 1),
                           "recall@10": round(hits / max(1, sum(len(x) for x in truth)), 3)}
                    results.setdefault(fname, {})[f"{layout} {scan}"] = row
                    print(fname, layout, scan, row, flush=True)
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
