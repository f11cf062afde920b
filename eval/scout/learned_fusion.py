"""Learned fusion, tried for issue #49 (eval/reports/fusion/issue49-learned-fusion.md): each fused
candidate's features (both arms' reciprocal ranks, BM25 share of the best, cosine and its gap to
the best, the share of the question's content words the chunk and its title/heading hold, the
query's BM25 coverage) are recorded under the shipped pipeline, a logistic model (pointwise, or
RankNet pairs) is fitted on the tune queries (obsidian-help main set and the tune halves of para,
versions, intl), and every set is ranked with it in place of weighted RRF.

usage (repo root; HOME holds an index of obsidian-help as vault "oh", built with the default mix):
  .venv/bin/python eval/scout/learned_fusion.py HOME [point|pair ...]"""
import json, sys, math
from collections import defaultdict
import numpy as np
import hybrid
from hybrid.embedders.registry import make_embedder
from hybrid.eval.run import aggregate, answer_at, DEPTH, NO_HIT, section_matches
from hybrid.retrieval import pipeline, fuse
from ranx import Qrels, Run, evaluate

Q = "qrels/"
SETS = {"main": "obsidian-help", "para": "obsidian-help-para", "vers": "obsidian-help-versions",
        "intl": "obsidian-help-intl", "fresh": "obsidian-help-fresh"}
CTX = {}
orig_weights, orig_fuse = pipeline.fusion_weights, pipeline.fuse_arms

def weights_hook(targets, parsed, arms, rows, settings, fit=None):
    CTX["rows"], CTX["parsed"], CTX["store"] = rows, parsed, targets[0][1]
    return orig_weights(targets, parsed, arms, rows, settings, fit)

def features(arms, weights, fit):
    rows, parsed, store = CTX["rows"], CTX["parsed"], CTX["store"]
    stems = store.lexical.stem.stems
    want = fuse.content_stems(parsed.text, stems)
    lex, vec = arms.lexical, arms.vector
    lr = {k: i for i, (k, _) in enumerate(lex, 1)}; vr = {k: i for i, (k, _) in enumerate(vec, 1)}
    ls = dict(lex); vs = dict(vec)
    lmax = max(ls.values(), default=1.0) or 1.0
    vmax = max(vs.values(), default=0.0); vmin = min(vs.values(), default=0.0)
    wl, wv = weights or (1, 1)
    K = fit.rrf_k
    keys = list(dict.fromkeys([k for k, _ in lex] + [k for k, _ in vec]))
    qlen = len(parsed.terms)
    out = []
    for k in keys:
        r = rows[k]
        cov = fuse.covered(want, stems(f"{r.title} {r.heading} {r.text}")) if want else 1.0
        tcov = fuse.covered(want, stems(f"{r.title} {r.heading}")) if want else 0.0
        l = 1.0 / (K + lr[k]) if k in lr else 0.0
        v = 1.0 / (K + vr[k]) if k in vr else 0.0
        cos = vs.get(k, vmin)
        f = [l * (K + 1), v * (K + 1), wl / 1.0 * l * (K + 1), ls.get(k, 0.0) / lmax, cos, cos - vmax,
             cov, tcov, float(k in lr and k in vr), arms.coverage, arms.coverage * l * (K + 1),
             min(qlen, 12) / 12, 1.0 / math.log2(2 + lr.get(k, 200)), 1.0 / math.log2(2 + vr.get(k, 200))]
        out.append((k, f))
    return out

MODE = {"w": None}
def fuse_hook(mode, arms, fit, weights=None):
    base = orig_fuse(mode, arms, fit, weights)
    if mode != "hybrid":
        return base
    feats = features(arms, weights, fit)
    CTX["feats"] = [(k, f, CTX["rows"][k]) for k, f in feats]
    w = MODE["w"]
    if w is None:
        return base
    X = np.array([f for _, f in feats]); s = 1 / (1 + np.exp(-(X @ w[:-1] + w[-1])))
    out = sorted(zip([k for k, _ in feats], (0.5 * s).tolist()), key=lambda kv: -kv[1])
    return out

pipeline.fusion_weights, pipeline.fuse_arms = weights_hook, fuse_hook

def grade(row, judged):
    hp = [p.strip() for p in row.heading.split(" > ")] if row.heading else []
    g = judged.get(row.path, 0)
    for d, x in judged.items():
        if "#" in d and section_matches(d, row.path, hp):
            g = max(g, x)
    return g

def load(name):
    qs = [json.loads(l) for l in open(Q + SETS[name] + ".queries.jsonl") if l.strip()]
    qrels = json.load(open(Q + SETS[name] + ".qrels.json"))
    return [q for q in qs if q["qid"] in qrels], qrels

mix = make_embedder("mix:minilm,use-multilingual")
h = hybrid.open(sys.argv[1], embedders=[mix])
h.override(duplicate_similarity=0, recency_months=0)

def run_set(name, w=None, collect=False):
    MODE["w"] = w
    qs, qrels = load(name)
    run, data = {}, []
    for q in qs:
        hits = h.search(q["text"], top_k=DEPTH, mode="hybrid", vaults=["oh"], passages=True)
        run[q["qid"]] = aggregate(hits, qrels[q["qid"]]) or {NO_HIT: 0.0}
        if collect and "feats" in CTX:
            data.append((q, [(f, grade(r, qrels[q["qid"]])) for k, f, r in CTX["feats"]]))
        CTX.pop("feats", None)
    qr = Qrels({k: qrels[k] for k in run})
    nd = evaluate(qr, Run(run), "ndcg@10", return_mean=False, make_comparable=True)
    ndq = dict(zip(sorted(qr.keys()), map(float, nd)))
    res = defaultdict(list)
    for q in qs:
        a1 = answer_at(run[q["qid"]], qrels[q["qid"]], 1)
        for g in ("all", "split:" + q.get("split", "-"), q.get("category", "-")):
            res[g].append((ndq[q["qid"]], a1))
    summ = {g: (round(np.mean([x[0] for x in v]), 3), round(np.mean([x[1] for x in v]), 3), len(v)) for g, v in res.items()}
    return summ, data

def is_train(name, q):
    return name == "main" or (name in ("para", "vers", "intl") and q.get("split") == "tune")
def fit(alldata, kind="point", l2=1e-3, iters=3000, lr=0.5, cols=None):
    Xs, ys, ws, groups = [], [], [], []
    for name, data in alldata.items():
        for q, cands in data:
            if not is_train(name, q) or not cands: continue
            X = np.array([f for f, _ in cands]); y = np.array([g for _, g in cands], float) / 2
            if cols is not None: X = X[:, cols]
            if y.max() == 0: continue
            groups.append((X, y))
    d = groups[0][0].shape[1]
    w = np.zeros(d + 1)
    for it in range(iters):
        grad = np.zeros(d + 1)
        for X, y in groups:
            s = X @ w[:-1] + w[-1]
            if kind == "point":
                p = 1 / (1 + np.exp(-s)); e = (p - y) / len(y)
                grad[:-1] += X.T @ e; grad[-1] += e.sum()
            else:  # pairwise RankNet on pairs with different grade
                diff = y[:, None] - y[None, :]
                P = (diff > 0).astype(float)
                if P.sum() == 0: continue
                sd = s[:, None] - s[None, :]
                g = -P / (1 + np.exp(sd))  # d/ds_i of log(1+exp(-(s_i - s_j)))
                gi = g.sum(1) - g.sum(0)
                gi /= P.sum()
                grad[:-1] += X.T @ gi
        grad /= len(groups); grad[:-1] += l2 * w[:-1]
        w -= lr * grad
    return w


if __name__ == "__main__":
    alldata = {}
    for name in SETS:
        summ, alldata[name] = run_set(name, None, collect=True)
        print("rrf", name, json.dumps(summ), flush=True)
    for kind in sys.argv[2:] or ["point", "pair"]:
        w = fit(alldata, kind)
        print(kind, "weights", np.round(w, 3).tolist(), flush=True)
        for name in SETS:
            print(kind, name, json.dumps(run_set(name, w)[0]), flush=True)
