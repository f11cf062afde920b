"""Evidence completeness of ``context``: how often the text an answer sends holds the whole
labelled answer span (qrels/obsidian-help-spans.jsonl), at equal token budgets, with context
around the hits and without it (the hits' own chunks only, more of them, up to the same budget).

    HYBRID_HOME=/tmp/oh hybrid index ../shared/vaults/obsidian-help --name oh
    PYTHONPATH=eval/bench .venv/bin/python eval/archive/notes/context_completeness.py /tmp/oh [--budgets 300 600 1200]
    PYTHONPATH=eval/bench .venv/bin/python eval/archive/notes/context_completeness.py \\
        --token-ratio ../shared/vaults/obsidian-help

Both sides are counted the same way (hybrid.retrieval.context: count_tokens per line plus one
for its break, each line sent once, a step cut where the budget ends):

- with context: the default answer (``top_k`` 8 notes, up to 4 passages each) and its context
  within the budget, for each ``ORDER`` and ``STEP_PER_RANK`` tried (the tune split picks);
- without: the first 50 passages (``passages=True``), each hit's own lines only, best first,
  until the budget is spent.

A question is complete when, for one of its labelled answers, every non-blank line of every
span of it was sent. Printed per split, then as JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

SPANS = Path(__file__).resolve().parents[3] / "qrels" / "obsidian-help-spans.jsonl"
STEPS_TRIED = (0.5, 1.0, 2.0, 4.0, 8.0)
ORDERS = ("shown", "score")


def sent_lines(ctx) -> dict[str, set[int]]:
    """Every line the context sent, by path, without the blank ones."""
    out: dict[str, set[int]] = {}
    for n in ctx.notes:
        for b in n.blocks:
            for i, text in enumerate(b.text.split("\n")):
                if text.strip():
                    out.setdefault(n.path, set()).add(b.start_line + i)
    return out


def complete(sent: dict[str, set[int]], answers, vault_root: Path) -> bool:
    for spans in answers:
        ok = True
        for s in spans:
            lines = (vault_root / s["path"]).read_text(encoding="utf-8").split("\n")
            need = {i for i in range(s["start"], s["end"] + 1) if lines[i - 1].strip()}
            if not need <= sent.get(s["path"], set()):
                ok = False
                break
        if ok:
            return True
    return False


def token_ratio(folder: Path) -> None:
    """count_tokens against the WordPiece tokens of MiniLM's tokenizer over every note of
    ``folder``, as context counts a block (each line plus its break)."""
    from hybrid.core.tokens import count_tokens
    from hybrid.embedders import WordPieceCounter, minilm_path
    wp = WordPieceCounter(minilm_path() / "tokenizer.json")
    ours = theirs = 0
    for f in sorted(folder.rglob("*.md")):
        lines = [x for x in f.read_text(encoding="utf-8").split("\n") if x.strip()]
        ours += sum(count_tokens(x) + 1 for x in lines)
        theirs += sum(wp(lines)) if lines else 0
    print(f"count_tokens {ours}, MiniLM WordPiece {theirs} (without [CLS]/[SEP]): ratio {ours / theirs:.2f}")


def main() -> None:
    import hybrid
    from hybrid.retrieval.context import gather
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("home", nargs="?")
    ap.add_argument("--budgets", type=int, nargs="+", default=[300, 600, 1200])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--token-ratio", type=Path, metavar="FOLDER", help="only compare the token counts on FOLDER")
    args = ap.parse_args()
    if args.token_ratio:
        token_ratio(args.token_ratio)
        return
    if not args.home:
        ap.error("give the HYBRID_HOME that indexed obsidian-help")
    h = hybrid.open(args.home)
    vault = h.config.select(None)[0]
    targets = [(v, h.session.store(v)) for v in h.config.select(None)]  # what Hybrid.search reads (owner's view)
    questions = [json.loads(line) for line in SPANS.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = []
    for q in questions:
        answer = h.search(q["text"])                       # the default answer, as every door gives it
        more = h.search(q["text"], passages=True, top_k=50)  # the baseline's hits
        paths = {s["path"] for spans in q["answers"] for s in spans}
        row = {"qid": q["qid"], "split": q["split"], "with": {}, "without": {}, "used": {},
               "note_in_answer": any(x.path in paths for x in answer),   # an answering note is a hit at all
               "note_in_50": any(x.path in paths for x in more)}
        for b in args.budgets:
            base = gather(targets, more, b, max_steps=1)
            row["without"][b] = complete(sent_lines(base), q["answers"], vault.path)
            row["used"][f"without-{b}"] = base.used
            for order in ORDERS:
                for step in STEPS_TRIED:
                    ctx = gather(targets, answer, b, step_per_rank=step, order=order)
                    row["with"][f"{b}@{step}{order}"] = complete(sent_lines(ctx), q["answers"], vault.path)
                    row["used"][f"with-{b}@{step}{order}"] = ctx.used
        rows.append(row)
    report: dict = {"questions": len(rows), "budgets": args.budgets, "splits": {}}
    for split in ("tune", "heldout", "all"):
        mine = [r for r in rows if split == "all" or r["split"] == split]
        table: dict = {"n": len(mine), "note_in_answer": sum(r["note_in_answer"] for r in mine),
                       "note_in_50": sum(r["note_in_50"] for r in mine)}
        for b in args.budgets:
            table[f"without@{b}"] = sum(r["without"][b] for r in mine)
            for order in ORDERS:
                for step in STEPS_TRIED:
                    table[f"with@{b}/step{step}{order}"] = sum(r["with"][f"{b}@{step}{order}"] for r in mine)
        report["splits"][split] = table
    tune = report["splits"]["tune"]
    tried = [(o, s) for o in ORDERS for s in STEPS_TRIED]
    best = max(tried, key=lambda t: sum(tune[f"with@{b}/step{t[1]}{t[0]}"] for b in args.budgets))  # first on ties
    report["chosen_on_tune"] = {"order": best[0], "step_per_rank": best[1]}
    print(f"{len(rows)} questions; chosen on tune: ORDER {best[0]}, STEP_PER_RANK {best[1]}")
    for split, table in report["splits"].items():
        n = table["n"]
        print(f"\n{split} ({n} questions): whole answer span sent, of {n} (an answering note among the "
              f"default answer's notes: {table['note_in_answer']}, among the first 50 passages: {table['note_in_50']})")
        print("budget  without  " + "  ".join(f"{o[:5]}@{s:g}" for o, s in tried) + "   tokens used (without / chosen)")
        mine = [r for r in rows if split == "all" or r["split"] == split]
        for b in args.budgets:
            used = (sum(r["used"][f"without-{b}"] for r in mine) / n,
                    sum(r["used"][f"with-{b}@{best[1]}{best[0]}"] for r in mine) / n)
            cells = "  ".join(f"{table[f'with@{b}/step{s}{o}']:>7}" for o, s in tried)
            print(f"{b:>6}  {table[f'without@{b}']:>7}  {cells}   {used[0]:.0f} / {used[1]:.0f}")
    if args.json:
        print(json.dumps({**report, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
