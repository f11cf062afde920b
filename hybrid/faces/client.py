"""The small client of a running ``hybrid serve --http``: what ``hybrid query`` sends its search
to when a server is up (its models warm, its indexes open), found through the address file
the server writes (``server.json`` in the data folder, readable by the user only: its URL and
the random owner key that makes the server answer with the owner's view).

It reads the config and nothing of the engine (no index, model, numpy or store is imported),
so a query through a server costs the server's own time plus a few tens of milliseconds of
start-up: the standard library's ``http.client``, one POST to ``/api/search``.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from hybrid.core.errors import HybridError

if TYPE_CHECKING:
    from hybrid.core.config import Config
    from hybrid.retrieval.request import SearchRequest
    from hybrid.retrieval.result import SearchResult

log = logging.getLogger("hybrid")

# The request itself was refused: searching in-process would fail the same way (same checks in
# Hybrid.search) or, worse, hide the reason. Anything else (401 without HYBRID_TOKEN, 5xx, an
# unrelated program on the port) falls back to searching in-process.
REFUSED = {400, 413, 415, 422}


def server_file(config: Config) -> Path:
    """Where a running server of this config's data folder writes its address."""
    return config.data / "server.json"


def server_info(config: Config) -> dict | None:
    """The running server's address file (``url``, ``pid``, ``token``, ``owner_key``), or None
    when there is none, it cannot be read, or it has no owner key (a server from before the
    agent view would not know us as the owner)."""
    try:
        info = json.loads(server_file(config).read_text(encoding="utf-8"))
        info["url"], info["owner_key"] = str(info["url"]), str(info.get("owner_key") or "")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return info if info["owner_key"] else None


def search(config: Config, request: SearchRequest, timeout: float = 2.0) -> dict | None:
    """The running server's JSON answer to ``request`` (a dict with a ``notes`` or ``hits``
    list), or None: no server answers, search in-process. A request the server refuses as
    such (:data:`REFUSED`) raises its one-line reason."""
    info = server_info(config)
    if info is None:
        return None
    url, owner_key = info["url"], info["owner_key"]
    body = request.to_json()
    for name in ("passages", "context"):  # at their default: a server from before them answers as ever
        if not body[name]:
            del body[name]
    headers = {"Content-Type": "application/json", "X-Hybrid-Owner": owner_key}
    token = os.environ.get("HYBRID_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        status, payload = _post(url + "/api/search", json.dumps(body).encode(), headers, timeout)
    except (OSError, ValueError) as exc:
        log.info("no server answering at %s (%s); searching in-process", url, exc)
        return None
    if status in REFUSED:
        raise HybridError(_error_text(status, payload))
    if status != 200:
        log.info("server at %s answered %s; searching in-process", url, status)
        return None
    try:
        data = json.loads(payload)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("notes", data.get("hits")), list):
        log.info("server at %s gave no search answer; searching in-process", url)
        return None
    return data


def search_result(config: Config, request: SearchRequest, timeout: float = 2.0) -> SearchResult | None:
    """:func:`search` as a :class:`~hybrid.retrieval.result.SearchResult` (hits, the words the
    server corrected, the parsed query), as ``Hybrid.search`` returns it; None: search
    in-process."""
    data = search(config, request, timeout)
    if data is None:
        return None
    from hybrid.retrieval.result import SearchResult
    return SearchResult.from_response(data, request.query, request.parsed)


def _post(url: str, body: bytes, headers: dict[str, str], timeout: float) -> tuple[int, bytes]:
    """(status, body) of a POST; OSError when nothing answers, ValueError for an address that
    is not http(s)."""
    import http.client
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http address: {url!r}")
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn: Any = kind(parts.hostname, parts.port, timeout=timeout)
    try:
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    except http.client.HTTPException as exc:  # a malformed answer: not our server
        raise OSError(str(exc)) from None
    finally:
        conn.close()


def _error_text(status: int, payload: bytes) -> str:
    """The server's one-line {"error": …} message, or the status if the body is not that."""
    try:
        return str(json.loads(payload)["error"]).splitlines()[0]
    except (ValueError, KeyError, TypeError, IndexError):
        return f"the server refused the search (HTTP {status})"
