"""Deduplication before and after (issue #30, part 4): index time and size, embeddings, and
distinct answers in the top 10, on obsidian-help and on its copy where 30 % of the sections are
copies (eval/archive/notes/dup_vault.py); plus the data behind the folding threshold.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/notes/dups.py --before /tmp/base --vault /tmp/help-dups \\
        --original ../shared/vaults/obsidian-help [--embedder minilm] [--out eval/reports/notes/issue30-dups.json]

``--before``: a checkout of the code to compare with (e.g. ``git archive BASE | tar -x -C
/tmp/base``); each side runs in its own interpreter with that checkout first on the path
(``--worker``), indexing each vault into a scratch home. The scoring is this file's, the same
for both sides: a hit of the top 10 is *distinct* when its text (whitespace normalised) differs
from every hit above it, and *near-distinct* when it also resembles none of them at 0.7 or more
(Jaccard over 3-word shingles, :mod:`hybrid.retrieval.fold`, imported from this checkout).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parents[3]
SETS = ("obsidian-help", "obsidian-help-para")
PAIRS_DEPTH = 30  # the threshold study: pairs among the top passages a search folds over


def queries() -> list[str]:
    out = []
    for name in SETS:
        with open(ROOT / "qrels" / f"{name}.queries.jsonl", encoding="utf-8") as fh:
            out += [json.loads(line)["text"] for line in fh if line.strip()]
    return out


def worker(vault: Path, embedder: str, pairs: bool) -> dict:
    """Index ``vault`` into a scratch home with the code on ``sys.path``; run the queries."""
    import hybrid
    home = Path(tempfile.mkdtemp(prefix="dups-home-", dir="/tmp"))
    h = hybrid.open(home, embedder=embedder)
    h.add_vault(vault, "v")
    t = time.perf_counter()
    report = h.index()[0]
    index_s = time.perf_counter() - t
    idx = h.config.vault("v").index_dir
    db = sqlite3.connect(str(idx / "catalog.sqlite"))
    out = {"index_seconds": round(index_s, 2), "chunks": report.chunks, "embedded": report.chunks_embedded,
           "index_bytes": sum(p.stat().st_size for p in idx.rglob("*") if p.is_file()),
           "catalog_bytes": (idx / "catalog.sqlite").stat().st_size,
           "embeddings": db.execute("SELECT count(*) FROM embeddings").fetchone()[0],
           "passages": [], "notes": [], "latency_ms": []}
    qs = queries()
    for q in qs[:5]:  # warm-up: the model, the arms' caches
        h.search(q, top_k=10)
    for q in qs:
        t = time.perf_counter()
        res = h.search(q, top_k=10)
        out["latency_ms"].append(round(1000 * (time.perf_counter() - t), 2))
        out["notes"].append([(n.best.path, n.best.text, getattr(n.best, "also_in", [])) for n in res.notes])
        psg = h.search(q, top_k=10, passages=True)
        out["passages"].append([(x.path, x.text, getattr(x, "also_in", [])) for x in psg])
    if pairs:  # the passages a search compares, folding off
        h.override(duplicate_similarity=0)
        out["pairs"] = [[x.text for x in h.search(q, top_k=PAIRS_DEPTH, passages=True)] for q in qs]
    h.close()
    return out


def rescore(home: Path, embedder: str, threshold: float, pairs: bool) -> dict:
    """On an index already built (a worker's home): distinct hits in the top 10 with folding as
    this checkout does it, and (``pairs``) the passages the threshold study compares."""
    import hybrid
    h = hybrid.open(home, embedder=embedder)
    out: dict = {"notes": [], "passages": []}
    for q in queries():
        res = h.search(q, top_k=10)
        out["notes"].append([(n.best.path, n.best.text, n.best.also_in) for n in res.notes])
        out["passages"].append([(x.path, x.text, x.also_in) for x in h.search(q, top_k=10, passages=True)])
    if pairs:
        h.override(duplicate_similarity=0)
        out["pairs"] = [[x.text for x in h.search(q, top_k=PAIRS_DEPTH, passages=True)] for q in queries()]
    h.close()
    row: dict = {}
    for mode in ("notes", "passages"):
        e, n = distinct(out[mode], threshold)
        row[f"{mode}_distinct"], row[f"{mode}_near_distinct"] = round(e, 2), round(n, 2)
        row[f"{mode}_with_also_in"] = sum(1 for hits in out[mode] for x in hits if x[2])
        row[f"{mode}_folded"] = sum(len(x[2]) for hits in out[mode] for x in hits)
    if pairs:
        row["pairs"] = out["pairs"]
    return row


def latency_ab(home: Path, embedder: str, rounds: int = 3) -> dict:
    """Search latency with folding on (the default) and off, interleaved query by query on one
    index (so a busy machine weighs on both alike), which side goes first alternating (the
    second search of a question finds warm caches): medians in ms and the median difference."""
    import hybrid
    h = hybrid.open(home, embedder=embedder)
    default = h.settings.duplicate_similarity
    qs = queries()
    for q in qs[:5]:
        h.search(q, top_k=10)
    on: list[float] = []
    off: list[float] = []
    for r in range(rounds):
        for n, q in enumerate(qs):
            sides = ((default, on), (0.0, off))
            for value, sink in (sides if (r + n) % 2 == 0 else sides[::-1]):
                h.override(duplicate_similarity=value)
                t = time.perf_counter()
                h.search(q, top_k=10)
                sink.append(1000 * (time.perf_counter() - t))
    h.close()
    return {"searches": len(on), "on_p50_ms": round(statistics.median(on), 2),
            "off_p50_ms": round(statistics.median(off), 2),
            "diff_p50_ms": round(statistics.median(a - b for a, b in zip(on, off)), 3)}


def run_side(code: Path, vault: Path, embedder: str, pairs: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=str(code))
    proc = subprocess.run([sys.executable, str(HERE), "--worker", str(vault), "--embedder", embedder]
                          + (["--pairs"] if pairs else []), env=env, capture_output=True, text=True,
                          cwd=str(code))
    if proc.returncode:
        raise SystemExit(f"worker failed ({code}, {vault}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def distinct(lists: list[list], threshold: float) -> tuple[float, float]:
    """Mean over queries of (distinct, near-distinct) hits among each query's top 10."""
    from hybrid.retrieval.fold import resemblance, shingles
    exact, near = [], []
    for hits in lists:
        seen: list[str] = []
        sh: list[frozenset] = []
        e = n = 0
        for _, text, _ in hits:
            norm = " ".join(text.split())
            mine = shingles(text)
            if norm not in seen:
                e += 1
                if all(resemblance(mine, s) < threshold for s in sh):
                    n += 1
            seen.append(norm)
            sh.append(mine)
        exact.append(e)
        near.append(n)
    return statistics.mean(exact), statistics.mean(near)


def threshold_table(pair_lists: list[list[str]], manifest: dict) -> dict:
    """How many pairs of different passages a threshold folds (the original vault's top 30 per
    query), and how many of the edited copies it catches, by edit size."""
    from hybrid.retrieval.fold import heading_of, resemblance, same_heading, shingles
    values = []
    for texts in pair_lists:
        sets = [(" ".join(t.split()), shingles(t), heading_of(t)) for t in texts]
        for i in range(len(sets)):
            for j in range(i):
                if sets[i][0] != sets[j][0]:  # under different headings never folded: 0
                    sim = resemblance(sets[i][1], sets[j][1]) if same_heading(sets[i][2], sets[j][2]) else 0.0
                    values.append((sim, texts[i][:80], texts[j][:80]))
    edited: dict[str, list[float]] = {}
    for e in manifest.get("edited", []):
        key = "one word" if e["rate"] is None else f"{round(100 * e['rate'])} % of words"
        edited.setdefault(key, []).append(resemblance(shingles(e["section"]), shingles(e["edited"])))
    table = []
    for t in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0):
        row = {"threshold": t, "distinct_pairs_folded": sum(v >= t for v, _, _ in values),
               "distinct_pairs": len(values)}
        for key, vals in edited.items():
            row[key] = round(sum(v >= t for v in vals) / len(vals), 3)
        table.append(row)
    top = sorted(values, reverse=True)[:8]
    return {"table": table, "closest_distinct_pairs": [[round(v, 3), a, b] for v, a, b in top],
            "edited_median": {k: round(statistics.median(v), 3) for k, v in edited.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", type=Path)
    ap.add_argument("--pairs", action="store_true")
    ap.add_argument("--latency", type=Path, help="a home with one indexed vault: folding on/off A/B")
    ap.add_argument("--rescore", type=Path, nargs=2, metavar=("ORIGINAL_HOME", "DUPS_HOME"),
                    help="the after side's homes: distinct hits and the threshold study, indexes kept")
    ap.add_argument("--before", type=Path)
    ap.add_argument("--vault", type=Path)
    ap.add_argument("--original", type=Path)
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--threshold", type=float, default=0.7)
    ap.add_argument("--out", type=Path, default=ROOT / "eval" / "reports" / "notes" / "issue30-dups.json")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.embedder, args.pairs)))
        return
    if args.latency:
        print(json.dumps(latency_ab(args.latency, args.embedder)))
        return
    if args.rescore:  # HOME of the original vault's index, HOME of the copies' (the "after" side's)
        manifest = json.loads(args.vault.with_suffix(".manifest.json").read_text(encoding="utf-8"))
        original = rescore(args.rescore[0], args.embedder, args.threshold, pairs=True)
        result = {"original/after": original, "dups/after": rescore(args.rescore[1], args.embedder,
                                                                    args.threshold, pairs=False),
                  "threshold": threshold_table(original.pop("pairs"), manifest)}
        args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
        print(json.dumps(result, indent=1))
        return
    manifest = json.loads(args.vault.with_suffix(".manifest.json").read_text(encoding="utf-8"))
    result: dict = {"embedder": args.embedder, "manifest": {k: v for k, v in manifest.items()
                                                            if not isinstance(v, list)}}
    for label, vault in (("original", args.original), ("dups", args.vault)):
        for side, code in (("before", args.before), ("after", ROOT)):
            got = run_side(code, vault, args.embedder, pairs=label == "original" and side == "after")
            row = {k: got[k] for k in ("index_seconds", "chunks", "embedded", "index_bytes", "catalog_bytes",
                                       "embeddings")}
            row["latency_p50_ms"] = statistics.median(got["latency_ms"])
            for mode in ("notes", "passages"):
                e, n = distinct(got[mode], args.threshold)
                row[f"{mode}_distinct"], row[f"{mode}_near_distinct"] = round(e, 2), round(n, 2)
                row[f"{mode}_with_also_in"] = sum(1 for hits in got[mode] for h in hits if h[2])
            result[f"{label}/{side}"] = row
            print(label, side, json.dumps(row), file=sys.stderr, flush=True)
            if "pairs" in got:
                result["threshold"] = threshold_table(got["pairs"], manifest)
    args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
