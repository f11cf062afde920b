"""Fit the confidence models of ``hybrid/retrieval/confidence.py`` and check them on held-out queries.

Data: every hit (top 10) of every labelled query, in hybrid, vector and lexical mode, labelled 1
when its note is judged relevant for the query. Queries:

- ``qrels/obsidian-help`` (50, no split field: odd-numbered ones tune, even ones held out),
- ``qrels/obsidian-help-para`` (48, its own tune / heldout split),
- ``qrels/obsidian-help-none`` (40 questions the vault cannot answer, tune / heldout split),
- the bundled sample vault's queries (all held out: another vault, written by other hands).

The models (logistic regression, L2, fitted by Newton's method in numpy) are fitted on the tune
hits only and written to ``hybrid/data/confidence.json`` with ``--write``. The report gives, per
model and split: Brier score, expected calibration error (10 bins), ROC AUC, and for the top hit
of each query, how often it is labelled strong / fair / weak for answered and unanswerable
queries.

    .venv/bin/python eval/bench/calibrate_confidence.py [--write] [--report eval/reports/confidence.md]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import common
import numpy as np

from hybrid.retrieval import confidence
from hybrid.retrieval.hits import confidence_label

ROOT = Path(__file__).resolve().parents[2]
QRELS = ROOT / "qrels"
DATA = ROOT / "hybrid" / "data"
MODES = ("hybrid", "vector", "lexical")


def load_set(name: str, folder: Path = QRELS) -> tuple[list[dict], dict[str, dict[str, int]]]:
    queries = [json.loads(line) for line in (folder / f"{name}.queries.jsonl").read_text().splitlines() if line]
    qrels_file = folder / f"{name}.qrels.json"
    qrels = json.loads(qrels_file.read_text()) if qrels_file.exists() else {}
    return queries, qrels


def split_of(name: str, q: dict, i: int) -> str:
    if name == "sample":
        return "heldout"
    if "split" in q:
        return q["split"]
    return "tune" if i % 2 == 0 else "heldout"


def collect(h, vault: str, name: str, queries, qrels) -> list[dict]:
    """One record per hit: features, model name, label, split, query id and rank."""
    captured: list[tuple] = []
    real = confidence.annotate

    def spy(hits, rows, vector_scores, parsed, analyze, embedder_ids, ranks=None):
        feats = confidence.features(hits, rows, vector_scores, parsed, analyze, ranks)
        captured.append((list(hits), feats, confidence.model_name(bool(vector_scores), embedder_ids)))
        return real(hits, rows, vector_scores, parsed, analyze, embedder_ids, ranks)

    confidence.annotate = spy
    out = []
    try:
        for i, q in enumerate(queries):
            relevant = {doc for doc, grade in qrels.get(q["qid"], {}).items() if grade > 0}
            for mode in MODES:
                captured.clear()
                h.search(q["text"], vaults=[vault], mode=mode, top_k=10, passages=True)
                hits, feats, model = captured[-1]
                for rank, (hit, f) in enumerate(zip(hits, feats), 1):
                    out.append({"set": name, "qid": q["qid"], "mode": mode, "model": model, "rank": rank,
                                "split": split_of(name, q, i), "answerable": bool(relevant),
                                "label": int(hit.path in relevant), "features": f})
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
    brier = float(np.mean((p - y) ** 2))
    bins = np.minimum((p * 10).astype(int), 9)
    ece = float(sum(abs(p[bins == b].mean() - y[bins == b].mean()) * (bins == b).sum()
                    for b in range(10) if (bins == b).any()) / len(p))
    pos, neg = p[y == 1], p[y == 0]
    auc = float(((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum())
                / max(1, len(pos) * len(neg)))
    return {"n": int(len(p)), "positives": int(y.sum()), "brier": round(brier, 4), "ece": round(ece, 4),
            "auc": round(auc, 4)}


def top_hit_table(records: list[dict], probs: np.ndarray) -> dict:
    """For the top hit of each query: the label words, for answered (top hit relevant), missed
    (answerable, top hit not relevant) and unanswerable queries."""
    out: dict[str, dict[str, int]] = {}
    for r, p in zip(records, probs):
        if r["rank"] != 1:
            continue
        kind = "unanswerable" if not r["answerable"] else ("top hit relevant" if r["label"] else "top hit wrong")
        out.setdefault(kind, {"strong": 0, "fair": 0, "weak": 0})[confidence_label(float(p))] += 1
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, default=ROOT / "eval" / "out" / "confidence-home")
    ap.add_argument("--write", action="store_true", help="write hybrid/data/confidence.json")
    ap.add_argument("--report", type=Path, help="write a markdown report here")
    ap.add_argument("--l2", type=float, default=1.0)
    args = ap.parse_args()

    h = common.open_both_vaults(args.home)
    records = []
    for name in ("obsidian-help", "obsidian-help-para", "obsidian-help-none"):
        records += collect(h, "oh", name, *load_set(name))
    records += collect(h, "sample", "sample", *load_set("sample", DATA))
    h.close()
    args.home.mkdir(parents=True, exist_ok=True)
    (args.home / "records.json").write_text(json.dumps(records))  # scratch, for offline study

    result: dict = {"models": {}, "fit": {}}
    for model, feats in confidence.MODEL_FEATURES.items():
        rows = [r for r in records if r["model"] == model or (model == "relative" and r["model"] == "full")]
        tune = [r for r in rows if r["split"] == "tune"]
        X = np.array([[r["features"][f] for f in feats] for r in tune])
        y = np.array([r["label"] for r in tune], dtype=float)
        w = fit(X, y, args.l2)
        result["models"][model] = {"features": list(feats), "weights": [round(float(v), 5) for v in w[:-1]],
                                   "bias": round(float(w[-1]), 5)}
        fitted: dict = {}
        parts = {"tune": [r for r in rows if r["split"] == "tune"],
                 "heldout (obsidian-help)": [r for r in rows if r["split"] == "heldout" and r["set"] != "sample"],
                 "sample vault (held out)": [r for r in rows if r["set"] == "sample"]}
        for split, part in parts.items():
            Xs = np.array([[r["features"][f] for f in feats] for r in part] or np.zeros((0, len(feats))))
            ys = np.array([r["label"] for r in part], dtype=float)
            ps = 1 / (1 + np.exp(-(Xs @ w[:-1] + w[-1])))
            fitted[split] = {**metrics(ps, ys), "top_hit": top_hit_table(part, ps)}
        result["fit"][model] = fitted
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
             "`.venv/bin/python eval/bench/calibrate_confidence.py --write --report eval/reports/confidence.md`",
             "", "Per model, fitted on the tune split; every hit of the top 10 (all three modes pooled where",
             "the model applies). Brier and ECE: lower is better; AUC: how well it orders relevant above not.", ""]
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
            for kind, c in sorted(v["top_hit"].items()):
                lines.append(f"| {split} | {kind} | {c['strong']} | {c['fair']} | {c['weak']} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
