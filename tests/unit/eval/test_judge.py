"""hybrid eval judge: questions from a file or the audit log, pooled hits, recorded answers that
hybrid eval reads, and a resumed session that asks nothing twice."""
import json
import re

import pytest
from click.testing import CliRunner
from helpers import write

from hybrid.app.audit import AuditLog
from hybrid.eval.inputs import Problems, load_qrels, load_queries, reconcile
from hybrid.eval.judge import pool, questions_from_audit, questions_from_file
from hybrid.faces.cli.main import main
from hybrid.retrieval.hits import Hit


def test_audit_questions_are_distinct_newest_first(tmp_path):
    log = AuditLog(tmp_path / "audit.jsonl", 10**6, 1)
    for tool, q in [("search", "kafka lag"), ("get_note", None), ("api/search", "tailscale  routes"),
                    ("search", "Kafka lag"), ("search", ""), ("search", "sourdough")]:
        log.append({"tool": tool, "args": {"query": q} if q is not None else {"path": "a.md"}})
    assert [q.text for q in questions_from_audit(log.records(), 0)] == ["sourdough", "Kafka lag", "tailscale routes"]
    assert [q.text for q in questions_from_audit(log.records(), 2)] == ["sourdough", "Kafka lag"]


def test_questions_file_plain_or_queries_format(tmp_path):
    plain = write(tmp_path, "q.txt", "how do I back up\n\n# a comment\n  tomatoes   sun \n")
    assert [q.text for q in questions_from_file(plain)] == ["how do I back up", "tomatoes sun"]
    jl = write(tmp_path, "q.jsonl", '{"qid": "g1", "text": "garden", "category": "keyword"}\n')
    assert [(q.qid, q.text, q.category) for q in questions_from_file(jl)] == [("g1", "garden", "keyword")]


def test_pool_interleaves_modes_and_keeps_each_note_once():
    def hit(path, heading="H"):
        return Hit("v", path, "t", [heading], 1, 2, f"about {path}", 0.0)
    ranked = {"hybrid": [hit("a.md"), hit("a.md", "other"), hit("b.md")],
              "lexical": [hit("c.md"), hit("a.md")], "vector": [hit("b.md"), hit("d.md")]}
    got = pool(lambda text, mode: ranked[mode], "q", depth=2)
    assert [c.path for c in got] == ["a.md", "c.md", "b.md", "d.md"]
    assert got[0].modes == ("hybrid", "lexical") and got[0].heading == "H" and got[2].modes == ("vector", "hybrid")


@pytest.fixture
def judging(hybrid_home, vault, tmp_path):
    write(hybrid_home, "config.toml", '[settings]\nembedder = "hash:64"\n')
    questions = write(tmp_path, "questions.txt", "tomatoes sun\norders-created topic\nsourdough\n")
    qfile, rfile = tmp_path / "set" / "queries.jsonl", tmp_path / "set" / "qrels.json"
    args = ["eval", "judge", str(questions), "--vault", str(vault), "--depth", "2",
            "--queries", str(qfile), "--qrels", str(rfile)]
    return args, qfile, rfile


@pytest.mark.slow  # indexes a small vault (~0.5 s)
def test_judge_records_answers_eval_reads_and_resumes(judging, vault):
    args, qfile, rfile = judging
    # the first note of the first question is the answer; skip the rest of it; quit at the second
    first = CliRunner().invoke(main, args, input="2\ns\nq\n")
    assert first.exit_code == 0, first.output
    assert "[1/3] j001: tomatoes sun" in first.output and "[2/3] j002" in first.output
    shown = re.search(r"\(1/(\d+)\) (\S+)", first.output)
    pooled, answer = int(shown.group(1)), shown.group(2)
    assert pooled >= 2 and json.loads(rfile.read_text()) == {"j001": {answer: 2}}
    # hybrid eval reads the pair as is
    p = Problems()
    queries, judged = reconcile(load_queries(qfile, p), load_qrels(rfile, p),
                                {"home/garden.md", "work/orders.md", "home/network.md", "journal.md"}, p, "x")
    assert list(queries) == ["j001"] and judged == {"j001": {answer: 2}} and not p.counts
    assert "measure with: hybrid eval --vault" in first.output

    # resumed: the judged note is not asked again (a `y` would make it grade 1), the rest are
    second = CliRunner().invoke(main, args, input="y\n" * 20)
    assert second.exit_code == 0, second.output
    assert f"(1/{pooled - 1}) " in second.output.split("[2/3]")[0]
    qrels = json.loads(rfile.read_text())
    assert qrels["j001"][answer] == 2 and len(qrels["j001"]) == pooled
    assert sorted(g for g in qrels["j001"].values()) == [1] * (pooled - 1) + [2]
    assert set(qrels) == {"j001", "j002", "j003"}
    lines = [json.loads(ln) for ln in qfile.read_text().splitlines()]
    assert [ln["qid"] for ln in lines] == ["j001", "j002", "j003"]  # each question once
    third = CliRunner().invoke(main, args, input="")
    assert third.exit_code == 0 and "0 question(s) judged this session" in third.output


def test_judge_needs_one_source_of_questions(judging):
    args, _, _ = judging
    res = CliRunner().invoke(main, [*args, "--from-audit"])
    assert res.exit_code == 2 and "one of them" in res.output
    res = CliRunner().invoke(main, ["eval", "--modes", "lexical", "judge", "--help"])
    assert res.exit_code == 2 and "--modes belong to `hybrid eval` itself" in res.output


def test_eval_help_explains_metrics_and_formats():
    out = CliRunner().invoke(main, ["eval", "--help"]).output
    for word in ("ndcg@10", "recall@k", "mrr@10", "map@100", "answer@1", "answer@10", "JSONL", "TREC",
                 '{"q1": {"Account/Passwords.md": 2', "docs/evaluation.md", "judge"):
        assert word in out, word


@pytest.mark.slow  # indexes a small vault (~0.5 s)
def test_judge_from_audit_asks_what_agents_asked(judging, hybrid_home):
    args, _, rfile = judging
    log = AuditLog(hybrid_home / "data" / "audit.jsonl", 10**6, 1)
    for q in ("old question", "tailscale routes"):
        log.append({"tool": "search", "args": {"query": q}})
    res = CliRunner().invoke(main, [*args[:2], "--from-audit", "--limit", "1", *args[3:]], input="y\nq\n")
    assert res.exit_code == 0, res.output
    assert "[1/1] j001: tailscale routes" in res.output and "old question" not in res.output
    assert list(json.loads(rfile.read_text())["j001"].values()) == [1]


@pytest.mark.slow  # indexes a small vault (~0.5 s)
def test_judge_names_an_answer_no_mode_found(judging, vault):
    """`a` names a note by path or title (a ref that names none is said and asked again), with
    its grade, then the shown note is asked again; a question whose pooled notes are all judged
    and none relevant is offered again in the next session to name its answer. --question gives
    questions without a file."""
    args, _, rfile = judging
    base = [a for a in args if a != args[2]]  # no questions file
    ask = [*base, "--question", "what to plant in spring", "--depth", "1"]
    res = CliRunner().invoke(main, ask, input="a\nno such note here\nGarden\n\n" + "n\n" * 10)
    assert res.exit_code == 0, res.output
    assert "[1/1] j001: what to plant in spring" in res.output and "no such note here" in res.output
    judged = json.loads(rfile.read_text())["j001"]
    assert judged["home/garden.md"] == 2 and sorted(judged.values()).count(2) == 1
    assert all(g == 0 for p, g in judged.items() if p != "home/garden.md")

    ask = [*base, "--question", "kafka partitions count", "--depth", "1"]
    res = CliRunner().invoke(main, ask, input="n\n" * 10)  # nothing pooled is relevant
    assert res.exit_code == 0 and "have no relevant note yet" in res.output
    res = CliRunner().invoke(main, ask, input="a\nwork/orders.md\ny\n")
    assert res.exit_code == 0, res.output
    assert "pooled notes are judged and none is relevant" in res.output
    assert json.loads(rfile.read_text())["j002"]["work/orders.md"] == 1
    res = CliRunner().invoke(main, [*base, "--question", "x", "--from-audit"])
    assert res.exit_code == 2 and "one of them" in res.output
