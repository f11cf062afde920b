"""What the multilingual default costs (issue #29): ``minilm`` alone (the default before) against
``mix:minilm,use-multilingual`` (the default now), on the same vault, in alternating pairs.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/models/mix_cost.py \\
        [--vault ../shared/vaults/obsidian-help] [--pairs 2]

Per pair, each embedder indexes the vault into a fresh home (`hybrid index` as a process: wall
and CPU time; the first pair's order is minilm first, the next mix first, and so on), then:
- index bytes on disk (catalog + tantivy + FAISS);
- warm in-process query latency, p50 of English and of non-English questions, hybrid mode
  (each query run 3 times, after one warm-up pass);
- a cold `hybrid query --local` process for one English and one non-English question (median of
  3, wall and CPU): what a query costs with no server running.
Ratios are of medians over the pairs; the machine is shared, so only ratios and medians mean
anything. Writes ``eval/out/bench/mix_cost.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import OBSIDIAN_HELP, SCRATCH

SPECS = {"minilm": "minilm", "mix": "mix:minilm,use-multilingual"}
ENGLISH = ["how do I restore a deleted note", "sync conflicts between two devices",
           "change the font size of the editor", "publish a site with a custom domain",
           "embed a canvas in a note", "keyboard shortcut to open the command palette"]
OTHER = ["Wie kann ich eine gelöschte Notiz wiederherstellen?", "同步冲突怎么解决",
         "cambiar el tamaño de la fuente del editor", "Как опубликовать сайт со своим доменом?",
         "キャンバスをノートに埋め込む", "كيف أفتح لوحة الأوامر"]
HYBRID = [sys.executable, "-m", "hybrid.cli"]


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def index(home: Path, vault: Path, spec: str) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of a full `hybrid index` process; CPU time
    is what a busy shared machine disturbs least."""
    env = {**os.environ, "HYBRID_HOME": str(home)}
    (home).mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'[settings]\nembedder = "{spec}"\n', encoding="utf-8")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([*HYBRID, "index", str(vault), "--name", "v"], env=env, check=True,
                   capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def warm(home: Path, queries: list[str]) -> float:
    import hybrid
    h = hybrid.open(home)
    try:
        for q in queries:
            h.search(q, mode="hybrid")
        times = []
        for _ in range(3):
            for q in queries:
                t = time.perf_counter()
                h.search(q, mode="hybrid")
                times.append(time.perf_counter() - t)
        return statistics.median(times)
    finally:
        h.close()


def cold(home: Path, query: str) -> tuple[float, float]:
    """Median wall and CPU seconds of a `hybrid query --local` process (no server), of 3."""
    env = {**os.environ, "HYBRID_HOME": str(home)}
    walls, cpus = [], []
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run([*HYBRID, "query", query, "--local", "-n", "3"], env=env, check=True,
                       capture_output=True, text=True)
        walls.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return statistics.median(walls), statistics.median(cpus)


def _cold(home: Path) -> dict[str, float]:
    out = {}
    for name, query in (("en", ENGLISH[0]), ("other", OTHER[0])):
        wall, cpu = cold(home, query)
        out[f"cold_{name}_s"], out[f"cold_{name}_cpu_s"] = round(wall, 3), round(cpu, 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vault", type=Path, default=OBSIDIAN_HELP)
    ap.add_argument("--pairs", type=int, default=2)
    args = ap.parse_args()
    rows: dict[str, list[dict]] = {k: [] for k in SPECS}
    with tempfile.TemporaryDirectory(prefix="hybrid-mix-cost-") as tmp:
        for pair in range(args.pairs):
            order = list(SPECS) if pair % 2 == 0 else list(SPECS)[::-1]
            for name in order:
                home = Path(tmp) / f"{name}-{pair}"
                wall, cpu = index(home, args.vault, SPECS[name])
                row = {"index_s": round(wall, 1), "index_cpu_s": round(cpu, 1), "bytes": folder_bytes(home / "data"),
                       "warm_en_ms": round(1000 * warm(home, ENGLISH), 2),
                       "warm_other_ms": round(1000 * warm(home, OTHER), 2),
                       **_cold(home)}
                rows[name].append(row)
                print(name, pair, row, flush=True)
    med = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in rows.items()}
    ratios = {k: round(med["mix"][k] / med["minilm"][k], 3) for k in med["mix"]}
    out = {"vault": str(args.vault), "pairs": args.pairs, "runs": rows, "medians": med, "mix_over_minilm": ratios}
    SCRATCH.mkdir(parents=True, exist_ok=True)
    (SCRATCH / "mix_cost.json").write_text(json.dumps(out, indent=2), encoding="utf-8")
    print(json.dumps({"medians": med, "mix_over_minilm": ratios}, indent=2))


if __name__ == "__main__":
    main()
