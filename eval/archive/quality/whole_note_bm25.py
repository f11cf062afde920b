"""Whole-note BM25 as a yardstick for the lexical arm (issue #11, item 0).

Indexes every note of a vault as ONE tantivy document (title + aliases, body; English stemming,
no chunking, no typo repair, no identifier field) and scores a labelled set at note level:
nDCG@10 and answer@1 per category. Compare with the ``lexical`` row of ``hybrid eval`` on the
same set, which ranks a note at its best 128-token chunk. Section-level judgements are mapped
to their note, so the ``section`` category is not comparable with ``hybrid eval``'s.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/quality/whole_note_bm25.py \\
        --vault ../shared/vaults/obsidian-help \\
        --queries qrels/obsidian-help.queries.jsonl --qrels qrels/obsidian-help.qrels.json
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from pathlib import Path


def build(vault: Path, title_boost: float):
    import tantivy

    from hybrid.sources.markdown import decode, parse_note
    from hybrid.sources.walk import discover
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("title", tokenizer_name="en_stem")
    sb.add_text_field("body", tokenizer_name="en_stem")
    sb.add_text_field("path", stored=True, tokenizer_name="raw")
    index = tantivy.Index(sb.build(), path=tempfile.mkdtemp(prefix="hybrid-note-bm25-"))
    writer = index.writer()
    for e in discover(vault, ["**/*.md"], []):
        text, _ = decode(Path(e.abspath).read_bytes(), e.path)
        note = parse_note(e.path, text)
        writer.add_document(tantivy.Document(title=" ".join([note.title, *note.aliases]), body=text,
                                             path=e.path))
    writer.commit()
    index.reload()

    def search(text: str, k: int = 100) -> dict[str, float]:
        words = " ".join(re.findall(r"\w+", text.lower()))
        if not words:
            return {}
        query = index.parse_query(words, ["title", "body"], field_boosts={"title": title_boost})
        searcher = index.searcher()
        return {searcher.doc(a)["path"][0]: float(s) for s, a in searcher.search(query, k).hits}
    return search


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vault", type=Path, required=True)
    ap.add_argument("--queries", type=Path, required=True)
    ap.add_argument("--qrels", type=Path, required=True)
    ap.add_argument("--title-boost", type=float, default=1.0)
    args = ap.parse_args()
    from ranx import Qrels, Run, evaluate

    queries = [json.loads(line) for line in args.queries.read_text().splitlines() if line.strip()]
    judged = {q: {d.split("#")[0]: g for d, g in docs.items()}
              for q, docs in json.loads(args.qrels.read_text()).items()}
    search = build(args.vault, args.title_boost)
    run = {q["qid"]: search(q["text"]) or {"__none__": 0.0} for q in queries if q["qid"] in judged}
    qrels = Qrels({q: judged[q] for q in run})
    scores = evaluate(qrels, Run(run), "ndcg@10", return_mean=False, make_comparable=True)
    ndcg = dict(zip(qrels.keys(), map(float, scores)))
    cats: dict[str, list[tuple[float, bool]]] = {}
    for q in queries:
        if q["qid"] in run:
            top = max(run[q["qid"]], key=run[q["qid"]].get)
            best = judged[q["qid"]].get(top, 0) == max(judged[q["qid"]].values())
            cats.setdefault(q.get("category", "all"), []).append((ndcg[q["qid"]], best))
    print("| category | queries | nDCG@10 | answer@1 |\n|---|---|---|---|")
    for cat, vals in sorted(cats.items()) + [("all", [v for vs in cats.values() for v in vs])]:
        print(f"| {cat} | {len(vals)} | {sum(v for v, _ in vals) / len(vals):.3f} | "
              f"{sum(b for _, b in vals) / len(vals):.3f} |")


if __name__ == "__main__":
    main()
