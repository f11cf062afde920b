"""hybrid eval in everyday use: the answer@1 misses listed on the terminal and in report.md, the
answer@1-per-category plot, the default modes, no library warnings on stderr, and where the
report went."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import write

from hybrid.core.errors import HybridError
from hybrid.core.settings import Settings
from hybrid.eval.inputs import Problems, Query
from hybrid.eval.report import CATEGORY_PLOT, MISSES_SHOWN, category_bars, print_table, write_report
from hybrid.eval.run import NO_HIT, ConfigResult, EvalResult, RunConfig, answer_at


def _config_result(mode: str, run: dict[str, dict[str, float]], qrels) -> ConfigResult:
    cfg = RunConfig(mode, 128, 32, True, 10, 1.0, 1.5)
    ans = {str(k): {q: answer_at(run[q], qrels[q], k) for q in run} for k in (1, 10)}
    return ConfigResult(cfg, {"ndcg@10": 0.5}, {"ndcg@10": {q: 0.5 for q in run}}, ans, run, 0.1)


def _result(n: int = 14) -> EvalResult:
    """``n`` queries judged {a.md: 2, b.md: 1}. Lexical ranks a.md first everywhere; hybrid ranks
    b.md (a lesser answer) first for q00..q{n-4}, retrieves nothing for the next, ranks only
    c.md for the next, and gets the last one right."""
    queries = {f"q{i:02}": Query(f"q{i:02}", f"query | {i}", "exact" if i % 2 else "paraphrase")
               for i in range(n)}
    qrels = {q: {"a.md": 2, "b.md": 1} for q in queries}
    qids = list(queries)
    hybrid_run = {q: {"b.md": 3.0, "x.md": 2.0, "a.md": 1.0} for q in qids[:-3]}
    hybrid_run[qids[-3]] = {NO_HIT: 0.0}
    hybrid_run[qids[-2]] = {"c.md": 1.0}
    hybrid_run[qids[-1]] = {"a.md": 2.0, "b.md": 1.0}
    lexical_run = {q: {"a.md": 1.0} for q in qids}
    runs = [_config_result("lexical", lexical_run, qrels), _config_result("hybrid", hybrid_run, qrels)]
    return EvalResult(runs, queries, qrels, Problems(), metrics=("ndcg@10",))


def test_answer_at_1_misses_of_the_hybrid_run():
    result = _result()
    main = result.main_run()
    assert main is not None and main.config.mode == "hybrid"  # hybrid, though lexical scores better
    misses = result.misses(main)
    assert [m.qid for m in misses] == [f"q{i:02}" for i in range(13)]
    first = misses[0]
    assert (first.text, first.category, first.answer_rank, first.first, first.first_grade, first.top_grade) == \
           ("query | 0", "paraphrase", 3, "b.md", 1, 2)
    nothing, other = misses[-2], misses[-1]
    assert nothing.answer_rank is None and nothing.first == ""  # the placeholder is no hit
    assert other.answer_rank is None and other.first == "c.md" and other.first_grade == 0
    data = result.to_dict()["answer_at_1_misses"]
    assert data["run"] == main.config.name and len(data["queries"]) == 13
    # without a hybrid run, the best run by answer@1
    lexical_only = EvalResult(result.results[:1], result.queries, result.qrels, Problems(), metrics=("ndcg@10",))
    assert lexical_only.main_run().config.mode == "lexical" and lexical_only.misses(lexical_only.main_run()) == []


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_terminal_lists_the_first_misses_and_the_report_all(tmp_path, capsys):
    result = _result()
    out = tmp_path / "report"
    write_report(result, out, "hybrid eval", Settings())
    print_table(result, out / "report.md")
    text = capsys.readouterr().out
    assert "answer@1 misses of hybrid-c128-o32-h1-k10-w1-1.5: 13 of 14 queries" in text
    assert 'q00 [paraphrase] "query | 0"' in text
    assert "answer at rank 3; first: b.md (relevant, grade 1 of 2)" in text
    assert "q09" in text and "q10" not in text  # capped at MISSES_SHOWN
    assert f"… and {13 - MISSES_SHOWN} more in {out / 'report.md'}" in text
    report = (out / "report.md").read_text()
    section = report.split("## answer@1 misses", 1)[1]
    assert all(f"| q{i:02} |" in section for i in range(13)) and "| q13 |" not in section
    assert "| q00 | paraphrase | query \\| 0 | 3 | b.md (relevant, grade 1 of 2) |" in section
    assert "| q11 | exact | query \\| 11 | not in top 100 chunks | nothing retrieved |" in section
    assert "| q12 | paraphrase | query \\| 12 | not in top 100 chunks | c.md (not judged relevant) |" in section


def test_category_plot_is_answer_at_1_per_group_and_run(tmp_path):
    result = _result()
    groups, series = category_bars(result)
    assert groups == ["all", "exact", "paraphrase"]
    assert series["lexical"] == [1.0, 1.0, 1.0]
    assert series["hybrid"] == pytest.approx([1 / 14, 1 / 7, 0.0])
    out = tmp_path / "report"
    write_report(result, out, "hybrid eval", Settings())
    assert (out / CATEGORY_PLOT).stat().st_size > 1000
    report = (out / "report.md").read_text()
    table_and_plot = report.split("## answer@1 by category", 1)[1].split("##", 1)[0]
    assert f"![answer@1 by category]({CATEGORY_PLOT})" in table_and_plot
    # many runs: the best run of each mode
    many = EvalResult(result.results * 4, result.queries, result.qrels, Problems(), metrics=("ndcg@10",))
    assert list(category_bars(many)[1]) == ["lexical", "hybrid"]
    # no categories, no plot
    plain = {q: Query(q, v.text) for q, v in result.queries.items()}
    assert category_bars(EvalResult(result.results, plain, result.qrels, Problems())) == ([], {})


@pytest.mark.parametrize("config, args, modes", [
    ("", [], ["lexical", "vector", "hybrid"]),
    ('rerank_model = "late"\n', [], ["lexical", "vector", "hybrid", "rerank"]),
    ("", ["--rerank-model", "late"], ["lexical", "vector", "hybrid", "rerank"]),
    ('rerank_model = "late"\n', ["--modes", "lexical,hybrid"], ["lexical", "hybrid"]),
])
def test_default_modes_rerank_only_when_configured(hybrid_home, monkeypatch, config, args, modes):
    from click.testing import CliRunner

    import hybrid.eval.run
    from hybrid.faces.cli.main import main

    write(hybrid_home, "config.toml", f'[settings]\nembedder = "hash:64"\n{config}')
    seen = []

    def fake_run_eval(vault_path, queries, qrels, configs, *a, **kw):
        seen.extend(c.mode for c in configs)
        raise HybridError("stop here")

    monkeypatch.setattr(hybrid.eval.run, "run_eval", fake_run_eval)
    res = CliRunner().invoke(main, ["eval", *args])
    assert res.exit_code == 1 and "stop here" in res.output
    assert seen == modes


def _hybrid_exe() -> list[str]:
    exe = Path(sys.executable).with_name("hybrid")
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "hybrid"]


@pytest.mark.slow  # three CLI runs on the sample vault, the first compiling ranx's nDCG (~15 s)
def test_cli_eval_default_run_stderr_is_clean_and_report_is_found(tmp_path):
    """A new user's first `hybrid eval`: numba compiles ranx's metrics on first use (a fresh
    NUMBA_CACHE_DIR) and warns about it, matplotlib builds its font cache (a fresh MPLCONFIGDIR);
    none of that may reach stderr. The report lands in the data dir and the output says where."""
    home = tmp_path / "home"
    env = dict(os.environ, HYBRID_HOME=str(home), NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               MPLCONFIGDIR=str(tmp_path / "mpl"))
    env.pop("PYTHONWARNINGS", None)
    # ndcg@10 alone: numba warns while compiling it, and compiling every metric takes a minute
    res = subprocess.run([*_hybrid_exe(), "eval", "--embedder", "hash:64", "--metrics", "ndcg@10", "--limit", "20"],
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    own = ("warning: ", "error: ", "info: ", "hint: ", "report: ")  # hybrid's own stderr lines
    assert not [ln for ln in lines if not ln.startswith(own)], res.stderr
    assert "Warning" not in res.stderr and "site-packages" not in res.stderr, res.stderr
    assert "rerank skipped" not in res.stderr  # rerank is not a default mode without a reranker
    assert "answer@1 misses of hybrid-" in res.stdout and "more in " in res.stdout
    last = res.stdout.strip().splitlines()[-1]
    assert last.startswith("report: ") and last.endswith("report.md")
    report = Path(last[len("report: "):])
    assert report.is_file() and report.parent.parent == home / "data" / "eval"
    assert (report.parent / CATEGORY_PLOT).is_file() and "## answer@1 misses" in report.read_text()

    res = subprocess.run([*_hybrid_exe(), "eval", "--embedder", "hash:64", "--limit", "5", "--modes", "lexical",
                          "--metrics", "ndcg@10", "--json", "--out", str(tmp_path / "out")],
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["queries"] == 5  # stdout is JSON only
    assert res.stderr.strip() == f"report: {tmp_path / 'out' / 'report.md'}"

    before = sorted((home / "data" / "eval").iterdir())
    res = subprocess.run([*_hybrid_exe(), "eval", "--embedder", "hash:64", "--limit", "5", "--modes", "lexical",
                          "--metrics", "ndcg@10", "--json", "--no-report"],
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["queries"] == 5 and res.stderr.strip() == ""
    assert sorted((home / "data" / "eval").iterdir()) == before  # no report folder written


def test_no_report_and_out_contradict(hybrid_home):
    from click.testing import CliRunner

    from hybrid.faces.cli.main import main
    res = CliRunner().invoke(main, ["eval", "--no-report", "--out", str(hybrid_home / "x")])
    assert res.exit_code == 2 and "use one of them" in res.output


def test_without_the_eval_extra_hybrid_eval_says_how_to_install_it(hybrid_home, monkeypatch):
    """ranx is the `eval` extra's (a plain `pip install` leaves it out): `hybrid eval` then stops
    in one line naming the install command, before anything is indexed."""
    from click.testing import CliRunner

    import hybrid.eval.run
    from hybrid.faces.cli.main import main
    write(hybrid_home, "config.toml", '[settings]\nembedder = "hash:64"\n')
    monkeypatch.setitem(sys.modules, "ranx", None)  # import ranx: ImportError
    monkeypatch.setattr(hybrid.eval.run, "open_hybrid", lambda *a, **kw: pytest.fail("indexed without ranx"))
    res = CliRunner().invoke(main, ["eval", "--no-report"])
    assert res.exit_code == 1
    error = [ln for ln in res.output.splitlines() if "ranx" in ln]
    assert len(error) == 1 and "pip install 'ranx>=" in error[0] and "'eval' extra" in error[0], res.output


def test_the_install_command_names_what_pyproject_lists_in_the_extra():
    import tomllib

    from hybrid.eval.run import EXTRA, extra_requirements
    pyproject = Path(__file__).parents[3] / "pyproject.toml"
    if not pyproject.is_file():
        pytest.skip("not run from a source tree")
    listed = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["optional-dependencies"][EXTRA]
    # the installed metadata is pyproject's as of the last install (scripts/bootstrap.sh
    # reinstalls whenever pyproject.toml changes)
    assert extra_requirements() == listed


def test_without_matplotlib_the_report_has_no_plots_and_says_why(tmp_path, monkeypatch, caplog):
    from hybrid.eval.run import extra_requirements
    wanted = next(r for r in extra_requirements() if r.startswith("matplotlib"))  # pyproject's bound
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    out = tmp_path / "report"
    write_report(_result(), out, "hybrid eval", Settings())
    report = (out / "report.md").read_text()
    assert "## answer@1 by category" in report and "![" not in report
    assert not list(out.glob("*.png"))
    assert [r.getMessage() for r in caplog.records if "plots" in r.getMessage()] == [
        f"report written without plots: matplotlib is not installed (pip install '{wanted}')"]
