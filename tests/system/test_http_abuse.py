"""No way in over HTTP: each test a reproduction from the adversarial review of `hybrid serve
--http`. Token guessing is throttled per client host (every loopback address one host) on
every route that checks the token (the bearer header on /api/search, /ui/api/*, /mcp, and the
sign-in form), and for all clients together, never the owner at another address or with the
owner key or a session, nor a client already in use; signing out ends the session on the server
(one, or everywhere; across restarts; a damaged revocation file signs everyone out). In-process
through Starlette's TestClient where the socket is not the point; real `hybrid serve --http`
subprocesses on 127.0.0.1 (slow). Slow clients and the connection cap:
test_http_connections.py."""
import contextlib
import json
import stat
import sys
from collections import Counter

import pytest
from helpers import hash_home, raw_http
from starlette.testclient import TestClient

from hybrid.faces.http import build_app
from hybrid.faces.ui import session as session_mod
from hybrid.faces.ui.session import (
    ALL_FAILURES,
    FAILURE_WINDOW,
    MAX_FAILURES,
    SESSION_DAYS,
    Sessions,
    Throttle,
    Throttled,
    client_key,
)
from hybrid.retrieval.result import answer_passages

TOKEN = "s3cret"
OWNER = "KEY"
PORT = 8765
BASE = f"http://127.0.0.1:{PORT}"
COOKIE = f"hybrid_session_{PORT}"
ATTACKER, OWNER_AT, OTHER = "203.0.113.9", "198.51.100.7", "192.0.2.44"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
ROUTES = {"/api/search": {"query": "orders"}, "/ui/api/search": {"query": "orders"}, "/mcp": INIT}
ACCEPT = "application/json, text/event-stream"  # what an MCP client sends


# --- fixtures and helpers ----------------------------------------------------------------------
@pytest.fixture
def h(fake_indexed):
    return fake_indexed


@pytest.fixture
def home(hybrid_home, vault):
    """A HYBRID_HOME for `hybrid serve --http` subprocesses (the ``serve`` fixture)."""
    return hash_home(hybrid_home, vault)


def with_peer(app):
    """``app`` taking each request's client address from a test-only ``X-Test-Peer`` header: a
    TestClient has one address, and /mcp needs the one lifespan a single client runs."""
    async def peered(scope, receive, send):
        if scope["type"] == "http":
            for k, v in scope["headers"]:
                if k == b"x-test-peer":
                    scope = {**scope, "client": (v.decode(), 5000)}
        await app(scope, receive, send)
    return peered


@pytest.fixture
def server(h):
    """A token server's app in-process, lifespan running (so /mcp answers); requests say which
    address they come from with ``X-Test-Peer``."""
    with TestClient(with_peer(build_app(h, port=PORT, token=TOKEN, owner_key=OWNER)), base_url=BASE) as c:
        yield c


def ask(c: TestClient, path: str, peer: str, token: str | None = None, **headers: str):
    """POST ``path``'s usual body from address ``peer`` with bearer ``token`` (None: no header)."""
    hdrs = {"X-Test-Peer": peer, "Accept": ACCEPT, **headers}
    if token is not None:
        hdrs["Authorization"] = f"Bearer {token}"
    return c.post(path, json=ROUTES[path], headers=hdrs)


def form(c: TestClient, peer: str, token: str):
    return c.post("/ui/login", json={"token": token}, headers={"X-Test-Peer": peer})


def throttle_out(c: TestClient, peer: str) -> None:
    for _ in range(MAX_FAILURES):
        assert ask(c, "/api/search", peer, "guess").status_code == 401
    assert ask(c, "/api/search", peer, "guess").status_code == 429


@pytest.fixture
def make_app(h):
    """``make_app(**build_app keywords)``: a server's app on ``h``'s data folder; a second one is
    that server restarted."""
    return lambda **kw: build_app(h, **{"port": PORT, "owner_key": OWNER, **kw})


def sign_in(c: TestClient) -> str:
    """Sign ``c`` in through a one-time link (as `hybrid ui` does); its session cookie's value."""
    path = c.post("/ui/api/ticket", headers={"X-Hybrid-Owner": OWNER}, json={}).json()["path"]
    r = c.get(path, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/"
    return c.cookies[COOKIE]


def status_with(app, value: str) -> int:
    """What ``GET /ui/api/status`` answers a fresh browser holding session cookie ``value``."""
    return TestClient(app, base_url=BASE, cookies={COOKIE: value}).get("/ui/api/status").status_code


# --- 1. token guessing ------------------------------------------------------------------------
@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("path", list(ROUTES))
def test_bearer_guesses_are_throttled_per_address(server, path):
    for _ in range(MAX_FAILURES):
        assert ask(server, path, ATTACKER, "guess").status_code == 401
    r = ask(server, path, ATTACKER, "guess")
    assert r.status_code == 429 and "too many wrong tokens" in r.json()["error"]
    assert 1 <= int(r.headers["retry-after"]) <= FAILURE_WINDOW
    assert ask(server, path, OWNER_AT, TOKEN).status_code == 200  # the owner, elsewhere: served
    assert ask(server, path, OTHER, "typo").status_code == 401  # another address has its own budget
    assert ask(server, path, OTHER, TOKEN).status_code == 200
    # the guesser's address is not checked at all, or a 200 among the 429s would give the token away
    assert ask(server, path, ATTACKER, TOKEN).status_code == 429


def test_one_budget_for_every_route_and_the_sign_in_form(server):
    for path in ROUTES:
        assert ask(server, path, ATTACKER, "guess").status_code == 401
    for _ in range(MAX_FAILURES - len(ROUTES)):
        assert form(server, ATTACKER, "guess").status_code == 401
    r = form(server, ATTACKER, TOKEN)
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1 and "set-cookie" not in r.headers
    r = server.get("/ui/api/status", headers={"X-Test-Peer": ATTACKER, "Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 429 and "content-security-policy" in r.headers  # the page's own refusal
    r = form(server, OTHER, TOKEN)  # the form is per address too: five wrong tries lock out no one else
    assert r.status_code == 200 and r.headers["set-cookie"].startswith(f"{COOKIE}=")


def test_the_owner_key_and_a_session_get_past_a_throttled_address(server):
    throttle_out(server, ATTACKER)  # e.g. another local user guessing from 127.0.0.1, as the owner
    owner = {"X-Hybrid-Owner": OWNER}
    assert ask(server, "/api/search", ATTACKER, TOKEN, **owner).status_code == 200  # `hybrid query`
    assert ask(server, "/api/search", ATTACKER, "wrong", **owner).status_code == 401
    path = server.post("/ui/api/ticket", headers={**owner, "X-Test-Peer": ATTACKER}, json={}).json()["path"]
    assert server.get(path, headers={"X-Test-Peer": ATTACKER}, follow_redirects=False).status_code == 303
    assert ask(server, "/ui/api/search", ATTACKER).status_code == 200  # `hybrid ui`'s session
    assert ask(server, "/ui/api/search", ATTACKER, "guess").status_code == 200  # the session decides


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_a_request_without_a_token_is_no_guess(server):
    for _ in range(3 * MAX_FAILURES):
        assert ask(server, "/api/search", ATTACKER).status_code == 401
        assert ask(server, "/ui/api/search", ATTACKER).status_code == 401
    assert ask(server, "/api/search", ATTACKER, TOKEN).status_code == 200


def test_the_throttle_remembers_a_bounded_number_of_clients():
    now = [0.0]
    t = Throttle(max_clients=64, clock=lambda: now[0])
    for i in range(10_000):  # many addresses, each late enough for the bound on all to let it try
        now[0] += FAILURE_WINDOW / ALL_FAILURES
        assert t.check(f"10.{i // 65536}.{i // 256 % 256}.{i % 256}", "guess", TOKEN) is False
    assert 0 < t.clients <= 64


def test_forgetting_clients_never_resets_a_guessers_count():
    t = Throttle(max_clients=64)
    for _ in range(MAX_FAILURES):
        assert t.check(ATTACKER, "guess", TOKEN) is False
    for i in range(10_000):  # guesses from other addresses, to push the guesser out of memory
        with contextlib.suppress(Throttled):
            t.check(f"10.{i // 65536}.{i // 256 % 256}.{i % 256}", "guess", TOKEN)
    assert t.clients <= 64
    with pytest.raises(Throttled):
        t.check(ATTACKER, TOKEN, TOKEN)


def test_every_loopback_address_is_one_client():
    peers = ["127.0.0.1", "127.0.0.2", "127.200.1.9", "::1", "::ffff:127.0.0.3"]
    assert len(peers) == MAX_FAILURES
    t = Throttle()
    for peer in peers:
        assert t.check(peer, "guess", TOKEN) is False
    with pytest.raises(Throttled) as exc:
        t.check("127.9.9.9", TOKEN, TOKEN)  # a fresh loopback address is the same host: unchecked
    assert not exc.value.everyone and "from your address" in str(exc.value)
    assert client_key("127.1.2.3") == client_key("::1") == client_key("::ffff:127.0.0.1") == "loopback"
    assert t.check("10.0.0.1", TOKEN, TOKEN)  # another host


def test_rotating_addresses_meet_one_bound_for_all_clients():
    now = [1000.0]
    t = Throttle(clock=lambda: now[0])
    assert t.check(OWNER_AT, TOKEN, TOKEN)  # a client in use before the flood (an MCP client)
    outcomes: Counter = Counter()
    for i in range(1000):
        try:
            outcomes[t.check(f"10.{i // 256}.{i % 256}.1", f"guess{i}", TOKEN)] += 1
        except Throttled as exc:
            assert exc.everyone and 1 <= exc.retry_after <= FAILURE_WINDOW
            outcomes["throttled"] += 1
    assert outcomes == {False: ALL_FAILURES, "throttled": 1000 - ALL_FAILURES}
    with pytest.raises(Throttled) as exc:  # first seen during the flood: not checked, the right token neither
        t.check(OTHER, TOKEN, TOKEN)
    assert "sent to this server lately" in str(exc.value)
    assert t.check(OWNER_AT, TOKEN, TOKEN)  # the client in use keeps working
    assert t.check(OWNER_AT, "typo", TOKEN) is False  # its wrong tokens count, as anyone's
    now[0] += 2 * FAILURE_WINDOW / ALL_FAILURES  # the typo's and one more guess's worth drain
    assert t.check("10.99.0.1", "guess", TOKEN) is False
    with pytest.raises(Throttled):
        t.check("10.99.0.2", "guess", TOKEN)
    now[0] += FAILURE_WINDOW  # a quiet minute: everyone's tokens are checked again
    assert t.check(OTHER, TOKEN, TOKEN)


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_a_guesser_with_many_addresses_locks_out_no_one_in_use(server):
    assert ask(server, "/mcp", OWNER_AT, TOKEN).status_code == 200  # an MCP client, before the flood
    statuses = Counter(ask(server, "/api/search", f"2001:db8:{i:x}::1", f"guess{i}").status_code
                       for i in range(ALL_FAILURES + 20))  # a fresh /64 each time
    assert statuses == {401: ALL_FAILURES, 429: 20}
    r = ask(server, "/api/search", "2001:db8:ffff::1", TOKEN)  # a new client's right token: unchecked
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
    assert form(server, OTHER, TOKEN).status_code == 429  # the sign-in form shares the bound
    for path in ROUTES:  # but the client in use, ...
        assert ask(server, path, OWNER_AT, TOKEN).status_code == 200
    assert ask(server, "/api/search", OTHER, TOKEN, **{"X-Hybrid-Owner": OWNER}).status_code == 200  # the owner key
    sign_in(server)  # and a session (`hybrid ui`)
    assert ask(server, "/ui/api/search", OTHER, "guess").status_code == 200


def test_an_ipv6_host_gets_one_budget_for_its_whole_64():
    t = Throttle()
    for i in range(MAX_FAILURES):
        t.check(f"2001:db8:1:2::{i + 1:x}", "guess", TOKEN)
    with pytest.raises(Throttled):
        t.check("2001:db8:1:2:ffff::99", TOKEN, TOKEN)  # a fresh address in the same /64
    assert t.check("2001:db8:1:3::1", TOKEN, TOKEN)  # the next /64 is someone else
    assert client_key("::ffff:10.1.2.3") == client_key("10.1.2.3") == "10.1.2.3"
    assert client_key("testclient") == "testclient"


# --- 2. signing out ---------------------------------------------------------------------------
@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_logout_ends_a_copied_cookie_also_after_a_restart(make_app):
    app = make_app()
    browser = TestClient(app, base_url=BASE)
    value = sign_in(browser)
    assert status_with(app, value) == 200  # a copy of the cookie works while the session lives
    assert browser.post("/ui/logout", json={}).json() == {"signed_in": False}
    assert status_with(app, value) == 401
    restarted = make_app()
    assert status_with(restarted, value) == 401
    again = TestClient(restarted, base_url=BASE)
    assert status_with(restarted, sign_in(again)) == 200  # signing in again works


def test_logout_reaches_every_server_on_the_data_folder(make_app):
    first, second = make_app(), make_app(port=PORT)  # e.g. a restart while the old one still runs
    value = sign_in(TestClient(first, base_url=BASE))
    TestClient(second, base_url=BASE, cookies={COOKIE: value}).post("/ui/logout", json={})
    assert status_with(first, value) == 401


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_sign_out_everywhere(make_app, h):
    app = make_app(token=TOKEN)
    a, b = TestClient(app, base_url=BASE), TestClient(app, base_url=BASE)
    value_a, value_b = sign_in(a), sign_in(b)
    pending = a.post("/ui/api/ticket", headers={"X-Hybrid-Owner": OWNER}, json={}).json()["path"]
    stranger = TestClient(app, base_url=BASE)
    assert stranger.post("/ui/logout-everywhere", json={}).status_code == 401  # not for anyone
    assert status_with(app, value_b) == 200
    r = a.post("/ui/logout-everywhere", json={})
    assert r.status_code == 200 and "Max-Age=0" in r.headers["set-cookie"]
    assert status_with(app, value_a) == 401 and status_with(app, value_b) == 401
    assert a.get(pending, follow_redirects=False).headers["location"] == "/?signin=expired"
    restarted = make_app(token=TOKEN)
    assert status_with(restarted, value_a) == 401 and status_with(restarted, value_b) == 401
    c = TestClient(restarted, base_url=BASE)
    value_c = sign_in(c)
    assert status_with(restarted, value_c) == 200
    bearer = {"Authorization": f"Bearer {TOKEN}"}  # a token holder may do it too
    r = TestClient(restarted, base_url=BASE).post("/ui/logout-everywhere", json={}, headers=bearer)
    assert r.status_code == 200
    assert status_with(restarted, value_c) == 401


def test_the_page_offers_sign_out_everywhere(make_app):
    c = TestClient(make_app(), base_url=BASE)
    assert 'id="signout-all"' in c.get("/").text
    assert '"/ui/logout-everywhere"' in c.get("/ui/static/app.js").text


DAMAGE = {"garbage": b"\x00\xffnot json", "empty": b"", "cut": b'{"epoch": "0123456789abcdef0123456789abcdef", "rev',
          "no epoch": b'{"revoked": {}}', "epoch a number": b'{"epoch": 5, "revoked": {}}',
          "short epoch": b'{"epoch": "abc", "revoked": {}}', "list": b"[]",
          "revoked a list": b'{"epoch": "0123456789abcdef0123456789abcdef", "revoked": []}', "deleted": None}


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_revocation_file_signs_everyone_out(make_app, h, damage):
    app = make_app()
    browser = TestClient(app, base_url=BASE)
    value = sign_in(browser)
    path = h.config.data / session_mod.REVOKED_FILE
    path.unlink() if DAMAGE[damage] is None else path.write_bytes(DAMAGE[damage])
    assert status_with(app, value) == 401  # the running server notices
    restarted = make_app()
    assert status_with(restarted, value) == 401
    fresh = sign_in(TestClient(restarted, base_url=BASE))
    assert status_with(restarted, fresh) == 200 and status_with(app, fresh) == 200  # both agree again
    state = json.loads(path.read_text())
    assert set(state) == {"epoch", "revoked"} and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_revocation_file_is_private_and_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(session_mod, "MAX_REVOKED", 5)
    data, now = tmp_path / "data", [1_000_000.0]
    s = Sessions(data, PORT, None, clock=lambda: now[0])
    path = data / session_mod.REVOKED_FILE
    live = s.issue()
    assert not s.revoke("123.nope") and not s.revoke(None)  # only live sessions are recorded
    for _ in range(5):
        assert s.revoke(s.issue())
    assert len(json.loads(path.read_text())["revoked"]) == 5 and s.valid(live)
    s.revoke(s.issue())  # one past the cap: everyone is signed out, and the list starts over
    assert not s.valid(live) and json.loads(path.read_text())["revoked"] == {}
    old = s.issue()
    s.revoke(old)
    now[0] += SESSION_DAYS * 86400 + 1  # the revoked session would have expired by now
    s.revoke(s.issue())
    revoked = json.loads(path.read_text())["revoked"]
    assert len(revoked) == 1 and old.split(".")[1] not in revoked
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in data.iterdir()) == ["ui-sessions.json", "ui.key"]  # no temporary files left


# --- 3. a real server: guessing ----------------------------------------------------------------
@pytest.mark.slow
def test_guessing_the_token_of_a_real_server(serve):
    s = serve(env={"HYBRID_TOKEN": TOKEN})
    statuses: Counter = Counter()
    for i in range(60):
        path = list(ROUTES)[i % len(ROUTES)]
        # a fresh source address each time (all of 127.0.0.0/8 is this host on Linux) and a fresh
        # X-Forwarded-For (uvicorn would believe it from a loopback peer): one client all along
        source = f"127.0.{i // 250}.{i % 250 + 2}" if sys.platform == "linux" else None
        status, headers, _ = raw_http(s.port, "POST", path, json.dumps(ROUTES[path]).encode(), source,
                                 Authorization=f"Bearer guess{i}", **{"X-Forwarded-For": f"10.9.{i}.1"})
        statuses[status] += 1
        if status == 429:
            assert int(headers["retry-after"]) >= 1
    assert statuses == {401: MAX_FAILURES, 429: 60 - MAX_FAILURES}
    owner_key = json.loads(s.info.read_text())["owner_key"]  # `hybrid query` from the same host
    status, _, body = raw_http(s.port, "POST", "/api/search", b'{"query": "tailscale"}',
                               Authorization=f"Bearer {TOKEN}", **{"X-Hybrid-Owner": owner_key})
    assert status == 200 and answer_passages(json.loads(body))
    # another local process with the right token is the same client: it waits too, unchecked
    assert raw_http(s.port, "POST", "/mcp", json.dumps(INIT).encode(), Authorization=f"Bearer {TOKEN}")[0] == 429
