"""Fit the confidence models of ``hybrid/retrieval/confidence.py`` and check them on held-out queries.

Data: every hit (top 10) of every labelled query, in hybrid, vector and lexical mode, labelled 1
when its note (or, for a query judged by section, its section) is judged relevant. Queries:

- over obsidian-help: ``qrels/obsidian-help`` (50, no split field: odd-numbered ones tune, even
  ones held out), ``obsidian-help-para`` (48), ``obsidian-help-none`` (40 English questions the
  vault cannot answer), ``obsidian-help-intl`` (68 questions in other languages) and
  ``obsidian-help-none-intl`` (24 unanswerable ones in 12 other languages), each with its own
  tune / heldout split;
- the bundled sample vault's 70 queries (odd / even), ``qrels/sample-none`` (40 questions it
  cannot answer: 16 English, 24 in 12 other languages), and ``qrels/mixed-languages`` (20 English
  and other-language questions over the sample vault with notes in 8 other languages; odd / even).

A model is fitted per scorer, on the tune hits of the queries that scorer scored: ``full`` (the
vector arm scored by MiniLM: English questions in an English vault), ``mix`` (scored by the
default mix's multilingual half too: questions in other languages, and English ones over vaults
that hold other languages), ``relative`` (any embedder: no absolute cosine) and ``lexical``.
Logistic regression, L2, by Newton's method in numpy; ``--write`` writes
``hybrid/data/confidence.json``. The report gives per model and split the Brier score, expected
calibration error (10 bins) and ROC AUC, and per language group (English questions, questions in
other languages) on the held-out split, as an answer shows them (each query's confidences made
non-increasing down the list): the ECE, how often a right first hit comes with "nothing
relevant" (no hit fair or better) and how often an unanswerable question gets a fair or strong hit.

    .venv/bin/python eval/bench/calibrate_confidence.py [--write] [--report eval/reports/confidence.md]
    .venv/bin/python eval/bench/calibrate_confidence.py --check --reuse   # the shipped models on the same hits
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

import common
import mixed_languages
import numpy as np

from hybrid.core.lang import foreign
from hybrid.embedders.mix import SURE_ENGLISH
from hybrid.retrieval import confidence
from hybrid.retrieval.hits import FAIR, confidence_label
from hybrid.retrieval.notes import monotone

ROOT = Path(__file__).resolve().parents[2]
QRELS = ROOT / "qrels"
DATA = ROOT / "hybrid" / "data"
MODES = ("hybrid", "vector", "lexical")
# (vault, set, folder): the vault ``oh`` is obsidian-help, ``mixed`` the sample vault with the
# notes of qrels/mixed-languages/ (eval/bench/mixed_languages.py)
SETS = (("oh", "obsidian-help", QRELS), ("oh", "obsidian-help-para", QRELS), ("oh", "obsidian-help-none", QRELS),
        ("oh", "obsidian-help-intl", QRELS), ("oh", "obsidian-help-none-intl", QRELS),
        ("sample", "sample", DATA), ("sample", "sample-none", QRELS), ("mixed", "mixed-languages", QRELS))


def load_set(name: str, folder: Path = QRELS) -> tuple[list[dict], dict[str, dict[str, int]]]:
    queries = [json.loads(line) for line in (folder / f"{name}.queries.jsonl").read_text().splitlines() if line]
    qrels_file = folder / f"{name}.qrels.json"
    qrels = json.loads(qrels_file.read_text()) if qrels_file.exists() else {}
    return queries, qrels


def split_of(q: dict, i: int) -> str:
    """A query's own split, else odd-numbered ones tune and even ones held out."""
    return q.get("split") or ("tune" if i % 2 == 0 else "heldout")


def language(text: str) -> str:
    """The language group of a question: ``en``, or ``other`` (as the default mix reads it)."""
    return "en" if foreign(text) <= SURE_ENGLISH else "other"


def scorer(embedder_ids: list[str], has_vector: bool) -> str:
    """The model a search's confidence uses (:func:`hybrid.retrieval.confidence.model_name`)."""
    return confidence.model_name(has_vector, set(embedder_ids))


def collect(h, vault: str, name: str, queries, qrels) -> list[dict]:
    """One record per hit: features, scorer, label, split, language group, query id and rank."""
    captured: list[tuple] = []
    real = confidence.annotate

    def spy(hits, rows, vector_scores, parsed, analyze, embedder_ids, ranks=None, kind="local"):
        feats = confidence.features(hits, rows, vector_scores, parsed, analyze, ranks)
        captured.append((list(hits), feats, scorer(sorted(embedder_ids), bool(vector_scores))))
        return real(hits, rows, vector_scores, parsed, analyze, embedder_ids, ranks, kind)

    confidence.annotate = spy
    out = []
    try:
        for i, q in enumerate(queries):
            relevant = {doc for doc, grade in qrels.get(q["qid"], {}).items() if grade > 0}
            for mode in MODES:
                captured.clear()
                h.search(q["text"], vaults=[vault], mode=mode, top_k=10, passages=True)
                if not captured:  # no hit at all
                    continue
                hits, feats, model = captured[-1]
                for rank, (hit, f) in enumerate(zip(hits, feats), 1):
                    section = f"{hit.path}#{' > '.join(hit.heading_path)}"
                    out.append({"set": name, "qid": q["qid"], "mode": mode, "model": model, "rank": rank,
                                "split": split_of(q, i), "answerable": bool(relevant),
                                "language": language(q["text"]),
                                "label": int(hit.path in relevant or section in relevant), "features": f})
    finally:
        confidence.annotate = real
    return out


def fit(x: np.ndarray, y: np.ndarray, l2: float = 1.0, iters: int = 50) -> np.ndarray:
    """Logistic regression weights (bias last) by Newton's method with an L2 penalty on the
    weights (not the bias)."""
    X = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(X.shape[1])
    reg = np.full(X.shape[1], l2)
    reg[-1] = 0.0
    for _ in range(iters):
        p = 1 / (1 + np.exp(-X @ w))
        grad = X.T @ (p - y) + reg * w
        hess = (X * (p * (1 - p))[:, None]).T @ X + np.diag(reg + 1e-9)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def metrics(p: np.ndarray, y: np.ndarray) -> dict:
    brier = float(np.mean((p - y) ** 2)) if len(p) else float("nan")
    bins = np.minimum((p * 10).astype(int), 9)
    ece = float(sum(abs(p[bins == b].mean() - y[bins == b].mean()) * (bins == b).sum()
                    for b in range(10) if (bins == b).any()) / max(1, len(p)))
    pos, neg = p[y == 1], p[y == 0]
    auc = float(((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum())
                / max(1, len(pos) * len(neg)))
    return {"n": int(len(p)), "positives": int(y.sum()), "brier": round(brier, 4), "ece": round(ece, 4),
            "auc": round(auc, 4)}


def probabilities(model: dict, records: list[dict]) -> np.ndarray:
    if not records:
        return np.zeros(0)
    x = np.array([[r["features"][f] for f in model["features"]] for r in records])
    return 1 / (1 + np.exp(-(x @ np.array(model["weights"]) + model["bias"])))


def as_shown(records: list[dict], probs: np.ndarray) -> np.ndarray:
    """Each query's confidences made non-increasing down its list, as an answer in passages
    shows them (:func:`hybrid.retrieval.notes.monotone`)."""
    out = np.array(probs, dtype=float)
    by_query: dict[tuple, list[int]] = collections.defaultdict(list)
    for i, r in enumerate(records):
        by_query[(r["set"], r["qid"], r["mode"])].append(i)
    for idx in by_query.values():
        idx.sort(key=lambda i: records[i]["rank"])
        out[idx] = [v for v in monotone([float(out[i]) for i in idx])]
    return out


def answer_table(records: list[dict], probs: np.ndarray) -> dict:
    """Per query (its top hit): the label words of answered queries (top hit relevant),
    missed ones (answerable, top hit not relevant) and unanswerable ones; "nothing relevant"
    is the share of answered queries with no hit fair or better, "false fair" the share of
    unanswerable ones with one."""
    by_query: dict[tuple, list[tuple[int, int, float, bool, str]]] = collections.defaultdict(list)
    for r, p in zip(records, probs):
        by_query[(r["set"], r["qid"], r["mode"])].append((r["rank"], r["label"], float(p), r["answerable"],
                                                          r["model"]))
    out: dict[str, dict[str, int]] = {}
    unsure: collections.Counter = collections.Counter()
    for hits in by_query.values():
        hits.sort()
        _, label, p, answerable, model = hits[0]
        kind = "unanswerable" if not answerable else ("top hit relevant" if label else "top hit wrong")
        out.setdefault(kind, {"strong": 0, "fair": 0, "weak": 0})[confidence_label(p)] += 1
        # a first hit near the cut: unknown, not "nothing relevant"
        # (hybrid.retrieval.confidence.cannot_tell; its identifier rule is not modelled)
        floor = confidence.KEYWORDS_NOTHING if model == "lexical" else confidence.NOTHING_BELOW
        if floor <= p < FAIR:
            unsure[kind] += 1
    answered, none = out.get("top hit relevant", {}), out.get("unanswerable", {})
    return {"labels": out,
            "nothing_relevant": round((answered.get("weak", 0) - unsure["top hit relevant"])
                                      / max(1, sum(answered.values())), 3),
            "unknown": round(unsure["top hit relevant"] / max(1, sum(answered.values())), 3),
            "unanswerable_unknown": round(unsure["unanswerable"] / max(1, sum(none.values())), 3),
            "false_fair": round((none.get("fair", 0) + none.get("strong", 0)) / max(1, sum(none.values())), 3),
            "answered": sum(answered.values()), "unanswerable": sum(none.values())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, default=ROOT / "eval" / "out" / "confidence-home")
    ap.add_argument("--write", action="store_true", help="write hybrid/data/confidence.json")
    ap.add_argument("--report", type=Path, help="write a markdown report here")
    ap.add_argument("--l2", type=float, default=1.0)
    ap.add_argument("--reuse", action="store_true",
                    help="read the hits the last run collected under --home instead of searching again")
    ap.add_argument("--check", action="store_true",
                    help="fit nothing: report the models hybrid/data/confidence.json holds")
    ap.add_argument("--keep", nargs="*", default=[], metavar="MODEL",
                    help="keep these models as hybrid/data/confidence.json holds them (fit the rest)")
    args = ap.parse_args()

    saved = args.home / "records.json"  # scratch: the hits and their features
    if args.reuse and saved.exists():
        records = json.loads(saved.read_text())
    else:
        h = common.open_both_vaults(args.home)
        if "mixed" not in {v.name for v in h.vaults}:
            h.add_vault(mixed_languages.build(args.home / "mixed-vault"), "mixed")
            h.index()
        records = []
        for vault, name, folder in SETS:
            records += collect(h, vault, name, *load_set(name, folder))
        h.close()
        saved.write_text(json.dumps(records))

    result: dict = {"models": {}, "fit": {}, "languages": {}}
    for model, feats in confidence.MODEL_FEATURES.items():
        # relative: every hit the vector arm scored, without its absolute cosine
        rows = [r for r in records if r["model"] == model or (model == "relative" and r["model"] != "lexical")]
        tune = [r for r in rows if r["split"] == "tune"]
        if args.check or model in args.keep:
            result["models"][model] = confidence.models().get(model) or confidence.models()["relative"]
        else:
            X = np.array([[r["features"][f] for f in feats] for r in tune])
            y = np.array([r["label"] for r in tune], dtype=float)
            w = fit(X, y, args.l2)
            result["models"][model] = {"features": list(feats), "weights": [round(float(v), 5) for v in w[:-1]],
                                       "bias": round(float(w[-1]), 5)}
        fitted: dict = {}
        for split in ("tune", "heldout"):
            part = [r for r in rows if r["split"] == split]
            ps = probabilities(result["models"][model], part)
            fitted[split] = {**metrics(ps, np.array([r["label"] for r in part], dtype=float)),
                             **answer_table(part, as_shown(part, ps))}
        result["fit"][model] = fitted
    # as a search shows them: each hit by the model its search applies
    for lang in ("en", "other"):
        for mode in ("hybrid", "lexical"):
            for split in ("tune", "heldout"):
                part = [r for r in records if r["language"] == lang and r["mode"] == mode and r["split"] == split]
                ps = np.zeros(len(part))
                for model in result["models"]:
                    idx = [i for i, r in enumerate(part) if r["model"] == model]
                    ps[idx] = probabilities(result["models"][model], [part[i] for i in idx])
                shown = as_shown(part, ps)
                result["languages"][f"{lang} {mode} {split}"] = {
                    **metrics(shown, np.array([r["label"] for r in part], dtype=float)),
                    **answer_table(part, shown)}
    print(json.dumps(result, indent=1))
    if args.write:
        payload = {"about": "fitted by eval/bench/calibrate_confidence.py; see hybrid/retrieval/confidence.py",
                   "models": result["models"]}
        (DATA / "confidence.json").write_text(json.dumps(payload, indent=1) + "\n")
    if args.report:
        args.report.write_text(render(result))
    return 0


def render(result: dict) -> str:
    lines = ["# Confidence calibration", "",
             "`.venv/bin/python eval/bench/calibrate_confidence.py --keep lexical --write "
             "--report eval/reports/confidence.md`",
             "", "Per model, fitted on the tune split; every hit of the top 10 (all three modes pooled where",
             "the model applies). Brier and ECE: lower is better; AUC: how well it orders relevant above not.",
             "\"Nothing relevant\": answered queries (top hit relevant) with no hit fair or better; \"false",
             "fair\": unanswerable queries with a fair or strong hit (confidences as shown: non-increasing",
             "down each list). \"Unknown\": no hit fair, but the first near the cut (`confidence.cannot_tell`:",
             "at or above `NOTHING_BELOW`, or `KEYWORDS_NOTHING` without a vector arm), so the answer says",
             "neither; shown for answered and for unanswerable queries.", "",
             "## By language group, as a search shows them", "",
             "| questions | mode | split | hits | ECE | AUC | answered | nothing relevant | unknown "
             "| unanswerable | false fair | unknown |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for key, v in result["languages"].items():
        lang, mode, split = key.split()
        lines.append(f"| {'English' if lang == 'en' else 'other languages'} | {mode} | {split} | {v['n']} | "
                     f"{v['ece']} | {v['auc']} | {v['answered']} | {v['nothing_relevant']:.0%} | "
                     f"{v['unknown']:.0%} | {v['unanswerable']} | {v['false_fair']:.0%} | "
                     f"{v['unanswerable_unknown']:.0%} |")
    lines.append("")
    for model, fitted in result["fit"].items():
        m = result["models"][model]
        weights = ", ".join(f"{f} {w:+.3f}" for f, w in zip(m["features"], m["weights"]))
        lines += [f"## `{model}`", "", f"weights: {weights}, bias {m['bias']:+.3f}", "",
                  "| split | hits | relevant | Brier | ECE | AUC |", "|---|---|---|---|---|---|"]
        for split, v in fitted.items():
            lines.append(f"| {split} | {v['n']} | {v['positives']} | {v['brier']} | {v['ece']} | {v['auc']} |")
        lines += ["", "Top hit of each query, by label (strong / fair / weak):", "",
                  "| split | kind | strong | fair | weak |", "|---|---|---|---|---|"]
        for split, v in fitted.items():
            for kind, c in sorted(v["labels"].items()):
                lines.append(f"| {split} | {kind} | {c['strong']} | {c['fair']} | {c['weak']} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
