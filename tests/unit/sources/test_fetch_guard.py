"""Fetching bookmarked pages never reaches inside (hybrid.sources.fetch): link-local and cloud
metadata addresses are refused always, loopback and private ones unless ``fetch_private``,
directly or by redirect, however the address is spelled, and before any request is made;
robots.txt is asked of every host a redirect reaches; a name that resolves differently when the
connection is made (DNS rebinding) is refused too.

Without sockets: httpx's MockTransport records every request and a fake resolver (socket.
getaddrinfo patched) answers names. With sockets: HTTP servers on 127.0.0.1 started and stopped
by each test."""
import socket
import threading
from http.server import BaseHTTPRequestHandler
from urllib.parse import quote

import httpx
import pytest
from helpers import local_server, write

import hybrid
from hybrid.sources.fetch import fetch_pages, skipped_summary
from hybrid.sources.netguard import METADATA, PRIVATE, PRIVATE_HINT, ROBOTS

PUBLIC = "93.184.215.14"  # a public address; no test connects to it
NAMES = {"public.example": [PUBLIC], "internal.example": ["10.1.2.3"],
         "imds.example": ["169.254.169.254"], "mixed.example": ["93.184.215.15", "10.0.0.5"]}
# Every spelling of an address that is refused whatever fetch_private says.
METADATA_URLS = [
    "http://169.254.169.254/latest/meta-data/",
    "http://2852039166/",                  # decimal
    "http://0xa9fea9fe/",                  # hex
    "http://0xa9.0xfe.0xa9.0xfe/",         # dotted hex
    "http://0251.254.43518/",              # octal, short form
    "http://169.254.43518/",               # short form
    "http://169.254.169.254./",            # trailing dot
    "http://[::ffff:169.254.169.254]/",    # IPv4-mapped IPv6
    "http://[::ffff:a9fe:a9fe]/",
    "http://[::169.254.169.254]/",         # IPv4-compatible IPv6
    "http://[64:ff9b::a9fe:a9fe]/",        # NAT64
    "http://public.example@169.254.169.254/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://METADATA.Google.Internal./",
    "http://imds.example/",                # a name that resolves to it
    "http://[fe80::1]/",
    "http://[fd00:ec2::254]/",             # AWS's IMDS over IPv6
    "http://100.100.100.200/",             # Alibaba
    "http://168.63.129.16/machine/",       # Azure's wireserver: a public address
    "http://[fd20:ce::254]/",              # Google's metadata server over IPv6
    "http://192.0.0.192/",                 # Oracle's older metadata address
    "http://[64:ff9b:1::a9fe:a9fe]/",      # local-use NAT64
    "http://[64:ff9b:1:a9fe:a9:fe00::]/",  # its /48 layout (RFC 6052)
    "http://[64:ff9b:1:0:a9:fea9:fe00:0]/",  # its /64 layout
    "http://[64:ff9b:1:a83f:81:1000::]/",  # 168.63.129.16 in the /48 layout
    "http://[2001:0:4136:e378:8000:63bf:5601:5601]/",  # Teredo, its client 169.254.169.254
    "http://[2002:a83f:8110::1]/",         # 6to4 of 168.63.129.16
    "http://[::ffff:0:a9fe:a9fe]/",        # IPv4-translated (::ffff:0:0/96, SIIT)
    "http://[::ffff:0:168.63.129.16]/",
]
# Refused unless fetch_private = true.
PRIVATE_URLS = [
    "http://10.0.0.1/", "http://127.0.0.1:8080/admin", "http://[::1]/", "http://127.1/",
    "http://0x7f000001/", "http://0/", "http://[::]/", "http://100.64.0.1/", "http://192.168.1.1/",
    "http://[fc00::1]/", "http://224.0.0.1/", "http://internal.example/",
    "http://192.0.0.8/",                   # IETF protocol assignments: older ipaddress calls it global
    "http://[3fff::1]/",                   # documentation (2024): older ipaddress calls it global
    "http://mixed.example/",               # one private address among public ones is enough
    "http://[::ffff:0:8.8.8.8]/",          # IPv4-translated: not routed as its IPv4 address is
]


def fake_getaddrinfo(table, calls):
    """socket.getaddrinfo answering the names in ``table`` (a list of addresses, or a function
    of how many times the name was asked) and IP literals as the real one does; any other name
    is not found. Every question is counted in ``calls``."""
    real = socket.getaddrinfo

    def getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
        host = host.decode() if isinstance(host, bytes) else host
        calls[host] = calls.get(host, 0) + 1
        if host in table:
            answer = table[host]
            addresses = answer(calls[host]) if callable(answer) else answer
            return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "",
                     (a, port, 0, 0) if ":" in a else (a, port)) for a in addresses]
        try:
            return real(host, port, family, type, proto, flags | socket.AI_NUMERICHOST)
        except socket.gaierror:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None
    return getaddrinfo


@pytest.fixture
def resolver(monkeypatch):
    calls: dict[str, int] = {}
    table = dict(NAMES)
    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo(table, calls))
    return table, calls


def mock_site():
    """A MockTransport for public.example (``/r?to=URL`` redirects there) that answers any
    other host with a page, and the list of requests it saw."""
    seen: list[httpx.URL] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url)
        if request.url.path == "/robots.txt":
            return httpx.Response(404)
        if request.url.path == "/r":
            return httpx.Response(302, headers={"Location": request.url.params["to"]})
        return httpx.Response(200, text=f"inside {request.url.host}",
                              headers={"Content-Type": "text/plain"})
    return httpx.MockTransport(handle), seen


def redirect(target: str) -> str:
    return "http://public.example/r?to=" + quote(target, safe="")


@pytest.mark.parametrize("target", METADATA_URLS)
def test_metadata_refused_direct_and_by_redirect_even_with_fetch_private(resolver, target):
    host = httpx.URL(target).host
    for private in (False, True):
        transport, seen = mock_site()
        pages = fetch_pages([target, redirect(target), "http://public.example/ok"],
                            transport=transport, private=private)
        assert pages["http://public.example/ok"].ok  # the guard lets public pages through
        direct, redirected = pages[target], pages[redirect(target)]
        assert not direct.ok and direct.error.startswith(f"refused: {METADATA} ")
        assert not redirected.ok and redirected.error.startswith("redirect to ")
        assert f": refused: {METADATA} " in redirected.error
        assert {u.host for u in seen} == {"public.example"}, host  # never asked, not even robots.txt


@pytest.mark.parametrize("target", PRIVATE_URLS)
def test_private_refused_unless_fetch_private(resolver, target):
    host = httpx.URL(target).host
    transport, seen = mock_site()
    pages = fetch_pages([target, redirect(target)], transport=transport)
    direct, redirected = pages[target], pages[redirect(target)]
    assert not direct.ok and direct.error.startswith(f"refused: {PRIVATE} ")
    assert direct.error.endswith(f"({PRIVATE_HINT})")
    assert not redirected.ok and f": refused: {PRIVATE} " in redirected.error
    assert {u.host for u in seen} == {"public.example"}

    transport, seen = mock_site()
    pages = fetch_pages([target, redirect(target)], transport=transport, private=True)
    assert pages[target].ok and pages[redirect(target)].ok
    assert pages[target].text == f"inside {host}"
    assert [u for u in seen if u.host == host and u.path != "/robots.txt"] == [httpx.URL(target)] * 2


def test_redirect_to_other_schemes_refused(resolver):
    transport, seen = mock_site()
    url = redirect("gopher://127.0.0.1:6379/_FLUSHALL")
    pages = fetch_pages([url], transport=transport, private=True)
    assert pages[url].error == "redirect to gopher://127.0.0.1:6379/_FLUSHALL: not an http(s) URL"
    assert all(u.scheme == "http" for u in seen)


# --- with sockets: servers on 127.0.0.1 --------------------------------------------------------

class Site(BaseHTTPRequestHandler):
    """``/go?to=URL`` redirects; ``/internal`` is what must not leak; ``robots.txt`` disallows
    ``/private`` when the server's ``robots`` says so."""
    hits: dict[str, int]
    lock = threading.Lock()
    robots = ""

    def do_GET(self):
        with self.lock:
            self.hits[self.path] = self.hits.get(self.path, 0) + 1
        path, _, query = self.path.partition("?")
        if path == "/go":
            self.send_response(302)
            self.send_header("Location", query.removeprefix("to="))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = {"/robots.txt": self.robots, "/internal": "internal zanzibar credentials page",
                "/private/page": "private zanzibar page", "/open": "open page"}.get(path)
        self.send_response(404 if body is None else 200)
        data = (body or "").encode()
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def site(robots: str = ""):
    handler = type("SiteCopy", (Site,), {"hits": {}, "robots": robots})
    return local_server(handler), handler


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_bookmark_redirecting_to_local_port_is_not_fetched_or_indexed(tmp_path):
    first, first_hits = site()
    inner, inner_hits = site()
    with first as a, inner as b:
        mark = f"{a.url}/go?to={b.url}/internal"
        export = write(tmp_path, "bookmarks.json", f'[{{"url": "{mark}", "title": "Harmless page"}}]')
        h = hybrid.open(tmp_path / "home", embedder="hash:64")
        h.add_source("bookmarks", export, "reading")
        report = h.index(fetch="new")[0]
        assert (report.fetched, report.fetch_failed) == (0, 1)
        assert inner_hits.hits == {} and first_hits.hits == {}
        assert f"{mark}: not fetched (refused: {PRIVATE} 127.0.0.1 ({PRIVATE_HINT})); " \
               "indexed by its title" in report.warnings
        assert f"fetch (reading): 1 page skipped: 1 {PRIVATE} ({PRIVATE_HINT})" in report.warnings
        assert h.search("zanzibar credentials", mode="lexical") == []
        # the same bookmark with fetch_private = true: the setup is live, the page is reached
        allowed = hybrid.open(tmp_path / "home", embedder="hash:64", fetch_private=True)
        assert allowed.index(fetch="new")[0].fetched == 1
        assert inner_hits.hits["/internal"] == 1
        assert allowed.search("zanzibar credentials", mode="lexical")[0].title == "Harmless page"


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_redirect_to_metadata_name_refused_before_connecting(resolver):
    table, calls = resolver
    first, _ = site()
    inner, inner_hits = site()
    with first as a, inner as b:
        table["metadata.google.internal"] = ["127.0.0.1"]  # here, the metadata service is b
        port = b.server_address[1]
        url = f"{a.url}/go?to=http://metadata.google.internal:{port}/internal"
        page = fetch_pages([url], private=True, timeout=5)[url]
    assert not page.ok and page.error == (f"redirect to http://metadata.google.internal:{port}/internal: "
                                          f"refused: {METADATA} metadata.google.internal")
    assert inner_hits.hits == {} and "metadata.google.internal" not in calls


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_robots_txt_of_the_host_a_redirect_reaches_is_honoured():
    first, first_hits = site()
    inner, inner_hits = site(robots="User-agent: *\nDisallow: /private\n")
    with first as a, inner as b:
        refused, fine = f"{a.url}/go?to={b.url}/private/page", f"{a.url}/go?to={b.url}/open"
        pages = fetch_pages([refused, fine], private=True, timeout=5, concurrency=1)
    assert pages[refused].error == f"redirect to {b.url}/private/page: disallowed by robots.txt"
    assert pages[fine].ok and pages[fine].text == "open page"
    assert "/private/page" not in inner_hits.hits
    assert inner_hits.hits["/robots.txt"] == 1 and first_hits.hits["/robots.txt"] == 1  # once a host
    assert skipped_summary(pages.values()) == f"1 page skipped: 1 {ROBOTS}"


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("robots", [True, False])
def test_dns_rebinding_is_refused_where_the_connection_is_made(resolver, robots):
    """The name answers a public address once, then 127.0.0.1 (a zero-TTL rebinding attack):
    the page's check before its request passes, its connection re-checks and refuses."""
    table, calls = resolver
    table["rebind.test"] = lambda n: [PUBLIC] if n == 1 else ["127.0.0.1"]
    inner, inner_hits = site()
    with inner as b:
        url = f"http://rebind.test:{b.server_address[1]}/internal"
        page = fetch_pages([url], timeout=1, robots=robots)[url]
    assert not page.ok and page.error == f"refused: {PRIVATE} 127.0.0.1 for rebind.test ({PRIVATE_HINT})"
    assert inner_hits.hits == {}
    # the page's check, (robots.txt's check, refused,) the page's connection: refused there
    assert calls["rebind.test"] == (3 if robots else 2)
