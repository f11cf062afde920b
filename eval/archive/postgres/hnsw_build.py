"""The HNSW build with PostgreSQL's default maintenance_work_mem (64 MB) against the memory
hybrid asks for (``hybrid.store.pg.store.build_memory_mb``): the same random unit vectors, the
same index, built once each way (issue #31).

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/postgres/hnsw_build.py --vectors 100000 [--dim 384] \\
        [--work /tmp/hnsw-build]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import common
import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vectors", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--work", type=Path, default=Path("/tmp/hnsw-build"))
    args = ap.parse_args()
    import psycopg
    from pgvector.psycopg import register_vector

    from hybrid.store.pg.vector import build_memory_mb
    args.work.mkdir(parents=True, exist_ok=True)
    with common.embedded_pg(args.work / "pgdata") as server:
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            register_vector(conn)
            rng = np.random.default_rng(7)

            def unit(x):
                return x / np.linalg.norm(x)
            common.vector_table(conn, args.dim, (unit(rng.standard_normal(args.dim).astype(np.float32))
                                                 for _ in range(args.vectors)))
            out = {"vectors": args.vectors, "dim": args.dim}
            for name, mem in (("default", None), ("sized", build_memory_mb(args.vectors, args.dim))):
                conn.execute("DROP INDEX IF EXISTS v_hnsw")
                with conn.transaction():
                    if mem:
                        conn.execute(f"SET LOCAL maintenance_work_mem = '{mem}MB'")
                    shown = conn.execute("SHOW maintenance_work_mem").fetchone()[0]
                    t = time.perf_counter()
                    conn.execute("CREATE INDEX v_hnsw ON v USING hnsw (e vector_cosine_ops)")
                    out[name] = {"maintenance_work_mem": shown, "build_s": round(time.perf_counter() - t, 1)}
                print(json.dumps(out[name]), flush=True)
            print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
