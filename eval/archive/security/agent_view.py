"""What the agent view costs a query: warm in-process latency of the owner's search and an
agent's (agent index, hidden-id ban in FAISS, rows judged and redacted) on one index, run
alternately in rounds so the shared machine's load falls on both alike. Optionally hides a
share of the notes (``--hide-folder``) to price a large hidden set.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/security/agent_view.py \\
        --vault ../shared/vaults/obsidian-help [--hide-folder en/Plugins]

Indexes the vault into a temporary home with the bundled MiniLM (a minute or two), then prints
JSON: p50/p95 per view and mode, and the ratio agent/owner of the p50s.
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import hybrid  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
QUERY_FILES = ["qrels/obsidian-help.queries.jsonl", "qrels/obsidian-help-para.queries.jsonl"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vault", required=True)
    ap.add_argument("--hide-folder", default="", help="agent_exclude this folder (a larger hidden set)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    qs = [json.loads(line)["text"] for f in QUERY_FILES for line in open(ROOT / f, encoding="utf-8")]
    home = Path(tempfile.mkdtemp(prefix="hybrid-agent-bench-"))
    settings = {"agent_exclude": [args.hide_folder]} if args.hide_folder else {}
    h = hybrid.open(home, embedder="minilm", **settings)
    h.add_vault(args.vault, "v")
    report = h.index()[0]
    times: dict[str, list[float]] = {}
    for q in qs[:10]:  # warm both views (models, agent index, kingfisher rules)
        h.search(q, top_k=10)
        h.search(q, top_k=10, agent=True)
    for _ in range(args.rounds):
        for agent in (False, True):
            for mode in ("lexical", "hybrid"):
                key = f"{'agent' if agent else 'owner'}-{mode}"
                for q in qs:
                    t = time.perf_counter()
                    h.search(q, top_k=10, mode=mode, agent=agent)
                    times.setdefault(key, []).append((time.perf_counter() - t) * 1000)
    out: dict = {"queries": len(qs), "rounds": args.rounds, "chunks": report.chunks,
                 "hidden_folder": args.hide_folder, "index_seconds": report.seconds,
                 "tantivy_seconds": report.stage_seconds.get("tantivy")}
    status = h.status(agent=True)[0]
    out["agent_sees"] = {"notes": status.notes, "chunks": status.chunks}
    for key, ts in sorted(times.items()):
        ts.sort()
        out[key] = {"p50_ms": round(statistics.median(ts), 2), "p95_ms": round(ts[int(0.95 * len(ts)) - 1], 2)}
    for mode in ("lexical", "hybrid"):
        out[f"ratio-{mode}"] = round(out[f"agent-{mode}"]["p50_ms"] / out[f"owner-{mode}"]["p50_ms"], 2)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
