"""Whole-document BM25 beside hybrid's BM25 arm, on a BEIR dataset (issue #29).

The yardsticks index every document ONCE, whole (title + text), read by the arm's own analyzer
(:func:`hybrid.store.lexicon.stem_analyzer`), and rank by BM25 over the query's stems (no
stopwords dropped, no typo repair, no field boosts):

- ``tantivy``: one tantivy field, tantivy's BM25 (k1 1.2, b 0.75, fixed);
- ``bm25s``: the same tokens through bm25s (Lucene's BM25, k1 1.2, b 0.75), when installed
  (``pip install 'hybrid[bench]'``); skipped with a note otherwise.

The arm is ``hybrid eval``'s ``lexical`` mode on the same notes (``load_beir``: one note per
document, ``# title`` + text) and the same judgements, indexed with a hash embedder (the vector
arm plays no part: no model to wait for). ``--arm KEY=VALUE,...`` adds a run of the arm with
settings changed (``--arm fuzzy=false --arm stopwords=false --arm lexical_unit=chunk``), to
measure one suspect at a time. Scores by ranx: nDCG@10 and recall@100, note level.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/quality/beir_bm25.py --beir ../shared/benchmarks/scifact-train
    PYTHONPATH=eval/bench .venv/bin/python eval/archive/quality/beir_bm25.py --beir DIR --arm fuzzy=false \\
        --out eval/reports/x.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

METRICS = ("ndcg@10", "recall@100")
DEPTH = 100


def whole_docs(vault: Path) -> dict[str, str]:
    """Note path → its text as the baseline reads it: the ``# `` of the title line dropped."""
    return {p.name: p.read_text(encoding="utf-8").removeprefix("# ") for p in sorted(vault.glob("*.md"))}


def tantivy_baseline(docs: dict[str, str], analyzer):
    import tantivy
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("body", tokenizer_name="hy_stem")
    sb.add_text_field("path", stored=True, tokenizer_name="raw")
    schema = sb.build()
    index = tantivy.Index(schema, path=tempfile.mkdtemp(prefix="beir-bm25-"))
    index.register_tokenizer("hy_stem", analyzer)
    writer = index.writer(heap_size=128_000_000, num_threads=1)
    for path, text in docs.items():
        writer.add_document(tantivy.Document(body=text, path=path))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    searcher = index.searcher()

    def search(text: str) -> dict[str, float]:
        stems = list(dict.fromkeys(analyzer.analyze(text)))
        if not stems:
            return {}
        q = tantivy.Query.boolean_query([(tantivy.Occur.Should, tantivy.Query.term_query(schema, "body", s))
                                         for s in stems])
        return {searcher.doc(a)["path"][0]: float(s) for s, a in searcher.search(q, DEPTH).hits}
    return search


def bm25s_baseline(docs: dict[str, str], analyzer):
    try:
        import bm25s
    except ImportError:
        return None
    paths = list(docs)
    model = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    model.index([analyzer.analyze(docs[p]) for p in paths], show_progress=False)
    vocab = model.vocab_dict

    def search(text: str) -> dict[str, float]:
        stems = [s for s in dict.fromkeys(analyzer.analyze(text)) if s in vocab]
        if not stems:
            return {}
        ids, scores = model.retrieve([stems], k=DEPTH, show_progress=False)
        return {paths[int(i)]: float(s) for i, s in zip(ids[0], scores[0]) if s > 0}
    return search


def score(run: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    from ranx import Qrels, Run, evaluate
    full = {q: run.get(q) or {"__none__": 0.0} for q in qrels}
    out = evaluate(Qrels(qrels), Run(full), list(METRICS), make_comparable=True)
    return {m: round(float(v), 4) for m, v in out.items()}


def parse_settings(spec: str) -> dict[str, object]:
    out: dict[str, object] = {}
    for part in filter(None, spec.split(",")):
        key, _, value = part.partition("=")
        low = value.strip().lower()
        out[key.strip()] = (low == "true") if low in ("true", "false") else \
            float(low) if low.replace(".", "", 1).isdigit() else value.strip()
    return out


def arm(vault: Path, queries, qrels, changes: dict[str, object]) -> tuple[dict[str, float], dict]:
    """The lexical arm as ``hybrid eval --modes lexical`` runs it, with ``changes`` to the
    settings: (metrics, the note-level run)."""
    from hybrid.core.settings import Settings, replace
    from hybrid.embedders import make_embedder
    from hybrid.eval.inputs import Problems
    from hybrid.eval.run import grid, run_eval
    s = replace(Settings(), embedder="hash:64", **changes)
    cfg = grid(["lexical"], [s.chunk_tokens], [s.chunk_overlap], [s.context_header], [s.rrf_k],
               [(s.weight_lexical, s.weight_vector)])
    res = run_eval(vault, queries, qrels, cfg, s, Problems(), metrics=METRICS,
                   embedder=make_embedder("hash:64"))
    r = res.results[0]
    return {m: round(v, 4) for m, v in r.metrics.items()}, r.run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--beir", type=Path, required=True)
    ap.add_argument("--split", help="qrels/SPLIT.tsv (default: test, or the folder's only split)")
    ap.add_argument("--arm", action="append", default=None, metavar="KEY=VALUE,...",
                    help="a run of the arm with these settings changed (repeatable); '' = defaults")
    ap.add_argument("--no-arm", action="store_true", help="only the baselines")
    ap.add_argument("--out", type=Path, help="write the figures here as JSON")
    args = ap.parse_args()

    from hybrid.eval.inputs import Problems, load_beir, reconcile
    from hybrid.store.lexicon import stem_analyzer
    vault = Path(tempfile.mkdtemp(prefix="beir-bm25-vault-")) / "vault"
    problems = Problems()
    queries, qrels, n = load_beir(args.beir, vault, problems, args.split)
    queries, qrels = reconcile(queries, qrels, {p.name for p in vault.glob("*.md")}, problems, "qrels")
    docs = whole_docs(vault)
    analyzer = stem_analyzer()
    rows: list[tuple[str, dict[str, float], float]] = []
    for name, build in (("whole-document BM25, tantivy", tantivy_baseline),
                        ("whole-document BM25, bm25s", bm25s_baseline)):
        t = time.perf_counter()
        search = build(docs, analyzer)
        if search is None:
            print(f"({name}: bm25s is not installed; pip install 'hybrid[bench]')")
            continue
        run = {q: search(queries[q].text) for q in qrels}
        rows.append((name, score(run, qrels), time.perf_counter() - t))
    if not args.no_arm:
        for spec in args.arm if args.arm is not None else [""]:
            t = time.perf_counter()
            metrics, _ = arm(vault, queries, qrels, parse_settings(spec))
            rows.append((f"hybrid lexical arm{' (' + spec + ')' if spec else ''}", metrics,
                         time.perf_counter() - t))
    print(f"{args.beir.name}: {n} documents, {len(qrels)} judged queries\n")
    print("| system | nDCG@10 | recall@100 | seconds |\n|---|---|---|---|")
    for name, m, secs in rows:
        print(f"| {name} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} | {secs:.0f} |")
    if args.out:
        args.out.write_text(json.dumps({"documents": n, "queries": len(qrels),
                                        "rows": [{"system": a, **m} for a, m, _ in rows]}, indent=1))


if __name__ == "__main__":
    main()
