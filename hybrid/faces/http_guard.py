"""What may reach the HTTP server's routes (:mod:`hybrid.faces.http`): the checks in front of
every request, and of every connection.

Security: binds 127.0.0.1 by default. Every request (``/health`` included) must carry a ``Host``
that is exactly ``localhost``, a loopback IP literal (127.0.0.0/8, ::1), the bound address or a
name given with ``--allow-host`` / ``HYBRID_ALLOWED_HOSTS``; an ``Origin``, when sent, must name
one of those hosts (``Origin: null`` is refused): 403 otherwise, which defeats DNS rebinding and
cross-site pages. ``POST /api/search`` needs ``Content-Type: application/json`` (415), so a
browser cannot send it without a CORS preflight, which this server never grants. Bodies over
``limits.MAX_BODY_BYTES`` get 413 before they are read in full (on ``/mcp`` the cap leaves room
for a ``proposal_max_chars`` proposal in any characters, and a refusal there is a JSON-RPC error
the agent's client shows); a JSON body holding a string that is not text (an unpaired surrogate)
gets 400 naming where, whichever route it is for. With a token (``--token`` / ``HYBRID_TOKEN``;
required for a non-loopback bind) every request but ``/health`` and the page's needs
``Authorization: Bearer <token>`` (401); the page's routes need a signed-in session or that
header themselves (:mod:`hybrid.faces.ui.session`). Wrong tokens are counted per client host
(every loopback address is one) and for all clients together, on every route and the sign-in
form alike (:class:`~hybrid.faces.ui.session.Throttle`): a host that sent too many, or any host
not known to hold the token while all together sent too many, gets 429 with ``Retry-After``, its
token unchecked; requests carrying the owner key or a session are served as before. The client
address is the socket's: ``X-Forwarded-For`` is ignored, or a guesser would pick a fresh one per
request.

Slow or too many clients: a request's head must arrive within ``http_header_timeout`` seconds of
connecting (or of the previous answer), its body within ``http_body_timeout`` (408), or the
connection is closed. Past :data:`MAX_CONNECTIONS` open connections a new one displaces the
connection that has waited on its client longest (silent, half a head, half a body, an answer it
does not read, idle between requests; never one being answered), or gets 503 when every other
one is being answered. ``/health`` touches neither the index nor the handle's lock, so it
answers while searches queue.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import re
from asyncio import TimerHandle
from collections import OrderedDict
from collections.abc import Iterable

from hybrid.core.errors import HybridError
from hybrid.faces.ui.routes import ui_path, with_security_headers
from hybrid.faces.ui.session import Throttle, Throttled
from hybrid.retrieval.limits import MAX_BODY_BYTES, BadSearchArgs, check_texts

WILDCARD_BINDS = {"0.0.0.0", "::"}
# host[:port] or [ipv6][:port]; no userinfo, path or whitespace can sneak past it
_HOST_RE = re.compile(r"^(?:\[(?P<v6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9_.-]+))(?::(?P<port>[0-9]{1,5}))?$")
_ORIGIN_RE = re.compile(r"^https?://(?P<host>[^/?#@]+)$")
MAX_CONNECTIONS = 1000  # open connections (fewer when the process may open few files)


def normalize_host(value: str) -> str | None:
    """The bare lower-case name or canonical IP of a Host header, Origin host, ``--host`` or
    ``--allow-host`` value ('[::1]:8765' → '::1', 'LocalHost:80' → 'localhost'); None when it is
    not a plain host[:port], so anything odd is refused rather than guessed at."""
    v = value.strip().lower()
    try:
        return str(ipaddress.ip_address(v))  # a bare IP, e.g. --host ::1
    except ValueError:
        pass
    m = _HOST_RE.match(v)
    if not m:
        return None
    try:
        ip = ipaddress.ip_address(m["v6"] or m["name"])
    except ValueError:
        return None if m["v6"] else m["name"]
    return str(ip) if (ip.version == 6) == bool(m["v6"]) else None  # brackets are for IPv6 only


def is_loopback(host: str) -> bool:
    """Exactly 'localhost' or a loopback IP literal (with or without port or brackets). Names
    that merely look like one, such as '127.evil.com', are not: an attacker controls their DNS."""
    name = normalize_host(host)
    if name is None:
        return False
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def allowed_names(bind_host: str, extra: Iterable[str] = ()) -> set[str]:
    """Host names accepted besides loopback ones: the bound address (unless a wildcard, which no
    client puts in a Host header) and the ``--allow-host`` names. A bad name is a user error."""
    names = set()
    for value in [bind_host, *extra]:
        name = normalize_host(value)
        if name is None:
            raise HybridError(f"{value!r} is not a host name or IP address (for --allow-host / "
                              f"HYBRID_ALLOWED_HOSTS give a bare name like mybox.lan or 192.168.1.5)")
        if name not in WILDCARD_BINDS:
            names.add(name)
    return names


def url_host(name: str) -> str:
    return f"[{name}]" if ":" in name else name


class Guard:
    """ASGI middleware in front of every route: Host/Origin validation, the bearer token (wrong
    ones counted per address by ``throttle``), the body-size cap (checked on Content-Length and
    on the bytes actually streamed) and the body's deadline."""

    def __init__(self, app, bind_host: str, token: str | None, allowed_hosts: Iterable[str] = (),
                 max_body: int = MAX_BODY_BYTES, throttle: Throttle | None = None,
                 owner_key: str | None = None, body_timeout: float = 30.0,
                 mcp_max_body: int | None = None):
        self.app = app
        self.mcp_max_body = max_body if mcp_max_body is None else mcp_max_body
        self.names = allowed_names(bind_host, allowed_hosts)
        self.token = token
        self.max_body = max_body
        self.throttle = Throttle() if throttle is None else throttle
        self.owner_key = owner_key
        self.body_timeout = body_timeout

    def host_ok(self, value: str) -> bool:
        name = normalize_host(value)
        return name is not None and (is_loopback(name) or name in self.names)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if ui_path(scope["path"]):  # every answer of the page's, refusals and 404/405s included
            send = with_security_headers(send)
        client = scope.get("client") or ("?", 0)
        refusal = self.refusal(headers, scope["path"], client[0])
        if refusal:
            return await _plain(send, *refusal)
        mcp = scope["path"] == "/mcp" or scope["path"].startswith("/mcp/")
        body = await _read_body(headers, receive, self.mcp_max_body if mcp else self.max_body,
                                self.body_timeout)
        if body is None:
            return None
        if not isinstance(body, tuple):
            unreadable = _unreadable_json(body)
            body = (400, unreadable) if unreadable else body
        if isinstance(body, tuple):
            # an MCP client shows a JSON-RPC error's message to the agent, anything else as
            # "Server returned an error response"
            return await (_jsonrpc_error if mcp else _plain)(send, *body)
        return await self.app(scope, _replay(body, receive), send)

    def refusal(self, headers: dict[str, str], path: str, client: str = "?") -> tuple | None:
        """(status, message[, headers]) when the request must be refused before it is read."""
        host = headers.get("host", "")
        if not self.host_ok(host):
            return 403, f"Host {host[:100]!r} is not allowed (start the server with --allow-host NAME to accept it)"
        origin = headers.get("origin")
        if origin is not None:
            m = _ORIGIN_RE.match(origin.strip().lower())
            if not (m and self.host_ok(m["host"])):
                return 403, f"Origin {origin[:100]!r} is not allowed"
        if self.token and path != "/health" and not ui_path(path):  # the page's routes check sessions
            auth = headers.get("authorization")
            if auth is None:  # no guess: nothing to count
                return 401, "missing bearer token", {"www-authenticate": "Bearer"}
            given = auth[7:] if auth.lower().startswith("bearer ") else ""
            if self.owner_key and hmac.compare_digest(headers.get("x-hybrid-owner", "").encode(),
                                                      self.owner_key.encode()):
                ok = hmac.compare_digest(given.encode(), self.token.encode())  # the owner: never throttled
            else:
                try:
                    ok = self.throttle.check(client, given, self.token)
                except Throttled as exc:
                    return 429, str(exc), {"retry-after": str(exc.retry_after)}
            if not ok:
                return 401, "wrong bearer token", {"www-authenticate": "Bearer"}
        return None


async def _read_body(headers: dict[str, str], receive, limit: int,
                     timeout: float) -> bytes | tuple | None:
    """The whole request body, or (status, message[, headers]) as soon as it is known to be too
    big (a declared Content-Length over the limit is refused unread, a streamed one once it
    crosses it) or late (408 after ``timeout`` seconds, and the connection closed: the rest may
    be on its way). None: the client went away mid-body, so there is no one to answer."""
    import anyio
    declared = headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            return 400, "bad Content-Length header"
        if int(declared) > limit:
            return 413, _too_large(limit)
    with anyio.move_on_after(timeout):
        return await _receive_all(receive, limit)
    return 408, f"request body not received within {timeout:g} s", {"connection": "close"}


async def _receive_all(receive, limit: int) -> bytes | tuple | None:
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return 413, _too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


# JSON's escape of a UTF-16 surrogate: only then can a decoded string fail to be text
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _unreadable_json(body: bytes) -> str | None:
    """The one-line refusal of a JSON body holding a string that is not text (an unpaired
    surrogate, :func:`~hybrid.retrieval.limits.check_texts`), naming where; None otherwise.
    Here, once for every route: each route's own code would fail on it somewhere else (a path,
    the index, the answer's encoding). A body that is not JSON is left to its route to refuse."""
    if not _SURROGATE_ESCAPE.search(body):
        return None
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return None
    try:
        check_texts(parsed)
    except BadSearchArgs as exc:
        return str(exc)
    return None


def _too_large(limit: int) -> str:
    return f"request body too large ({limit:,} bytes is this server's limit for one request)"


def _replay(body: bytes, receive):
    """A receive() that hands the app the already-read body once, then the real stream (for
    http.disconnect, which long-lived MCP responses wait on)."""
    sent = False

    async def replayed():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()
    return replayed


async def _jsonrpc_error(send, status: int, text: str, extra: dict[str, str] | None = None):
    """A refusal of an MCP request as a JSON-RPC error (id null: the request was not read)."""
    await _plain(send, status, text, extra,
                 {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": text}})


async def _plain(send, status: int, text: str, extra: dict[str, str] | None = None,
                 payload: dict | None = None):
    body = (json.dumps(payload or {"error": text}) + "\n").encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def connection_cap() -> int:
    """:data:`MAX_CONNECTIONS`, or half the files this process may open when that is fewer
    (macOS allows 256 by default): past the limit, accept() fails and no one gets in."""
    try:
        import resource
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return MAX_CONNECTIONS
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return MAX_CONNECTIONS
    return max(16, min(MAX_CONNECTIONS, soft // 2))


_TIMED_OUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
              b"content-length: 16\r\nconnection: close\r\n\r\nrequest too slow")
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
         b"content-length: 20\r\nconnection: close\r\n\r\ntoo many connections")


def protocol_class(header_timeout: float, max_connections: int | None = None):
    """uvicorn's h11 protocol plus what uvicorn lacks: a deadline for each request's head (a
    client trickling header bytes, or sending none, gets 408 and its connection closed after
    ``header_timeout`` seconds), and a cap on open connections. Past the cap a newcomer
    displaces the connection that has waited on its client longest, and is refused (503) only
    when every other connection is being answered.

    Waiting on its client: connected and silent, half a request's head, a head read and its body
    still arriving, an answer it does not read (the write buffer is full), or idle between
    requests. Only a request read whole, until its answer went out, is being answered. A
    flooder's half-sent requests so make room for every newcomer, and a real client's request is
    displaced only if as many connections as the cap arrived between its connecting and its
    head's arriving (there was once a second's grace for a fresh connection instead, and 1,100
    half heads renewed each second kept every endpoint at 503).

    uvicorn's public API has neither (``limit_concurrency`` refuses newcomers with 503 but never
    displaces a waiting connection, ``timeout_keep_alive`` covers only the idle time between
    requests), and ASGI middleware sees a request only once its head has been read: so this
    relies on these things of ``H11Protocol``, pinned by
    ``tests/system/test_http_connections.py`` and held to the releases that pass it (0.54 and
    0.55, pyproject.toml's bound): ``connections`` is the server's set of open protocols,
    ``cycle`` is replaced when a request's head has been read, ``cycle.more_body`` says its
    body is still arriving, ``cycle.response_complete`` that its answer went out, and
    ``flow.write_paused`` that the transport holds more than it may until the client reads."""
    from uvicorn.protocols.http.h11_impl import H11Protocol
    cap = max_connections or connection_cap()
    # the connections waiting on their client, the one waiting longest first
    waiting: OrderedDict[H11Protocol, None] = OrderedDict()

    class Protocol(H11Protocol):
        head_timer: TimerHandle | None = None

        def connection_made(self, transport):
            super().connection_made(transport)
            self._track(anew=True)
            if len(self.connections) > cap and not self._shed():
                waiting.pop(self, None)
                transport.write(_BUSY)
                transport.close()
                return
            self._await_head()

        def data_received(self, data: bytes) -> None:
            if self.transport.is_closing():
                return
            if self.head_timer is None and self.idle():  # a new request on a kept-alive connection
                self._await_head()
            cycle = self.cycle
            super().data_received(data)
            if self.cycle is not cycle and self.head_timer is not None:  # its head was read
                self.head_timer.cancel()
                self.head_timer = None
            self._track(anew=self.cycle is not cycle)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._track(anew=True)

        def pause_writing(self) -> None:
            super().pause_writing()
            self._track(anew=True)  # its answer waits for the client to read what it was sent

        def resume_writing(self) -> None:
            super().resume_writing()
            self._track(anew=False)

        def connection_lost(self, exc: Exception | None) -> None:
            waiting.pop(self, None)
            if self.head_timer is not None:
                self.head_timer.cancel()
                self.head_timer = None
            super().connection_lost(exc)

        def idle(self) -> bool:
            """Between requests: none yet, or the last one answered."""
            return self.cycle is None or self.cycle.response_complete

        def answering(self) -> bool:
            """A request read whole (head and body) whose answer is being made or sent, and not
            held up by a client that does not read it."""
            return (self.cycle is not None and not self.cycle.response_complete and not self.cycle.more_body
                    and not self.flow.write_paused)

        def _track(self, anew: bool) -> None:
            """Keep this connection in ``waiting`` exactly while it is not being answered;
            ``anew``: it starts waiting now (connected, answered, a head read), so it goes last.
            A head arriving in pieces keeps its place: the longest unfinished go first."""
            if self.answering():
                waiting.pop(self, None)
            elif anew or self not in waiting:
                waiting[self] = None
                waiting.move_to_end(self)

        def _await_head(self) -> None:
            self.head_timer = self.loop.call_later(header_timeout, self._too_slow)

        def _too_slow(self) -> None:
            self.head_timer = None
            if not self.transport.is_closing():
                self.transport.write(_TIMED_OUT)
                self.transport.close()

        def _shed(self) -> bool:
            """Close the connection that has waited on its client longest (one already closing
            makes the room by itself); False when all others are being answered."""
            for victim in waiting:
                if victim is not self:
                    break
            else:
                return False
            del waiting[victim]
            victim.transport.close()
            return True
    return Protocol
