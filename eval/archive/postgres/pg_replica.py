"""Team mode on a streaming replica: how long a change takes to reach the standby's readers,
and query latency on the standby against the primary (issue #31, part E).

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/postgres/pg_replica.py [--repeats 30] [--embedder minilm]

Builds a primary and a hot standby with ``pg_basebackup -R`` (tests/pg_replica.py, loaded from
the tests folder), indexes a copy of the bundled sample vault on the primary, then measures:

- **replication lag**: a row committed on the primary until a standby connection sees it
  (polled without sleeping), ``--repeats`` times;
- **index run to reader**: one note edited and ``index()`` run on the primary until a
  long-lived reader on the standby finds the edit with a lexical search;
- **query latency**: the sample set's queries in each mode on a reader of the primary and a
  reader of the standby (the same embedder, warm; which side goes first alternates).

Raw results go to eval/out/bench/pg_replica.json; the tables are printed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, SCRATCH, summary_ms

import hybrid


def load_replica_helper():
    """tests/pg_replica.py, by its path (the bench scripts never edit sys.path)."""
    spec = importlib.util.spec_from_file_location("pg_replica", ROOT / "tests" / "pg_replica.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["pg_replica"] = module  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


def sample_queries() -> list[str]:
    lines = (Path(hybrid.__file__).parent / "data" / "sample.queries.jsonl").read_text().splitlines()
    return [json.loads(x)["text"] for x in lines if x.strip()]


def raw_lag(pair, db: str, repeats: int) -> list[float]:
    """Seconds from a committed row on the primary to its first sight on the standby."""
    import psycopg
    out = []
    with psycopg.connect(pair.primary_uri(db), autocommit=True) as p, \
            psycopg.connect(pair.standby_uri(db), autocommit=True) as s:
        p.execute("CREATE TABLE IF NOT EXISTS lag_probe (i int PRIMARY KEY)")
        pair.wait_for_replay()
        for i in range(repeats):
            p.execute("INSERT INTO lag_probe VALUES (%s)", (i,))
            t = time.perf_counter()
            while s.execute("SELECT 1 FROM lag_probe WHERE i = %s", (i,)).fetchone() is None:
                pass
            out.append(time.perf_counter() - t)
    return out


def index_lag(owner, folder: Path, standby_reader, repeats: int) -> tuple[list[float], list[float]]:
    """(index() on the primary, then until the standby's reader finds the edit; the index runs'
    own durations) per repeat."""
    seen, runs = [], []
    for i in range(repeats):
        word = f"replicaprobe{i}zq"
        (folder / "probe.md").write_text(f"# Probe\n\nThe word {word} marks run {i}.\n")
        t = time.perf_counter()
        owner.index()
        done = time.perf_counter()
        runs.append(done - t)
        while not standby_reader.search(word, mode="lexical"):
            pass
        seen.append(time.perf_counter() - done)
    return seen, runs


def latency(readers: dict, queries: list[str], modes: tuple[str, ...]) -> dict:
    out: dict = {}
    for mode in modes:
        times: dict[str, list[float]] = {k: [] for k in readers}
        for h in readers.values():  # warm: the model, the connection, the server's caches
            for q in queries:
                h.search(q, mode=mode)
        for n, q in enumerate(queries):
            order = list(readers) if n % 2 == 0 else list(reversed(readers))
            for k in order:
                t = time.perf_counter()
                readers[k].search(q, mode=mode)
                times[k].append(time.perf_counter() - t)
        out[mode] = {k: summary_ms(v) for k, v in times.items()}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--embedder", default="minilm", help="the embedder of the vault and the queries")
    args = ap.parse_args()
    pg_replica = load_replica_helper()
    work = Path(tempfile.mkdtemp(prefix="hybrid-replica-bench-"))
    try:
        with pg_replica.replica_pair(work / "pair") as pair:
            pair.sql(pair.primary_uri(), "CREATE DATABASE kb")
            folder = work / "vault"
            shutil.copytree(Path(hybrid.__file__).parent / "sample_vault", folder)
            from hybrid.embedders import make_embedder
            emb = make_embedder(args.embedder)
            owner = hybrid.open(work / "owner", embedders=[emb], store=pair.primary_uri("kb"))
            owner.add_vault(folder, "sample")
            t = time.perf_counter()
            owner.index()
            full = time.perf_counter() - t
            replay_after_full = pair.wait_for_replay()
            readers = {}
            for side, uri in (("primary", pair.primary_uri("kb")), ("standby", pair.standby_uri("kb"))):
                readers[side] = hybrid.open(work / side, embedders=[emb])
                readers[side].add_vault(work / side / "no-folder", "sample", store=uri)
            chunks = readers["standby"].status()[0].chunks
            lag = raw_lag(pair, "kb", args.repeats)
            seen, runs = index_lag(owner, folder, readers["standby"], args.repeats)
            lat = latency(readers, sample_queries(), ("lexical", "vector", "hybrid"))
            for h in (owner, *readers.values()):
                h.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {"embedder": args.embedder, "chunks": chunks, "full_index_s": round(full, 2),
              "replay_after_full_index_s": round(replay_after_full, 3),
              "raw_lag_ms": summary_ms(lag), "raw_lag_median_ms": round(statistics.median(lag) * 1000, 2),
              "index_run_s": summary_ms(runs), "index_to_standby_reader_ms": summary_ms(seen),
              "latency_ms": lat}
    SCRATCH.mkdir(parents=True, exist_ok=True)
    (SCRATCH / "pg_replica.json").write_text(json.dumps(result, indent=2))
    print(f"sample vault: {chunks} chunks, {args.embedder}; full index on the primary {full:.2f} s, "
          f"replayed by the standby {replay_after_full * 1000:.0f} ms after it returned\n")
    print("| measure | p50 ms | p95 ms | n |\n|---|---|---|---|")
    for name, s in (("row committed on the primary -> seen on the standby", result["raw_lag_ms"]),
                    ("one-note index run on the primary (for scale)", result["index_run_s"]),
                    ("index run returned -> standby reader's search finds the edit",
                     result["index_to_standby_reader_ms"])):
        print(f"| {name} | {s['p50']} | {s['p95']} | {s['n']} |")
    print("\n| mode | primary p50 / p95 ms | standby p50 / p95 ms |\n|---|---|---|")
    for mode, sides in lat.items():
        print(f"| {mode} | {sides['primary']['p50']} / {sides['primary']['p95']} | "
              f"{sides['standby']['p50']} / {sides['standby']['p95']} |")


if __name__ == "__main__":
    main()
