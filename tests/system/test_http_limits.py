"""Hardening of the HTTP server and of every search entry point, each test a reproduction from
the adversarial review: DNS rebinding (Host / Origin / Content-Type), allowed hosts for a LAN
bind, caps on top_k / body size / query length, argument types, and the address file's life.
Real servers (``hybrid serve --http`` subprocesses on 127.0.0.1) and a real MCP client; the
hash embedder keeps them quick."""
import http.client
import json
import signal
import socket
import subprocess
import sys

import anyio
import pytest
from helpers import free_port, hash_home, server_env
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from starlette.testclient import TestClient

import hybrid
from hybrid.core.errors import HybridError
from hybrid.faces.http import build_app, remote_search
from hybrid.faces.http_guard import is_loopback
from hybrid.retrieval.limits import MAX_BODY_BYTES, MAX_QUERY_CHARS, MAX_TOP_K, BadSearchArgs
from hybrid.retrieval.request import SearchRequest
from hybrid.retrieval.result import answer_passages

JSON = {"Content-Type": "application/json"}


def request(port, method, path, headers=None, body=None, host=None):
    """One HTTP request with full control of the Host header (urllib always sets its own)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host or f"127.0.0.1:{port}")
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def search(port, payload, headers=None, **kw):
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return request(port, "POST", "/api/search", {**JSON, **(headers or {})}, body, **kw)


@pytest.fixture
def home(hybrid_home, vault):
    return hash_home(hybrid_home, vault)


@pytest.fixture
def client(home):
    """The real ASGI app in-process, for checks that need no socket."""
    h = hybrid.open(home)
    yield TestClient(build_app(h), base_url="http://127.0.0.1:8765")
    h.close()


# --- 1. DNS rebinding ---------------------------------------------------------------------------
@pytest.mark.parametrize("host", ["localhost", "localhost:8765", "LOCALHOST:1", "127.0.0.1", "127.0.0.1:80",
                                  "127.1.2.3:8765", "::1", "[::1]", "[::1]:8765", "[0:0:0:0:0:0:0:1]:80"])
def test_loopback_names_are_accepted(host):
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["127.evil.com", "127.0.0.1.evil.com:80", "localhost.evil.com", "evil.com",
                                  "", "127.0.0.1@evil.com", "evil.com@127.0.0.1", "[::1].evil.com", "0.0.0.0",
                                  "10.0.0.1", "[127.0.0.1]", "localhost:80/x", "127.0.0.1 evil.com"])
def test_lookalike_hosts_are_not_loopback(host):
    assert not is_loopback(host)


@pytest.mark.slow
def test_rebinding_host_and_null_origin_are_refused(serve):
    s = serve()
    for path in ("/health", "/api/search"):
        status, body = request(s.port, "POST" if path == "/api/search" else "GET", path, JSON,
                               b'{"query": "tailscale"}' if path == "/api/search" else None,
                               host=f"127.evil.com:{s.port}")
        assert status == 403 and "127.evil.com" in json.loads(body)["error"]
    assert request(s.port, "GET", "/health", host=f"localhost:{s.port}")[0] == 200
    assert request(s.port, "GET", "/health", host=f"[::1]:{s.port}")[0] == 200
    assert search(s.port, {"query": "tailscale"}, {"Origin": "null"})[0] == 403
    assert search(s.port, {"query": "tailscale"}, {"Origin": "http://127.evil.com"})[0] == 403
    mcp = {**JSON, "Accept": "application/json, text/event-stream", "Origin": "null"}
    assert request(s.port, "POST", "/mcp", mcp, b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}')[0] == 403
    status, body = search(s.port, {"query": "tailscale"}, {"Origin": f"http://localhost:{s.port}"})
    assert status == 200 and answer_passages(json.loads(body))[0]["path"] == "home/network.md"


@pytest.mark.slow
def test_api_search_needs_a_json_content_type(serve):
    s = serve()
    body = b'{"query": "tailscale"}'
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        status, reply = request(s.port, "POST", "/api/search", {"Content-Type": ctype}, body)
        assert status == 415 and "application/json" in json.loads(reply)["error"]
    assert request(s.port, "POST", "/api/search", {}, body)[0] == 415
    assert search(s.port, body, {"Content-Type": "application/json; charset=utf-8"})[0] == 200


@pytest.mark.slow
def test_allowed_hosts_make_a_lan_bind_usable(serve):
    s = serve("--host", "0.0.0.0", "--allow-host", "mybox.lan", env={"HYBRID_TOKEN": "s3cret",
                                                                     "HYBRID_ALLOWED_HOSTS": "nas.lan, 192.168.1.5"})
    auth = {"Authorization": "Bearer s3cret"}
    for name in ("mybox.lan", "nas.lan", "192.168.1.5", "MyBox.LAN"):
        status, body = search(s.port, {"query": "tailscale"}, auth, host=f"{name}:{s.port}")
        assert status == 200 and answer_passages(json.loads(body)), name
    assert search(s.port, {"query": "tailscale"}, auth, host=f"other.lan:{s.port}")[0] == 403
    assert search(s.port, {"query": "tailscale"}, {}, host=f"mybox.lan:{s.port}")[0] == 401
    assert request(s.port, "GET", "/health", host=f"mybox.lan:{s.port}")[0] == 200  # no token needed
    assert request(s.port, "GET", "/health", host=f"other.lan:{s.port}")[0] == 403  # but Host-checked
    origin = {**auth, "Origin": f"http://mybox.lan:{s.port}"}
    assert search(s.port, {"query": "tailscale"}, origin, host=f"mybox.lan:{s.port}")[0] == 200
    # The MCP SDK's own Host/Origin check honours the same names (it would answer 421 / 403).
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    mcp = {**origin, **JSON, "Accept": "application/json, text/event-stream"}
    status, _ = request(s.port, "POST", "/mcp", mcp, json.dumps(init).encode(), host=f"mybox.lan:{s.port}")
    assert status == 200


@pytest.mark.slow
def test_a_bad_allow_host_is_one_error_line(home):
    r = subprocess.run([sys.executable, "-m", "hybrid", "serve", "--http", "--port", str(free_port()),
                        "--allow-host", "evil.com/path"], env=server_env(home), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1 and "not a host name" in r.stderr and "Traceback" not in r.stderr


def free_port6() -> int:
    with socket.socket(socket.AF_INET6) as s:
        s.bind(("::1", 0))
        return s.getsockname()[1]


def banner_and_answers(home, host: str, port: int, *paths: str) -> tuple[str, list[int]]:
    """Start `hybrid serve --http --token s3cret` on ``host``; its announcing line, and the
    status of a GET of each of ``paths`` without a token, sent to the address it announced."""
    import re
    import time
    import urllib.error
    import urllib.request
    proc = subprocess.Popen([sys.executable, "-m", "hybrid", "serve", "--http", "--host", host, "--port", str(port),
                             "--token", "s3cret"], env=server_env(home), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = next((ln for ln in proc.stderr if "search page at" in ln), "")
        base = re.search(r"http://\S+/", line)[0].rstrip("/")
        statuses = []
        for path in paths:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with urllib.request.urlopen(base + path, timeout=10) as r:
                        statuses.append(r.status)
                except urllib.error.HTTPError as e:
                    statuses.append(e.code)
                except OSError:  # not listening yet (or an address that names no host)
                    if time.monotonic() < deadline and proc.poll() is None:
                        time.sleep(0.2)
                        continue
                    raise
                break
        return line, statuses
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stderr.close()


@pytest.mark.slow
@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_the_serve_line_says_what_needs_the_token_and_a_usable_address(home, host):
    """It said 'health at /health (token required)', though /health answers without one, and
    'http://::1:PORT/' for --host ::1, an address no browser or client takes."""
    port = free_port6() if ":" in host else free_port()
    line, (health, mcp) = banner_and_answers(home, host, port, "/health", "/mcp")
    want = f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"
    assert want in line
    assert health == 200 and "health at /health" in line and "(token required)" not in line.split("health at")[1]
    assert mcp == 401 and "MCP at /mcp (token required)" in line


# --- 2. caps and argument types ----------------------------------------------------------------
BAD_BODIES = [
    ({"query": "x", "top_k": "x"}, "top_k"), ({"query": "x", "vaults": 5}, "vaults"),
    ({"query": "x", "folders": "a"}, "folders"), ({"query": 3}, "query must be a string"),
    ({"query": "x", "rerank": "yes"}, "rerank"), ({"query": "x", "top_k": 1e11}, "top_k"),
    ({"query": "x", "top_k": True}, "top_k"), ({"query": "x", "top_k": 0}, "between 1 and"),
    ({"query": "x", "top_k": MAX_TOP_K + 1}, "between 1 and"), ({"query": "x", "tags": [1]}, "tags"),
    ({"query": "x", "since": True}, "since"), ({"query": "x", "mode": "fast"}, "mode"),
    ({"query": "x" * (MAX_QUERY_CHARS + 1)}, "too long"), ({"top_k": 3}, "query is required"),
    ({"query": "x", "evil": 1}, "unknown fields"), ([], "JSON object"), (b"not json", "JSON object"),
    (b"[" * 60_000, "nested too deep"),
    (b'{"query": "x", "top_k": ' + b"9" * 5000 + b"}", "top_k holds a number too long"),
    (b'{"query": "\\ud800"}', "not valid text"), (b'{"query": "x", "folders": ["\\udfff"]}', "not valid text"),
]


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("payload,fix", BAD_BODIES, ids=[str(i) for i in range(len(BAD_BODIES))])
def test_api_search_wrong_types_are_400(client, payload, fix):
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    r = client.post("/api/search", content=body, headers=JSON)
    assert r.status_code == 400
    error = r.json()["error"]
    assert fix in error and "\n" not in error and len(error) < 300


# Bodies with an unpaired surrogate (JSON's "\ud800", which no UTF-8 text holds) where a string
# goes, on every route that reads a JSON body: the field named, never a 500.
LONE_SURROGATES = [
    ("/api/related", b'{"note": "\\ud800"}', "note"),
    ("/api/related", b'{"note": "network", "vault": "x\\udfff"}', "vault"),
    ("/api/search", b'{"query": "tailscale", "tags": ["ok", "\\ud800"]}', "tags[1]"),
    ("/ui/api/read", b'{"vault": "vault", "path": "home/\\ud800.md", "start_line": 1, "end_line": 1}', "path"),
    ("/ui/api/related", b'{"note": "\\udc00"}', "note"),
    ("/ui/api/tags/suggest", b'{"note": "\\ud800"}', "note"),
    ("/ui/login", b'{"token": "\\ud800"}', "token"),
    ("/mcp", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_note", '
             b'"arguments": {"path": "\\ud800"}}}', "params.arguments.path"),
]


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("path,body,field", LONE_SURROGATES, ids=[f"{p}-{f}" for p, _, f in LONE_SURROGATES])
def test_an_unpaired_surrogate_is_a_400_naming_the_field(home, path, body, field):
    h = hybrid.open(home)
    with TestClient(build_app(h, token="s3cret"), base_url="http://127.0.0.1:8765") as c:
        r = c.post(path, content=body, headers={**JSON, "Authorization": "Bearer s3cret",
                                                "Accept": "application/json, text/event-stream"})
    h.close()
    assert r.status_code == 400, r.text
    data = r.json()
    error = data["error"]["message"] if path == "/mcp" else data["error"]
    assert error.startswith(f"{field} is not valid text") and "\n" not in error and len(error) < 300
    # a surrogate pair is one character (an emoji): no refusal
    ok = c.post("/api/search", content=b'{"query": "tailscale \\ud83e\\udd8a"}',
                headers={**JSON, "Authorization": "Bearer s3cret"})
    assert ok.status_code == 200


# A number of more digits than Python reads (4,300) where a JSON body holds one, on every route
# that reads a JSON body: said so, naming the field (it was "body must be a JSON object").
LONG = b"9" * 5000
LONG_NUMBERS = [
    ("/api/search", b'{"query": "x", "top_k": ' + LONG + b"}", "top_k"),
    ("/api/related", b'{"note": "home/network.md", "top_k": ' + LONG + b"}", "top_k"),
    ("/ui/api/read", b'{"vault": "vault", "path": "home/network.md", "start_line": ' + LONG + b"}", "start_line"),
    ("/ui/api/search", b'{"query": "x", "top_k": ' + LONG + b"}", "top_k"),
    ("/ui/login", b'{"token": "s3cret", "x": [1, ' + LONG + b"]}", "x[1]"),
]


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("path,body,field", LONG_NUMBERS, ids=[p for p, _, _ in LONG_NUMBERS])
def test_a_number_too_long_is_said_so(home, path, body, field):
    h = hybrid.open(home)
    with TestClient(build_app(h, token="s3cret"), base_url="http://127.0.0.1:8765") as c:
        r = c.post(path, content=body, headers={**JSON, "Authorization": "Bearer s3cret"})
    h.close()
    assert r.status_code == 400, r.text
    assert r.json()["error"].startswith(f"{field} holds a number too long (5,000 digits; at most 4,300)")


@pytest.mark.slow
def test_huge_top_k_does_not_take_the_server_down(serve):
    s = serve()
    for top_k in (100_000_000_000, 1e11, 10**30):
        status, body = search(s.port, {"query": "tailscale", "top_k": top_k})
        assert status == 400 and "top_k" in json.loads(body)["error"]
    assert s.proc.poll() is None and request(s.port, "GET", "/health")[0] == 200
    status, body = search(s.port, {"query": "tailscale", "top_k": MAX_TOP_K})
    assert status == 200 and answer_passages(json.loads(body))


def _raw(port, head: bytes, body: bytes) -> bytes:
    """Send a request head and part of a body, then read the reply's status line. A server that
    waited for the rest of the body would never answer (the socket times out: the test fails)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head + body)
        reply = b""
        while b"\r\n" not in reply:
            data = sock.recv(4096)
            if not data:
                break
            reply += data
    return reply


@pytest.mark.slow
def test_declared_oversized_body_is_refused_unread(serve):
    s = serve()
    head = (f"POST /api/search HTTP/1.1\r\nHost: 127.0.0.1:{s.port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: 50000000\r\n\r\n").encode()
    assert _raw(s.port, head, b"x" * 1024).startswith(b"HTTP/1.1 413")
    assert request(s.port, "GET", "/health")[0] == 200


@pytest.mark.slow
def test_streamed_oversized_body_is_refused(serve):
    s = serve()
    head = (f"POST /api/search HTTP/1.1\r\nHost: 127.0.0.1:{s.port}\r\nContent-Type: application/json\r\n"
            f"Transfer-Encoding: chunked\r\n\r\n").encode()
    chunk = b"400\r\n" + b"x" * 1024 + b"\r\n"  # 1 KiB chunks, no Content-Length
    assert _raw(s.port, head, chunk * (MAX_BODY_BYTES // 1024 + 1)).startswith(b"HTTP/1.1 413")
    assert request(s.port, "GET", "/health")[0] == 200


def test_python_api_enforces_the_limits(fake):
    with pytest.raises(BadSearchArgs, match="too long"):
        fake.search("x" * (MAX_QUERY_CHARS + 1))
    with pytest.raises(BadSearchArgs, match="between 1 and 1000"):
        fake.search("x", top_k=MAX_TOP_K + 1)
    with pytest.raises(BadSearchArgs, match="folders must be a list"):
        fake.search("x", folders="home")  # once silently searched folders h, o, m, e
    with pytest.raises(ValueError, match="top_k must be an integer"):  # also a plain ValueError
        fake.search("x", top_k=True)
    with pytest.raises(BadSearchArgs, match="query must be a string"):
        fake.search(None)


def test_python_api_accepts_the_largest_allowed_values(fake, vault):
    fake.add_vault(vault, "vault")
    fake.index()
    hits = fake.search("tailscale " + "x" * (MAX_QUERY_CHARS - 10), top_k=MAX_TOP_K, mode="lexical")
    assert isinstance(hits, list)
    assert fake.search("tailscale", top_k=MAX_TOP_K, mode="lexical", folders=("home",))[0].path == "home/network.md"


@pytest.mark.slow
def test_cli_query_too_long_is_one_error_line(home):
    r = subprocess.run([sys.executable, "-m", "hybrid", "query", "x" * (MAX_QUERY_CHARS + 1)],
                       env=server_env(home), capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and r.stderr.startswith("error: query is too long") and "Traceback" not in r.stderr
    assert r.stdout == ""


@pytest.mark.slow
def test_mcp_search_limits_through_a_real_session(serve):
    s = serve()

    async def main():
        async with streamable_http_client(f"http://127.0.0.1:{s.port}/mcp") as (r, w):
            async with ClientSession(r, w) as session:
                await session.initialize()
                res = await session.call_tool("search", {"query": "x" * (MAX_QUERY_CHARS + 1)})
                assert res.is_error and "too long" in res.content[0].text
                res = await session.call_tool("search", {"query": "tailscale", "top_k": 51})
                assert res.is_error and "between 1 and 50" in res.content[0].text
                res = await session.call_tool("search", {"query": "tailscale", "top_k": 50})
                assert not res.is_error and answer_passages(res.structured_content)
    anyio.run(main)


# --- 3. the address file and the CLI's fast path -----------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
@pytest.mark.slow
def test_server_json_is_removed_when_the_server_is_stopped(serve, sig):
    s = serve()
    assert json.loads(s.info.read_text())["pid"] == s.proc.pid
    s.proc.send_signal(sig)
    assert s.proc.wait(timeout=30) == 0  # a clean stop, not death by signal
    assert not s.info.exists()


@pytest.mark.slow
def test_a_second_server_on_a_taken_port_leaves_the_first_ones_file(serve, home):
    first = serve()
    r = subprocess.run([sys.executable, "-m", "hybrid", "serve", "--http", "--port", str(first.port)],
                       env=server_env(home), capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert json.loads(first.info.read_text())["pid"] == first.proc.pid
    assert search(first.port, {"query": "tailscale"})[0] == 200


@pytest.mark.slow
def test_remote_search_surfaces_a_400_and_falls_back_on_401(serve, home, monkeypatch):
    monkeypatch.delenv("HYBRID_TOKEN", raising=False)
    s = serve()
    h = hybrid.open(home)
    skewed = SearchRequest("tailscale")  # as a client of another version might send it
    object.__setattr__(skewed, "top_k", "8")
    with pytest.raises(HybridError, match="top_k must be an integer"):
        remote_search(h, skewed)  # 400
    with pytest.raises(HybridError, match="unknown vault 'nope'"):
        remote_search(h, SearchRequest("tailscale", vaults=["nope"]))  # 422
    assert remote_search(h, SearchRequest("tailscale", top_k=2))[0]["path"] == "home/network.md"
    s.proc.terminate()
    s.proc.wait(timeout=30)
    serve(env={"HYBRID_TOKEN": "s3cret"})  # this client has no token: 401, so search in-process
    assert remote_search(h, SearchRequest("tailscale", top_k=2)) is None
    h.close()
