"""hybrid eval's uncertainty (bootstrap intervals, paired comparisons) and its "apply this
setting" advice, on hand-made per-query scores."""
import itertools
import json

import numpy as np
import pytest
from helpers import write

from hybrid.core.config import load_config
from hybrid.core.settings import Settings
from hybrid.eval.advice import Advice, advise
from hybrid.eval.inputs import Problems, Query
from hybrid.eval.report import comparison_lines
from hybrid.eval.run import ConfigResult, EvalResult, RunConfig
from hybrid.eval.uncertainty import compare, interval


def _run(cfg: RunConfig, scores: list[float]) -> ConfigResult:
    qids = [f"q{i:02}" for i in range(len(scores))]
    per = {"ndcg@10": dict(zip(qids, scores))}
    ans = {k: {q: s >= 0.5 for q, s in zip(qids, scores)} for k in ("1", "10")}
    return ConfigResult(cfg, {"ndcg@10": float(np.mean(scores))}, per, ans, {q: {"a.md": 1.0} for q in qids}, 0.0)


def _result(runs: list[ConfigResult]) -> EvalResult:
    n = len(next(iter(runs[0].per_query.values())))
    queries = {f"q{i:02}": Query(f"q{i:02}", f"text {i}") for i in range(n)}
    return EvalResult(runs, queries, {q: {"a.md": 2} for q in queries}, Problems(), metrics=("ndcg@10",))


def _cfg(mode="hybrid", tokens=128, k=10.0, wv=1.5) -> RunConfig:
    return RunConfig(mode, tokens, 32, True, k, 1.0, wv)


def test_interval_is_deterministic_and_holds_the_mean():
    rng = np.random.default_rng(1)
    v = rng.random(40)
    lo, hi = interval(v)
    assert (lo, hi) == interval(v)  # fixed seed
    assert lo < v.mean() < hi and hi - lo < 0.5
    assert interval([0.7] * 10) == (pytest.approx(0.7), pytest.approx(0.7))


def test_eight_queries_cannot_separate_a_small_difference():
    a = [0.9, 0.6, 0.8, 1.0, 0.5, 0.9, 0.7, 0.9]
    b = [0.8, 0.7, 0.7, 1.0, 0.6, 0.8, 0.6, 0.8]
    c = compare("ndcg@10", "A", "B", a, b)
    assert c.difference == pytest.approx(np.mean(a) - np.mean(b))
    assert c.low < 0 < c.high and not c.separated
    assert c.sentence().startswith(f"8 queries cannot separate {np.mean(a):.3f} from {np.mean(b):.3f}: "
                                   f"difference {c.difference:.3f}, 95% CI [")
    d = np.std(np.subtract(a, b), ddof=1)
    assert c.mdd == pytest.approx(2.8 * d / np.sqrt(8))
    # the same gap on every one of 30 queries is separated
    strong = compare("ndcg@10", "A", "B", [0.8] * 15 + [0.9] * 15, [0.75] * 15 + [0.85] * 15)
    assert strong.separated and strong.low == pytest.approx(0.05)
    same = compare("ndcg@10", "A", "B", a, a)
    assert same.identical and not same.separated and "on every one of the 8 queries" in same.sentence()


def test_every_run_has_an_interval_and_every_comparison_is_in_the_json():
    good = _run(_cfg(), [0.9, 0.8, 1.0, 0.7] * 5)
    worse = _run(_cfg("lexical"), [0.5, 0.6, 0.4, 0.7] * 5)
    result = _result([worse, good])
    data = json.loads(json.dumps(result.to_dict()))
    assert [c["ci"]["ndcg@10"][0] <= c["metrics"]["ndcg@10"] <= c["ci"]["ndcg@10"][1] for c in data["configs"]] \
        == [True, True]
    comp = data["comparisons"]["ndcg@10"]
    assert [(c["best"], c["other"], c["separated"]) for c in comp] == [(good.config.name, worse.config.name, True)]
    assert set(data["comparisons"]) == {"ndcg@10", "answer@1", "answer@10"}
    assert data["uncertainty"]["seed"] and data["uncertainty"]["level"] == 0.95
    lines = comparison_lines(result)
    assert good.config.name in lines[0] and "20 queries separate" in lines[1]


def test_advice_applies_the_clearly_better_setting_with_fewest_changes(hybrid_home):
    current = _run(_cfg(), [0.5, 0.6, 0.4, 0.5] * 10)
    k30 = _run(_cfg(k=30.0), [0.8, 0.9, 0.7, 0.8] * 10)                 # clearly better, one change
    k30_256 = _run(_cfg(tokens=256, k=30.0), [0.86, 0.85, 0.7, 0.8] * 10)  # a hair better, two changes
    result = _result([current, k30, k30_256])
    advice = advise(result, Settings())
    assert advice is not None and advice.clearly_better
    assert advice.best == k30.config.name and advice.changes == {"rrf_k": 30.0}
    config = hybrid_home / "config.toml"
    lines = advice.lines(config)
    assert lines[0].startswith(f"Apply this setting: {k30.config.name} is clearly better than the current")
    assert "corrected for the 2 alternatives" in lines[0]
    toml = [ln.strip() for ln in lines if ln.startswith("    ")]
    assert toml == ["rrf_k = 30.0"]  # no re-index: the chunking did not change
    # the printed lines, put in [settings] beside what is there, make it the setting
    write(hybrid_home, "config.toml", '[settings]\nembedder = "hash:64"\n' + "\n".join(toml) + "\n")
    settings = load_config(hybrid_home).settings
    assert settings.rrf_k == 30 and settings.embedder == "hash:64"
    again = advise(result, settings)  # now k30 is current; k30_256 is a hair better, not clearly
    assert again.current == k30.config.name and not again.clearly_better
    assert again.lines(config)[0].startswith("Keep the current setting")


def test_advice_keeps_the_setting_when_the_queries_cannot_tell(hybrid_home):
    current = _run(_cfg(), [0.9, 0.6, 0.8, 1.0, 0.5, 0.9, 0.7, 0.9])
    other = _run(_cfg(tokens=256), [1.0, 0.7, 0.9, 1.0, 0.4, 1.0, 0.6, 1.0])
    advice = advise(_result([current, other]), Settings())
    assert advice is not None and not advice.clearly_better
    line = advice.lines(hybrid_home / "config.toml")
    assert line == [f"Keep the current setting: the best hybrid run ({other.config.name}) is not clearly "
                    f"better than the current one ({current.config.name}) by ndcg@10: "
                    f"{advice.comparison.sentence()}."]
    assert advice.to_dict()["config_lines"] == [] and advice.to_dict()["clearly_better"] is False
    # chunkings in the advice say to re-index
    strong = _run(_cfg(tokens=256), [1.0] * 8)
    weak = _run(_cfg(), [0.2] * 8)
    lines = advise(_result([weak, strong]), Settings()).lines(hybrid_home / "config.toml")
    assert "    chunk_tokens = 256" in lines and lines[-1] == "    hybrid index"
    # one run per mode: nothing to advise
    assert advise(_result([weak, _run(_cfg("lexical"), [0.1] * 8)]), Settings()) is None


@pytest.mark.slow  # two CLI evals of the sample vault (hash embedder); ranx compiles nDCG on first use
def test_printed_setting_lines_make_the_winner_the_setting(hybrid_home):
    """The hash embedder's vectors are noise, so on the sample set dropping the vector weight is
    clearly better: eval says so with config lines; put in config.toml, they make a plain
    `hybrid eval` run exactly the winning configuration, and no further change is advised."""
    from click.testing import CliRunner

    from hybrid.faces.cli.main import main
    write(hybrid_home, "config.toml", '[settings]\nembedder = "hash:64"\n')
    res = CliRunner().invoke(main, ["eval", "--modes", "hybrid", "--weights", "1:1.5,1:0", "--metrics", "ndcg@10",
                                    "--no-report"])
    assert res.exit_code == 0, res.output
    assert "Apply this setting: hybrid-c128-o32-h1-k10-w1-0 is clearly better" in res.output
    assert f"[settings] table of {hybrid_home / 'config.toml'}:" in res.output
    out = res.output.splitlines()
    start = next(i for i, ln in enumerate(out) if "[settings] table of" in ln) + 2  # then a blank line
    lines = [ln.strip() for ln in itertools.takewhile(lambda ln: ln.startswith("    "), out[start:])]
    assert lines == ["weight_vector = 0.0"]
    with open(hybrid_home / "config.toml", "a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    res = CliRunner().invoke(main, ["eval", "--modes", "hybrid", "--metrics", "ndcg@10", "--no-report", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [c["name"] for c in data["configs"]] == ["hybrid-c128-o32-h1-k10-w1-0"] and data["apply"] is None
    res = CliRunner().invoke(main, ["eval", "--modes", "hybrid", "--weights", "1:1.5,1:0", "--metrics", "ndcg@10",
                                    "--no-report", "--json"])
    assert json.loads(res.stdout)["apply"]["clearly_better"] is False  # the winner is the setting now


def test_the_advised_lines_are_toml_that_reads_back_as_the_changes():
    """Every kind of setting the advice changes (ints, a bool, floats) printed as TOML lines,
    as tomli-w printed them before tomlkit, already in hybrid for config.toml, took over."""
    import tomllib
    changes = {"chunk_tokens": 256, "chunk_overlap": 0, "context_header": False, "rrf_k": 60.0,
               "weight_lexical": 0.5, "weight_vector": 1.5}
    lines = Advice("hybrid", "ndcg@10", "a", "b", changes).config_lines()
    assert lines == ["chunk_tokens = 256", "chunk_overlap = 0", "context_header = false", "rrf_k = 60.0",
                     "weight_lexical = 0.5", "weight_vector = 1.5"]
    assert tomllib.loads("\n".join(lines)) == changes
