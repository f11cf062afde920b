"""Issue #52 feasibility, questions 2 and 3: milvus-lite's BM25 against tantivy's on the same
tokens, and the multi-field sum (tantivy: sum over fields of boost x BM25(field)) as one BM25
function per field fused by hybrid_search + WeightedRanker(norm_score=False).

Corpus: obsidian-help's English notes split into paragraphs (the first --chunks, default
2,000), tokens = lowercase \\w+ words; Milvus gets each token hex-encoded (eval/archive/milvus/
analyzers.py shows the standard analyzer keeps those whole), tantivy gets the plain tokens
through a whitespace tokenizer. Queries: qrels/obsidian-help.queries.jsonl (50), their unique
tokens. A plain-Python BM25 with exact document lengths is the third opinion, to tell apart
what differs by formula, by statistics scope (segments, deleted rows) and by tantivy's
one-byte field-norm quantization.

    .venv/bin/python eval/archive/milvus/bm25_parity.py [--chunks 2000]   # ~2 min; JSON on stdout
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter, defaultdict
from pathlib import Path

from _study import SCRATCH, Timer, client, dump, encode, fresh, paragraphs, queries, release, words
from pymilvus import AnnSearchRequest, DataType, Function, FunctionType, WeightedRanker

K1, B = 1.2, 0.75
FIELDS = {"title": 0.5, "headings": 0.5, "body": 1.0, "ident": 1.0}  # hybrid's FIELD_BOOSTS + IDENT_BOOST
TOP = 10


# --- references -------------------------------------------------------------------------------
class ExactBM25:
    """BM25 (Lucene/tantivy idf, k1, b) with exact lengths over ``docs`` {id: tokens}."""

    def __init__(self, docs: dict[int, list[str]], k1: float = K1, b: float = B):
        self.k1, self.b = k1, b
        self.n = len(docs)
        self.len = {i: len(t) for i, t in docs.items()}
        self.avgdl = sum(self.len.values()) / max(self.n, 1)
        self.post: dict[str, dict[int, int]] = defaultdict(dict)
        for i, toks in docs.items():
            for t, f in Counter(toks).items():
                self.post[t][i] = f

    def scores(self, q: list[str]) -> dict[int, float]:
        out: dict[int, float] = defaultdict(float)
        for t in set(q):
            p = self.post.get(t, {})
            if not p:
                continue
            idf = math.log(1 + (self.n - len(p) + 0.5) / (len(p) + 0.5))
            for i, f in p.items():
                out[i] += idf * f * (self.k1 + 1) / (f + self.k1 * (1 - self.b + self.b * self.len[i] / self.avgdl))
        return out


def tantivy_index(docs: dict[int, dict[str, list[str]]], fields):
    import tantivy
    sb = tantivy.SchemaBuilder()
    sb.add_integer_field("id", stored=True, indexed=True)
    for f in fields:
        sb.add_text_field(f, tokenizer_name="ws")
    index = tantivy.Index(sb.build())
    index.register_tokenizer("ws", tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())
    w = index.writer(heap_size=50_000_000, num_threads=1)
    for i, d in docs.items():
        w.add_document(tantivy.Document(id=i, **{f: " ".join(d[f]) for f in fields}))
    w.commit()
    w.wait_merging_threads()
    index.reload()
    return index


def tantivy_search(index, q: dict[str, list[str]], boosts: dict[str, float], k=TOP):
    import tantivy
    Q, s = tantivy.Query, index.searcher()
    clauses = [(tantivy.Occur.Should, Q.boost_query(Q.term_query(index.schema, f, t), b))
               for f, b in boosts.items() for t in sorted(set(q[f]))]
    if not clauses:
        return {}
    res = s.search(Q.boolean_query(clauses), k)
    return {s.doc(a)["id"][0]: sc for sc, a in res.hits}


# --- milvus -----------------------------------------------------------------------------------
def milvus_collection(c, name, fields, nested=True):
    """One BM25 function per field. ``nested``: pass k1/b as params={"params": {...}}: pymilvus
    3.0.2 flattens params={...} into top-level keys, which milvus-lite 3.2.2 drops (it reads
    only a key named "params"), so the plain form scores with lite's k1=1.5, b=0.75."""
    s = c.create_schema(auto_id=False)
    s.add_field("id", DataType.INT64, is_primary=True)
    ip = c.prepare_index_params()
    for f in fields:
        s.add_field(f, DataType.VARCHAR, max_length=65_535, enable_analyzer=True)
        s.add_field(f"sp_{f}", DataType.SPARSE_FLOAT_VECTOR)
        s.add_function(Function(name=f"bm25_{f}", function_type=FunctionType.BM25,
                                input_field_names=[f], output_field_names=[f"sp_{f}"]))
        ip.add_index(f"sp_{f}", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                     params={"params": {"bm25_k1": K1, "bm25_b": B}} if nested else {"bm25_k1": K1, "bm25_b": B})
    c.create_collection(name, schema=s, index_params=ip)


def rows(docs, ids, fields):
    return [{"id": i, **{f: encode(docs[i][f]) for f in fields}} for i in ids]


def milvus_search(c, name, qtoks, k=TOP, field="body"):
    if not qtoks:
        return {}
    r = c.search(name, data=[encode(sorted(set(qtoks)))], anns_field=f"sp_{field}", limit=k,
                 output_fields=["id"])
    return {h["id"]: h["distance"] for h in r[0]}


def compare(got: dict[int, float], ref_scores: dict[int, float], k=TOP, short=()) -> dict:
    """``got``: an engine's top-k {id: score}; ``ref_scores``: every doc's reference score;
    ``short``: ids whose length tantivy's field norm stores exactly (<= 40 tokens)."""
    ref_top = sorted(ref_scores, key=lambda i: (-ref_scores[i], i))[:k]
    diff = {i: abs(s - ref_scores.get(i, 0.0)) / max(ref_scores.get(i, 0.0), 1e-9) for i, s in got.items()}
    floor = min((ref_scores.get(i, 0.0) for i in got), default=0.0)
    better_missed = sum(1 for i in ref_top if i not in got and ref_scores[i] > floor * (1 + 1e-5))
    return {"overlap": len(set(got) & set(ref_top)), "of": min(k, len(ref_top)), "better_missed": better_missed,
            "max_rel_diff": max(diff.values(), default=0.0),
            **({"max_rel_diff_short": max((d for i, d in diff.items() if i in short), default=0.0)} if short else {})}


def summary(per_query: list[dict]) -> dict:
    """Over the queries with at least one reference hit."""
    per_query = [p for p in per_query if p["of"]]
    n = len(per_query)
    return {"queries with hits": n,
            "mean top-10 overlap": round(sum(p["overlap"] / max(p["of"], 1) for p in per_query) / n, 4),
            "queries with identical top-10 set": sum(p["overlap"] == p["of"] for p in per_query),
            **({"queries whose top-10 misses a better-scoring doc (not a tie)":
                sum(p["better_missed"] > 0 for p in per_query)}
               if all("better_missed" in p for p in per_query) else {}),
            "max relative score diff": float(f"{max(p['max_rel_diff'] for p in per_query):.3g}"),
            "median of per-query max relative diff":
                float(f"{sorted(p['max_rel_diff'] for p in per_query)[n // 2]:.3g}"),
            **({"max relative diff, docs of <= 40 tokens":
                float(f"{max(p['max_rel_diff_short'] for p in per_query):.3g}")}
               if all("max_rel_diff_short" in p for p in per_query) else {})}


# --- question 2 -------------------------------------------------------------------------------
def per_segment(segments: list[tuple[dict[int, list[str]], set[int]]], q: list[str]) -> dict[int, float]:
    """BM25 as milvus-lite's code reads (sparse_inverted.py): each segment (and the memtable)
    scored with its own N, df and avgdl, over all its rows (deleted and superseded ones
    included); ``segments``: (the segment's rows, the ids whose live version it holds)."""
    out: dict[int, float] = {}
    for rows_, mine in segments:
        out.update({i: s for i, s in ExactBM25(rows_).scores(q).items() if i in mine})
    return out


def manifest_files(path: str, name: str) -> dict:
    import json
    m = json.loads((Path(path) / "collections" / name / "manifest.json").read_text())
    p = m["partitions"]["_default"]
    return {"data files": len(p["data_files"]), "delta files": len(p["delta_files"])}


def q2(docs, qs):
    bodies = {i: d["body"] for i, d in docs.items()}
    fb = ["body"]
    out = {}
    path = fresh("parity")
    c = client(path)

    def run(name, live: dict[int, list[str]], segments=None):
        """Milvus top-10 (distance negated) against exact BM25 on ``live`` and tantivy built
        clean on ``live``; with ``segments``, also against :func:`per_segment`."""
        ex = ExactBM25(live)
        short = {i for i, t in live.items() if len(t) <= 40}
        ti = tantivy_index({i: {"body": t} for i, t in live.items()}, fb)
        r_ex, r_ti, r_tm, r_sg = [], [], [], []
        for q in qs:
            m = {i: -d for i, d in milvus_search(c, name, q).items()}
            t = tantivy_search(ti, {"body": q}, {"body": 1.0})
            full = ex.scores(q)
            r_ex.append(compare(m, full, short=short))
            r_ti.append(compare(t, full, short=short))
            r_tm.append({"overlap": len(set(m) & set(t)), "of": min(TOP, len(t)),
                         "max_rel_diff": max((abs(m[i] - t[i]) / t[i] for i in set(m) & set(t)), default=0.0)})
            if segments:
                r_sg.append(compare(m, per_segment(segments, q)))
        res = {"milvus vs exact BM25 (live docs)": summary(r_ex), "tantivy vs exact BM25": summary(r_ti),
               "milvus vs tantivy": summary(r_tm), **manifest_files(path, name)}
        if segments:
            res["milvus vs BM25 per segment, removed/old rows counted"] = summary(r_sg)
        return res

    ids = sorted(docs)
    milvus_collection(c, "flat", fb, nested=False)
    c.insert("flat", rows(docs, ids, fb))
    lite_default = ExactBM25(bodies, k1=1.5, b=0.75)
    vs_default = [compare({i: -d for i, d in milvus_search(c, "flat", q).items()}, lite_default.scores(q)) for q in qs]
    out["0. k1/b given the documented way (params={'bm25_k1': 1.2, 'bm25_b': 0.75})"] = {
        "describe_index": c.describe_index("flat", "sp_body"), **run("flat", bodies),
        "milvus vs exact BM25 with k1=1.5, b=0.75": summary(vs_default)}
    c.drop_collection("flat")
    milvus_collection(c, "one", fb)
    out["describe_index with params={'params': {...}}"] = c.describe_index("one", "sp_body")
    with Timer() as t:
        for k in range(0, len(ids), 500):
            c.insert("one", rows(docs, ids[k:k + 500], fb))
    out["insert 2,000 rows in 4 batches (s)"] = round(t.s, 2)
    r = c.search("one", data=[encode(qs[0])], anns_field="sp_body", limit=3)
    out["distance returned (first query, top 3)"] = [h["distance"] for h in r[0]]
    out["A. all rows in the memtable (no flush)"] = run("one", bodies)
    c.flush("one")
    out["B. after flush()"] = run("one", bodies)

    # deletes: 10 % of the rows (every 10th)
    gone = set(ids[::10])
    c.delete("one", ids=sorted(gone))
    live = {i: t for i, t in bodies.items() if i not in gone}
    seg = [(bodies, set(live))]
    out["C. after deleting 10 % (tombstones in the memtable)"] = run("one", live, seg)
    c.flush("one")
    out["D. deletes flushed"] = run("one", live, seg)
    c.compact("one")
    out["E. after compact()"] = run("one", live, seg)

    # upserts: 10 % of the live rows get another paragraph's text
    up = [i for i in sorted(live) if i % 10 == 5]
    new = {i: bodies[(i + 997) % len(ids)] for i in up}
    c.upsert("one", [{"id": i, "body": encode(t)} for i, t in new.items()])
    live2 = {**live, **new}
    seg2 = [(bodies, set(live) - set(up)), (new, set(up))]
    out["F. after upserting 10 % (new text, in the memtable)"] = run("one", live2, seg2)
    c.flush("one")
    c.compact("one")
    out["G. upserts flushed + compact()"] = run("one", live2, seg2)

    # several segments: 3 inserts, each flushed (lite compacts on its own from 4 files on)
    milvus_collection(c, "three", fb)
    parts = [ids[k::3] for k in range(3)]
    for part in parts:
        c.insert("three", rows(docs, part, fb))
        c.flush("three")
    seg3 = [({i: bodies[i] for i in part}, set(part)) for part in parts]
    out["H. 3 inserts of ~667 rows, each flushed"] = run("three", bodies, seg3)
    c.compact("three")
    out["I. the same after compact()"] = run("three", bodies, seg3)
    c.upsert("three", rows(docs, ids[:1], fb))  # row 0 again, same text: a 4th data file
    c.flush("three")
    out["J. a 4th flush (an upsert of one row, same text): lite compacts on its own"] = run("three", bodies, seg3)
    release(path)
    return out


def q2_sparse_ip(docs, qs):
    """BM25 without Milvus's statistics: a SPARSE_FLOAT_VECTOR field (metric IP) holding each
    doc's BM25 term factor tf*(k1+1)/(tf+k1*(1-b+b*dl/avgdl)) under term ids from a vocabulary
    kept outside Milvus (no hashing), and the query's IDFs as the query vector's weights: the
    inner product is BM25. N, df and avgdl are then whatever the writer computes (here: the
    live docs), so segments and deletes do not change scores."""
    bodies = {i: d["body"] for i, d in docs.items()}
    vocab: dict[str, int] = {}
    for t in bodies.values():
        for w in t:
            vocab.setdefault(w, len(vocab) + 1)

    def doc_vec(toks, avgdl):
        tf = Counter(toks)
        return {vocab[w]: f * (K1 + 1) / (f + K1 * (1 - B + B * len(toks) / avgdl)) for w, f in tf.items()}

    def query_vec(q, live):
        ex = ExactBM25(live)
        return {vocab[w]: math.log(1 + (ex.n - len(ex.post[w]) + 0.5) / (len(ex.post[w]) + 0.5))
                for w in set(q) if w in vocab and ex.post.get(w)}

    path = fresh("sparseip")
    c = client(path)
    s = c.create_schema(auto_id=False)
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("sv", DataType.SPARSE_FLOAT_VECTOR)
    ip = c.prepare_index_params()
    ip.add_index("sv", index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
    c.create_collection("ip", schema=s, index_params=ip)
    avgdl = sum(map(len, bodies.values())) / len(bodies)
    ids = sorted(bodies)
    parts = [ids[k::3] for k in range(3)]
    with Timer() as t:
        for part in parts:  # three segments, as in H
            c.insert("ip", [{"id": i, "sv": doc_vec(bodies[i], avgdl)} for i in part])
            c.flush("ip")
    out = {"insert 2,000 rows as 3 flushed segments (s)": round(t.s, 2)}

    def run(live):
        ex = ExactBM25(live)
        res = []
        for q in qs:
            qv = query_vec(q, live)
            if not qv:
                continue
            r = c.search("ip", data=[qv], anns_field="sv", limit=TOP, output_fields=["id"])
            res.append(compare({h["id"]: h["distance"] for h in r[0]}, ex.scores(q)))
        return {"vs exact BM25 (live docs)": summary(res), **manifest_files(path, "ip")}

    out["3 segments"] = run(bodies)
    gone = set(ids[::10])
    c.delete("ip", ids=sorted(gone))
    live = {i: t for i, t in bodies.items() if i not in gone}
    out["after deleting 10 % (query IDFs from the live docs; doc factors still use the old avgdl)"] = run(live)
    new_avgdl = sum(map(len, live.values())) / len(live)
    c.upsert("ip", [{"id": i, "sv": doc_vec(t, new_avgdl)} for i, t in live.items()])
    out["after rewriting every live row's factors with the new avgdl"] = run(live)
    out["avgdl before / after the deletes"] = [round(avgdl, 3), round(new_avgdl, 3)]
    r = c.search("ip", data=[{vocab["note"]: 1.0}], anns_field="sv", limit=1)
    out["distance sign (IP): top hit for 'note' with weight 1"] = r[0][0]["distance"]
    release(path)
    return out


# --- question 3 -------------------------------------------------------------------------------
def q3(docs, qs_text):
    from hybrid.core.tokens import ident_tokens  # read only: hybrid's identifier tokens
    fields = list(FIELDS)
    mdocs = {i: {"title": words(d["title"]), "headings": words(d["headings"]), "body": d["body"],
                 "ident": ident_tokens(d["raw"])} for i, d in docs.items()}
    qs = [{"title": words(t), "headings": words(t), "body": words(t), "ident": ident_tokens(t)} for t in qs_text]
    ti = tantivy_index(mdocs, fields)
    path = fresh("bm25f")
    c = client(path)
    milvus_collection(c, "f", fields)
    c.insert("f", rows(mdocs, sorted(mdocs), fields))
    c.flush("f")
    exact = {f: ExactBM25({i: d[f] for i, d in mdocs.items()}) for f in fields}
    out = {"fields and boosts": FIELDS}
    for limit in (10, 100, 1000):
        r_ex, r_ti, lost = [], [], 0
        for q in qs:
            reqs = [AnnSearchRequest(data=[encode(sorted(set(q[f])))], anns_field=f"sp_{f}",
                                     param={}, limit=limit) for f in fields if q[f]]
            ws = [FIELDS[f] for f in fields if q[f]]
            res = c.hybrid_search("f", reqs, WeightedRanker(*ws, norm_score=False), limit=TOP,
                                  output_fields=["id"])
            m = {h["id"]: h["distance"] for h in res[0]}
            full: dict[int, float] = defaultdict(float)
            for f in fields:
                for i, s in exact[f].scores(q[f]).items():
                    full[i] += FIELDS[f] * s
            t = tantivy_search(ti, q, FIELDS)
            r_ex.append(compare(m, full))
            r_ti.append({"overlap": len(set(m) & set(t)), "of": min(TOP, len(t)),
                         "max_rel_diff": max((abs(m[i] - t[i]) / t[i] for i in set(m) & set(t)), default=0.0)})
            lost += sum(abs(s - full[i]) > 1e-4 * full[i] for i, s in m.items())
        out[f"per-field limit {limit}"] = {"fused top-10 vs exact weighted sum": summary(r_ex),
                                           "fused top-10 vs tantivy multi-field": summary(r_ti),
                                           "hits whose fused score misses a field's share": lost}
    # one SPARSE_FLOAT_VECTOR (IP) for all fields: term ids per (field, token) from a vocabulary
    # kept outside Milvus, doc weights = the field's BM25 term factor, query weights = boost x
    # the field's IDF: one search, no per-field limit
    vocab: dict[tuple[str, str], int] = {}
    stats = {f: (exact[f].n, exact[f].avgdl) for f in fields}

    def dvec(d):
        v = {}
        for f in fields:
            toks = d[f]
            for w, tf in Counter(toks).items():
                tid = vocab.setdefault((f, w), len(vocab) + 1)
                v[tid] = tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(toks) / stats[f][1]))
        return v

    def qvec(q):
        v = {}
        for f in fields:
            for w in set(q[f]):
                df = len(exact[f].post.get(w, {}))
                if df and (f, w) in vocab:
                    v[vocab[(f, w)]] = FIELDS[f] * math.log(1 + (stats[f][0] - df + 0.5) / (df + 0.5))
        return v

    s2 = c.create_schema(auto_id=False)
    s2.add_field("id", DataType.INT64, is_primary=True)
    s2.add_field("sv", DataType.SPARSE_FLOAT_VECTOR)
    ip2 = c.prepare_index_params()
    ip2.add_index("sv", index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
    c.create_collection("fip", schema=s2, index_params=ip2)
    c.insert("fip", [{"id": i, "sv": dvec(d)} for i, d in mdocs.items()])
    c.flush("fip")
    r_ex = []
    for q in qs:
        full: dict[int, float] = defaultdict(float)
        for f in fields:
            for i, sc in exact[f].scores(q[f]).items():
                full[i] += FIELDS[f] * sc
        qv = qvec(q)
        if not qv:
            continue
        res = c.search("fip", data=[qv], anns_field="sv", limit=TOP, output_fields=["id"])
        r_ex.append(compare({h["id"]: h["distance"] for h in res[0]}, full))
    out["one fielded sparse IP vector (hybrid-computed weights), one search"] = {
        "top-10 vs exact weighted sum": summary(r_ex)}
    # the ranker's normalisation left on: what the scores become
    q = qs[0]
    reqs = [AnnSearchRequest(data=[encode(sorted(set(q[f])))], anns_field=f"sp_{f}", param={}, limit=100)
            for f in fields if q[f]]
    ws = [FIELDS[f] for f in fields if q[f]]
    a = c.hybrid_search("f", reqs, WeightedRanker(*ws, norm_score=False), limit=3, output_fields=["id"])[0]
    b = c.hybrid_search("f", reqs, WeightedRanker(*ws), limit=3, output_fields=["id"])[0]
    out["first query, top 3: norm_score=False vs default (True)"] = {
        "False": [(h["id"], round(h["distance"], 4)) for h in a],
        "True": [(h["id"], round(h["distance"], 4)) for h in b]}
    release(path)
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=2000)
    args = ap.parse_args()
    paras = paragraphs(args.chunks)
    docs = {p["id"]: {"title": p["title"], "headings": p["headings"], "body": words(p["body"]), "raw": p["body"]}
            for p in paras}
    lens = sorted(len(d["body"]) for d in docs.values())
    qtext = queries(50)
    result = {"corpus": {"chunks": len(docs), "body tokens median": lens[len(lens) // 2], "max": lens[-1],
                         "share of bodies over 40 tokens": round(sum(x > 40 for x in lens) / len(lens), 3),
                         "queries": len(qtext)}}
    result["q2"] = q2(docs, [words(t) for t in qtext])
    print("# q2 done", file=sys.stderr)
    result["q2 sparse IP"] = q2_sparse_ip(docs, [words(t) for t in qtext])
    print("# q2 sparse IP done", file=sys.stderr)
    result["q3"] = q3(docs, qtext)
    print("# q3 done", file=sys.stderr)
    dump(result)
    SCRATCH.mkdir(exist_ok=True)
