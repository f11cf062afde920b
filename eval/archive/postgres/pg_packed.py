"""The PostgreSQL keyword arm, packed postings against the SQL scorer (issue #31,
hybrid.store.pg.packed), query by query on one database: each query runs both ways in turn
(so the machine's load hits both alike), the answers are compared (same units in the same
order, scores within 1e-9), and p50/p95 are reported per query set, filter and unit, with the
reader's cache of packed rows on and off.

The generated vault of ``--notes`` notes (scale.py) is indexed into a database of an embedded
server in ``--work`` once (kept with the server's data between runs; ``--fresh`` indexes again).

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/postgres/pg_packed.py --notes 15000 [--queries 100] \\
        [--work /tmp/hybrid-packed]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import common
import pg_scale
import scale

from hybrid.store.base import NoteFilter


def compare(url: str, vault: Path, queries: int, depth: int, cache: bool) -> list[dict]:
    from hybrid.retrieval.request import SearchRequest
    from hybrid.store.lexicon import LexicalQuery
    from hybrid.store.pg import packed
    from hybrid.store.pg.store import PgStore
    packed.CACHE_BYTES = (96 << 20) if cache else 0
    store = PgStore("scale", url)
    sets = {"random": scale.queries_from(vault, queries), "common words": scale.common_queries(vault, queries)[0]}
    filters = {"none": {}, **scale.FILTERS}
    rows = []
    try:
        for fname, f in filters.items():
            w = SearchRequest(query="x", **scale.concrete(f, vault)).filters
            opts = dict(where=NoteFilter(w.folders, w.tags, w.since))
            for sname, qs in sets.items():
                for unit in ("chunk", "section"):
                    times: dict[str, list[float]] = {"sql": [], "packed": []}
                    differ, how = 0, {"packed": 0, "sql": 0}
                    for q in qs:
                        lq = LexicalQuery(q.split())
                        got = {}
                        for way in ("sql", "packed"):
                            store.lexical.use_packed = way == "packed"
                            t = time.perf_counter()
                            got[way] = store.lexical.search_units(lq, depth, unit=unit, **opts)
                            times[way].append(time.perf_counter() - t)
                        how[store.lexical.answered or "sql"] += 1
                        a, b = got["sql"], got["packed"]
                        differ += [i for i, _ in a] != [i for i, _ in b] or any(
                            abs(x - y) > 1e-9 * max(1.0, abs(x)) for (_, x), (_, y) in zip(a, b))
                    rows.append({"filter": fname, "queries": sname, "unit": unit, "cache": cache,
                                 "sql": common.summary_ms(times["sql"]), "packed": common.summary_ms(times["packed"]),
                                 "differ": differ, "answered": how})
                    print(f"[pg_packed] {fname:14} {sname:12} {unit:7} cache {'on ' if cache else 'off'} "
                          f"sql {rows[-1]['sql']['p50']:8} / {rows[-1]['sql']['p95']:8}  packed "
                          f"{rows[-1]['packed']['p50']:7} / {rows[-1]['packed']['p95']:7}  differ {differ} {how}",
                          flush=True)
    finally:
        store.close()
    return rows


def table(rows: list[dict]) -> str:
    out = ["| filter | queries | unit | reader cache | SQL scorer p50 / p95 ms | packed p50 / p95 ms | differ "
           "| answered packed |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['filter']} | {r['queries']} | {r['unit']} | {'on' if r['cache'] else 'off'} | "
                   f"{r['sql']['p50']} / {r['sql']['p95']} | {r['packed']['p50']} / {r['packed']['p95']} | "
                   f"{r['differ']} | {r['answered']['packed']}/{sum(r['answered'].values())} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--notes", type=int, default=15000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--depth", type=int, default=50, help="units asked for (the hybrid search's candidates)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/hybrid-packed"))
    ap.add_argument("--fresh", action="store_true", help="index the vault again")
    ap.add_argument("--out", type=Path, default=common.SCRATCH / "pg_packed")
    args = ap.parse_args()
    import psycopg
    common.install()
    args.work.mkdir(parents=True, exist_ok=True)
    vault = scale.vault_for(args.notes, args.work)
    db = f"bench{args.notes}"
    with common.embedded_pg(args.work / "pgdata", keep=True) as server:
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname=%s", (db,)).fetchone()
            if args.fresh or not exists:
                conn.execute(f"DROP DATABASE IF EXISTS {db}")
                conn.execute(f"CREATE DATABASE {db}")
                exists = None
        url = server.get_uri(db)
        if not exists:
            print(f"[pg_packed] indexing {args.notes} notes", flush=True)
            print(pg_scale.full_index(args.work / f"home-{args.notes}-pg", vault, url), flush=True)
        rows = []
        for cache in (True, False):
            rows += compare(url, vault, args.queries, args.depth, cache)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(rows, indent=2))
    print(table(rows))


if __name__ == "__main__":
    main()
