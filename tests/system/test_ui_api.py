"""The search page's HTTP side (:mod:`hybrid.faces.ui`): security headers, who may use the page
(session cookies, one-time tickets, the token form, the bearer token), the Guard in front of it
(Host, Origin, Content-Type, body size), and each JSON route (search, read, facets, status,
re-index jobs) on a real index of the small test vault. In-process through Starlette's
TestClient (the hash embedder keeps it quick); the last tests run real `hybrid serve --http` and
`hybrid ui` subprocesses on 127.0.0.1 (slow)."""
import hashlib
import hmac
import http.client
import json
import os
import re
import stat
import subprocess
import sys
import threading
import time
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path

import pytest
from helpers import free_port, hash_home, server_env, write
from starlette.testclient import TestClient

import hybrid
from hybrid.core.errors import HybridError
from hybrid.faces.http import build_app
from hybrid.faces.ui import jobs as jobs_mod
from hybrid.faces.ui.jobs import IndexJobs
from hybrid.faces.ui.routes import SECTION_LINES, read_section
from hybrid.faces.ui.session import (
    FAILURE_WINDOW,
    MAX_FAILURES,
    SESSION_DAYS,
    TICKET_TTL,
    Sessions,
    Throttle,
    Throttled,
)
from hybrid.retrieval.limits import MAX_BODY_BYTES
from hybrid.retrieval.result import answer_passages

OWNER = "KEY"
TOKEN = "s3cret"
PORT = 8765
BASE = f"http://127.0.0.1:{PORT}"
COOKIE = f"hybrid_session_{PORT}"
JSON = {"Content-Type": "application/json"}
NOTES_IN_VAULT = 4  # the conftest `vault` fixture's notes
# every route that needs a signed-in session: (method, path, JSON body or None)
PRIVATE = [("POST", "/ui/api/search", {"query": "orders"}),
           ("POST", "/ui/api/read", {"vault": "vault", "path": "work/orders.md", "start_line": 1, "end_line": 2}),
           ("POST", "/ui/api/related", {"note": "work/orders.md"}),
           ("GET", "/ui/api/status", None), ("GET", "/ui/api/facets", None),
           ("GET", "/ui/api/files?vault=vault", None),
           ("POST", "/ui/api/reindex", {"vault": "vault"}), ("GET", "/ui/api/jobs", None)]


# --- fixtures and helpers ----------------------------------------------------------------------
@pytest.fixture
def h(fake_indexed):
    return fake_indexed


@pytest.fixture
def make_client(h):
    """``make_client(**build_app keywords)``: a TestClient on the real app for ``h`` (owner key
    ``KEY``), its Host ``127.0.0.1:8765``; ``raise_server_exceptions=False`` turns crashes into 500s."""
    def make(raise_server_exceptions=True, **kw):
        return TestClient(build_app(h, **{"port": PORT, "owner_key": OWNER, **kw}), base_url=BASE,
                          raise_server_exceptions=raise_server_exceptions)
    return make


@pytest.fixture
def client(make_client):
    """A client of a server without a token, not signed in."""
    return make_client()


@pytest.fixture
def signed(client):
    """The same client, signed in through a one-time link (as `hybrid ui` does)."""
    sign_in(client)
    return client


@pytest.fixture
def token_client(make_client):
    """A client of a server started with the token ``s3cret``, not signed in."""
    return make_client(token=TOKEN)


def sign_in(client: TestClient) -> str:
    """Get a ticket with the owner key and open its link; returns the link's Set-Cookie."""
    r = client.post("/ui/api/ticket", headers={"X-Hybrid-Owner": OWNER}, json={})
    assert r.status_code == 200, r.text
    r = client.get(r.json()["path"], follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/"
    return r.headers["set-cookie"]


def one_line_error(r, *statuses: int) -> str:
    """The response's JSON ``error`` after checking its status is one of ``statuses`` and the
    message is one short line."""
    assert r.status_code in statuses, (r.status_code, r.text)
    error = r.json()["error"]
    assert isinstance(error, str) and error and "\n" not in error and len(error) < 400
    return error


def call(client: TestClient, method: str, path: str, body=None, **kw):
    if method == "GET":
        return client.get(path, **kw)
    return client.post(path, json=body, **kw)


def search(client: TestClient, **body):
    return client.post("/ui/api/search", json=body)


def read(client: TestClient, **body):
    return client.post("/ui/api/read", json=body)


def wait_for(predicate, what: str, timeout: float = 30.0):
    """Poll ``predicate()`` until it returns something truthy (which is returned)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def job_state(client: TestClient, job_id: int) -> dict | None:
    """Job ``job_id`` as ``GET /ui/api/jobs`` lists it, once it is no longer running."""
    r = client.get("/ui/api/jobs")
    assert r.status_code == 200
    job = next(j for j in r.json()["jobs"] if j["id"] == job_id)
    return job if job["state"] != "running" else None


def first_hit(client: TestClient, query: str, **body) -> dict:
    r = search(client, query=query, **body)
    assert r.status_code == 200, r.text
    hits = answer_passages(r.json())
    assert hits, f"no hit for {query!r}"
    return hits[0]


def read_hit(client: TestClient, hit: dict):
    return read(client, vault=hit["vault"], path=hit["path"], start_line=hit["start_line"],
                end_line=hit["end_line"], heading_path=hit["heading_path"])


class PageAudit(HTMLParser):
    """What in an HTML page the CSP (no ``unsafe-inline``) would block: inline scripts, style
    attributes and ``on…=`` event handlers."""

    def __init__(self):
        super().__init__()
        self.problems: list[str] = []
        self.scripts: list[str] = []

    def handle_starttag(self, tag, attrs):
        names = {k.lower(): v for k, v in attrs}
        if tag == "script":
            self.scripts.append(names.get("src") or "")
            if not names.get("src"):
                self.problems.append("inline <script>")
        if tag == "style":
            self.problems.append("inline <style>")
        for name in names:
            if name == "style" or name.startswith("on"):
                self.problems.append(f"<{tag} {name}=…>")


# --- 1. security headers -----------------------------------------------------------------------
def check_security_headers(r) -> None:
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert "frame-ancestors 'none'" in csp
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["referrer-policy"] == "no-referrer"


def test_page_has_security_headers_and_nothing_inline(client):
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    check_security_headers(r)
    audit = PageAudit()
    audit.feed(r.text)
    assert audit.scripts == ["/ui/static/app.js"]  # the page's one script, from a file
    assert audit.problems == []
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", r.text, re.I)
    assert not re.search(r"\son[a-z]+\s*=", r.text, re.I)
    assert not re.search(r"\sstyle\s*=", r.text, re.I)


def test_json_errors_carry_the_same_security_headers(client):
    r = client.post("/ui/api/search", json={"query": "orders"})
    one_line_error(r, 401)
    assert r.headers["content-type"].startswith("application/json")
    check_security_headers(r)
    assert r.headers["cache-control"] == "no-store"
    assert client.get("/ui/static/app.js").headers["content-security-policy"] == r.headers["content-security-policy"]


def test_refusals_and_unknown_routes_of_the_page_carry_the_security_headers(signed):
    """The Guard's own refusals and the framework's 404/405 on the page's paths, too."""
    answers = [signed.get("/", headers={"Host": "evil.example"}),                         # 403 Host
               signed.post("/ui/api/search", json={"query": "x"}, headers={"Origin": "http://evil.example"}),
               signed.post("/ui/api/search", content=b"x" * (MAX_BODY_BYTES + 1), headers=JSON),  # 413
               signed.get("/ui/api/nope"), signed.get("/ui/api/search")]                # 404, 405
    assert [r.status_code for r in answers] == [403, 403, 413, 404, 405]
    for r in answers:
        check_security_headers(r)
    assert "content-security-policy" not in signed.get("/health").headers  # only the page's paths


# --- 2. private routes need a session ----------------------------------------------------------
def expired_cookie(h) -> str:
    """A correctly signed session cookie issued more than SESSION_DAYS ago."""
    past = time.time() - (SESSION_DAYS + 1) * 86400
    return Sessions(h.config.data, PORT, None, clock=lambda: past).issue()


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("method,path,body", PRIVATE, ids=[p for _, p, _ in PRIVATE])
def test_private_routes_refuse_without_a_session(client, h, method, path, body):
    assert "sign in" in one_line_error(call(client, method, path, body), 401)
    forged = {"cookie": f"{COOKIE}=123.deadbeef"}
    one_line_error(call(client, method, path, body, headers=forged), 401)
    old = expired_cookie(h)
    assert Sessions(h.config.data, PORT, None, clock=lambda: int(old.split(".")[0])).valid(old)  # well signed
    one_line_error(call(client, method, path, body, headers={"cookie": f"{COOKIE}={old}"}), 401)
    one_line_error(call(client, method, path, body, headers={"cookie": f"hybrid_session_9999={old}"}), 401)
    sign_in(client)  # the same request signed in gets through
    assert call(client, method, path, body).status_code in (200, 202)
    wait_for(lambda: all(j["state"] != "running" for j in client.get("/ui/api/jobs").json()["jobs"]), "jobs")


def test_a_cookie_from_the_future_or_for_another_port_is_refused(client, h):
    ahead = time.time() + 3600
    future = Sessions(h.config.data, PORT, None, clock=lambda: ahead).issue()
    one_line_error(client.get("/ui/api/status", headers={"cookie": f"{COOKIE}={future}"}), 401)
    other_port = Sessions(h.config.data, 9999, None).issue()  # valid value, but under another name
    assert client.get("/ui/api/status", headers={"cookie": f"hybrid_session_9999={other_port}"}).status_code == 401
    assert client.get("/ui/api/status", headers={"cookie": f"{COOKIE}={other_port}"}).status_code == 200


def test_a_cookie_with_non_ascii_bytes_is_refused_not_a_crash(make_client):
    client = make_client(raise_server_exceptions=False)
    r = client.get("/ui/api/status", headers={"cookie": f"{COOKIE}=1.\u00e9".encode()})
    one_line_error(r, 401)


# --- 3. the one-time link ----------------------------------------------------------------------
def test_a_ticket_needs_the_owner_key(client):
    one_line_error(client.post("/ui/api/ticket", json={}), 403)
    one_line_error(client.post("/ui/api/ticket", headers={"X-Hybrid-Owner": "nope"}, json={}), 403)
    one_line_error(client.post("/ui/api/ticket", headers={"X-Hybrid-Owner": OWNER + "x"}, json={}), 403)
    r = client.post("/ui/api/ticket", headers={"X-Hybrid-Owner": OWNER}, json={})
    assert r.status_code == 200 and r.json()["path"] == f"/ui/login?ticket={r.json()['ticket']}"


def test_a_ticket_signs_in_once_with_a_strict_cookie(client):
    assert client.get("/ui/api/session").json() == {"signed_in": False, "token_login": False}
    path = client.post("/ui/api/ticket", headers={"X-Hybrid-Owner": OWNER}, json={}).json()["path"]
    r = client.get(path, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=")
    attrs = {a.strip().split("=")[0].lower(): a.strip() for a in cookie.split(";")[1:]}
    assert "httponly" in attrs and attrs["samesite"] == "SameSite=Strict" and attrs["path"] == "Path=/"
    assert attrs["max-age"] == f"Max-Age={SESSION_DAYS * 86400}"
    check_security_headers(r)
    assert client.get("/ui/api/session").json()["signed_in"] is True
    assert client.get("/ui/api/status").status_code == 200

    fresh = TestClient(client.app, base_url=BASE)  # another browser given the same link
    again = fresh.get(path, follow_redirects=False)
    assert again.status_code == 303 and again.headers["location"] == "/?signin=expired"
    assert "set-cookie" not in again.headers
    assert fresh.get("/ui/api/status").status_code == 401


def test_an_unknown_ticket_is_refused(client):
    for path in ("/ui/login?ticket=nope", "/ui/login", "/ui/login?ticket="):
        r = client.get(path, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/?signin=expired"
        assert "set-cookie" not in r.headers
    assert client.get("/ui/api/status").status_code == 401


def test_an_expired_ticket_is_refused(hybrid_home, tmp_path):
    now = [1_000_000.0]
    s = Sessions(tmp_path / "data", PORT, None, clock=lambda: now[0])
    late, in_time = s.ticket(), s.ticket()
    now[0] += TICKET_TTL - 1
    assert s.redeem(in_time)
    assert not s.redeem(in_time)  # used up
    now[0] += 2
    assert not s.redeem(late)
    assert not s.redeem("never-issued")


def test_the_cookie_is_named_after_the_port(make_client):
    cookie = sign_in(make_client(port=9001))  # two servers on one host must not share a cookie
    assert cookie.startswith("hybrid_session_9001=") and "HttpOnly" in cookie


# --- 4. the token form and the bearer token ----------------------------------------------------
def test_token_form_signs_in_with_the_right_token_only(token_client):
    assert token_client.get("/ui/api/session").json() == {"signed_in": False, "token_login": True}
    assert "wrong token" in one_line_error(token_client.post("/ui/login", json={"token": "nope"}), 401)
    one_line_error(token_client.post("/ui/login", json={"token": 5}), 401)
    one_line_error(token_client.post("/ui/login", json={}), 401)
    assert token_client.get("/ui/api/status").status_code == 401
    r = token_client.post("/ui/login", json={"token": TOKEN})
    assert r.status_code == 200 and r.json() == {"signed_in": True}
    assert r.headers["set-cookie"].startswith(f"{COOKIE}=") and "SameSite=Strict" in r.headers["set-cookie"]
    assert token_client.get("/ui/api/status").status_code == 200


def test_token_form_is_throttled_after_wrong_tokens(token_client):
    for _ in range(MAX_FAILURES):
        one_line_error(token_client.post("/ui/login", json={"token": "guess"}), 401)
    r = token_client.post("/ui/login", json={"token": TOKEN})  # from the guesser's address: unchecked
    assert "wait" in one_line_error(r, 429)
    assert 1 <= int(r.headers["retry-after"]) <= FAILURE_WINDOW
    assert "set-cookie" not in r.headers
    assert token_client.get("/ui/api/status").status_code == 401


def test_throttle_lifts_as_time_passes():
    now = [5_000.0]
    t = Throttle(clock=lambda: now[0])
    assert [t.check("10.0.0.9", "x", TOKEN) for _ in range(MAX_FAILURES)] == [False] * MAX_FAILURES
    with pytest.raises(Throttled) as exc:
        t.check("10.0.0.9", TOKEN, TOKEN)  # not even the right token is checked
    assert exc.value.retry_after == round(FAILURE_WINDOW / MAX_FAILURES)
    now[0] += FAILURE_WINDOW / MAX_FAILURES  # one more guess a while
    assert t.check("10.0.0.9", "y", TOKEN) is False
    with pytest.raises(Throttled):
        t.check("10.0.0.9", TOKEN, TOKEN)
    now[0] += FAILURE_WINDOW + 1  # a quiet minute: the whole budget again
    assert t.check("10.0.0.9", TOKEN, TOKEN) is True
    assert [t.check("10.0.0.9", "x", TOKEN) for _ in range(MAX_FAILURES)] == [False] * MAX_FAILURES


def test_token_form_on_a_server_without_a_token_is_400(client):
    assert "no token" in one_line_error(client.post("/ui/login", json={"token": "anything"}), 400)
    assert client.get("/ui/api/status").status_code == 401


def test_bearer_token_and_the_guard_exemption(token_client):
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    r = token_client.get("/ui/api/status", headers=bearer)
    assert r.status_code == 200 and r.json()["vaults"][0]["name"] == "vault"
    assert token_client.get("/ui/api/status", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert token_client.get("/ui/api/status").status_code == 401
    # the page itself loads without the bearer (a browser cannot send one) ...
    assert token_client.get("/").status_code == 200
    assert token_client.get("/ui/static/app.js").status_code == 200
    # ... but the exemption opens nothing else
    r = token_client.post("/api/search", json={"query": "orders"})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert token_client.post("/api/search", json={"query": "orders"}, headers=bearer).status_code == 200
    assert token_client.get("/health").status_code == 200


def test_owner_link_also_signs_in_on_a_token_server(token_client):
    sign_in(token_client)
    assert token_client.get("/ui/api/status").status_code == 200
    assert token_client.post("/api/search", json={"query": "orders"}).status_code == 401  # cookie is UI-only


# --- 5. cross-origin requests ------------------------------------------------------------------
def test_foreign_origin_is_refused_even_when_signed_in(signed):
    r = signed.post("/ui/api/search", json={"query": "orders"}, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403 and "evil.example" in r.json()["error"]
    assert signed.post("/ui/api/search", json={"query": "orders"}, headers={"Origin": "null"}).status_code == 403
    r = signed.post("/ui/api/search", json={"query": "orders"}, headers={"Origin": BASE})
    assert r.status_code == 200 and answer_passages(r.json())


def test_simple_request_content_types_are_415(signed):
    body = json.dumps({"query": "orders"})
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        for path in ("/ui/api/search", "/ui/api/reindex", "/ui/logout", "/ui/login"):
            r = signed.post(path, content=body, headers={"Content-Type": ctype})
            assert "application/json" in one_line_error(r, 415), (path, ctype)
    assert signed.post("/ui/api/search", content=body).status_code == 415  # no Content-Type at all
    r = signed.post("/ui/api/search", content=body, headers={"Content-Type": "application/json; charset=utf-8"})
    assert r.status_code == 200
    assert signed.get("/ui/api/status").status_code == 200  # the refused logout did not sign out


def test_foreign_host_is_refused(client):
    for host in ("evil.example", "evil.example:8765", "127.0.0.1.evil.example"):
        r = client.get("/", headers={"Host": host})
        assert r.status_code == 403 and "<html" not in r.text.lower()
    assert client.get("/", headers={"Host": "localhost:8765"}).status_code == 200


# --- 6. signing out ----------------------------------------------------------------------------
def test_logout_clears_the_cookie(signed):
    assert signed.get("/ui/api/status").status_code == 200
    r = signed.post("/ui/logout", json={})
    assert r.status_code == 200 and r.json() == {"signed_in": False}
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=;") and "Max-Age=0" in cookie and "Path=/" in cookie
    assert COOKIE not in signed.cookies
    one_line_error(signed.get("/ui/api/status"), 401)
    assert signed.get("/ui/api/session").json()["signed_in"] is False


# --- 7. search ---------------------------------------------------------------------------------
HIT_KEYS = {"citation", "lexical_rank", "vector_rank", "fused_score", "score", "pin", "recency_penalty"}


def test_search_answers_hits_with_their_score_breakdown(signed):
    r = signed.post("/ui/api/search", json={"query": "orders-created partitions"})
    assert r.status_code == 200
    data = r.json()
    assert answer_passages(data) and answer_passages(data)[0]["path"] == "work/orders.md"
    for hit in answer_passages(data):
        assert HIT_KEYS <= set(hit) and "text" not in hit
        assert hit["citation"] == f"vault:{hit['path']}:{hit['start_line']}-{hit['end_line']}"
    assert {"needles", "fusion", "parsed", "took_ms"} <= set(data)
    assert set(data["fusion"]) >= {"k", "lexical", "vector"}
    assert data["parsed"]["terms"] and data["parsed"]["listing"] is False
    assert isinstance(data["took_ms"], (int, float)) and data["took_ms"] >= 0
    assert r.headers["cache-control"] == "no-store"
    assert "orders-created" in data["needles"]


def test_search_pins_an_exact_identifier(signed):
    top = first_hit(signed, "orders-created")
    assert top["path"] == "work/orders.md" and top["pin"] in ("literal", "verbatim")
    assert top["lexical_rank"] == 1


def test_search_modes_report_their_fusion(signed):
    lexical = signed.post("/ui/api/search", json={"query": "tailscale", "mode": "lexical"}).json()
    assert answer_passages(lexical)[0]["path"] == "home/network.md"
    assert all(x["vector_rank"] is None for x in answer_passages(lexical))
    assert lexical["fusion"] == {}  # one arm: nothing fused
    hybrid_ = signed.post("/ui/api/search", json={"query": "tailscale", "mode": "hybrid"}).json()
    assert set(hybrid_["fusion"]) == {"k", "lexical", "vector"} and hybrid_["fusion"]["k"] > 0


def test_search_tag_filter(signed):
    r = search(signed, query="reads partitions topic", tags=["kafka"])
    assert r.status_code == 200
    hits = answer_passages(r.json())
    assert hits and all("kafka" in x["tags"] for x in hits)
    assert {x["path"] for x in hits} == {"work/orders.md"}
    inline = search(signed, query="tag:kafka partitions").json()
    assert inline["parsed"]["tags"] == ["kafka"] and {x["path"] for x in answer_passages(inline)} == {"work/orders.md"}


def test_search_folder_filter(signed):
    hits = answer_passages(search(signed, query="sun network sourdough", folders=["home"]).json())
    assert hits and all(x["path"].startswith("home/") for x in hits)


def test_search_min_score_drops_weak_hits(signed):
    everything = answer_passages(search(signed, query="orders-created", top_k=20).json())
    strong = answer_passages(search(signed, query="orders-created", top_k=20, min_score=0.5).json())
    assert strong and len(strong) < len(everything)
    assert all(x["confidence"] >= 0.5 for x in strong)


def test_search_for_a_kind_the_vault_lacks_is_a_422(signed):
    error = one_line_error(search(signed, query="orders", sources=["pdf"]), 422)
    assert "pdf" in error
    one_line_error(search(signed, query="orders", sources=["spreadsheet"]), 400)  # not a kind at all


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("body,status,fix", [
    ({"query": "x", "evil": 1}, 400, "evil"), ({"query": "x", "min_score": 2}, 400, "min_score"),
    ({"query": "x", "top_k": "x"}, 400, "top_k"), ({"top_k": 3}, 400, "query is required"),
    ({"query": "x", "tags": "kafka"}, 400, "tags"), ({"query": "x", "mode": "fast"}, 400, "mode"),
    ({"query": '"abc'}, 422, "quote"), ({"query": ""}, 422, ""),
], ids=["unknown", "min_score", "top_k", "no-query", "tags-str", "mode", "open-quote", "empty"])
def test_search_bad_input_is_one_error_line(signed, body, status, fix):
    assert fix in one_line_error(search(signed, **body), status)


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("raw", [b"[1,2]", b"not json", b'"query"', b"[" * 60_000],
                         ids=["list", "text", "string", "deep"])
def test_search_body_must_be_a_json_object(signed, raw):
    assert "JSON object" in one_line_error(signed.post("/ui/api/search", content=raw, headers=JSON), 400)


def test_search_oversize_body_is_413(signed):
    body = json.dumps({"query": "orders", "tags": ["x" * (MAX_BODY_BYTES + 1)]}).encode()
    r = signed.post("/ui/api/search", content=body, headers=JSON)
    assert r.status_code == 413 and "too large" in r.json()["error"]
    assert signed.post("/ui/api/search", json={"query": "orders"}).status_code == 200  # still serving


# --- 8. reading a hit's section ----------------------------------------------------------------
def file_lines(vault: Path, rel: str) -> list[str]:
    return (vault / rel).read_text(encoding="utf-8").split("\n")


def test_read_returns_the_lines_around_a_hit_from_disk(signed, vault):
    hit = first_hit(signed, "orders-created")
    r = read_hit(signed, hit)
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["path"] == "work/orders.md" and data["vault"] == "vault"
    assert (data["hit_start"], data["hit_end"]) == (hit["start_line"], hit["end_line"])
    assert data["start_line"] <= hit["start_line"] and data["end_line"] >= hit["end_line"]
    disk = file_lines(vault, "work/orders.md")
    assert data["lines"] == disk[data["start_line"] - 1:data["end_line"]]
    assert len(data["lines"]) == data["end_line"] - data["start_line"] + 1
    assert any("orders-created" in line for line in data["lines"])
    assert disk[-1] == "" and data["total_lines"] == len(disk) - 1  # the final newline ends a line
    # the section under the hit's heading, up to its first subheading: not the Consumers part
    assert disk[data["start_line"] - 1] == "# Orders pipeline"
    assert not any(line.startswith("## Consumers") for line in data["lines"])


def test_read_every_hit_matches_the_file(signed, vault):
    hits = answer_passages(search(signed, query="sun network sourdough billing", top_k=20).json())
    assert len(hits) >= 4
    for hit in hits:
        data = read_hit(signed, hit).json()
        disk = file_lines(vault, hit["path"])
        assert data["start_line"] <= hit["start_line"] <= hit["end_line"] <= data["end_line"]
        assert data["lines"] == disk[data["start_line"] - 1:data["end_line"]], hit["citation"]


def test_read_without_a_heading_shows_context_lines(signed, vault):
    write(vault, "plain.md", "".join(f"plain line {i}\n" for i in range(1, 101)))
    r = read(signed, vault="vault", path="plain.md", start_line=50, end_line=51)
    data = r.json()
    assert r.status_code == 200 and data["start_line"] < 50 and data["end_line"] > 51
    assert data["lines"] == file_lines(vault, "plain.md")[data["start_line"] - 1:data["end_line"]]
    assert data["end_line"] - data["start_line"] + 1 < 100  # some context, not the whole note


def test_read_refuses_paths_outside_the_vault(signed, vault, tmp_path):
    (tmp_path / "outside.md").write_text("# Outside\n\nTOP-SECRET-OUTSIDE\n", encoding="utf-8")
    write(vault, ".env", "API_KEY=TOP-SECRET-ENV\n")
    write(vault, ".obsidian/plugins/x/data.md", "TOP-SECRET-PLUGIN\n")
    for path in ("../outside.md", str(tmp_path / "outside.md"), "work/../../outside.md", ".env",
                 ".obsidian/plugins/x/data.md", "..\\outside.md"):
        r = read(signed, vault="vault", path=path, start_line=1, end_line=1)
        assert 400 <= r.status_code < 500, (path, r.status_code)
        one_line_error(r, r.status_code)
        assert "TOP-SECRET" not in r.text, path


def test_read_refuses_a_symlink_out_of_the_vault(signed, vault, tmp_path):
    (tmp_path / "outside.md").write_text("TOP-SECRET-LINK\n", encoding="utf-8")
    (vault / "link.md").symlink_to(tmp_path / "outside.md")
    r = read(signed, vault="vault", path="link.md", start_line=1, end_line=1)
    assert 400 <= r.status_code < 500 and "TOP-SECRET" not in r.text


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("body,fix", [
    ({"start_line": 0, "end_line": 2}, "start_line"), ({"start_line": 3, "end_line": 2}, "start"),
    ({"start_line": "1", "end_line": 2}, "start_line"), ({"start_line": 1}, "end_line"),
    ({"start_line": 1, "end_line": 2, "heading_path": "Orders"}, "heading_path"),
    ({"start_line": 1, "end_line": 2, "path": 5}, "path"), ({"start_line": 1, "end_line": 2, "vault": None}, "vault"),
    ({"start_line": True, "end_line": 2}, "start_line"),
], ids=["zero", "end-before-start", "str", "no-end", "heading-str", "path-int", "no-vault", "bool"])
def test_read_bad_arguments_are_400(signed, body, fix):
    full = {"vault": "vault", "path": "work/orders.md", **body}
    assert fix in one_line_error(read(signed, **{k: v for k, v in full.items() if v is not None}), 400)


def test_read_unknown_vault_or_note(signed):
    one_line_error(read(signed, vault="nope", path="work/orders.md", start_line=1, end_line=1), 422)
    one_line_error(read(signed, vault="vault", path="work/missing.md", start_line=1, end_line=1), 404)


def test_read_a_note_shortened_since_indexing_is_404(signed, vault):
    hit = first_hit(signed, "billing reads")
    assert hit["path"] == "work/orders.md" and hit["end_line"] > 3
    (vault / "work/orders.md").write_text("# Orders pipeline\n\nshort now.\n", encoding="utf-8")
    r = read_hit(signed, hit)
    error = one_line_error(r, 404)
    assert "3 lines now" in error and "re-index" in error
    assert "billing" not in r.text


LONG_NOTE = "# Long\n\n" + "".join(f"filler line number {i}\n" for i in range(3, 1001))


def test_read_caps_a_long_section_around_the_hit(h, vault):
    write(vault, "long.md", LONG_NOTE.replace("filler line number 700\n", "the quokka hides here\n"))
    h.index()
    hit = h.search("quokka", mode="lexical")[0]
    assert hit.path == "long.md" and hit.heading_path == ["Long"]
    data = read_section(h, {"vault": "vault", "path": hit.path, "start_line": hit.start_line,
                            "end_line": hit.end_line, "heading_path": hit.heading_path})
    assert data["end_line"] - data["start_line"] + 1 == len(data["lines"]) <= SECTION_LINES
    assert data["start_line"] <= hit.start_line and hit.end_line <= data["end_line"]
    assert "the quokka hides here" in data["lines"]
    assert data["lines"] == file_lines(vault, "long.md")[data["start_line"] - 1:data["end_line"]]
    assert data["total_lines"] == 1000


def test_read_names_the_notes_linking_to_the_hit_note(h, vault):
    write(vault, "hub.md", "# Hub\n\nThe hub note.\n")
    write(vault, "spoke.md", "# Spoke\n\nBack to the [[Hub]].\n")
    h.index()
    data = read_section(h, {"vault": "vault", "path": "hub.md", "start_line": 3, "end_line": 3})
    assert data["backlinks"] == [{"path": "spoke.md", "line": 3}] and data["backlinks_total"] == 1
    write(vault, "new.md", "# New\n\nNot indexed yet.\n")
    data = read_section(h, {"vault": "vault", "path": "new.md", "start_line": 3, "end_line": 3})
    assert data["backlinks"] is None


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_read_a_hit_near_the_end_of_a_long_section_fills_the_window(h, vault):
    write(vault, "long.md", LONG_NOTE)
    h.index()
    data = read_section(h, {"vault": "vault", "path": "long.md", "start_line": 995, "end_line": 997,
                            "heading_path": ["Long"]})
    assert data["start_line"] <= 995 and data["end_line"] == 1000
    assert len(data["lines"]) == SECTION_LINES  # 1000 lines in the section: the window could be full


def test_read_a_hit_near_the_start_of_a_long_section_fills_the_window(h, vault):
    write(vault, "long.md", LONG_NOTE)
    h.index()
    data = read_section(h, {"vault": "vault", "path": "long.md", "start_line": 5, "end_line": 7,
                            "heading_path": ["Long"]})
    assert (data["start_line"], data["end_line"]) == (1, SECTION_LINES)


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("rel,word", [("C#/generics.md", "zebrafish"), ("!inbox.md", "platypus"),
                                      ("a|b.md", "wombat")], ids=["hash-folder", "bang-name", "pipe-name"])
def test_read_a_hit_whose_path_has_reference_characters(signed, vault, rel, word):
    write(vault, "inbox.md", "# Other note\n\nnothing to see.\n")
    write(vault, rel, f"# Title\n\nThe {word} lives here.\n")
    assert signed.post("/ui/api/reindex", json={"vault": "vault"}).status_code == 202
    wait_for(lambda: all(j["state"] != "running" for j in signed.get("/ui/api/jobs").json()["jobs"]), "re-index")
    hit = first_hit(signed, word, mode="lexical")
    assert hit["path"] == rel  # the search finds it ...
    r = read_hit(signed, hit)  # ... and expanding it shows that file's lines, not another note's
    assert r.status_code == 200, r.text
    assert r.json()["path"] == rel and f"The {word} lives here." in r.json()["lines"]
    assert "nothing to see." not in r.json()["lines"]


# --- 9. facets ---------------------------------------------------------------------------------
def test_facets_offer_the_vaults_kinds_tags_and_folders(signed):
    r = signed.get("/ui/api/facets")
    assert r.status_code == 200
    data = r.json()
    assert data["vaults"] == ["vault"]
    assert data["sources"] == ["note"]
    assert {"work", "kafka", "home-lab/networking"} <= set(data["tags"])
    assert {"work", "home"} <= set(data["folders"]) and "" not in data["folders"]
    assert data["folders"] == sorted(data["folders"])


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_facets_list_nested_folders_and_skip_unindexed_vaults(h, vault, tmp_path, make_client):
    write(vault, "work/teams/billing.md", "# Billing\n\n#team/billing owns invoices.\n")
    h.index()
    (tmp_path / "empty").mkdir()
    h.add_vault(tmp_path / "empty", "empty")  # registered, never indexed
    client = make_client()
    sign_in(client)
    data = client.get("/ui/api/facets").json()
    assert {"work", "work/teams"} <= set(data["folders"]) and "team/billing" in data["tags"]
    assert sorted(data["vaults"]) == ["empty", "vault"]  # listed though it offers nothing yet


# --- 10. status --------------------------------------------------------------------------------
def test_status_shows_each_vault_and_the_server(signed):
    r = signed.get("/ui/api/status")
    assert r.status_code == 200
    data = r.json()
    v = data["vaults"][0]
    assert v["name"] == "vault" and v["notes"] == NOTES_IN_VAULT and v["chunks"] >= NOTES_IN_VAULT
    assert v["embedder"] == "hash:64" and v["vector_index"]
    assert v["watcher"] == {"watching": False}
    assert v["changes"] == {"new": 0, "changed": 0, "deleted": 0, "skipped": 0, "skipped_files": []}
    server = data["server"]
    assert server["version"] == hybrid.__version__ and server["watching"] is False
    assert server["pid"] == os.getpid() and data["jobs"] == []


def test_status_counts_changes_on_disk(signed, vault):
    write(vault, "new.md", "# New\n\nfresh.\n")
    (vault / "home/garden.md").unlink()
    changes = signed.get("/ui/api/status").json()["vaults"][0]["changes"]
    assert changes["new"] == 1 and changes["deleted"] == 1


def test_files_lists_every_file_with_what_became_of_it(signed, vault):
    """The owner's file listing (`hybrid status --files`): counts over all, rows of one state."""
    write(vault, "new.md", "# New\n\nfresh.\n")
    write(vault, "photo.psd", "not a note")
    write(vault, ".obsidian/app.json", "{}")
    r = signed.get("/ui/api/files?vault=vault")
    assert r.status_code == 200
    check_security_headers(r)
    data = r.json()
    assert data["counts"] == {"indexed": NOTES_IN_VAULT, "pending": 1, "skipped": 0, "failed": 0, "excluded": 2}
    assert data["total"] == NOTES_IN_VAULT + 3 and not data["truncated"] and not data["from_index"]
    rows = {f["path"]: (f["state"], f["why"]) for f in data["files"]}
    assert rows["new.md"] == ("pending", "new") and rows["photo.psd"] == ("excluded", "not_included")
    assert rows[".obsidian/"] == ("excluded", "hidden") and rows["work/orders.md"] == ("indexed", "")
    one = signed.get("/ui/api/files?vault=vault&state=indexed&limit=2").json()
    assert [f["state"] for f in one["files"]] == ["indexed", "indexed"] and one["truncated"]
    assert one["counts"] == data["counts"]
    for bad in ("state=lost", "limit=0", "limit=x", "limit=999999"):
        one_line_error(signed.get(f"/ui/api/files?vault=vault&{bad}"), 400)
    one_line_error(signed.get("/ui/api/files"), 400)
    assert "unknown vault" in one_line_error(signed.get("/ui/api/files?vault=nope"), 422)


# --- 11. re-index jobs -------------------------------------------------------------------------
@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_reindex_job_runs_to_done_and_picks_up_a_new_note(signed, vault):
    r = signed.post("/ui/api/reindex", json={"vault": "vault"})
    assert r.status_code == 202
    job = r.json()
    assert job["vault"] == "vault" and job["state"] in ("running", "done") and job["error"] is None
    done = wait_for(lambda: job_state(signed, job["id"]), "the first re-index")
    assert done["state"] == "done" and done["finished"] is not None
    assert done["summary"]["unchanged"] == NOTES_IN_VAULT and done["summary"]["added"] == 0
    assert done["stage"] in ("scan", "load", "embed", "write")

    write(vault, "work/runbook.md", "# Runbook\n\nRestart the capybara consumer when lag grows.\n")
    second = signed.post("/ui/api/reindex", json={"vault": "vault"}).json()
    assert second["id"] != job["id"]
    done = wait_for(lambda: job_state(signed, second["id"]), "the second re-index")
    assert done["state"] == "done" and done["summary"]["added"] == 1
    assert done["summary"]["unchanged"] == NOTES_IN_VAULT
    assert first_hit(signed, "capybara")["path"] == "work/runbook.md"
    listed = signed.get("/ui/api/status").json()["jobs"]
    assert {j["id"] for j in listed} == {job["id"], second["id"]}


def test_reindex_bad_requests(signed):
    assert "unknown vault" in one_line_error(signed.post("/ui/api/reindex", json={"vault": "nope"}), 422)
    for body in ({}, {"vault": ""}, {"vault": 5}, {"vault": ["vault"]}):
        assert "vault" in one_line_error(signed.post("/ui/api/reindex", json=body), 400)
    assert signed.get("/ui/api/jobs").json() == {"jobs": []}


@pytest.fixture
def gated(h, monkeypatch):
    """``h`` whose ``index`` waits for ``gate`` (a threading.Event) before indexing for real:
    a job stays "running" until the test sets it. Returns (h, gate, calls)."""
    gate, calls = threading.Event(), []
    real = h.index

    def slow_index(vaults=None, **kw):
        calls.append(list(vaults or []))
        assert gate.wait(30), "the test never opened the gate"
        return real(vaults, **kw)
    monkeypatch.setattr(h, "index", slow_index)
    yield h, gate, calls
    gate.set()  # never leave a job thread waiting


def finished(jobs: IndexJobs, job_id: int):
    job = jobs.get(job_id)
    return job if job is not None and job.state != "running" else None


def test_a_second_start_while_running_returns_the_same_job(gated):
    h, gate, calls = gated
    jobs = IndexJobs(h)
    first = jobs.start("vault")
    again = jobs.start("vault")
    assert again.id == first.id and again.state == "running"
    assert [j.id for j in jobs.all()] == [first.id]
    gate.set()
    done = wait_for(lambda: finished(jobs, first.id), "the gated job")
    assert done.state == "done" and done.summary["unchanged"] == NOTES_IN_VAULT
    assert calls == [["vault"]]  # indexed once
    third = jobs.start("vault")
    assert third.id != first.id
    assert wait_for(lambda: finished(jobs, third.id), "the third job").state == "done"


def test_jobs_report_progress_while_running(h, monkeypatch):
    seen, gate = [], threading.Event()

    def staged(vaults=None, progress=None, **kw):
        progress("embed", 3, 7)
        seen.append("reported")
        assert gate.wait(30)
        raise HybridError("stopped after embedding")
    monkeypatch.setattr(h, "index", staged)
    jobs = IndexJobs(h)
    job = jobs.start("vault")
    wait_for(lambda: seen, "the progress report")
    running = jobs.get(job.id)
    assert (running.state, running.stage, running.done, running.total) == ("running", "embed", 3, 7)
    gate.set()
    assert wait_for(lambda: finished(jobs, job.id), "the job").state == "failed"


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("exc,error", [
    (HybridError("the disk is on fire\nsecond line of detail"), "the disk is on fire"),
    (RuntimeError("boom"), "RuntimeError: boom"), (HybridError(""), "failed"),
], ids=["hybrid-error", "bug", "empty-message"])
def test_a_failing_job_ends_failed(h, monkeypatch, exc, error):
    def broken(vaults=None, **kw):
        raise exc
    monkeypatch.setattr(h, "index", broken)
    jobs = IndexJobs(h)
    job = jobs.start("vault")
    done = wait_for(lambda: finished(jobs, job.id), "the failing job")
    assert done.state == "failed" and done.error == error and done.finished is not None
    assert done.summary == {}
    assert jobs.start("vault").id != job.id  # a failed job does not block the next one


def test_a_failing_job_through_the_api(signed, h, monkeypatch):
    def broken(vaults=None, **kw):
        raise HybridError("another indexer holds the lock")
    monkeypatch.setattr(h, "index", broken)
    job = signed.post("/ui/api/reindex", json={"vault": "vault"}).json()
    done = wait_for(lambda: job_state(signed, job["id"]), "the failing job")
    assert done["state"] == "failed" and done["error"] == "another indexer holds the lock"


def test_old_finished_jobs_are_dropped(h, monkeypatch):
    monkeypatch.setattr(h, "index", lambda vaults=None, **kw: (_ for _ in ()).throw(HybridError("x")))
    jobs = IndexJobs(h)
    ids = []
    for _ in range(jobs_mod.KEEP + 5):
        ids.append(jobs.start("vault").id)
        wait_for(lambda: finished(jobs, ids[-1]), "a job")
    kept = [j.id for j in jobs.all()]
    assert len(kept) <= jobs_mod.KEEP + 1 and ids[-1] in kept and ids[0] not in kept


# --- 12. static files --------------------------------------------------------------------------
def test_static_files_are_served_with_their_types(client):
    js = client.get("/ui/static/app.js")
    assert js.status_code == 200 and "javascript" in js.headers["content-type"]
    check_security_headers(js)
    css = client.get("/ui/static/app.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("path", ["/ui/static/../routes.py", "/ui/static/%2e%2e%2froutes.py", "/ui/static/routes.py",
                                  "/ui/static/nope.js", "/ui/static/..%2f__init__.py", "/ui/static/index.html",
                                  "/ui/static/%2e%2e%2f%2e%2e%2fapi.py", "/ui/static/App.js", "/ui/static/app.js.map"])
def test_static_refuses_anything_but_its_files(client, path):
    r = client.get(path)
    assert r.status_code == 404
    assert "import " not in r.text and "def " not in r.text and "<html" not in r.text.lower()


# --- 13. the session module --------------------------------------------------------------------
def test_a_cookie_signed_under_another_token_is_refused(tmp_path):
    data = tmp_path / "data"
    mine, other, none = Sessions(data, PORT, "s3cret"), Sessions(data, PORT, "other"), Sessions(data, PORT, None)
    value = mine.issue()
    assert mine.valid(value)
    assert not other.valid(value) and not none.valid(value)
    assert not mine.valid(other.issue()) and not mine.valid(none.issue())
    issued, sid, mac = value.split(".")
    other_sid = f"{int(sid[0], 16) ^ 1:x}{sid[1:]}"
    for bad in (None, "", issued, f"{issued}.{sid}", f"{issued}.{mac}", f".{sid}.{mac}", f"{issued}.{sid}.{mac}.x",
                f"{int(issued) + 1}.{sid}.{mac}", f"{issued}.{other_sid}.{mac}", f"-{issued}.{sid}.{mac}",
                f"{issued}.{sid}.{mac[:-1]}", f"{issued}.{sid}.{mac.upper()}", f"{issued}.{sid.upper()}.{mac}"):
        assert not mine.valid(bad), bad


def test_ui_key_is_private_and_sessions_survive_a_restart(tmp_path):
    data = tmp_path / "data"
    before = Sessions(data, PORT, TOKEN)
    key = data / "ui.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert len(bytes.fromhex(key.read_text())) == 32
    value = before.issue()
    after = Sessions(data, PORT, TOKEN)  # the server restarted: same data folder, same token
    assert after.valid(value) and before.valid(after.issue())
    assert not Sessions(tmp_path / "elsewhere", PORT, TOKEN).valid(value)  # another key
    key.unlink()  # deleting the key signs everyone out
    assert not Sessions(data, PORT, TOKEN).valid(value)


def test_a_damaged_ui_key_is_replaced(tmp_path):
    data = tmp_path / "data"
    value = Sessions(data, PORT, None).issue()
    (data / "ui.key").write_text("not hex at all", encoding="ascii")
    s = Sessions(data, PORT, None)
    assert not s.valid(value) and s.valid(s.issue())
    assert len(bytes.fromhex((data / "ui.key").read_text())) == 32


def test_an_empty_ui_key_is_not_used_to_sign_cookies(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "ui.key").write_text("", encoding="ascii")  # e.g. a crash before the key reached the disk
    s = Sessions(data, PORT, None)
    epoch = json.loads((data / "ui-sessions.json").read_text())["epoch"]  # even knowing the epoch
    key = hmac.new(b"", b"hybrid-ui-session\0\0" + epoch.encode(), hashlib.sha256).digest()  # anyone's
    issued, sid = str(int(time.time())), "ab" * 16
    forged = f"{issued}.{sid}.{hmac.new(key, f'{issued}.{sid}'.encode(), hashlib.sha256).hexdigest()}"
    assert not s.valid(forged)


def test_tickets_are_capped(tmp_path):
    s = Sessions(tmp_path / "data", PORT, None)
    oldest = s.ticket()
    newer = [s.ticket() for _ in range(80)]
    assert not s.redeem(oldest)  # pushed out by newer ones
    assert s.redeem(newer[-1])


# --- 14. `hybrid ui` against real servers (subprocesses) ---------------------------------------
def http_get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One GET on 127.0.0.1 that follows no redirect: (status, lower-cased headers, body)."""
    parts = urllib.parse.urlsplit(url)
    assert parts.hostname == "127.0.0.1", url
    conn = http.client.HTTPConnection("127.0.0.1", parts.port, timeout=30)
    try:
        conn.request("GET", parts.path + (f"?{parts.query}" if parts.query else ""), headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def hybrid_ui(home, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hybrid", "ui", "--no-open", *args], env=server_env(home),
                          capture_output=True, text=True, timeout=240)


def check_sign_in_link(url: str, port: int) -> str:
    """Open a `hybrid ui` link as a browser would (once): 303 with a session cookie, which then
    opens the owner's routes; the link does not work twice. Returns the cookie."""
    assert url.startswith(f"http://127.0.0.1:{port}/ui/login?ticket="), url
    status, headers, _ = http_get(url)
    assert status == 303 and headers["location"] == "/"
    cookie = headers["set-cookie"].split(";")[0]
    assert cookie.startswith(f"hybrid_session_{port}=") and "HttpOnly" in headers["set-cookie"]
    status, _, body = http_get(f"http://127.0.0.1:{port}/ui/api/status", {"Cookie": cookie})
    assert status == 200 and json.loads(body)["vaults"][0]["name"] == "vault"
    assert http_get(f"http://127.0.0.1:{port}/ui/api/status")[0] == 401
    status, headers, _ = http_get(url)
    assert status == 303 and headers["location"] == "/?signin=expired" and "set-cookie" not in headers
    return cookie


@pytest.fixture
def home(hybrid_home, vault):
    return hash_home(hybrid_home, vault)


@pytest.fixture
def data_dir(home) -> Path:
    h = hybrid.open(home)
    try:
        return h.config.data
    finally:
        h.close()


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has exited (not our child, so no wait(): a zombie counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def _server_pid(data: Path) -> int | None:
    try:
        return int(json.loads((data / "server.json").read_text(encoding="utf-8"))["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


@pytest.fixture
def background(data_dir):
    """Stops, after the test, a server `hybrid ui` left running in the background (its pid
    read from the data folder's server.json), should the test not have stopped it itself."""
    yield
    pid = _server_pid(data_dir)
    if pid is not None and pid != os.getpid() and not _gone(pid):
        os.kill(pid, 15)
        deadline = time.monotonic() + 30
        while not _gone(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not _gone(pid):
            os.kill(pid, 9)


@pytest.mark.slow
def test_hybrid_ui_signs_in_to_the_running_server(serve, home):
    server = serve()
    proc, port = server.proc, server.port
    r = hybrid_ui(home)
    assert r.returncode == 0, r.stderr
    assert "starting the server" not in r.stderr  # it found the running one
    url = r.stdout.strip().splitlines()[-1]
    check_sign_in_link(url, port)
    # paths as sent on the wire (http.client normalises nothing): no way out of the static folder
    for raw in ("/ui/static/../routes.py", "/ui/static/..%2froutes.py", "/ui/static/%2e%2e%2froutes.py",
                "/ui/static/../../http_server.py", "/ui/../http_server.py"):
        status, _, body = http_get(f"http://127.0.0.1:{port}{raw}")
        assert status == 404 and b"import " not in body, raw
    assert proc.poll() is None


@pytest.mark.slow
def test_hybrid_ui_starts_a_server_when_none_runs(home, data_dir, background):
    assert _server_pid(data_dir) is None
    port = free_port()
    r = hybrid_ui(home, "--port", str(port))
    assert r.returncode == 0, r.stderr
    assert f"starting the server on port {port}" in r.stderr
    pid = _server_pid(data_dir)
    assert pid is not None and not _gone(pid)
    status, _, body = http_get(f"http://127.0.0.1:{port}/health")
    assert status == 200 and json.loads(body)["pid"] == pid and json.loads(body)["watching"] is True
    check_sign_in_link(r.stdout.strip().splitlines()[-1], port)

    again = hybrid_ui(home, "--port", str(free_port()))  # a second run reuses it, whatever --port says
    assert again.returncode == 0 and "starting the server" not in again.stderr
    assert again.stdout.strip().startswith(f"http://127.0.0.1:{port}/ui/login?ticket=")
    assert _server_pid(data_dir) == pid

    os.kill(pid, 15)
    wait_for(lambda: _gone(pid), "the background server to exit")
    assert not (data_dir / "server.json").exists()


# --- the page on a PostgreSQL vault (team mode) ------------------------------------------------
def test_the_page_works_on_a_postgresql_vault(hybrid_home, vault, pg_url):
    """Search, expand, facets, status and a re-index through the page's routes when the vault's
    index lives in PostgreSQL."""
    h = hybrid.open(hybrid_home, embedder="hash:64", store="postgresql")
    h.add_vault(vault, "vault")
    h.index()
    try:
        client = TestClient(build_app(h, port=PORT, owner_key=OWNER), base_url=BASE)
        sign_in(client)
        r = search(client, query="orders-created partitions")
        assert r.status_code == 200, r.text
        top = answer_passages(r.json())[0]
        assert top["path"] == "work/orders.md" and top["pin"] in ("literal", "verbatim")
        assert top["lexical_rank"] == 1 and top["fused_score"] is not None
        section = read(client, **{k: top[k] for k in ("vault", "path", "start_line", "end_line", "heading_path")})
        disk = (vault / "work/orders.md").read_text(encoding="utf-8").split("\n")
        body = section.json()
        assert body["lines"] == disk[body["start_line"] - 1:body["end_line"]]
        facets = client.get("/ui/api/facets").json()
        assert "kafka" in facets["tags"] and "work" in facets["folders"] and facets["sources"] == ["note"]
        status = client.get("/ui/api/status").json()["vaults"][0]
        assert status["store"] and status["notes"] == NOTES_IN_VAULT
        write(vault, "work/new.md", "# New\n\nA brand new zeppelin note.\n")
        job = client.post("/ui/api/reindex", json={"vault": "vault"}).json()
        wait_for(lambda: next(j for j in client.get("/ui/api/jobs").json()["jobs"] if j["id"] == job["id"])["state"]
                 != "running", "the re-index")
        done = next(j for j in client.get("/ui/api/jobs").json()["jobs"] if j["id"] == job["id"])
        assert done["state"] == "done" and done["summary"]["added"] == 1, done
        assert answer_passages(search(client, query="zeppelin").json())[0]["path"] == "work/new.md"
    finally:
        h.close()
