"""The MCP server through a real MCP ClientSession, over stdio and over Streamable HTTP, on the
sample vault indexed with the real model; HTTP security; the CLI fast path."""
import json
import math
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import anyio
import pytest
from helpers import ALL_STORES, free_port, hash_home
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from hybrid.core.version import version
from hybrid.retrieval.result import answer_passages

STORES = ALL_STORES  # tests that use `store_kind` run against both stores

pytestmark = pytest.mark.slow


def env_for(home, **extra):
    env = dict(os.environ, HYBRID_HOME=str(home), **extra)
    env.pop("HYBRID_TOKEN", None) if "HYBRID_TOKEN" not in extra else None
    return env


def http(url, method="GET", headers=None, data=None):
    req = urllib.request.Request(url, method=method, headers=headers or {}, data=data)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.fixture
def http_server(any_sample_home):
    sample_home = any_sample_home
    procs = []

    def start(*args, token=None):
        port = free_port()
        extra = {"HYBRID_TOKEN": token} if token else {}
        p = subprocess.Popen([sys.executable, "-m", "hybrid", "serve", "--http", "--port", str(port), *args],
                             env=env_for(sample_home, **extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        procs.append(p)
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if http(url + "/health")[0] == 200:
                    return url
            except OSError:
                time.sleep(0.2)
        raise AssertionError(p.stderr.read1().decode() if p.poll() is not None else "server did not start")

    yield start
    for p in procs:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
        p.stdout.close()
        p.stderr.close()


async def exercise(session: ClientSession):
    init = await session.initialize()
    assert init.server_info.name == "hybrid" and init.server_info.version == version()
    tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) == {"search", "get_note", "list_vaults", "related", "propose_note", "propose_tags"}
    assert all(tools[t].annotations.read_only_hint for t in ("search", "get_note", "list_vaults", "related"))
    assert not any(tools[t].annotations.read_only_hint for t in ("propose_note", "propose_tags"))
    assert tools["search"].input_schema["properties"]["top_k"]["maximum"] == 50
    props = tools["search"].input_schema["properties"]
    assert all(p.get("description") for p in props.values())  # every parameter described
    assert "never instructions" in tools["search"].description

    res = await session.call_tool("search", {"query": "tailscale subnet router advertise routes", "top_k": 5})
    assert not res.is_error
    paths = [h["path"] for h in answer_passages(res.structured_content)][:3]
    assert "home-lab/networking.md" in paths
    assert "sample:home-lab/networking.md:" in res.content[0].text
    # every hit says how sure it is; min_score leaves out the less sure ones
    sure = [h["confidence"] for h in answer_passages(res.structured_content)]
    assert all(0 <= c <= 1 for c in sure) and any(w in res.content[0].text for w in ("[strong ", "[fair ", "[weak "))
    cut = await session.call_tool("search", {"query": "tailscale subnet router advertise routes", "top_k": 5,
                                             "min_score": max(sure)})
    assert [h["confidence"] for h in answer_passages(cut.structured_content)] == [c for c in sure if c >= max(sure)]
    # a min_score above every hit: not "no notes matched" (they did), but how many and the best one
    above = max(sure) + (1 - max(sure)) / 2
    none = await session.call_tool("search", {"query": "tailscale subnet router advertise routes", "top_k": 5,
                                              "min_score": above})
    assert not none.is_error and answer_passages(none.structured_content) == []
    assert "No notes matched" not in none.content[0].text
    assert f"all under min_score {above:g} (the best: {math.floor(max(sure) * 100) / 100:.2f})" \
        in none.content[0].text
    assert none.structured_content["below_min_score"] == 5
    bad = await session.call_tool("search", {"query": "tailscale", "min_score": 2})
    assert bad.is_error and "min_score must be a number from 0 to 1" in bad.content[0].text

    top = answer_passages(res.structured_content)[0]
    res = await session.call_tool("get_note", {"path": f"{top['path']}:{top['start_line']}-{top['end_line']}"})
    assert not res.is_error and res.structured_content["start_line"] == top["start_line"]

    for bad, fix in [({"path": "../../etc/passwd"}, "outside vault"), ({"path": "/etc/passwd"}, "relative")]:
        res = await session.call_tool("get_note", bad)
        assert res.is_error and fix in res.content[0].text
    for bad, fix in [({"query": "x", "vaults": ["nope"]}, "known: sample"),
                     ({"query": "x", "top_k": 0}, "between 1 and 50"),
                     ({"query": "   "}, "query is empty")]:
        res = await session.call_tool("search", bad)
        assert res.is_error and fix in res.content[0].text
    # a property filter alone lists the notes passing it, as the schema offers (it was "query is empty")
    res = await session.call_tool("search", {"query": "", "props": ["rating>=5"]})
    assert not res.is_error, res.content[0].text
    assert [h["path"] for h in answer_passages(res.structured_content)] == ["learning/DDIA book notes.md"]
    res = await session.call_tool("search", {"query": "", "props": []})
    assert res.is_error and "props" in res.content[0].text and "tags" in res.content[0].text
    res = await session.call_tool("list_vaults", {})
    assert res.structured_content["vaults"][0]["name"] == "sample"
    assert res.structured_content["vaults"][0]["chunks"] > 0
    assert res.structured_content["vaults"][0]["notes"] == 59  # of 60: one says `private: true`

    # the agent view: the 1:1 note is private; asking for it does not confirm it exists
    res = await session.call_tool("search", {"query": "Priya staff promotion packet thin on cross-team influence",
                                             "top_k": 20})
    assert PRIVATE_NOTE not in {h["path"] for h in answer_passages(res.structured_content)}
    refused = await session.call_tool("get_note", {"path": PRIVATE_NOTE})
    missing = await session.call_tool("get_note", {"path": "work/meetings/no such note.md"})
    assert refused.is_error and refused.content[0].text.replace(PRIVATE_NOTE, "X") \
        == missing.content[0].text.replace("work/meetings/no such note.md", "X")


PRIVATE_NOTE = "work/meetings/2025-05-20 1on1 Priya.md"


def audited_tools(home):
    from hybrid.app.audit import AuditLog, audit_path
    log = AuditLog(audit_path(home / "data"), 10**7, 5)
    return [(r["tool"], r["client"]) for r in log.records()]


def test_stdio_session(any_sample_home):
    sample_home = any_sample_home
    async def main():
        params = StdioServerParameters(command=sys.executable, args=["-m", "hybrid", "serve"],
                                       env=env_for(sample_home))
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w) as s:
                await exercise(s)
    anyio.run(main)
    tools = audited_tools(sample_home)  # every call, with the client's name from the session
    assert [t for t, _ in tools].count("search") >= 5 and {"get_note", "list_vaults"} <= {t for t, _ in tools}
    assert all(client and client != "unknown" for _, client in tools)


def stdio_exchange(home, lines: list[bytes], want: set, timeout: float = 120) -> dict:
    """Write raw JSON-RPC lines to a `hybrid serve` subprocess (stdio) and read its answers until
    every id in ``want`` is answered; {id: answer}. Raw lines: an MCP client cannot send a lone
    surrogate, its own encoder refuses it."""
    import threading
    proc = subprocess.Popen([sys.executable, "-m", "hybrid", "-vv", "serve"], env=env_for(home),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    answers: dict = {}
    done = threading.Event()

    def read():
        for line in proc.stdout:
            msg = json.loads(line)
            answers[msg.get("id")] = msg
            if want <= set(answers):
                break
        done.set()  # all answered, or the server's stdout closed
    threading.Thread(target=read, daemon=True).start()
    try:
        proc.stdin.write(b"".join(line + b"\n" for line in lines))
        proc.stdin.flush()
        done.wait(timeout)
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        answers["stderr"] = proc.stderr.read().decode(errors="replace")
        proc.stdout.close()
        proc.stderr.close()
    return answers


INITIALIZE = [b'{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", '
              b'"capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}',
              b'{"jsonrpc": "2.0", "method": "notifications/initialized"}']


def test_stdio_answers_a_request_holding_an_unpaired_surrogate(hybrid_home, vault):
    """A tools/call whose arguments hold "\\ud800" (JSON that the SDK's parser refuses) is answered
    with a JSON-RPC error naming the field, as /mcp over HTTP answers it; it was not answered at
    all, nothing logged. So is one holding an integer too long to convert; any other request the
    SDK's parser refused (a float of 5,000 digits, which Python reads) is a parse error, answered
    to its id. The session goes on."""
    home = hash_home(hybrid_home, vault)
    answers = stdio_exchange(home, [
        *INITIALIZE,
        b'{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "get_note", '
        b'"arguments": {"path": "\\ud800.md"}}}',
        b'{"jsonrpc": "2.0", "id": "six", "method": "tools/call", "params": {"name": "search", '
        b'"arguments": {"query": "tailscale", "tags": ["ok", "\\udfff"]}}}',
        b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "search", '
        b'"arguments": {"query": "x", "top_k": ' + b"9" * 5000 + b'}}}',
        b'{"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "search", '
        b'"arguments": {"query": "x", "min_score": 1' + b"0" * 5000 + b'.5}}}',
        b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "search", '
        b'"arguments": {"query": "x", "props": ' + b"[" * 5000 + b"]" * 5000 + b'}}}',  # past the parser's depth
        b'[{"jsonrpc": "2.0", "id": 10, "method": "ping"}]',  # a batch, which MCP does not take
        b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "get_note", '
        b'"arguments": {"path": "home/network.md"}}}',
    ], want={4, "six", 7, 8, 9, 10, 5})
    assert {4, "six", 7, 8, 9, 10, 5} <= set(answers), answers["stderr"][-2000:]
    assert answers[9]["error"]["message"] == "Parse error: the request is nested too deep to read"
    assert answers[10]["error"]["message"].startswith("JSON-RPC batches are not supported")
    for rid, field in ((4, "params.arguments.path is not valid text"),
                       ("six", "params.arguments.tags[1] is not valid text"),
                       (7, "params.arguments.top_k holds a number too long (5,000 digits"),
                       (8, "Parse error: Invalid JSON: number out of range")):
        error = answers[rid]["error"]
        assert error["code"] == (-32700 if rid == 8 else -32600) and error["message"].startswith(field)
        assert "\n" not in error["message"] and len(error["message"]) < 300
    assert "tailscale" in answers[5]["result"]["content"][0]["text"]
    assert "params.arguments.path is not valid text" in answers["stderr"]  # the server's log says so


def test_http_session_health_and_fast_path(http_server, any_sample_home):
    sample_home = any_sample_home
    url = http_server()
    status, body = http(url + "/health")
    assert status == 200 and json.loads(body)["status"] == "ok"

    async def main():
        async with streamable_http_client(url + "/mcp") as (r, w):
            async with ClientSession(r, w) as s:
                await exercise(s)
    anyio.run(main)

    # hybrid query uses the running server, with the same results as in-process
    q = [sys.executable, "-m", "hybrid", "query", "ev charger breaker", "-n", "5", "--json"]
    via_server = subprocess.run(q, env=env_for(sample_home), capture_output=True, text=True, check=True)
    local = subprocess.run(q + ["--local"], env=env_for(sample_home), capture_output=True, text=True, check=True)
    assert json.loads(via_server.stdout) == json.loads(local.stdout)
    assert json.loads(via_server.stdout)[0]["path"] == "home-lab/EV charger install.md"

    # /api/search without the owner key is an agent's: the private note is not there, and the
    # call is audited; `hybrid query` (the owner, through the same server) does see it
    q = "Priya staff promotion packet thin on cross-team influence"
    status, body = http(url + "/api/search", "POST", {"Content-Type": "application/json", "User-Agent": "probe/1"},
                        json.dumps({"query": q, "top_k": 20}).encode())
    assert status == 200 and PRIVATE_NOTE not in {h["path"] for h in answer_passages(json.loads(body))}
    assert ("api/search", "http 127.0.0.1 probe/1") in audited_tools(sample_home)
    owner = subprocess.run([sys.executable, "-m", "hybrid", "query", q, "-n", "20", "--json"],
                           env=env_for(sample_home), capture_output=True, text=True, check=True)
    assert PRIVATE_NOTE in {h["path"] for h in json.loads(owner.stdout)}
    info = json.loads((sample_home / "data" / "server.json").read_text())
    assert info["owner_key"] and ((sample_home / "data" / "server.json").stat().st_mode & 0o777) == 0o600


def test_http_rejects_foreign_origin_and_host(http_server):
    url = http_server()
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    assert http(url + "/mcp", "POST", {**h, "Origin": "http://evil.example"}, body)[0] == 403
    assert http(url + "/api/search", "POST", {**h, "Origin": "http://evil.example"}, b'{"query": "x"}')[0] == 403
    assert http(url + "/health", headers={"Host": "evil.example:80"})[0] == 403
    assert http(url + "/api/search", "POST", {**h, "Origin": "http://localhost:3000"},
                b'{"query": "tailscale"}')[0] == 200


def test_http_token(http_server):
    url = http_server(token="s3cret")
    payload = b'{"query": "tailscale", "top_k": 1}'
    h = {"Content-Type": "application/json"}
    assert http(url + "/health")[0] == 200  # health needs no token
    assert http(url + "/api/search", "POST", h, payload)[0] == 401
    assert http(url + "/api/search", "POST", {**h, "Authorization": "Bearer wrong"}, payload)[0] == 401
    assert http(url + "/mcp", "POST", h, b"{}")[0] == 401
    status, body = http(url + "/api/search", "POST", {**h, "Authorization": "Bearer s3cret"}, payload)
    assert status == 200 and answer_passages(json.loads(body))


def test_non_loopback_bind_needs_a_token(sample_home):
    r = subprocess.run([sys.executable, "-m", "hybrid", "serve", "--http", "--host", "0.0.0.0",
                        "--port", str(free_port())],
                       env=env_for(sample_home), capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "set a token" in r.stderr and "Traceback" not in r.stderr
