"""``hybrid eval calibrate``: fit the confidence models of :mod:`hybrid.retrieval.confidence` on
labelled queries and check them on the held-out ones; writes ``hybrid/data/confidence.json``.

Data: every hit (top 10) of every labelled query, in hybrid, vector and lexical mode, labelled 1
when its note (or, for a query judged by section, its section) is judged relevant; a set without
judgements holds questions its vault cannot answer (every hit 0). Splits: :mod:`hybrid.eval.sets`.

A model is fitted per scorer, on the tune hits of the queries that scorer scored: ``full`` (the
vector arm scored by MiniLM: English questions in an English vault), ``mix`` (scored by the
default mix's multilingual half too: questions in other languages, and English ones over vaults
that hold other languages), ``relative`` (any embedder: no absolute cosine) and ``lexical``.
Logistic regression, L2, by Newton's method in numpy. The result gives per model and split the
Brier score, expected calibration error (10 bins) and ROC AUC, and per language group (English
questions, questions in other languages) on each split, as an answer shows them (each query's
confidences made non-increasing down the list): the ECE, how often a right first hit comes with
"nothing relevant" (no hit fair or better) and how often an unanswerable question gets a fair or
strong hit. The shipped models were fitted on the project's sets (eval/bench/calibrate_confidence.py
names them; eval/reports/quality/confidence.md has the figures).
"""

from __future__ import annotations

import collections
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from hybrid.core.lang import foreign
from hybrid.embedders.mix import SURE_ENGLISH
from hybrid.eval.sets import Loaded
from hybrid.retrieval import confidence
from hybrid.retrieval.hits import FAIR, confidence_label
from hybrid.retrieval.notes import monotone

if TYPE_CHECKING:
    import numpy as np

MODES = ("hybrid", "vector", "lexical")
# as the shipped file has said since the bench script wrote it (that script now runs this module)
ABOUT = "fitted by eval/bench/calibrate_confidence.py; see hybrid/retrieval/confidence.py"
Record = dict[str, Any]


def language(text: str) -> str:
    """The language group of a question: ``en``, or ``other`` (as the default mix reads it)."""
    return "en" if foreign(text) <= SURE_ENGLISH else "other"


@contextmanager
def features_seen() -> Iterator[list[tuple[list, list[dict[str, float]], str]]]:
    """While open, every search's shown hits, their confidence features and the model that
    scored them (:func:`hybrid.retrieval.confidence.model_name`) are appended to the list
    yielded: the features are what the search itself computed, on its own rows."""
    seen: list[tuple[list, list[dict[str, float]], str]] = []
    real = confidence.annotate

    def spy(hits, rows, vector_scores, parsed, analyze, embedder_ids, ranks=None, kind="local"):
        feats = confidence.features(hits, rows, vector_scores, parsed, analyze, ranks)
        seen.append((list(hits), feats, confidence.model_name(bool(vector_scores), set(embedder_ids))))
        return real(hits, rows, vector_scores, parsed, analyze, embedder_ids, ranks, kind)

    confidence.annotate = spy
    try:
        yield seen
    finally:
        confidence.annotate = real


def collect(h, vault: str, labelled: Loaded) -> list[Record]:
    """One record per hit of every query of ``labelled`` over vault ``vault`` of handle ``h``, in
    each mode: features, scorer, label, split, language group, query id and rank."""
    out = []
    with features_seen() as seen:
        for q in labelled.queries:
            relevant = {doc for doc, grade in labelled.qrels.get(q.qid, {}).items() if grade > 0}
            for mode in MODES:
                seen.clear()
                h.search(q.text, vaults=[vault], mode=mode, top_k=10, passages=True)
                if not seen:  # no hit at all
                    continue
                hits, feats, model = seen[-1]
                for rank, (hit, f) in enumerate(zip(hits, feats), 1):
                    section = f"{hit.path}#{' > '.join(hit.heading_path)}"
                    out.append({"set": labelled.set.name, "qid": q.qid, "mode": mode, "model": model,
                                "rank": rank, "split": q.split, "answerable": bool(relevant),
                                "language": language(q.text),
                                "label": int(hit.path in relevant or section in relevant), "features": f})
    return out


def fit(x: np.ndarray, y: np.ndarray, l2: float = 1.0, iters: int = 50) -> np.ndarray:
    """Logistic regression weights (bias last) by Newton's method with an L2 penalty on the
    weights (not the bias)."""
    import numpy as np
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
    """Brier score, expected calibration error (10 bins) and ROC AUC of probabilities ``p``."""
    import numpy as np
    brier = float(np.mean((p - y) ** 2)) if len(p) else float("nan")
    bins = np.minimum((p * 10).astype(int), 9)
    ece = float(sum(abs(p[bins == b].mean() - y[bins == b].mean()) * (bins == b).sum()
                    for b in range(10) if (bins == b).any()) / max(1, len(p)))
    pos, neg = p[y == 1], p[y == 0]
    auc = float(((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum())
                / max(1, len(pos) * len(neg)))
    return {"n": int(len(p)), "positives": int(y.sum()), "brier": round(brier, 4), "ece": round(ece, 4),
            "auc": round(auc, 4)}


def probabilities(model: dict, records: Sequence[Record]) -> np.ndarray:
    import numpy as np
    if not records:
        return np.zeros(0)
    x = np.array([[r["features"][f] for f in model["features"]] for r in records])
    return 1 / (1 + np.exp(-(x @ np.array(model["weights"]) + model["bias"])))


def as_shown(records: Sequence[Record], probs: np.ndarray) -> np.ndarray:
    """Each query's confidences made non-increasing down its list, as an answer in passages
    shows them (:func:`hybrid.retrieval.notes.monotone`)."""
    import numpy as np
    out = np.array(probs, dtype=float)
    by_query: dict[tuple, list[int]] = collections.defaultdict(list)
    for i, r in enumerate(records):
        by_query[(r["set"], r["qid"], r["mode"])].append(i)
    for idx in by_query.values():
        idx.sort(key=lambda i: records[i]["rank"])
        out[idx] = [v for v in monotone([float(out[i]) for i in idx])]
    return out


def answer_table(records: Sequence[Record], probs: np.ndarray) -> dict:
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


def calibrate(records: Sequence[Record], *, l2: float = 1.0, keep: Sequence[str] = (),
              shipped: dict[str, dict] | None = None) -> dict:
    """Fit every model of :data:`hybrid.retrieval.confidence.MODEL_FEATURES` on the tune
    records, except those named in ``keep`` and those no tune record is for, taken from
    ``shipped`` (default: the shipped models; a model it lacks is its ``relative`` one); then
    score each model by split and each language group and mode by split, as a search shows
    them. Returns ``{"models": {name:
    {"features", "weights", "bias"}}, "fit": {name: {split: figures}}, "languages": {"en
    hybrid tune": figures, ...}}``."""
    import numpy as np
    shipped = confidence.models() if shipped is None else shipped
    result: dict = {"models": {}, "fit": {}, "languages": {}}
    for model, feats in confidence.MODEL_FEATURES.items():
        # relative: every hit the vector arm scored, without its absolute cosine
        rows = [r for r in records if r["model"] == model or (model == "relative" and r["model"] != "lexical")]
        tune = [r for r in rows if r["split"] == "tune"]
        if model in keep or not tune:  # no tune hit of this scorer: nothing to fit it on
            result["models"][model] = shipped.get(model) or shipped["relative"]
        else:
            X = np.array([[r["features"][f] for f in feats] for r in tune])
            y = np.array([r["label"] for r in tune], dtype=float)
            w = fit(X, y, l2)
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
    return result


def payload(result: dict) -> dict:
    """The file :func:`hybrid.retrieval.confidence.models` reads: ``{"about", "models"}``."""
    return {"about": ABOUT, "models": result["models"]}


def render(result: dict, command: str) -> str:
    """A markdown report of ``result`` (``command``: how it was made)."""
    lines = ["# Confidence calibration", "", f"`{command}`",
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
