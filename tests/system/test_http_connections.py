"""Slow and too many clients of `hybrid serve --http`, each test a reproduction from an adversarial
review: a request's head and body have deadlines; past the connection cap a newcomer displaces
the connection that has waited on its client longest (silent, half a head, half a body, an
answer it does not read, idle between requests), so a flood of half-sent requests starves
neither /health nor real clients; a connection being answered is never cut; /health answers
while searches hold the handle. Real `hybrid serve --http` subprocesses, or uvicorn in a thread
where a test patches the server, on 127.0.0.1 (slow)."""
import http.client
import json
import resource
import selectors
import socket
import threading
import time
from collections import Counter

import pytest
from helpers import hash_home, health_ok, raw_http, uvicorn_thread

import hybrid
import hybrid.app.api
import hybrid.faces.http
import hybrid.retrieval.search
from hybrid.faces.http import build_app
from hybrid.faces.http_guard import protocol_class

TOKEN = "s3cret"


@pytest.fixture
def h(fake_indexed):
    return fake_indexed


@pytest.fixture
def home(hybrid_home, vault):
    """A HYBRID_HOME for `hybrid serve --http` subprocesses (the ``serve`` fixture)."""
    return hash_home(hybrid_home, vault)


def wait_closed(socks: list[socket.socket], within: float) -> float:
    """Seconds until the server closed every one of ``socks`` (whatever it wrote first is read
    and dropped); fails the test after ``within``."""
    sel = selectors.DefaultSelector()
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    t0 = time.monotonic()
    while sel.get_map():
        left = within - (time.monotonic() - t0)
        assert left > 0, f"{len(sel.get_map())} of {len(socks)} connections still open after {within} s"
        for key, _ in sel.select(timeout=min(left, 1.0)):
            try:
                data = key.fileobj.recv(65536)  # type: ignore[union-attr]
            except ConnectionError:
                data = b""
            if not data:
                sel.unregister(key.fileobj)
    return time.monotonic() - t0


@pytest.mark.slow
def test_slowloris_connections_are_closed(serve, home):
    assert hybrid.Settings().http_header_timeout == 10  # the default; 3 s here keeps the test short
    config = home / "config.toml"
    config.write_text(config.read_text().replace("[settings]\n", "[settings]\nhttp_header_timeout = 3\n"))
    s = serve()
    head = f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{s.port}\r\nX-Slow: ".encode()
    socks = [socket.create_connection(("127.0.0.1", s.port), timeout=30) for _ in range(60)]
    for sock in socks[:50]:
        sock.sendall(head)  # half a head, the rest never comes; the other ten send nothing
    kept = socket.create_connection(("127.0.0.1", s.port), timeout=30)
    kept.sendall(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{s.port}\r\n\r\n".encode())
    assert kept.recv(65536).startswith(b"HTTP/1.1 200")
    kept.sendall(head)  # kept alive, then half a second request: uvicorn stops its idle timer here
    socks.append(kept)
    assert health_ok(s.port) < 5  # meanwhile the server answers
    wait_closed(socks, within=10)
    for sock in socks:
        sock.close()
    assert s.proc.poll() is None and health_ok(s.port) < 5


@pytest.mark.slow
def test_a_partial_body_gets_408_and_the_connection_closed(serve, home):
    config = home / "config.toml"
    config.write_text(config.read_text().replace("[settings]\n", "[settings]\nhttp_body_timeout = 2\n"))
    s = serve()
    sock = socket.create_connection(("127.0.0.1", s.port), timeout=30)
    sock.sendall(f"POST /api/search HTTP/1.1\r\nHost: 127.0.0.1:{s.port}\r\nContent-Type: application/json\r\n"
                 f"Content-Length: 100\r\n\r\n{{\"query\"".encode())
    reply = b""
    t0 = time.monotonic()
    while time.monotonic() - t0 < 15:
        data = sock.recv(65536)
        if not data:
            break
        reply += data
    else:
        pytest.fail("the connection is still open after 15 s")
    sock.close()
    assert reply.startswith(b"HTTP/1.1 408") and b"connection: close" in reply.lower()
    assert health_ok(s.port) < 5


# --- a flood of half-sent requests ------------------------------------------------------------
def half_head(port: int) -> bytes:
    return f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode()


def half_body(port: int) -> bytes:
    return (f"POST /api/search HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: 100\r\n\r\n{{\"query\"").encode()


class Flood:
    """``n`` connections to ``port`` that each send ``start`` and then nothing, kept at ``n``
    from a thread: each one the server closes is replaced at once (as a flooder would)."""

    def __init__(self, port: int, start: bytes, n: int):
        self.port, self.start, self.n = port, start, n
        self.closed, self.ready, self.stop = 0, threading.Event(), threading.Event()
        self.sel = selectors.DefaultSelector()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.thread.start()
        assert self.ready.wait(60), "the flood did not start"
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(60)
        for key in list(self.sel.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]

    def _open(self) -> None:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        sock.sendall(self.start)
        sock.setblocking(False)
        self.sel.register(sock, selectors.EVENT_READ)

    def _run(self) -> None:
        for _ in range(self.n):
            self._open()
        self.ready.set()
        while not self.stop.is_set():
            for key, _ in self.sel.select(timeout=0.1):
                self.sel.unregister(key.fileobj)
                key.fileobj.close()  # type: ignore[union-attr]
                self.closed += 1
                if not self.stop.is_set():
                    self._open()


@pytest.fixture
def enough_files():
    """Room in this process for a flood past the server's 1,000 connections."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4096 if hard == resource.RLIM_INFINITY else min(4096, hard)
    if want < 2500:
        pytest.skip(f"the open-file limit ({hard}) is too low for 1,100 connections")
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.slow
@pytest.mark.parametrize("half", ["head", "body"])
def test_a_flood_of_half_sent_requests_starves_no_one(serve, enough_files, half):
    """1,100 half heads (or half bodies, on a server without a token, which reads them) once
    made every endpoint answer 503: the cap shed only connections idle for a second, and the
    flood kept every one younger than that."""
    s = serve(env={"HYBRID_TOKEN": TOKEN}) if half == "head" else serve()
    auth = {"Authorization": f"Bearer {TOKEN}"} if half == "head" else {}
    answers: Counter = Counter()
    with Flood(s.port, (half_head if half == "head" else half_body)(s.port), 1100) as flood:
        for _ in range(20):
            answers["health", raw_http(s.port, "GET", "/health")[0]] += 1
            status, _, body = raw_http(s.port, "POST", "/api/search", b'{"query": "tailscale"}', **auth)
            answers["search", status] += 1
            if status == 200:
                assert json.loads(body)["notes"][0]["path"] == "home/network.md"
    assert answers == {("health", 200): 20, ("search", 200): 20}
    assert flood.closed > 100  # the flood ran past the cap: 1,100 opened, then each newcomer displaced one
    assert s.proc.poll() is None and health_ok(s.port) < 5


# --- uvicorn's protocol, patched: pinned here (it relies on H11Protocol's internals) ------------
def slow_api(monkeypatch, gate: threading.Event) -> list:
    """Make /api/search wait for ``gate`` (at most 30 s) before searching, inside a worker
    thread, as a long search does; returns a list that grows by one as each starts waiting."""
    real, waiting_now = hybrid.faces.http.api_search_call, []

    def waiting(*args):
        waiting_now.append(1)
        gate.wait(30)
        return real(*args)
    monkeypatch.setattr(hybrid.faces.http, "api_search_call", waiting)
    return waiting_now


def served_within(port: int, seconds: float) -> None:
    """Ask /health until it answers 200; fail the test if it has not within ``seconds``."""
    deadline = time.monotonic() + seconds
    while raw_http(port, "GET", "/health")[0] != 200:
        assert time.monotonic() < deadline, f"/health not served within {seconds} s"
        time.sleep(0.2)


def post_search(port: int) -> int:
    return raw_http(port, "POST", "/api/search", b'{"query": "orders"}')[0]


@pytest.mark.slow
def test_a_slow_answer_is_not_cut_by_the_head_deadline(h, monkeypatch):
    gate = threading.Event()
    slow_api(monkeypatch, gate)
    with uvicorn_thread(build_app(h), http=protocol_class(0.5)) as port:
        threading.Timer(1.5, gate.set).start()  # the answer takes three head deadlines
        assert post_search(port) == 200
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)  # one kept-alive connection
        for _ in range(4):
            conn.request("GET", "/health", headers={"Host": f"127.0.0.1:{port}"})
            assert conn.getresponse().read() and conn.sock is not None
            time.sleep(0.3)  # pauses between requests, each shorter than the deadline
        conn.close()
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sock.sendall(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())
        time.sleep(0.2)
        sock.sendall(b"\r\n")  # a head in two pieces, within the deadline
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        sock.close()


@pytest.mark.slow
def test_past_the_cap_a_newcomer_displaces_who_waited_longest_then_is_refused(h, monkeypatch):
    gate = threading.Event()
    waiting = slow_api(monkeypatch, gate)
    with uvicorn_thread(build_app(h), http=protocol_class(30, max_connections=8)) as port:
        held = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(4)]
        for _ in range(4):
            held.append(socket.create_connection(("127.0.0.1", port), timeout=30))
            held[-1].sendall(half_head(port))  # half a head is not being answered
        newcomers = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(4)]
        wait_closed(held[:4], within=10)  # the four that waited longest made room, at once
        assert health_ok(port) < 5  # and so does any newcomer: the oldest half head goes
        wait_closed(held[4:5], within=10)
        for sock in held + newcomers:
            sock.close()
        bodies = []
        for _ in range(8):  # a head read, a body that never ends: waiting on its client, not answered
            bodies.append(socket.create_connection(("127.0.0.1", port), timeout=30))
            bodies[-1].sendall(half_body(port))
        assert health_ok(port) < 5
        wait_closed(bodies[:1], within=10)
        for sock in bodies:
            sock.close()
        readers = []
        for _ in range(8):  # answers their clients never read (pipelined, 9 MB): waiting on the client too
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", port))
            sock.sendall(f"GET /ui/static/app.js HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode() * 400)
            readers.append(sock)
        for sock in readers:
            assert sock.recv(1, socket.MSG_PEEK)  # being answered (and never idle again: pipelined)
        served_within(port, 20)  # once their answers fill the buffers, a newcomer displaces one
        for sock in readers:
            sock.close()
        results: list[int] = []
        busy = [threading.Thread(target=lambda: results.append(post_search(port))) for _ in range(8)]
        for t in busy:
            t.start()
        deadline = time.monotonic() + 20
        while len(waiting) < 8:
            assert time.monotonic() < deadline, "the searches did not start"
            time.sleep(0.05)
        status, _, body = raw_http(port, "GET", "/health")  # eight being answered: none to shed
        assert (status, body) == (503, b"too many connections")
        gate.set()
        for t in busy:
            t.join(30)
        assert results == [200] * 8 and health_ok(port) < 5


@pytest.mark.slow
def test_health_answers_while_searches_hold_the_handle(h, monkeypatch):
    """/health once re-read a changed config.toml under the handle's lock, on the event loop:
    with a search holding the lock, every connection waited for it."""
    gate, entered = threading.Event(), threading.Event()
    real = hybrid.retrieval.search.run_search

    def slow_search(*args, **kw):  # inside Hybrid.search's lock, as a long search is
        entered.set()
        gate.wait(30)
        return real(*args, **kw)
    monkeypatch.setattr(hybrid.retrieval.search, "run_search", slow_search)
    with uvicorn_thread(build_app(h), http=protocol_class(10)) as port:
        results: list[int] = []
        searches = [threading.Thread(target=lambda: results.append(post_search(port))) for _ in range(200)]
        for t in searches:
            t.start()
        assert entered.wait(30)
        with open(h.config.path, "a", encoding="utf-8") as fh:  # e.g. `hybrid vault add` elsewhere
            fh.write("\n# changed\n")
        try:
            assert health_ok(port, timeout=60) < 5
            assert raw_http(port, "GET", "/ui/api/session")[0] == 200
        finally:
            gate.set()
            for t in searches:
                t.join(60)
        assert results == [200] * 200


def test_the_server_protocol_is_h11s_with_the_hooks_it_relies_on():
    """The hooks the protocol patches exist in the installed uvicorn (a rename would silently
    turn the head deadline off)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle
    proto = protocol_class(10)
    assert issubclass(proto, H11Protocol)
    for name in ("connection_made", "data_received", "connection_lost", "on_response_complete",
                 "pause_writing", "resume_writing"):
        assert name in vars(H11Protocol), name
    assert {"cycle", "connections", "transport", "loop"} <= set(H11Protocol.__init__.__code__.co_names)
    assert "flow" in H11Protocol.connection_made.__code__.co_names
    from uvicorn.protocols.http.flow_control import FlowControl
    assert "write_paused" in FlowControl.__init__.__code__.co_names
    assert {"response_complete", "more_body"} <= set(RequestResponseCycle.__init__.__code__.co_names)
