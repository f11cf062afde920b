"""`hybrid eval calibrate` (hybrid.eval.calibrate): the confidence models fitted on labelled hits,
their figures, the file they are written to and the shipped file that must stay what it writes."""

import json

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import write
from test_fit import labelled

from hybrid.core.files import package_data
from hybrid.eval import calibrate
from hybrid.eval.sets import LabelledSet, load, open_indexed
from hybrid.retrieval import confidence


def test_newton_fit_finds_the_penalised_optimum():
    """Data drawn from a known logistic model: without a penalty the weights come back close to
    it; with one, the penalised gradient is zero at the answer (the bias is not penalised)."""
    rng = np.random.default_rng(51)
    x = rng.normal(size=(20_000, 2))
    true = np.array([2.0, -1.0, 0.5])  # bias last
    y = (rng.random(len(x)) < 1 / (1 + np.exp(-(x @ true[:2] + true[2])))).astype(float)
    assert np.allclose(calibrate.fit(x, y, l2=0.0), true, atol=0.1)
    w = calibrate.fit(x, y, l2=50.0)
    X = np.hstack([x, np.ones((len(x), 1))])
    grad = X.T @ (1 / (1 + np.exp(-X @ w)) - y) + np.array([50.0, 50.0, 0.0]) * w
    assert np.abs(grad).max() < 1e-6


def test_metrics_by_hand():
    p, y = np.array([0.9, 0.8, 0.3, 0.1]), np.array([1.0, 0.0, 1.0, 0.0])
    m = calibrate.metrics(p, y)
    assert m["n"] == 4 and m["positives"] == 2
    assert m["brier"] == round((0.01 + 0.64 + 0.49 + 0.01) / 4, 4)
    # one hit a bin: the mean gap between each probability and its label
    assert m["ece"] == round((0.1 + 0.8 + 0.7 + 0.1) / 4, 4)
    # pairs (relevant, not): (0.9, 0.8) (0.9, 0.1) (0.3, 0.1) ordered right, (0.3, 0.8) not
    assert m["auc"] == 0.75


def record(qid, rank, label, model="relative", split="tune", answerable=True, mode="hybrid", **feats):
    f = dict.fromkeys(confidence.FEATURES, 0.0) | feats
    return {"set": "s", "qid": qid, "mode": mode, "model": model, "rank": rank, "split": split,
            "answerable": answerable, "language": "en", "label": label, "features": f}


def test_as_shown_makes_each_list_non_increasing():
    """Down each query's list (by rank, whatever the records' order) a rise is pooled into its
    mean; another query's list is its own."""
    recs = [record("a", 2, 0), record("a", 1, 1), record("b", 1, 0)]
    assert calibrate.as_shown(recs, np.array([0.8, 0.5, 0.3])).tolist() == [(0.5 + 0.8) / 2] * 2 + [0.3]


def test_answer_table_counts_top_hits_by_label_word():
    recs = [record("a", 1, 1), record("a", 2, 0), record("b", 1, 0), record("c", 1, 0, answerable=False)]
    t = calibrate.answer_table(recs, np.array([0.2, 0.1, 0.9, 0.5]))
    assert t["labels"] == {"top hit relevant": {"strong": 0, "fair": 0, "weak": 1},
                           "top hit wrong": {"strong": 1, "fair": 0, "weak": 0},
                           "unanswerable": {"strong": 0, "fair": 1, "weak": 0}}
    assert (t["answered"], t["unanswerable"], t["false_fair"]) == (1, 1, 1.0)
    assert t["nothing_relevant"] == 1.0  # 0.2 is under the vector arm's floor: "nothing relevant"


def synthetic_records(n=400, seed=7):
    """Hits whose label follows coverage; vector scorers ``relative`` and ``full``, none ``mix``."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        cov = float(rng.random())
        label = int(rng.random() < cov)
        out.append(record(f"q{i // 5}", i % 5 + 1, label, model="full" if i % 3 else "relative",
                          split="tune" if (i // 5) % 2 == 0 else "heldout", coverage=cov, cos_gap=cov / 2,
                          rank_rr=1 / (i % 5 + 1)))
        out.append(record(f"q{i // 5}", i % 5 + 1, label, model="lexical", mode="lexical",
                          split=out[-1]["split"], coverage=cov, rank_rr=1 / (i % 5 + 1)))
    return out


def test_calibrate_fits_each_model_keeps_what_it_is_told_and_writes_what_the_search_reads(monkeypatch):
    shipped = confidence.models()
    result = calibrate.calibrate(synthetic_records(), keep=["lexical"])
    models = result["models"]
    assert list(models) == list(confidence.MODEL_FEATURES)
    assert models["lexical"] == shipped["lexical"]  # kept
    assert models["mix"] == shipped["mix"]  # no tune hit of that scorer: nothing to fit it on
    for name in ("full", "relative"):
        m = models[name]
        assert m["features"] == list(confidence.MODEL_FEATURES[name]) and len(m["weights"]) == len(m["features"])
        assert m["weights"][m["features"].index("coverage")] > 1  # the label follows coverage
        assert all(round(w, 5) == w for w in m["weights"]) and isinstance(m["bias"], float)
    for name, by_split in result["fit"].items():
        assert set(by_split) == {"tune", "heldout"}, name
        assert {"n", "brier", "ece", "auc", "labels", "false_fair"} <= set(by_split["tune"])
    assert set(result["languages"]) == {f"{lang} {mode} {split}" for lang in ("en", "other")
                                        for mode in ("hybrid", "lexical") for split in ("tune", "heldout")}
    # the file, read as a search reads it, gives the probabilities the figures were made with
    data = calibrate.payload(result)
    assert set(data) == {"about", "models"}
    monkeypatch.setattr(confidence, "_fitted", lambda: data)
    hit = synthetic_records(1)[0]
    assert confidence.probability(hit["features"], "full") == pytest.approx(
        float(calibrate.probabilities(models["full"], [hit])[0]))
    report = calibrate.render(result, "hybrid eval calibrate --keep lexical")
    assert report.startswith("# Confidence calibration\n\n`hybrid eval calibrate --keep lexical`")
    assert "## `relative`" in report


def test_the_shipped_file_is_what_the_fitter_writes():
    """hybrid/data/confidence.json holds a model per scorer, each as the search reads it, and is
    exactly the file the fitter writes when it keeps every model (``--check``)."""
    text = package_data("confidence.json")
    shipped = json.loads(text)
    models = confidence.models()
    assert set(models) == set(confidence.MODEL_FEATURES)
    for name, m in models.items():
        assert m["features"] == list(confidence.MODEL_FEATURES[name]), name
        assert len(m["weights"]) == len(m["features"]) and isinstance(m["bias"], float)
        assert 0 < confidence.probability(dict.fromkeys(confidence.FEATURES, 0.5), name) < 1
    result = calibrate.calibrate(synthetic_records(20), keep=list(confidence.MODEL_FEATURES))
    assert calibrate.payload(result) == shipped
    assert json.dumps(shipped, indent=1) + "\n" == text  # the writer's format


@pytest.mark.slow  # indexes a vault and searches it in three modes (tantivy, FAISS; the hash embedder)
def test_collect_labels_every_hit_with_the_features_its_search_computed(tmp_path):
    tiny = labelled(tmp_path)
    h, names = open_indexed(tmp_path / "home", [tiny.vault], embedder="hash:64")
    real = confidence.annotate
    try:
        records = calibrate.collect(h, names[tiny.vault.resolve()], load(tiny))
    finally:
        h.close()
    assert confidence.annotate is real  # the spy is gone
    assert {r["mode"] for r in records} == set(calibrate.MODES)
    assert {r["model"] for r in records if r["mode"] != "lexical"} == {"relative"}  # the hash embedder
    assert {r["model"] for r in records if r["mode"] == "lexical"} == {"lexical"}
    for r in records:
        assert set(r["features"]) == set(confidence.FEATURES) and r["set"] == "tiny" and r["answerable"]
        assert r["split"] == ("tune" if r["qid"] in ("q1", "q3", "q5") else "heldout")
    by = {(r["qid"], r["mode"], r["rank"]): r for r in records}
    top = by[("q2", "lexical", 1)]
    assert top["label"] == 1 and top["features"]["rank_rr"] == 1.0 and top["features"]["lex_rr"] == 1.0
    # each answerable question's note is found in hybrid mode, and labelled so
    assert {r["qid"] for r in records if r["mode"] == "hybrid" and r["label"]} == {f"q{i}" for i in range(1, 7)}


@pytest.mark.slow  # the whole command twice over a tiny vault (hash embedder)
def test_cli_calibrate_saves_hits_and_refits_them_the_same(tmp_path):
    from hybrid.faces.cli.main import main
    tiny = labelled(tmp_path)
    none = write(tmp_path, "tiny-none.queries.jsonl", json.dumps({"qid": "n1", "text": "volcano eruptions"}) + "\n")
    hits, out, again, report = (tmp_path / n for n in ("hits.json", "c.json", "c2.json", "r.md"))
    sets = ["--set", str(tiny.vault), str(tiny.queries), str(tiny.qrels), "--set", str(tiny.vault), str(none), "-"]
    r = CliRunner().invoke(main, ["eval", "calibrate", *sets, "--embedder", "hash:64", "--hits", str(hits),
                                  "--out", str(out), "--report", str(report), "--keep", "lexical"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    records = json.loads(hits.read_text())
    assert {x["set"] for x in records} == {"tiny", "tiny-none"}
    assert not any(x["answerable"] or x["label"] for x in records if x["set"] == "tiny-none")
    written = json.loads(out.read_text())
    assert written == calibrate.payload(result) and written["models"]["lexical"] == confidence.models()["lexical"]
    assert report.read_text().startswith("# Confidence calibration")
    r = CliRunner().invoke(main, ["eval", "calibrate", "--hits", str(hits), "--reuse", "--out", str(again),
                                  "--keep", "lexical"])
    assert r.exit_code == 0, r.output
    assert again.read_text() == out.read_text()
    r = CliRunner().invoke(main, ["eval", "calibrate", "--keep", "nope"])
    assert r.exit_code == 2 and "the models are full, mix, relative, lexical" in r.output


def test_a_set_is_named_by_its_queries_file(tmp_path):
    assert LabelledSet(tmp_path, tmp_path / "obsidian-help-para.queries.jsonl").name == "obsidian-help-para"
    assert LabelledSet(tmp_path, tmp_path / "mine.tsv").name == "mine"
