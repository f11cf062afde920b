"""The agent view, the audit trail and the proposals inbox through a real MCP client session
(in-process, the official SDK's Client) and through /api/search; logic-level, so the fast
`hash:` embedder stands in for the model."""
import json

import anyio
import pytest
from helpers import ALL_STORES
from mcp import Client
from mcp_types import Implementation
from secrets_fixtures import fake_secrets

from hybrid.app.audit import AuditLog, audit_path
from hybrid.faces.http import api_search_call
from hybrid.faces.mcp import build_server
from hybrid.retrieval.result import answer_passages

STORES = ALL_STORES  # tests that use `store_kind` run against both stores

SECRET = next(c for c in fake_secrets() if c["name"].startswith("github"))


@pytest.fixture
def agent_home(tmp_path, open_h):
    v = tmp_path / "vault"
    (v / "journal").mkdir(parents=True)
    (v / "work").mkdir()
    (v / "work" / "net.md").write_text("# Network\n\nThe quokka subnet router runs on the pi.\n")
    (v / "work" / "ci.md").write_text(f"# CI\n\nThe quokka deploy uses\n{SECRET['line']}\nfor the runner.\n")
    (v / "journal" / "2026-01-03.md").write_text("# Jan 3\n\nA quokka day; zorvatrex dose moved to 9am.\n")
    (v / "health.md").write_text("---\nprivate: true\n---\n# Health\n\nquokka zorvatrex appointment\n")
    (v / "money.md").write_text("---\ntags: [private/finance]\n---\n# Money\n\nquokka Fenwick Mutual account\n")
    home = tmp_path / "home"
    h = open_h(home, embedder="hash:64", agent_exclude=["journal/**"], proposals_folder="agent_learnings")
    h.add_vault(v, "v")
    h.index()
    return h, v, home


def call(h, tool, args, name="test-agent"):
    async def main():
        async with Client(build_server(h), client_info=Implementation(name=name, version="9.9")) as c:
            return await c.call_tool(tool, args)
    return anyio.run(main)


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_mcp_search_and_get_note_serve_the_agent_view(agent_home):
    h, v, home = agent_home
    res = call(h, "search", {"query": "quokka", "top_k": 10, "passages": True})
    paths = [x["path"] for x in answer_passages(res.structured_content)]
    assert sorted(paths) == ["work/ci.md", "work/net.md"]
    assert sorted(x["lexical_rank"] for x in answer_passages(res.structured_content)) == [1, 2]  # no gaps
    blob = json.dumps(res.structured_content) + res.content[0].text
    assert SECRET["secret"] not in blob and "[redacted secret]" in blob
    assert "zorvatrex" not in blob.lower() and "fenwick" not in blob.lower()
    assert answer_passages(call(h, "search", {"query": "zorvatrex", "mode": "lexical"}).structured_content) == []
    assert {x["path"] for x in answer_passages(call(h, "search", {"query": "zorvatrex"}).structured_content)} \
        <= {"work/ci.md", "work/net.md"}  # the vector arm's nearest public notes, nothing else
    # the owner still finds it
    assert {x.path for x in h.search("zorvatrex", top_k=10, mode="lexical")} == {"journal/2026-01-03.md", "health.md"}

    note = call(h, "get_note", {"path": "work/ci.md"})
    assert SECRET["secret"] not in note.structured_content["text"]
    assert note.structured_content["total_lines"] == 5
    missing = call(h, "get_note", {"path": "journal/nope.md"}).content[0].text
    for private in ("journal/2026-01-03.md", "health.md", "money.md:1-3"):
        res = call(h, "get_note", {"path": private})
        assert res.is_error and res.content[0].text.replace(private.split(":")[0], "X") \
            == missing.replace("journal/nope.md", "X")

    vaults = call(h, "list_vaults", {}).structured_content["vaults"]
    assert (vaults[0]["notes"], vaults[0]["chunks"]) == (2, 2) and "disk_bytes" not in vaults[0]


def test_every_agent_call_is_audited(agent_home):
    h, v, home = agent_home
    call(h, "search", {"query": "quokka", "top_k": 3}, name="claude-test")
    call(h, "get_note", {"path": "health.md"}, name="claude-test")
    call(h, "list_vaults", {}, name="claude-test")
    records = list(AuditLog.from_settings(home / "data", h.settings).records())
    assert [r["tool"] for r in records] == ["search", "get_note", "list_vaults"]
    assert all(r["client"] == "claude-test 9.9" and isinstance(r["ms"], float) for r in records)
    assert records[0]["args"]["query"] == "quokka" and records[0]["count"] == 2
    assert all(c.startswith("v:work/") for c in records[0]["returned"])
    assert records[1]["error"] and records[1]["returned"] == []
    assert (audit_path(home / "data").stat().st_mode & 0o777) == 0o600


def test_a_call_that_cannot_be_audited_is_refused(agent_home):
    h, v, home = agent_home
    audit_path(home / "data").mkdir(parents=True)  # a folder where the log file should be
    res = call(h, "search", {"query": "quokka"})
    assert res.is_error and "audit log" in res.content[0].text
    assert not res.structured_content or not res.structured_content.get("hits")


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_propose_note_writes_only_a_new_proposal_hidden_from_agents(agent_home):
    h, v, home = agent_home
    before = {p: p.read_bytes() for p in v.rglob("*.md")}
    res = call(h, "propose_note", {"title": "Quokka router lessons", "content": "quokka: reboot the pi first",
                                   "based_on": ["v:work/net.md:1-3"]})
    assert not res.is_error, res.content[0].text
    rel = res.structured_content["proposal"]["path"]
    assert rel.startswith("agent_learnings/") and rel.endswith("-quokka-router-lessons.md")
    text = (v / rel).read_text()
    assert "status: proposed" in text and "proposed_by: test-agent 9.9" in text and "v:work/net.md:1-3" in text
    assert all(p.read_bytes() == b for p, b in before.items())  # nothing else touched
    again = call(h, "propose_note", {"title": "Quokka router lessons", "content": "second"})
    assert again.structured_content["proposal"]["path"] != rel  # never overwritten
    for bad in ({"title": "../../escape", "content": "x" * 30_000}, {"title": "", "content": "x"}):
        assert call(h, "propose_note", bad).is_error
    h.index()
    assert rel not in {x.path for x in h.search("reboot the pi first", agent=True, top_k=20)}
    assert rel in {x.path for x in h.search("reboot the pi first", top_k=20)}
    h.override(agents_see_proposals=True)
    assert rel in {x.path for x in h.search("reboot the pi first", agent=True, top_k=20)}
    tools = [r["tool"] for r in AuditLog.from_settings(home / "data", h.settings).records()]
    assert tools.count("propose_note") == 4


def test_propose_note_refused_when_proposals_are_off(agent_home):
    h, v, home = agent_home
    h.override(proposals_folder="")
    res = call(h, "propose_note", {"title": "x", "content": "y"})
    assert res.is_error and "proposals are off" in res.content[0].text


def test_api_search_serves_agents_the_agent_view_and_the_owner_everything(agent_home):
    h, v, home = agent_home
    body = json.dumps({"query": "zorvatrex quokka", "top_k": 10}).encode()
    status, agent = api_search_call(h, body, "http 127.0.0.1 curl/8")
    assert status == 200 and {x["path"] for x in answer_passages(agent)} <= {"work/ci.md", "work/net.md"}
    status, owner = api_search_call(h, body, None)
    assert {"health.md", "journal/2026-01-03.md"} <= {x["path"] for x in answer_passages(owner)}
    records = list(AuditLog.from_settings(home / "data", h.settings).records())
    assert [(r["tool"], r["client"]) for r in records] == [("api/search", "http 127.0.0.1 curl/8")]
