"""The search page's routes, added to the HTTP server's app (:func:`hybrid.faces.http.build_app`).

Public: ``GET /`` (the page), ``GET /ui/static/NAME``, ``GET /ui/api/session`` (signed in or
not, and whether the server takes a token), the sign-in doors ``GET /ui/login?ticket=…`` and
``POST /ui/login`` and ``POST /ui/logout`` (which ends the session on the server, not just in
this browser); ``POST /ui/api/ticket`` takes the owner key.

Signed in (a session cookie, or ``Authorization: Bearer <token>`` when the server has one):
``POST /ui/api/search``, ``POST /ui/api/read``, ``POST /ui/api/related``, ``GET /ui/api/status``,
``GET /ui/api/files?vault=NAME[&state=S][&limit=N]`` (every file and what became of it),
``GET /ui/api/facets``, ``POST /ui/api/reindex``, ``GET /ui/api/jobs``, ``POST /ui/logout-everywhere``. They serve the
owner's view: every note, no redaction, no audit record (the audit log is of what agents were
shown). A wrong token, in the header or the sign-in form, counts against the client's host and all
clients' (:class:`~hybrid.faces.ui.session.Throttle`, shared with the Guard): 429 with
``Retry-After`` once too many were sent.

Every answer carries a Content-Security-Policy with no ``unsafe-inline`` (the page has no
inline script or style, and builds every piece of note text with ``textContent``), ``nosniff``,
``no-referrer`` and ``frame-ancestors 'none'``. Every POST needs ``Content-Type:
application/json`` (415), which no cross-site form can send without a preflight this server
never grants; the Guard in front refuses foreign ``Host`` and ``Origin`` headers first.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import posixpath
import re
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hybrid.core.errors import HybridError, PathRefused
from hybrid.faces.ui import STATIC
from hybrid.faces.ui.jobs import IndexJobs
from hybrid.faces.ui.session import Sessions, Throttle, Throttled
from hybrid.retrieval.limits import BadSearchArgs, json_object
from hybrid.retrieval.request import SearchRequest

if TYPE_CHECKING:
    from hybrid.app.api import Hybrid

log = logging.getLogger("hybrid")

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = {"content-security-policy": CSP, "x-content-type-options": "nosniff",
                    "referrer-policy": "no-referrer", "x-frame-options": "DENY"}
STATIC_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
                ".svg": "image/svg+xml", ".png": "image/png", ".html": "text/html; charset=utf-8"}
STATIC_NAME = re.compile(r"^[a-z0-9-]+\.(?:js|css|svg|png)$")
SECTION_LINES = 400   # the most lines an expanded hit shows (around the hit)
CONTEXT_LINES = 12    # lines around a hit that has no heading section to show
TOP_FACETS = 500      # tags and folders offered as completions


def ui_path(path: str) -> bool:
    """Whether the Guard should let ``path`` through without the bearer token: the page and
    its routes, which check a session (or the token) themselves."""
    return path == "/" or path == "/favicon.ico" or path.startswith("/ui/")


def with_security_headers(send):
    """An ASGI ``send`` that adds :data:`SECURITY_HEADERS` to a response lacking them (the
    Guard's refusals, the framework's own 404 and 405 answers)."""
    extra = [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]

    async def sending(message):
        if message["type"] == "http.response.start":
            have = {k.lower() for k, _ in message.get("headers", [])}
            message = {**message, "headers": [*message.get("headers", []), *(kv for kv in extra if kv[0] not in have)]}
        await send(message)
    return sending


def add_routes(server, h: Hybrid, *, port: int, token: str | None, owner_key: str, watcher=None,
               started: float | None = None, throttle: Throttle | None = None) -> Sessions:
    """Register the page's routes on the MCP server's app; returns its :class:`Sessions`.
    ``throttle``: the server's count of wrong tokens (default: one of the page's own)."""
    ui = _Routes(server, h, Sessions(h.config.data, port, token), token, owner_key,
                 Throttle() if throttle is None else throttle, IndexJobs(h), watcher, started or time.time())
    ui.add_page()
    ui.add_signing_in()
    ui.add_owner_work()
    from hybrid.faces.ui.tags import add_tag_routes
    add_tag_routes(ui)  # the tag review panel (issue #30)
    return ui.sessions


class _Routes:
    """The page's routes, by group, and what they share: answering in JSON with the security
    headers, who is signed in, the JSON body of a POST."""

    def __init__(self, server, h: Hybrid, sessions: Sessions, token: str | None, owner_key: str,
                 throttle: Throttle, jobs: IndexJobs, watcher, started: float):
        self.server, self.h, self.sessions, self.token, self.owner_key = server, h, sessions, token, owner_key
        self.throttle, self.jobs, self.watcher, self.started = throttle, jobs, watcher, started

    @staticmethod
    def answer(data: Any, status: int = 200, headers: dict[str, str] | None = None):
        from starlette.responses import JSONResponse
        return JSONResponse(data, status_code=status,
                            headers={**SECURITY_HEADERS, "cache-control": "no-store", **(headers or {})})

    def error(self, status: int, message: str):
        return self.answer({"error": message}, status)

    @staticmethod
    def client(request) -> str:
        return request.client.host if request.client else "?"

    def signed_in(self, request) -> bool:
        """A live session cookie, or the right bearer token (Throttled: too many wrong ones
        from this address, this one not checked)."""
        if self.sessions.valid(request.cookies.get(self.sessions.cookie)):
            return True
        auth = request.headers.get("authorization")
        if not self.token or auth is None:
            return False
        given = auth[7:] if auth.lower().startswith("bearer ") else ""
        return self.throttle.check(self.client(request), given, self.token)

    @staticmethod
    async def json_body(request) -> dict:
        """The JSON object a POST carries; a refusal (415 for another media type, 400) otherwise."""
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json":
            raise _Refused(415, "Content-Type must be application/json")
        try:
            return json_object(await request.body() or b"{}")
        except BadSearchArgs as exc:
            raise _Refused(400, str(exc)) from None

    def route(self, path: str, methods: list[str], *, auth: bool = True):
        """A UI route: refusals become one-line JSON errors; ``auth`` routes need a session."""
        def wrap(fn):
            async def handler(request):
                try:
                    if auth and not self.signed_in(request):
                        return self.error(401, "sign in first: run `hybrid ui`, or enter the server's token")
                    return await fn(request)
                except Throttled as exc:
                    return self.answer({"error": str(exc)}, 429, {"retry-after": str(exc.retry_after)})
                except _Refused as exc:
                    return self.error(exc.status, exc.message)
                except BadSearchArgs as exc:
                    return self.error(400, str(exc))
                except PathRefused as exc:
                    return self.error(404, str(exc).splitlines()[0])
                except HybridError as exc:
                    return self.error(422, str(exc).splitlines()[0])
            self.server.custom_route(path, methods=methods)(handler)
            return handler
        return wrap

    def add_page(self) -> None:
        route = self.route

        @route("/", ["GET"], auth=False)
        async def page(request):
            return _static("index.html")

        @route("/favicon.ico", ["GET"], auth=False)
        async def favicon(request):
            return _static("icon.svg")

        @route("/ui/static/{name}", ["GET"], auth=False)
        async def static(request):
            name = request.path_params["name"]
            if not STATIC_NAME.match(name):
                raise _Refused(404, "no such file")
            return _static(name)

    def add_signing_in(self) -> None:
        from starlette.responses import RedirectResponse
        route, answer, sessions, token = self.route, self.answer, self.sessions, self.token

        @route("/ui/api/session", ["GET"], auth=False)
        async def session(request):
            return answer({"signed_in": self.signed_in(request), "token_login": bool(token)})

        @route("/ui/login", ["GET"], auth=False)
        async def login_link(request):
            ticket = request.query_params.get("ticket", "")
            if not sessions.redeem(ticket):
                return RedirectResponse("/?signin=expired", 303, headers=SECURITY_HEADERS)
            return RedirectResponse("/", 303, headers={**SECURITY_HEADERS,
                                                       "set-cookie": sessions.set_cookie(sessions.issue())})

        @route("/ui/login", ["POST"], auth=False)
        async def login_form(request):
            given = (await self.json_body(request)).get("token")
            if not token:
                raise _Refused(400, "this server has no token: sign in with `hybrid ui`")
            if not self.throttle.check(self.client(request), given if isinstance(given, str) else "", token):
                raise _Refused(401, "wrong token")
            return answer({"signed_in": True}, headers={"set-cookie": sessions.set_cookie(sessions.issue())})

        @route("/ui/logout", ["POST"], auth=False)
        async def logout(request):
            await self.json_body(request)
            sessions.revoke(request.cookies.get(sessions.cookie))  # a copy of the cookie stops working too
            return answer({"signed_in": False}, headers={"set-cookie": sessions.clear_cookie()})

        @route("/ui/logout-everywhere", ["POST"], auth=True)
        async def logout_everywhere(request):
            await self.json_body(request)
            sessions.revoke_all()
            return answer({"signed_in": False}, headers={"set-cookie": sessions.clear_cookie()})

        @route("/ui/api/ticket", ["POST"], auth=False)
        async def ticket(request):
            given = request.headers.get("x-hybrid-owner", "")
            if not hmac.compare_digest(given.encode(), self.owner_key.encode()):
                raise _Refused(403, "a sign-in link needs the owner key (what `hybrid ui` sends)")
            t = sessions.ticket()
            return answer({"ticket": t, "path": f"/ui/login?ticket={t}"})

    def add_owner_work(self) -> None:
        import anyio
        route, answer, h, jobs = self.route, self.answer, self.h, self.jobs

        def posted(path: str, work: Callable[[Hybrid, dict], dict]) -> None:
            """A POST route answering ``work(h, body)``, run off the event loop."""
            @route(path, ["POST"], auth=True)
            async def handler(request):
                body = await self.json_body(request)
                return answer(await anyio.to_thread.run_sync(lambda: work(h, body)))

        posted("/ui/api/search", search_call)
        posted("/ui/api/read", read_section)
        posted("/ui/api/related", related_call)

        @route("/ui/api/status", ["GET"], auth=True)
        async def status(request):
            return answer(await anyio.to_thread.run_sync(
                lambda: status_data(h, self.watcher, jobs, self.started)))

        @route("/ui/api/files", ["GET"], auth=True)
        async def files(request):
            q = request.query_params
            return answer(await anyio.to_thread.run_sync(
                lambda: files_data(h, q.get("vault", ""), q.get("state", ""), q.get("limit", ""))))

        @route("/ui/api/facets", ["GET"], auth=True)
        async def facets(request):
            return answer(await anyio.to_thread.run_sync(lambda: facet_data(h)))

        @route("/ui/api/reindex", ["POST"], auth=True)
        async def reindex(request):
            vault = (await self.json_body(request)).get("vault")
            if not isinstance(vault, str) or not vault:
                raise _Refused(400, "vault (a name) is required")
            return answer(jobs.start(vault).to_dict(), 202)

        @route("/ui/api/jobs", ["GET"], auth=True)
        async def job_list(request):
            return answer({"jobs": [j.to_dict() for j in jobs.all()]})


class _Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def _static(name: str):
    from starlette.responses import Response
    path = STATIC / name
    try:
        body = path.read_bytes()
    except OSError:
        raise _Refused(404, "no such file") from None
    kind = STATIC_TYPES.get(posixpath.splitext(name)[1], "application/octet-stream")
    return Response(body, media_type=kind, headers={**SECURITY_HEADERS, "cache-control": "no-cache"})


# --- what the routes compute (plain functions: the tests call them too) ----------------------
def search_call(h: Hybrid, body: dict) -> dict:
    """The owner's search: the answer (notes with their passages, or passages) without chunk
    text (the snippet and the score breakdown are what the page shows; expanding reads the
    section from disk), whether any hit is relevant, how the query was read, the fusion
    weights and the time taken."""
    request = SearchRequest.from_json(json.dumps(body))  # checked as /api/search checks it
    t0 = time.perf_counter()
    result = h.search(request)
    took = round((time.perf_counter() - t0) * 1000, 1)
    p = result.parsed
    return {**result.to_json(text=False),
            "corrected_query": result.corrected_query if result.corrections else "",
            "suggested_query": result.suggested_query if result.suggestions else "",
            "parsed": {"terms": p.terms, "phrases": p.phrases, "excludes": p.excludes,
                       "folders": p.folders, "tags": p.tags, "sources": p.sources,
                       "props": [str(x) for x in p.props],
                       "since": p.since, "listing": p.listing},
            "took_ms": took}


def related_call(h: Hybrid, body: dict) -> dict:
    from hybrid.faces.related import page_related  # loaded when first asked
    return page_related(h, body)


def read_section(h: Hybrid, body: dict) -> dict:
    """The section around a hit, read from disk as ``hybrid get`` reads it: the section under
    the hit's heading path when it holds the hit's lines (at most :data:`SECTION_LINES`, kept
    around the hit), else the hit's lines and :data:`CONTEXT_LINES` on either side."""
    from hybrid.app.refs import heading_lines, section_lines
    vault, path = body.get("vault"), body.get("path")
    start, end = body.get("start_line"), body.get("end_line")
    heading = body.get("heading_path") or []
    if not (isinstance(vault, str) and isinstance(path, str) and _line(start) and _line(end)):
        raise BadSearchArgs("read needs vault, path, start_line and end_line (1 <= start <= end)")
    start, end = int(start), int(end)  # type: ignore[arg-type]  # ints: checked just above
    if start > end:
        raise BadSearchArgs("read needs vault, path, start_line and end_line (1 <= start <= end)")
    if not (isinstance(heading, list) and all(isinstance(x, str) for x in heading)):
        raise BadSearchArgs("heading_path must be a list of headings")
    from hybrid.app.refs import Ref
    note = h.get(Ref(path=path), vault)  # the hit's own path, never parsed as a reference
    lines = note.text.split("\n")
    if end > len(lines):
        raise PathRefused(f"{path} has {len(lines)} lines now, not {end}: the note changed since it was "
                          f"indexed (re-index it, or search again)")
    span = section_lines(lines, heading) if heading else None
    if span is None or not (span[0] <= start and end <= span[1]):
        span = (max(1, start - CONTEXT_LINES), min(len(lines), end + CONTEXT_LINES))
    else:  # the section's own text: up to its first subheading after the hit, not its subsections
        below = [i for i, _, _ in heading_lines(lines) if end <= i < span[1]]  # 0-based i: line i + 1
        span = (span[0], below[0] if below else span[1])
    first, last = span
    if last - first + 1 > SECTION_LINES:  # keep the hit in view, and as much around it as fits
        room = max(0, SECTION_LINES - (end - start + 1))
        lo = max(first, min(start - room // 2, last - SECTION_LINES + 1))  # a hit near the end: shift back
        first, last = lo, min(last, lo + SECTION_LINES - 1)
    return {"vault": vault, "path": note.path, "start_line": first, "end_line": last,
            "total_lines": len(lines), "hit_start": start, "hit_end": end,
            "lines": lines[first - 1:last],
            # who links to the note (hybrid.app.links); None when it is not indexed
            "backlinks": None if note.backlinks is None else [{"path": b.path, "line": b.line}
                                                              for b in note.backlinks],
            "backlinks_total": note.backlinks_total}


def _line(x: Any) -> bool:
    """A 1-based line number (not a bool, which Python counts as an int)."""
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1


def status_data(h: Hybrid, watcher, jobs: IndexJobs, started: float) -> dict:
    """Every vault's status (the owner's: sizes and changes on disk included), the watcher's
    state for it, the server, and the re-index jobs."""
    from hybrid.core.version import version
    watch = watcher.state() if watcher is not None else {}
    s = h.settings
    vaults = []
    for st in h.status():
        row = st.to_dict()
        row["watcher"] = watch.get(st.name, {"watching": False})
        vaults.append(row)
    return {"vaults": vaults, "jobs": [j.to_dict() for j in jobs.all()],
            "server": {"pid": os.getpid(), "uptime_s": round(time.time() - started, 1),
                       "version": version(), "watching": watcher is not None,
                       "rerank_model": s.rerank_model, "embedder": s.embedder}}


FILES_SHOWN = 1000      # rows of a vault's file listing the page gets by default
FILES_SHOWN_MAX = 20_000


def files_data(h: Hybrid, vault: str, state: str = "", limit: str = "") -> dict:
    """Vault ``vault``'s files and what became of each (`hybrid status --files`, the owner's
    view): the count of each state over all of them, and the first ``limit`` rows (of
    ``state`` only, when given) in walk order."""
    from hybrid.app.coverage import STATES
    if not vault:
        raise _Refused(400, "vault (a name) is required")
    if state and state not in STATES:
        raise _Refused(400, f"state must be one of {', '.join(STATES)}")
    try:
        most = int(limit) if limit else FILES_SHOWN
    except ValueError:
        raise _Refused(400, "limit must be a whole number") from None
    if not 1 <= most <= FILES_SHOWN_MAX:
        raise _Refused(400, f"limit must be between 1 and {FILES_SHOWN_MAX:,}")
    counts = dict.fromkeys(STATES, 0)
    rows: list[dict] = []
    from_index = False
    for row in h.files(vault):
        counts[row.state] += 1
        from_index = from_index or row.from_index
        if (not state or row.state == state) and len(rows) < most:
            rows.append(row.to_dict())
    matching = counts[state] if state else sum(counts.values())
    return {"vault": vault, "counts": counts, "files": rows, "total": sum(counts.values()),
            "truncated": matching > len(rows), "from_index": from_index}


def facet_data(h: Hybrid) -> dict:
    """What the filters can offer: vault names, the document kinds present, the most used tags
    and folders (at most :data:`TOP_FACETS` each)."""
    from hybrid.sources import kind_of
    tags: Counter[str] = Counter()
    folders: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    names = []
    for v in h.vaults:
        names.append(v.name)
        catalog = h.catalog_or_none(v)
        if catalog is None:
            continue  # not indexed yet (or unreadable): it offers nothing to filter by
        for note in catalog.notes():
            kinds[kind_of(note.path)] += 1
            parts = note.path.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                folders["/".join(parts[:i])] += 1
            tags.update(t for t in note.tags if isinstance(t, str))
    from hybrid.retrieval.request import OPTIONS
    return {"options": {o.name: o.describe() for o in OPTIONS}, "vaults": names, "sources": sorted(kinds),
            "tags": [t for t, _ in tags.most_common(TOP_FACETS)],
            "folders": sorted(f for f, _ in folders.most_common(TOP_FACETS))}
