"""The long-lived HTTP server: MCP over Streamable HTTP at ``/mcp``, ``GET /health``,
``POST /api/search`` (the fast path that ``hybrid query`` uses when a server is running),
``POST /api/related`` (:mod:`hybrid.faces.related`) and the
search page at ``/`` with its routes under ``/ui/`` (:mod:`hybrid.faces.ui`).

What may reach it (hosts, tokens, bodies, connections) is :mod:`hybrid.faces.http_guard`'s.

``/api/search`` serves the agent view (:mod:`hybrid.store.agent.view`) and records each call in the
audit log, like the MCP tools, unless the caller proves to be the owner: ``hybrid query`` sends
the random owner key this server wrote to its address file (``server.json``, readable by the
user only) as ``X-Hybrid-Owner``.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hybrid.core.errors import HybridError
from hybrid.faces import client
from hybrid.faces.http_guard import WILDCARD_BINDS, Guard, is_loopback, protocol_class, url_host
from hybrid.faces.ui.session import Throttle
from hybrid.retrieval.limits import BadSearchArgs, json_object, mcp_body_limit
from hybrid.retrieval.request import SearchRequest
from hybrid.retrieval.result import answer_passages

if TYPE_CHECKING:
    from hybrid.app.api import Hybrid
    from hybrid.retrieval.result import SearchResult

log = logging.getLogger("hybrid")
def server_file(h: Hybrid) -> Path:
    return client.server_file(h.config)


def build_app(h: Hybrid, host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
              watcher=None, allowed_hosts: Iterable[str] = (), owner_key: str | None = None):
    """The ASGI app: the MCP server's routes plus /health and /api/search, behind the Guard.
    ``owner_key`` (default: a random one) lets ``/api/search`` serve the owner's view."""
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    from hybrid.faces.mcp import build_server
    from hybrid.faces.ui.routes import add_routes

    server = build_server(h, watcher)
    started = time.time()
    owner_key = owner_key or secrets.token_urlsafe(32)
    throttle = Throttle()
    # validates the names before anything starts
    mcp_max_body = mcp_body_limit(h.settings.proposal_max_chars)
    guard = Guard(None, host, token, allowed_hosts, throttle=throttle, owner_key=owner_key,
                  body_timeout=h.settings.http_body_timeout, mcp_max_body=mcp_max_body)

    @server.custom_route("/health", methods=["GET"])
    async def health(request: Request):
        # The registry as last loaded, not h.vaults: that re-reads a changed config.toml under
        # the handle's lock, which a search holds, and this runs on the event loop: every
        # connection would wait for the search.
        return JSONResponse({"status": "ok", "pid": os.getpid(), "uptime_s": round(time.time() - started, 1),
                             "vaults": sorted(h.config.vaults),
                             "watching": bool(watcher)})

    async def answer_json(request: Request, call):
        """``call(h, body, client)`` on a JSON POST: the owner's view when the request carries
        the owner key, else an agent's (``client`` names it for the audit log)."""
        import anyio
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json":  # anything else is a CORS "simple request": no preflight
            return JSONResponse({"error": "Content-Type must be application/json"}, status_code=415)
        body = await request.body()
        owner = hmac.compare_digest(request.headers.get("x-hybrid-owner", "").encode(), owner_key.encode())
        peer = request.client.host if request.client else "?"
        client = None if owner else f"http {peer} {request.headers.get('user-agent', '')}".strip()[:200]
        status, data = await anyio.to_thread.run_sync(lambda: call(h, body, client))
        return JSONResponse(data, status_code=status)

    @server.custom_route("/api/search", methods=["POST"])
    async def api_search(request: Request):
        return await answer_json(request, api_search_call)

    @server.custom_route("/api/related", methods=["POST"])
    async def api_related(request: Request):
        return await answer_json(request, api_related_call)

    add_routes(server, h, port=port, token=token, owner_key=owner_key, watcher=watcher, started=started,
               throttle=throttle)

    # The SDK checks Host/Origin on /mcp too; it gets the same names as the Guard (which checks
    # every route, and more strictly: the SDK only compares strings).
    names = [url_host(n) for n in sorted({"127.0.0.1", "localhost", "::1"} | guard.names)]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=names + [f"{n}:*" for n in names],
        allowed_origins=[f"{s}://{n}{p}" for s in ("http", "https") for n in names for p in ("", ":*")])
    guard.app = server.streamable_http_app(streamable_http_path="/mcp", transport_security=security,
                                           host=host, max_request_body_size=mcp_max_body)
    return guard


def api_search_call(h: Hybrid, body: bytes, agent_client: str | None) -> tuple[int, dict]:
    """(HTTP status, JSON body) of one ``/api/search`` call: the owner's view when
    ``agent_client`` is None, else the agent view, the call recorded in the audit log first
    (a call that cannot be recorded gets 503)."""
    from hybrid.app.audit import record_call
    started = time.perf_counter()
    status, search = 200, None
    data: dict[str, Any] = {}
    secrets: tuple[str, ...] = ()  # what a refusal did not say back: not for the audit log either
    try:
        search = SearchRequest.from_json(body)
        # notes (each with its passages) or, asked for, passages ("hits"); then whether any is
        # relevant, the corrected words, the snippet needles
        data = h.search(search, agent=agent_client is not None).to_json()
    except BadSearchArgs as exc:
        status, data = 400, {"error": str(exc)}
    except HybridError as exc:
        status, data = refusal(exc, agent_client, "/api/search")
        secrets = getattr(exc, "secret_values", ())
    except Exception as exc:  # a bug: logged whole; the caller (and the audit log) get one line
        from hybrid.faces.mcp import internal_error
        log.exception("/api/search: internal error")
        status, data = 500, {"error": internal_error(exc)}
    if agent_client is None:
        return status, data
    returned = [x["citation"] for x in answer_passages(data)]
    record = {"tool": "api/search", "client": agent_client, "args": search.to_json() if search else _sent(body),
              "returned": returned, "count": len(returned), "error": data.get("error"), "secret_values": secrets}
    refused = record_call(h.config.data, h.settings, record, started)
    return (503, {"error": refused}) if refused else (status, data)


def refusal(exc: HybridError, agent_client: str | None, route: str) -> tuple[int, dict]:
    """(status, body) of a call refused with ``exc``: its line, 422; to an agent, when the line
    is the owner's only (``for_agents``: a model server's address and answer), 503 with a
    plain line, the details going to the server's log."""
    if agent_client is not None and exc.for_agents:
        from hybrid.faces.mcp import told_agent
        return 503, {"error": told_agent(exc, route)}
    return 422, {"error": str(exc).splitlines()[0]}


def _sent(body: bytes) -> dict[str, Any]:
    """The arguments of a refused request as sent (a JSON object), for its audit record, whose
    redaction then sees them (a filter on a secret quoted in the refusal); its size when it is
    no object."""
    from hybrid.retrieval.limits import json_object
    try:
        return json_object(body)
    except BadSearchArgs:
        return {"body_bytes": len(body)}


def api_related_call(h: Hybrid, body: bytes, agent_client: str | None) -> tuple[int, dict]:
    """(HTTP status, JSON body) of one ``/api/related`` call: the owner's view when
    ``agent_client`` is None, else the agent view, recorded in the audit log first (503 when
    it cannot be)."""
    from hybrid.app.audit import record_call
    from hybrid.faces.mcp import internal_error
    from hybrid.faces.related import MAX_TOP_K_AGENT, body_args
    from hybrid.retrieval.limits import MAX_TOP_K
    started = time.perf_counter()
    status, data, args = 200, {}, None
    try:
        parsed = json_object(body or b"{}")
        limit = MAX_TOP_K_AGENT if agent_client is not None else min(MAX_TOP_K, 100)
        args = body_args(parsed, limit)
        data = h.related(args[0], args[1], top_k=args[2], agent=agent_client is not None,
                         vault_hint="the `vault` field").to_json()
    except BadSearchArgs as exc:
        status, data = 400, {"error": str(exc)}
    except HybridError as exc:
        status, data = refusal(exc, agent_client, "/api/related")
    except Exception as exc:  # a bug: logged whole; the caller (and the audit log) get one line
        log.exception("/api/related: internal error")
        status, data = 500, {"error": internal_error(exc)}
    if agent_client is None:
        return status, data
    returned = [n["citation"] for n in data.get("notes", [])]
    record = {"tool": "api/related", "client": agent_client,
              "args": {"note": args[0], "vault": args[1], "top_k": args[2]} if args else {"body_bytes": len(body)},
              "returned": returned, "count": len(returned), "error": data.get("error")}
    refused = record_call(h.config.data, h.settings, record, started)
    return (503, {"error": refused}) if refused else (status, data)


def _server_class():
    """uvicorn's Server, calling ``on_listen`` once its socket is bound. The address file is
    written only then, so a second server that fails to bind (port taken) leaves the running
    one's file alone."""
    import uvicorn

    class Server(uvicorn.Server):
        def __init__(self, config, on_listen):
            super().__init__(config)
            self.on_listen = on_listen

        async def startup(self, sockets=None):
            await super().startup(sockets)  # sys.exit()s when it cannot bind
            self.on_listen()
    return Server


@contextmanager
def _graceful_signals(server):
    """SIGTERM and SIGHUP end the server gracefully, so ``finally`` blocks run. uvicorn handles
    SIGTERM itself but re-raises it after shutting down: under the default handler the process
    would die right there and leave server.json behind. SIGHUP (terminal closed) it ignores."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        server.should_exit = True
    sigs = [getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n)]
    previous = {s: signal.signal(s, stop) for s in sigs}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def serve_http(h: Hybrid, host: str, port: int, token: str | None, watcher=None,
               allowed_hosts: Iterable[str] = (), on_ready: Callable[[], None] | None = None) -> None:
    """Run until interrupted or terminated. While listening, the address is recorded in
    server.json for ``hybrid query``; it is removed on every exit Python sees (return, error,
    Ctrl-C, SIGTERM, SIGHUP). Only a hard abort escapes that, hence the caps in limits.py.
    ``on_ready`` is called once the socket is bound and the address recorded."""
    import uvicorn

    if not is_loopback(host) and not token:
        raise HybridError(f"binding {host} exposes your notes to the network: set a token with "
                          f"--token or HYBRID_TOKEN")
    allowed_hosts = list(allowed_hosts)
    owner_key = secrets.token_urlsafe(32)
    app = build_app(h, host, port, token, watcher, allowed_hosts, owner_key)
    if not is_loopback(host) and not allowed_hosts:
        log.warning("only loopback Host names are accepted: for clients on the network, add "
                    "--allow-host NAME (or HYBRID_ALLOWED_HOSTS) with the name or IP they use")
    info = server_file(h)
    # proxy_headers off: uvicorn would otherwise take the client address from X-Forwarded-For
    # on loopback connections, and a token guesser could name a fresh address per request
    # use_colors off: its log lines go through the command's sanitiser (hybrid.faces.cli.term),
    # which shows any escape sequence it did not make as text
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            http=protocol_class(h.settings.http_header_timeout), ws="none",
                            proxy_headers=False, use_colors=False)
    def listening() -> None:
        _write_info(info, host, port, token, owner_key)
        if on_ready is not None:
            on_ready()
    server = _server_class()(config, on_listen=listening)
    try:
        with _graceful_signals(server):
            server.run()
    except KeyboardInterrupt:  # uvicorn re-raises Ctrl-C after its graceful shutdown
        pass
    finally:
        _remove_info(info)


def _write_info(info: Path, host: str, port: int, token: str | None, owner_key: str = "") -> None:
    """Record where this server listens and its owner key (atomically: a reader never sees half
    a file; readable by the user only: the key unlocks the owner's view)."""
    info.parent.mkdir(parents=True, exist_ok=True)
    name = "127.0.0.1" if host in WILDCARD_BINDS else url_host(host.strip("[]"))
    tmp = info.with_suffix(f".{os.getpid()}.tmp")
    data = json.dumps({"url": f"http://{name}:{port}", "pid": os.getpid(), "token": bool(token),
                       "owner_key": owner_key})
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(data)
    os.replace(tmp, info)


def _remove_info(info: Path) -> None:
    """Remove the address file if it is still this process's (another server may own it now)."""
    try:
        if json.loads(info.read_text(encoding="utf-8")).get("pid") == os.getpid():
            info.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def remote_search(h: Hybrid, request: SearchRequest, timeout: float = 2.0) -> list[dict] | None:
    """Ask a running server (if its address file exists and it answers); None means: do it
    in-process (:mod:`hybrid.faces.client`, which imports nothing of the engine)."""
    data = client.search(h.config, request, timeout)
    if data is None:
        return None
    return answer_passages(data)


def remote_result(h: Hybrid, request: SearchRequest, timeout: float = 2.0) -> SearchResult | None:
    """:func:`remote_search` as a :class:`~hybrid.retrieval.result.SearchResult`
    (:func:`hybrid.faces.client.search_result`); None: search in-process."""
    return client.search_result(h.config, request, timeout)


def server_info(h: Hybrid) -> dict | None:
    """The running server's address file: :func:`hybrid.faces.client.server_info`."""
    return client.server_info(h.config)
