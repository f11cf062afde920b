"""Issue #30 (duplicates): a passage repeated in other notes is one hit whose ``also_in`` names
the copies, in every door: the CLI (text and --json), a real MCP client session, /api/search and
the page's /ui/api/search over one real index (hash embedder: this is about the field)."""
import json

import pytest
from click.testing import CliRunner
from helpers import mcp_search, write

import hybrid
from hybrid.faces.cli import main as cli
from hybrid.faces.http import api_search_call
from hybrid.faces.ui.routes import search_call
from hybrid.retrieval.result import answer_passages

BOILER = ("## Morning checklist\n\n- [ ] Review the inbox and flag what needs a reply today\n"
          "- [ ] Check the calendar for meetings and prepare notes for each\n")


@pytest.fixture(scope="module")
def daily(tmp_path_factory):
    root = tmp_path_factory.mktemp("dupdoors")
    write(root / "home", "config.toml", '[settings]\nembedder = "hash:64"\n')
    vault = root / "vault"
    for day in ("2024-01-01", "2024-01-02", "2024-01-03"):
        write(vault, f"Daily/{day}.md", f"# {day}\n\n{BOILER}\n## Journal\n\nWrote about {day} things.\n")
    write(vault, "inbox.md", "# Inbox zero\n\nFlag each message that needs a reply, archive the rest.\n")
    h = hybrid.open(root / "home")
    h.add_vault(vault, "v")
    h.index()
    yield h, root / "home"
    h.close()


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_every_door_shows_the_copies_under_one_hit(daily, monkeypatch):
    h, home = daily
    monkeypatch.setenv("HYBRID_HOME", str(home))
    args = {"query": "review the inbox calendar meetings", "top_k": 5}
    out = CliRunner().invoke(cli.main, ["query", args["query"], "-n", "5", "--json", "--local"])
    assert out.exit_code == 0, out.output
    res = mcp_search(h, args)
    status, api = api_search_call(h, json.dumps(args).encode(), None)
    assert status == 200
    answers = {"cli": {"notes": json.loads(out.stdout)}, "mcp": res.structured_content, "api": api,
               "page": search_call(h, dict(args))}
    for door, answer in answers.items():
        checklists = [p for p in answer_passages(answer) if "Morning checklist" in (p.get("snippet") or "")]
        assert len(checklists) == 1, door  # three daily notes, one answer
        folded = checklists[0]["also_in"]
        assert len(folded) == 2 and all(c.startswith("v:Daily/2024-01-0") for c in folded), door
        assert checklists[0]["path"] not in {c.split(":")[1] for c in folded}, door
    assert "same text in: v:Daily/" in res.content[0].text  # the MCP text names them too
    text = CliRunner().invoke(cli.main, ["query", args["query"], "-n", "5", "--local"])
    assert text.exit_code == 0 and "also in: Daily/2024-01-0" in text.stdout  # vault left out: the same one


@pytest.mark.slow
def test_status_reports_what_was_deduplicated(daily, monkeypatch):
    h, home = daily
    monkeypatch.setenv("HYBRID_HOME", str(home))
    out = CliRunner().invoke(cli.main, ["status", "--json"])
    assert out.exit_code == 0, out.output
    row = json.loads(out.stdout)[0]
    assert (row["shared_chunks"], row["shared_texts"], row["embeddings_saved"]) == (3, 1, 2)
    text = CliRunner().invoke(cli.main, ["status"])
    assert "deduplicated: 3 chunks share 1 texts, 2 embeddings saved" in text.stdout
    agent = [r for r in h.status(agent=True) if r.name == "v"][0]
    assert agent.shared_chunks == 0  # agents are not told (the counts include notes hidden from them)
