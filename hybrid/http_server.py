"""The long-lived HTTP server: MCP over Streamable HTTP at ``/mcp``, ``GET /health``, and
``POST /api/search`` (the fast path that ``hybrid query`` uses when a server is running).

Security: binds 127.0.0.1 by default; rejects a ``Host`` that is not the bound address or a
loopback name and an ``Origin`` that is not loopback (DNS rebinding, 403); with a token
(``--token`` / ``HYBRID_TOKEN``; required for a non-loopback bind) every request but
``/health`` needs ``Authorization: Bearer <token>`` (401).
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import time
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import HybridError

if TYPE_CHECKING:
    from .api import Hybrid

log = logging.getLogger("hybrid")
LOOPBACK_NAMES = {"127.0.0.1", "localhost", "::1", "[::1]"}


def is_loopback(host: str) -> bool:
    return host in LOOPBACK_NAMES or host.startswith("127.")


def _hostname(value: str) -> str:
    """'localhost:8765' → 'localhost'; '[::1]:8765' → '[::1]'."""
    if value.startswith("["):
        return value.split("]")[0] + "]"
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class Guard:
    """ASGI middleware: Host/Origin validation and the bearer token."""

    def __init__(self, app, bind_host: str, token: str | None):
        self.app = app
        self.bind_host = bind_host
        self.token = token

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = _hostname(headers.get("host", ""))
        if not (is_loopback(host) or host == self.bind_host):
            return await _plain(send, 403, f"Host {host!r} is not allowed")
        origin = headers.get("origin")
        if origin and origin != "null":
            o = urllib.parse.urlsplit(origin).hostname or ""
            if not (is_loopback(o) or o == self.bind_host):
                return await _plain(send, 403, f"Origin {origin!r} is not allowed")
        if self.token and scope["path"] != "/health":
            auth = headers.get("authorization", "")
            given = auth[7:] if auth.lower().startswith("bearer ") else ""
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return await _plain(send, 401, "missing or wrong bearer token", {"www-authenticate": "Bearer"})
        return await self.app(scope, receive, send)


async def _plain(send, status: int, text: str, extra: dict[str, str] | None = None):
    body = (json.dumps({"error": text}) + "\n").encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def server_file(h: "Hybrid") -> Path:
    return h.config.data / "server.json"


def build_app(h: "Hybrid", host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
              watcher=None):
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    from .mcp_server import build_server

    server = build_server(h, watcher)
    started = time.time()

    @server.custom_route("/health", methods=["GET"])
    async def health(request: Request):
        return JSONResponse({"status": "ok", "pid": os.getpid(), "uptime_s": round(time.time() - started, 1),
                             "vaults": [v.name for v in h.vaults],
                             "watching": bool(watcher)})

    @server.custom_route("/api/search", methods=["POST"])
    async def api_search(request: Request):
        import anyio
        try:
            args = await request.json()
            if not isinstance(args, dict):
                raise ValueError
        except ValueError:
            return JSONResponse({"error": "body must be a JSON object"}, status_code=400)
        allowed = {"query", "top_k", "mode", "vaults", "folders", "tags", "since", "rerank", "exclude_folders"}
        if set(args) - allowed:
            return JSONResponse({"error": f"unknown fields {sorted(set(args) - allowed)}"}, status_code=400)
        try:
            hits = await anyio.to_thread.run_sync(lambda: h.search(args.pop("query", ""), **args))
        except HybridError as exc:
            return JSONResponse({"error": str(exc)}, status_code=422)
        except TypeError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse({"hits": [h_.to_dict() for h_ in hits]})

    # Our Guard does Host/Origin checks for every route; the SDK's own check would reject
    # loopback aliases it does not know, so it only gets the bound address too.
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{n}:*" for n in ("127.0.0.1", "localhost", "[::1]", host)] + [host],
        allowed_origins=[f"http://{n}:*" for n in ("127.0.0.1", "localhost", "[::1]", host)])
    app = server.streamable_http_app(streamable_http_path="/mcp", transport_security=security, host=host)
    return Guard(app, host, token)


def serve_http(h: "Hybrid", host: str, port: int, token: str | None, watcher=None) -> None:
    """Run until interrupted; while up, the server's address is recorded for ``hybrid query``."""
    import uvicorn

    if not is_loopback(host) and not token:
        raise HybridError(f"binding {host} exposes your notes to the network: set a token with "
                          f"--token or HYBRID_TOKEN")
    app = build_app(h, host, port, token, watcher)
    info = server_file(h)
    info.parent.mkdir(parents=True, exist_ok=True)
    url_host = f"[{host}]" if ":" in host and not host.startswith("[") else host
    if host in ("0.0.0.0", "::"):
        url_host = "127.0.0.1"
    tmp = info.with_suffix(".tmp")
    tmp.write_text(json.dumps({"url": f"http://{url_host}:{port}", "pid": os.getpid(),
                               "token": bool(token)}), encoding="utf-8")
    os.replace(tmp, info)
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
    finally:
        try:
            if json.loads(info.read_text()).get("pid") == os.getpid():
                info.unlink()
        except (OSError, ValueError):
            pass


def remote_search(h: "Hybrid", args: dict, timeout: float = 2.0) -> list[dict] | None:
    """Ask a running server (if its address file exists and it answers); None means: do it
    in-process. Uses only the standard library so a cold ``hybrid query`` stays fast."""
    import urllib.error
    import urllib.request

    try:
        info = json.loads(server_file(h).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    req = urllib.request.Request(info["url"] + "/api/search", data=json.dumps(args).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    token = os.environ.get("HYBRID_TOKEN")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())["hits"]
    except urllib.error.HTTPError as exc:
        if exc.code == 422:  # the server understood and refused: same error as in-process
            raise HybridError(json.loads(exc.read()).get("error", "search failed")) from None
        log.info("server at %s answered %s; searching in-process", info["url"], exc.code)
        return None
    except (OSError, ValueError, KeyError):
        log.info("no server answering at %s; searching in-process", info.get("url"))
        return None
