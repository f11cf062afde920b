"""Join labelled query sets over one vault into one pair of files, each query's category
prefixed by its set (``oh:exact``) or, for sets with a split, ``set:split`` (``intl:heldout``),
so that one `hybrid eval` run indexes the vault once and reports every set and split.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/models/combine_sets.py --out /tmp/all \\
        oh=qrels/obsidian-help para=qrels/obsidian-help-para intl=qrels/obsidian-help-intl
    hybrid eval --vault ../shared/vaults/obsidian-help --queries /tmp/all.jsonl --qrels /tmp/all.json

Each ``NAME=STEM`` reads ``STEM.queries.jsonl`` and ``STEM.qrels.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="writes OUT.jsonl and OUT.json")
    ap.add_argument("sets", nargs="+", metavar="NAME=STEM")
    args = ap.parse_args()
    queries, qrels = [], {}
    for spec in args.sets:
        name, _, stem = spec.partition("=")
        for line in Path(f"{stem}.queries.jsonl").read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            q = json.loads(line)
            split = q.get("split")
            category = f"{name}:{split}" if split else f"{name}:{q.get('category', '')}"
            queries.append({"qid": q["qid"], "text": q["text"], "category": category, "split": split or name})
        qrels.update(json.loads(Path(f"{stem}.qrels.json").read_text(encoding="utf-8")))
    Path(f"{args.out}.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries),
                                         encoding="utf-8")
    Path(f"{args.out}.json").write_text(json.dumps(qrels, ensure_ascii=False), encoding="utf-8")
    print(f"{len(queries)} queries, {len(qrels)} judged, in {args.out}.jsonl / {args.out}.json")


if __name__ == "__main__":
    main()
