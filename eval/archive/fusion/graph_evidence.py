"""The link graph as ranking evidence (issue #30, part 3): run labelled queries over one indexed
vault with each graph adjustment below applied to the fused ranking (before exact-first and the
other priors), and score every variant per category. None of them won on held-out questions
without an existing set falling, so none is in the engine (eval/reports/fusion/issue30-graph.md).

The vault is indexed once into HOME (a scratch home, never the user's); the variants differ
only at query time, so one index serves them all::

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/models/combine_sets.py --out /tmp/all \\
        oh=qrels/obsidian-help para=qrels/obsidian-help-para intl=qrels/obsidian-help-intl
    PYTHONPATH=eval/bench .venv/bin/python eval/archive/fusion/graph_evidence.py --home /tmp/graph-exp/home \\
        --vault ../shared/vaults/obsidian-help --queries /tmp/all.jsonl --qrels /tmp/all.json \\
        --out eval/reports/fusion/issue30/graph-obsidian-help.json

    # the sample set (its vault and files ship in the package)
    PYTHONPATH=eval/bench .venv/bin/python eval/archive/fusion/graph_evidence.py --home /tmp/graph-exp/sample \\
        --vault hybrid/sample_vault --queries hybrid/data/sample.queries.jsonl \\
        --qrels hybrid/data/sample.qrels.json --out eval/reports/fusion/issue30/graph-sample.json

Variants: ``base`` (none), ``prior=W`` (in-degree prior of weight W), ``boost=W/N`` (the
neighbours of the N best notes lifted by W × their score), ``anchor=W`` (anchor text: BM25 over
the lines that link to each note, fused as a third RRF list of weight W over the candidates —
a query-time stand-in for adding anchor text to the lexical index), and combinations
``prior=W+boost=W/N`` (``--variants``, comma-separated; default: a grid of each alone). Each query is searched once
(hybrid mode, the default settings) and its fused ranking recorded; every variant is replayed
on it: the graph stages, then the engine's own exact-first and recency priors. Passages are not
thinned of overlaps as ``hybrid query`` does, for every variant alike, so ``base`` comes within
a hair of ``hybrid eval``'s figures, not exactly on them.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace

PRIORS = (0.02, 0.05, 0.1, 0.2, 0.4)
BOOSTS = (0.02, 0.05, 0.1, 0.2, 0.3)
TOPS = (1, 3, 5)
ANCHORS = (0.25, 0.5, 1.0, 1.5)
DEFAULT_VARIANTS = (["base"] + [f"prior={w}" for w in PRIORS]
                    + [f"boost={w}/{n}" for n in TOPS for w in BOOSTS] + [f"anchor={w}" for w in ANCHORS])


def parse_variant(text: str) -> tuple[float, float, int, float]:
    """``prior=W+boost=W/N+anchor=W`` → (prior weight, boost weight, boost top, anchor weight)."""
    prior, boost, top, anchor = 0.0, 0.0, 3, 0.0
    for part in text.split("+"):
        name, _, value = part.partition("=")
        if name == "anchor":
            anchor = float(value)
        elif name == "prior":
            prior = float(value)
        elif name == "boost":
            w, _, n = value.partition("/")
            boost, top = float(w), int(n or 3)
        elif name != "base":
            raise SystemExit(f"unknown variant {text!r}")
    return prior, boost, top, anchor


def anchor_docs(graph, root: Path) -> dict[int, str]:
    """Each linked note's anchor text: the lines of the notes linking to it that hold the link
    (``[[Note|shown text]]`` and the sentence around it), read from the vault's files."""
    from hybrid.app.links import link_line
    docs: dict[int, list[str]] = {}
    for fid, outs in graph.out.items():
        src = graph.notes[fid].path
        text = (root / src).read_text(encoding="utf-8", errors="replace")
        for to in outs:
            _, line = link_line(graph, text, to, src)
            if line:
                docs.setdefault(to, []).append(line)
    return {fid: "\n".join(lines) for fid, lines in docs.items()}


class AnchorIndex:
    """BM25 (k1 1.2, b 0.75) over the anchor documents, with the vault's own analyzer: a
    query-time stand-in for anchor text in each note's lexical document, to see whether it is
    worth indexing."""

    def __init__(self, docs: dict[int, str], analyze):
        import math
        from collections import Counter
        self.analyze = analyze
        self.tf = {fid: Counter(analyze(t)) for fid, t in docs.items()}
        self.len = {fid: sum(c.values()) for fid, c in self.tf.items()}
        self.avg = sum(self.len.values()) / max(1, len(self.len))
        df = Counter(w for c in self.tf.values() for w in c)
        n = len(self.tf)
        self.idf = {w: math.log(1 + (n - d + 0.5) / (d + 0.5)) for w, d in df.items()}

    def ranking(self, text: str) -> list[int]:
        words = set(self.analyze(text))
        scores = {}
        for fid, c in self.tf.items():
            s = sum(self.idf[w] * c[w] * 2.2 / (c[w] + 1.2 * (0.25 + 0.75 * self.len[fid] / self.avg))
                    for w in words if w in c)
            if s > 0:
                scores[fid] = s
        return sorted(scores, key=lambda f: -scores[f])


# --- the two adjustments tried (not shipped: see eval/reports/fusion/issue30-graph.md) --------------
# indegree_prior: each chunk's score × (1 + W · log(1 + in-degree) / log(1 + the vault's largest
# in-degree)), at most 1 + W. neighbour_boost: every chunk of a note linked (either direction)
# with one of the N best notes gets W × that note's score added (one hop, candidates only).

def _note(key, rows: Mapping) -> tuple[str, int]:
    return (key[0], rows[key].file_id)


def indegree_prior(ranked: Sequence, rows: Mapping,
                   graphs: Mapping, weight: float) -> list:
    """``ranked`` (best first) with each score lifted by its note's damped in-degree, re-sorted
    (ties keep their order). ``weight`` 0, or a vault without links, leaves it as it is."""
    if weight <= 0:
        return list(ranked)
    top = {v: max((len(b) for b in g.back.values()), default=0) for v, g in graphs.items()}
    out = []
    for key, score in ranked:
        vault, fid = _note(key, rows)
        g, most = graphs.get(vault), top.get(vault, 0)
        lift = 0.0
        if g is not None and most > 0:
            lift = weight * math.log1p(len(g.backlinks(fid))) / math.log1p(most)
        out.append((key, score * (1.0 + lift)))
    out.sort(key=lambda kv: -kv[1])
    return out


def neighbour_boost(ranked: Sequence, rows: Mapping,
                    graphs: Mapping, weight: float, top: int = 3) -> list:
    """``ranked`` (best first) with every chunk of a note linked with one of the ``top`` best
    notes lifted by ``weight`` × the best such note's score (its best chunk's), re-sorted. The
    strong notes themselves are not lifted by each other, so their order stays."""
    if weight <= 0 or top <= 0:
        return list(ranked)
    strong: dict = {}
    for key, score in ranked:
        note = _note(key, rows)
        if note not in strong:
            strong[note] = score
            if len(strong) == top:
                break
    lift: dict = {}
    for (vault, fid), score in strong.items():
        g = graphs.get(vault)
        if g is None:
            continue
        for other in g.neighbours(fid):
            n = (vault, other)
            if n not in strong:
                lift[n] = max(lift.get(n, 0.0), weight * score)
    if not lift:
        return list(ranked)
    out = [(key, score + lift.get(_note(key, rows), 0.0)) for key, score in ranked]
    out.sort(key=lambda kv: -kv[1])
    return out


def capture(store: list) -> None:
    """Wrap the pipeline's priors stage to record what it is given (the fused ranking, before
    exact-first and the other priors), so each variant is replayed without searching again."""
    from hybrid.retrieval import pipeline
    plain = pipeline.apply_priors

    def recording(fused, arms, rows, parsed, mode, settings):
        store.append((list(fused), copy.deepcopy(arms), rows, parsed, mode, settings))
        return plain(fused, arms, rows, parsed, mode, settings)
    pipeline.apply_priors = recording
    store.append(plain)


def replay(seen, plain, graphs: dict, variant: tuple[float, float, int, float],
           anchors: list[int] | None = None) -> list:
    """The ranked passages (path, heading path) of one recorded search under ``variant``: the
    graph stages, then the engine's own priors, as ``run_search`` orders them."""
    from hybrid.eval.run import DEPTH
    fused, arms, rows, parsed, mode, settings = seen
    prior, boost, top, anchor = variant
    if anchor and anchors:  # a third RRF list, over the candidates the arms found
        at = {fid: r for r, fid in enumerate(anchors, 1)}
        fused = sorted(((k, s + anchor / (settings.rrf_k + at[rows[k].file_id]) if rows[k].file_id in at else s)
                        for k, s in fused), key=lambda kv: -kv[1])
    fused = indegree_prior(fused, rows, graphs, prior)
    fused = neighbour_boost(fused, rows, graphs, boost, top)
    fused = plain(fused, copy.deepcopy(arms), rows, parsed, mode, settings)
    return [SimpleNamespace(path=rows[k].path, heading_path=rows[k].heading.split(" > ") if rows[k].heading else [])
            for k, _ in fused[:DEPTH]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", required=True, type=Path, help="scratch HYBRID_HOME (indexed here once)")
    ap.add_argument("--vault", required=True, type=Path)
    ap.add_argument("--queries", required=True, type=Path)
    ap.add_argument("--qrels", required=True, type=Path)
    ap.add_argument("--name", default="v", help="the vault's name in HOME (default: v)")
    ap.add_argument("--variants", default=",".join(DEFAULT_VARIANTS))
    ap.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = ap.parse_args()

    from ranx import Qrels, Run, evaluate

    import hybrid
    from hybrid.eval.inputs import Problems, load_qrels, load_queries
    from hybrid.eval.run import DEPTH, NO_HIT, aggregate, answer_at
    from hybrid.retrieval.graph import LinkGraph

    problems = Problems()
    queries = load_queries(args.queries, problems)
    qrels = load_qrels(args.qrels, problems)
    queries = {q: v for q, v in queries.items() if q in qrels}
    h = hybrid.open(args.home)
    if args.name not in h.config.vaults:
        h.add_vault(args.vault.resolve(), args.name)
    t0 = time.perf_counter()
    report = h.index([args.name])[0]
    print(f"index: {report.added} added, {report.unchanged} unchanged, {report.chunks} chunks "
          f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    store = h.session.store(h.config.vault(args.name))
    graph = LinkGraph.build(store.catalog.notes())
    edges = sum(len(x) for x in graph.out.values())
    print(f"graph: {len(graph.notes)} notes, {edges} links, {len(graph.back)} notes linked to",
          file=sys.stderr)
    recorded: list = []
    capture(recorded)
    plain = recorded.pop()
    searches = {}
    t0 = time.perf_counter()
    for qid, q in queries.items():
        recorded.clear()
        h.search(q.text, top_k=DEPTH, passages=True)
        searches[qid] = recorded[0] if recorded else None  # None: a listing, or nothing found
    print(f"searched {len(queries)} queries once ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    anchor_lists: dict = {}
    if "anchor=" in args.variants:
        index = AnchorIndex(anchor_docs(graph, args.vault), store.lexical.stem.analyze)
        anchor_lists = {qid: index.ranking(q.text) for qid, q in queries.items()}
        print(f"anchor text: {len(index.tf)} notes have some", file=sys.stderr)
    cats = sorted({q.category for q in queries.values()})
    qr = Qrels({q: dict(d) for q, d in qrels.items()})
    out: dict = {"queries": len(queries), "notes": len(graph.notes), "links": edges, "variants": {}}
    for name in args.variants.split(","):
        variant = parse_variant(name)
        run = {}
        for qid in queries:
            hits = (replay(searches[qid], plain, {args.name: graph}, variant, anchor_lists.get(qid))
                    if searches[qid] else [])
            run[qid] = aggregate(hits, qrels[qid]) or {NO_HIT: 0.0}
        nd = evaluate(qr, Run(run), "ndcg@10", return_mean=False, make_comparable=True)
        per = dict(zip(qr.keys(), map(float, nd)))
        a1 = {q: answer_at(run[q], qrels[q], 1) for q in run}
        row: dict = {}
        for c in [*cats, "all"]:
            ids = [q for q in queries if c in ("all", queries[q].category)]
            row[c] = {"n": len(ids), "ndcg@10": round(statistics.mean(per[q] for q in ids), 4),
                      "answer@1": round(statistics.mean(a1[q] for q in ids), 4)}
        row["per_query_ndcg"] = {q: round(per[q], 4) for q in queries}
        out["variants"][name] = row
        print(f"{name:24s} " + "  ".join(f"{c} {row[c]['ndcg@10']:.3f}/{row[c]['answer@1']:.2f}"
                                          for c in [*cats, "all"]), flush=True)
    h.close()
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
