"""Hardening round 2: every failure says what happened and is on the record. Out-of-range dates
are refused naming the argument, in every door; every agent call is audited, failed or not,
including failures nobody foresaw; agent text never reaches the owner's terminal raw."""
import json
import math

import anyio
import pytest
from click.testing import CliRunner
from helpers import write
from mcp import Client
from mcp_types import Implementation

import hybrid
from hybrid.app.audit import AuditLog
from hybrid.core.errors import QuerySyntaxError
from hybrid.faces.http import api_search_call
from hybrid.faces.mcp import build_server
from hybrid.retrieval.limits import BadSearchArgs
from hybrid.retrieval.request import SearchRequest

OUT_OF_RANGE = [1e300, -1e300, 2 ** 70, math.inf, "999999999999999999999d", "99999999y", "10000-01-01"]


@pytest.fixture
def h(tmp_path):
    v = tmp_path / "vault"
    write(v, "a.md", "# Alpha\n\nThe quokka subnet router runs on the pi.\n")
    write(tmp_path / "home", "config.toml", '[settings]\nembedder = "hash:64"\nproposals_folder = "inbox"\n')
    handle = hybrid.open(tmp_path / "home")
    handle.add_vault(v, "v")
    handle.index()
    yield handle
    handle.close()


def call(h, tool, args):
    async def main():
        async with Client(build_server(h), client_info=Implementation(name="probe", version="1")) as c:
            return await c.call_tool(tool, args)
    return anyio.run(main)


def records(h):
    return list(AuditLog.from_settings(h.config.data, h.settings).records())


@pytest.mark.parametrize("since", OUT_OF_RANGE)
def test_an_out_of_range_since_is_refused_naming_it(since):
    with pytest.raises(BadSearchArgs, match="since"):
        SearchRequest("x", since=since)


@pytest.mark.parametrize("inline", ["since:999999999999999999999d", "since:99999999y"])
def test_an_out_of_range_inline_since_is_a_syntax_error(inline):
    with pytest.raises(QuerySyntaxError, match="since"):
        SearchRequest(f"quokka {inline}").parsed  # noqa: B018


def test_dates_far_back_are_still_fine(h):
    assert [x.path for x in h.search("quokka", since="1900-01-01", mode="lexical")] == ["a.md"]
    assert [x.path for x in h.search("quokka", since=-2e9, mode="lexical")] == ["a.md"]
    from hybrid.retrieval.filters import NoMatchingNotes
    with pytest.raises(NoMatchingNotes, match="since 9999-12-3"):
        h.search("quokka", since="9999-12-31", mode="lexical")


def test_api_search_answers_400_and_audits_it(h):
    status, data = api_search_call(h, json.dumps({"query": "x", "since": 1e300}).encode(), "http 127.0.0.1 t")
    assert status == 400 and "since" in data["error"]
    (rec,) = records(h)
    assert rec["tool"] == "api/search" and "since" in rec["error"]


def test_mcp_since_is_a_tool_error_naming_it_and_audited(h):
    res = call(h, "search", {"query": "quokka", "since": "999999999999999999999d"})
    assert res.is_error and "since" in res.content[0].text and "I64" not in res.content[0].text
    (rec,) = records(h)
    assert rec["tool"] == "search" and "since" in rec["error"]


def test_an_unforeseen_failure_is_one_line_and_audited(h, monkeypatch):
    """A bug deep in the engine (not a HybridError) still ends in a tool error / a 500 with one
    line, and both calls are in the audit log."""
    def boom(*a, **k):
        raise ValueError("Expected I64 deep inside\nsecond line")
    monkeypatch.setattr(type(h), "search", boom)
    res = call(h, "search", {"query": "quokka"})
    assert res.is_error and "internal error" in res.content[0].text
    assert "\n" not in res.content[0].text
    status, data = api_search_call(h, json.dumps({"query": "quokka"}).encode(), "http 127.0.0.1 t")
    assert status == 500 and "internal error" in data["error"] and "\n" not in data["error"]
    got = records(h)
    assert [r["tool"] for r in got] == ["search", "api/search"]
    assert all("ValueError" in r["error"] for r in got)


def test_proposals_show_escapes_control_characters(h):
    """What an agent can send (C1 controls such as CSI, bidi overrides) and what a proposal file
    may hold however it got there (ESC, BEL, DEL, CR) is shown escaped; newlines and tabs stay."""
    from hybrid.faces.cli.main import main
    res = call(h, "propose_note", {"title": "Evil text", "content": "ok line\n\x9b31mred \u202eevil\u202c tab\there"})
    assert not res.is_error, res.content[0].text
    rel = res.structured_content["proposal"]["path"]
    path = h.config.vault("v").path / rel
    path.write_text(path.read_text() + "\x1b[2J clear\r\n\x07bell\x7f\n")
    env = {"HYBRID_HOME": str(h.config.path.parent)}
    out = CliRunner().invoke(main, ["proposals", "show", rel.rsplit("/", 1)[-1]], env=env)
    assert out.exit_code == 0, out.output
    text = out.stdout
    for bad in ("\x9b", "\x1b", "\u202e", "\u202c", "\x07", "\x7f", "\r"):
        assert bad not in text
    assert "\\u009b31mred" in text and "\\u202eevil" in text and "\\u001b[2J" in text
    assert "ok line\n" in text and "tab\there" in text  # line breaks and tabs stay what they are
    as_json = CliRunner().invoke(main, ["proposals", "show", rel.rsplit("/", 1)[-1], "--json"], env=env)
    assert "\x9b" in json.loads(as_json.stdout)["text"]  # JSON carries the text exactly (escaped by JSON)


@pytest.mark.slow  # a real HTTP server (in a thread) and an MCP client over Streamable HTTP
def test_a_proposal_of_many_emoji_over_http_names_the_limit_it_meets(h):
    """20,000 emoji are 20,000 characters (within proposal_max_chars) but ~240 kB of JSON: the
    body cap on /mcp leaves room for them; 20,001 are refused by the tool naming
    proposal_max_chars; a body over the cap gets a JSON-RPC error the client shows."""
    import httpx
    from helpers import app_server
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError

    async def propose(url, content):
        async with streamable_http_client(url + "/mcp") as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                try:
                    return await s.call_tool("propose_note", {"title": "Emoji", "content": content})
                except MCPError as exc:  # a JSON-RPC error: the SDK raises it with its message
                    return exc

    with app_server(h) as url:
        ok = anyio.run(propose, url, "🦊" * 20_000)
        assert not ok.is_error, ok.content[0].text
        over = anyio.run(propose, url, "🦊" * 20_001)
        assert over.is_error and "20,001 characters; the limit is 20,000 (proposal_max_chars)" in over.content[0].text
        huge = anyio.run(propose, url, "🦊" * 100_000)
        assert isinstance(huge, MCPError)
        assert "request body too large (305,536 bytes is this server's limit" in str(huge)
        raw = httpx.post(url + "/mcp", content=b"{" + b" " * 400_000 + b"}",
                         headers={"content-type": "application/json", "accept": "application/json, text/event-stream"})
        assert raw.status_code == 413 and raw.json()["error"]["message"].startswith("request body too large")
    tools = [r["tool"] for r in records(h)]
    assert tools.count("propose_note") == 2  # the third never reached the server's tools
