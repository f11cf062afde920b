"""Count what the spelling corrector does (issue #28): over ``qrels/spelled-right.queries.jsonl``
(correctly spelled queries, each naming the vault it targets) every rewrite is a false one; over
the labelled typo queries (the sample set's and obsidian-help's ``typo`` category) every
misspelling should be repaired. Each query runs twice: scoped to its own vault, and over both
vaults at once (where a word of one vault used to be "corrected" to a neighbour from the other).

The bundled sample vault and ``../shared/vaults/obsidian-help`` (skipped when absent) are indexed
into a temporary home with the hash embedder, lexical mode only: the corrector runs before either
arm, so the model plays no part. Prints one line per rewrite or suggestion, then the counts.

    PYTHONPATH=. .venv/bin/python eval/bench/spelling.py [--obsidian-help /work/shared/vaults/obsidian-help]
    PYTHONPATH=/path/to/older/checkout .venv/bin/python eval/bench/spelling.py   # the same on older code
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from common import OBSIDIAN_HELP, ROOT

import hybrid

SAMPLE = Path(hybrid.__file__).parent / "sample_vault"
VAULTS = {"sample": SAMPLE, "obsidian-help": OBSIDIAN_HELP}
TYPO_SETS = {"sample": Path(hybrid.__file__).parent / "data" / "sample.queries.jsonl",
             "obsidian-help": ROOT / "qrels" / "obsidian-help.queries.jsonl"}


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def run(h, queries: list[dict], vaults: list[str] | None) -> tuple[list[tuple[dict, dict, dict]], list[float]]:
    """(query, corrections, suggestions) of each query, and each search's seconds."""
    out, times = [], []
    for q in queries:
        t = time.perf_counter()
        r = h.search(q["text"], mode="lexical", top_k=10, vaults=vaults or [q["vault"]])
        times.append(time.perf_counter() - t)
        out.append((q, r.corrections, dict(getattr(r, "suggestions", {}) or {})))
    return out, times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=Path, default=ROOT / "qrels" / "spelled-right.queries.jsonl")
    ap.add_argument("--obsidian-help", type=Path, default=OBSIDIAN_HELP,
                    help="the obsidian-help vault (default: shared/vaults/ beside the checkout)")
    args = ap.parse_args()
    VAULTS["obsidian-help"] = args.obsidian_help
    present = {name: p for name, p in VAULTS.items() if p.is_dir()}
    for name in set(VAULTS) - set(present):
        print(f"skipped: vault {name} not found at {VAULTS[name]}")
    right = [q for q in load(args.queries) if q["vault"] in present]
    typos = [dict(q, vault=name) for name, path in TYPO_SETS.items() if name in present
             for q in load(path) if q.get("category") == "typo"]
    with tempfile.TemporaryDirectory(prefix="hybrid-spelling-") as tmp:
        h = hybrid.open(Path(tmp) / "home", embedder="hash:64")
        for name, path in present.items():
            h.add_vault(path, name)
        t = time.perf_counter()
        h.index()
        print(f"indexed {', '.join(present)} in {time.perf_counter() - t:.1f} s")
        try:
            for label, queries, scopes in (("spelled right", right, ("own vault", "all vaults")),
                                           ("typo", typos, ("own vault", "all vaults"))):
                for scope in scopes:
                    got, times = run(h, queries, list(present) if scope == "all vaults" else None)
                    rewritten = [(q, c) for q, c, _ in got if c]
                    suggested = [(q, s) for q, _, s in got if s]
                    for q, c in rewritten:
                        print(f"  rewrite    [{label}, {scope}] {q['qid']}: {q['text']!r} {c}")
                    for q, s in suggested:
                        print(f"  suggestion [{label}, {scope}] {q['qid']}: {q['text']!r} {s}")
                    print(f"{label}, {scope}: {len(got)} queries, {len(rewritten)} rewritten, "
                          f"{len(suggested)} with a suggestion only; median search "
                          f"{statistics.median(times) * 1000:.1f} ms")
        finally:
            h.close()


if __name__ == "__main__":
    main()
