"""The answer's shape on the labelled sets (issue #28): how many notes an answer holds, overlapping
passages of one note, and whether confidence agrees with the order shown.

Runs against whichever hybrid is on the path, so the same script measures a checkout from before
answers were grouped (``PYTHONPATH=<old checkout>:eval/bench python eval/archive/quality/answer_shape.py``)
and after.
Before, MCP and ``/api/search`` answered ``top_k`` passages and the CLI grouped ``4 × top_k``
passages by note; after, every door answers ``top_k`` notes (``passages`` on request).

For every query of the sample set and the three obsidian-help sets (hybrid mode, ``top_k`` 8,
the doors' default) it records:

- notes and passages in the default answer of MCP / ``/api/search``;
- pairs of passages of one note whose line ranges overlap, in that answer;
- adjacent pairs of notes, in the grouped view, where the lower note is more confident
  (violations per 100 adjacent pairs), and notes whose headline is less confident than a
  passage under it;
- the note-level Brier score of the grouped view's confidences against the qrels (a note with a
  grade above 0 is relevant), so a monotone confidence is seen not to cost calibration;
- how often the answer is "nothing relevant" (no hit fair or better) on answerable queries and on
  the set the vault cannot answer.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/quality/answer_shape.py --home eval/out/shape-home \\
        --out eval/reports/answer-shape-after.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import common

import hybrid
from hybrid.retrieval.request import SearchRequest

QRELS = common.ROOT / "qrels"
DATA = Path(hybrid.__file__).parent / "data"
TOP_K = 8
FAIR = 0.4
GROUPED = "passages" in {f.name for f in dataclasses.fields(SearchRequest)}  # this hybrid answers by note


def load(name: str, folder: Path) -> tuple[list[dict], dict]:
    queries = [json.loads(line) for line in (folder / f"{name}.queries.jsonl").read_text().splitlines() if line]
    qrels_file = folder / f"{name}.qrels.json"
    return queries, (json.loads(qrels_file.read_text()) if qrels_file.exists() else {})


def grouped(hits) -> list[list]:
    notes: dict = {}
    for x in hits:
        notes.setdefault((x.vault, x.path), []).append(x)
    return list(notes.values())


def answers(h, vault: str, text: str) -> tuple[list, list[list]]:
    """(the passages MCP and /api/search returned, the notes of the grouped view) for a query."""
    if GROUPED:
        notes = h.search(text, vaults=[vault], top_k=TOP_K)
        return list(notes), grouped(notes)
    passages = h.search(text, vaults=[vault], top_k=TOP_K)
    return list(passages), grouped(h.search(text, vaults=[vault], top_k=4 * TOP_K))[:TOP_K]


def overlapping(hits) -> int:
    n = 0
    for i, a in enumerate(hits):
        for b in hits[i + 1:]:
            if (a.vault, a.path) == (b.vault, b.path) and a.start_line <= b.end_line and b.start_line <= a.end_line:
                n += 1
    return n


def measure(h, vault: str, name: str, queries: list[dict], qrels: dict) -> dict:
    out = {"queries": 0, "notes": 0, "passages": 0, "overlaps": 0, "note_pairs": 0, "violations": 0,
           "headline_below_sub": 0, "notes_shown": 0, "brier_sum": 0.0, "nothing_relevant": 0}
    for q in queries:
        passages, notes = answers(h, vault, q["text"])
        relevant = {d.split("#")[0] for d, g in qrels.get(q["qid"], {}).items() if g > 0}
        out["queries"] += 1
        out["notes"] += len({(x.vault, x.path) for x in passages}) if not GROUPED else len(notes)
        out["passages"] += len(passages)
        out["overlaps"] += overlapping(passages)
        conf = [max((x.confidence or 0.0) for x in n) for n in notes]
        out["note_pairs"] += max(0, len(conf) - 1)
        out["violations"] += sum(1 for a, b in zip(conf, conf[1:]) if b > a)
        out["headline_below_sub"] += sum(1 for n in notes if any((x.confidence or 0) > (n[0].confidence or 0)
                                                                for x in n[1:]))
        # the note's confidence as shown: the headline's
        out["notes_shown"] += len(notes)
        out["brier_sum"] += sum(((n[0].confidence or 0.0) - float(n[0].path in relevant)) ** 2 for n in notes)
        out["nothing_relevant"] += int(not any((x.confidence or 0.0) >= FAIR for x in passages))
    return out


def summary(raw: dict) -> dict:
    n = raw["queries"]
    return {"queries": n, "notes per answer": round(raw["notes"] / n, 2),
            "passages per answer": round(raw["passages"] / n, 2),
            "overlapping pairs per answer": round(raw["overlaps"] / n, 3),
            "violations per 100 adjacent note pairs": round(100 * raw["violations"] / max(1, raw["note_pairs"]), 1),
            "adjacent note pairs": raw["note_pairs"],
            "notes whose headline is below a passage under it": raw["headline_below_sub"],
            "note-level Brier (headline confidence)": round(raw["brier_sum"] / max(1, raw["notes_shown"]), 4),
            "answers saying nothing relevant": f"{raw['nothing_relevant']}/{n}"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, default=common.SCRATCH / "shape-home")
    ap.add_argument("--out", type=Path, help="write the figures here as JSON")
    args = ap.parse_args()
    h = common.open_both_vaults(args.home)
    sets = [("sample", "sample", DATA), ("oh", "obsidian-help", QRELS), ("oh", "obsidian-help-para", QRELS),
            ("oh", "obsidian-help-none", QRELS)]
    figures = {}
    total: dict = {}
    for vault, name, folder in sets:
        raw = measure(h, vault, name, *load(name, folder))
        figures[name] = summary(raw)
        for k, v in raw.items():
            total[k] = total.get(k, 0) + v
    figures["all"] = summary(total)
    h.close()
    report = {"grouped answers": GROUPED, "top_k": TOP_K, "mode": "hybrid", "figures": figures}
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
