"""A/B of warm in-process query latency between two checkouts of hybrid on one index (the
older code ignores what it does not know, e.g. lexical/sections/). Each checkout gets its own
copy of HOME, so neither rebuilds the other's agent index (its fingerprint names the rules of
the code that built it). The two run alternately, ``--repeat`` times each, so the shared
machine's load falls on both alike; every mode is timed, and the agent view's hybrid search.

    git worktree add /tmp/wt-old <commit>
    PYTHONPATH=eval/bench .venv/bin/python eval/archive/speed/query_ab.py --old /tmp/wt-old --home HOME \\
        --vault ../shared/vaults/obsidian-help

HOME must hold an index of VAULT registered as vault "v" (what `hybrid.open(HOME)` plus
`add_vault(VAULT, "v")` and `index()` leave; `--name` and `--embedder` name another vault and
model, e.g. `--name oh --embedder mix:minilm,use-multilingual` for `hybrid index VAULT --name oh`).
Queries: the obsidian-help and paraphrase sets.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]  # the queries' files are read from here

CODE = r'''
import sys, json, time, statistics
root, home, vault, embedder, name = sys.argv[1:6]
sys.path.insert(0, root)
import hybrid
from pathlib import Path
h = hybrid.open(home, embedder=embedder)
if name not in h.config.vaults:
    h.config.add_vault(Path(vault), name, ["**/*.md"], [])
qs = [json.loads(l)["text"] for f in ["qrels/obsidian-help.queries.jsonl", "qrels/obsidian-help-para.queries.jsonl"]
      for l in open(f)]
for q in qs[:10]:
    h.search(q, top_k=10)
    h.search(q, top_k=10, agent=True)  # the agent index brought in step (once per copy) and warm
out = {}
for label, mode, agent in (("lexical", "lexical", False), ("vector", "vector", False),
                           ("hybrid", "hybrid", False), ("hybrid-agent", "hybrid", True)):
    ts = []
    for q in qs:
        t = time.perf_counter()
        h.search(q, top_k=10, mode=mode, agent=agent)
        ts.append((time.perf_counter() - t) * 1000)
    ts.sort()
    out[label] = {"p50_ms": round(statistics.median(ts), 2), "p95_ms": round(ts[int(0.95 * len(ts)) - 1], 2)}
print(json.dumps(out))
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True, help="checkout of the older code")
    ap.add_argument("--new", default=".", help="checkout of the newer code (default: this one)")
    ap.add_argument("--home", required=True)
    ap.add_argument("--vault", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--embedder", default="minilm", help="the embedder HOME's index was made with")
    ap.add_argument("--name", default="v", help="the vault's name in HOME")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="query-ab-"))
    homes = {}
    for name in ("old", "new"):
        homes[name] = work / name
        shutil.copytree(args.home, homes[name], symlinks=True)
    try:
        for _ in range(args.repeat):
            for name, root in (("old", args.old), ("new", args.new)):
                r = subprocess.run([sys.executable, "-c", CODE, str(Path(root).resolve()), str(homes[name]),
                                    args.vault, args.embedder, args.name], capture_output=True, text=True,
                                   cwd=ROOT, env={**os.environ, "PYTHONPATH": str(Path(root).resolve())})
                print(name, r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr[-500:], flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
