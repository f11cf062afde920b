"""HNSW recall@10 against the exact answer, by the graph's build parameters (pgvector's ``m``
and ``ef_construction``) and ``ef_search``, on the scale bench's document vectors (issue #31:
at a million chunks the default graph, m 16 / ef_construction 64, reached recall@10 0.83 at
pgvector's largest ef_search).

The vectors are the ``bench`` embedder's (feature hashing) of chunk-like texts from the scale
bench's generator (``genvault.Generator``: the same Zipf background words and per-topic words);
queries are stored vectors (half) and vectors near them (half, ``calibration_queries``), as
hybrid's own calibration asks. The exact answer is numpy's (every vector is unit length, so
cosine order is dot-product order). Each graph is built once, in one embedded server, with
the memory ``build_memory_mb`` asks for, and timed.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/postgres/hnsw_params.py --vectors 300000 \\
        --graphs 16:64,24:96,32:128
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import common
import genvault
import numpy as np


def texts(n: int, seed: int = 7):
    """``n`` chunk-like texts: one to three blocks of one topic, as a chunk of a generated note."""
    gen = genvault.Generator(max(50, n // 7), seed)
    for i in range(n):
        topic = gen.topics[i % len(gen.topics)]
        yield " ".join(gen.block(topic) for _ in range(gen.rng.randint(1, 3)))


def vectors(n: int, dim: int) -> np.ndarray:
    from hybrid.embedders import HashEmbedder
    emb = HashEmbedder(dim)
    out = np.empty((n, dim), dtype=np.float32)
    batch: list[str] = []
    at = 0
    for t in texts(n):
        batch.append(t)
        if len(batch) == 2048:
            out[at:at + len(batch)] = np.asarray(emb.embed_documents(batch), dtype=np.float32)
            at += len(batch)
            batch = []
    if batch:
        out[at:at + len(batch)] = np.asarray(emb.embed_documents(batch), dtype=np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def truth(data: np.ndarray, queries: np.ndarray, k: int) -> list[set[int]]:
    sims = queries @ data.T
    top = np.argpartition(-sims, k, axis=1)[:, :k]
    return [set(int(i) for i in row) for row in top]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vectors", type=int, default=300_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--graphs", default="16:64,24:96,32:128", help="m:ef_construction pairs")
    ap.add_argument("--ef", default="40,100,200,400,1000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--work", type=Path, default=Path("/tmp/hnsw-params"))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    import psycopg
    from pgvector.psycopg import register_vector

    from hybrid.store.base import calibration_queries
    from hybrid.store.pg.vector import build_memory_mb
    t = time.perf_counter()
    data = vectors(args.vectors, args.dim)
    print(f"{args.vectors} vectors in {time.perf_counter() - t:.0f} s", flush=True)
    rng = np.random.default_rng(1234)
    half = args.queries // 2
    queries = np.concatenate([data[rng.choice(len(data), half, replace=False)],
                              calibration_queries(data, args.queries - half, rng)])
    k = 10
    exact = truth(data, queries, k)
    result: dict = {"vectors": args.vectors, "dim": args.dim, "queries": len(queries), "graphs": []}
    args.work.mkdir(parents=True, exist_ok=True)
    with common.embedded_pg(args.work / "pgdata") as server:
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            register_vector(conn)
            common.vector_table(conn, args.dim, data)
            for pair in args.graphs.split(","):
                m, efc = (int(x) for x in pair.split(":"))
                conn.execute("DROP INDEX IF EXISTS v_hnsw")
                mem = build_memory_mb(args.vectors, args.dim, m)  # what hybrid asks for this graph
                with conn.transaction():
                    conn.execute(f"SET LOCAL maintenance_work_mem = '{mem}MB'")
                    t = time.perf_counter()
                    conn.execute(f"CREATE INDEX v_hnsw ON v USING hnsw (e vector_cosine_ops) "
                                 f"WITH (m = {m}, ef_construction = {efc})")
                    build_s = time.perf_counter() - t
                size = conn.execute("SELECT pg_relation_size('v_hnsw')").fetchone()[0]
                graph = {"m": m, "ef_construction": efc, "build_s": round(build_s, 1),
                         "index_mb": round(size / 2**20, 1), "by_ef_search": {}}
                for ef in (int(x) for x in args.ef.split(",")):
                    found, times = [], []
                    with conn.transaction():
                        conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                        conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
                        for q, want in zip(queries, exact):
                            t = time.perf_counter()
                            ids = [r[0] for r in conn.execute(
                                "SELECT id FROM v ORDER BY e <=> %s LIMIT 10", (q,)).fetchall()]
                            times.append(time.perf_counter() - t)
                            found.append(len(want & set(ids)) / k)
                    stored, near = np.mean(found[:half]), np.mean(found[half:])
                    graph["by_ef_search"][ef] = {"recall_stored": round(float(stored), 3),
                                                 "recall_near": round(float(near), 3),
                                                 "ms_p50": round(float(np.median(times)) * 1000, 2)}
                    print(json.dumps({"m": m, "efc": efc, "ef_search": ef, **graph["by_ef_search"][ef]}),
                          flush=True)
                print(json.dumps({k_: v for k_, v in graph.items() if k_ != "by_ef_search"}), flush=True)
                result["graphs"].append(graph)
    out = args.out or common.SCRATCH / f"hnsw-params-{args.vectors}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(out)


if __name__ == "__main__":
    main()
