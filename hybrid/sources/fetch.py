"""Fetch bookmarked pages' main text, once, when asked (never in the background).

:func:`fetch_pages` downloads each http(s) URL with a few workers and at most ``per_host``
requests to one host at a time, honours robots.txt, stops a body at ``max_bytes``, and reduces
what it got to text: an HTML page to its main text as markdown (trafilatura: navigation, ads
and footers left out), plain text and markdown as they are, a PDF to the text of its pages.
One page's failure is that page's :class:`Page` (``ok=False`` and a one-line ``error``); the
call never raises for it.

A bookmark is a URL someone else chose, so fetching must not reach inside (SSRF): redirects are
followed here, one hop at a time, and before every hop :class:`Guard` resolves the host and
refuses link-local and cloud metadata addresses always, loopback and private ones unless
``private`` (the ``fetch_private`` setting); robots.txt is asked of every host a redirect
reaches. The connections themselves are made by :class:`GuardedBackend`, which resolves and
checks again and connects only to the addresses it checked, so a name that answers a public
address to the check and a private one to the connection (DNS rebinding) is refused too.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from hybrid.sources import FetchedPage as Page
from hybrid.sources.netguard import METADATA, PRIVATE, PRIVATE_HINT, ROBOTS, Failed, Guard, Refused, guarded_transport


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("hybrid")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        return "0"


USER_AGENT = f"hybrid/{_version()} (local bookmark indexer; fetches each page once on request)"
MAX_TEXT_CHARS = 1_000_000
MAX_ROBOTS_BYTES = 512 * 1024
HTML_TYPES = ("text/html", "application/xhtml+xml")
TEXT_TYPES = ("text/plain", "text/markdown", "text/x-markdown")
PDF_TYPES = ("application/pdf",)
MAX_REDIRECTS = 5
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_\-:.]+)""", re.I)

def skipped_summary(pages: Iterable[Page]) -> str:
    """One line counting the pages not fetched on purpose, by why ('' when none), e.g. ``3
    pages skipped: 2 private address (set fetch_private = true to allow), 1 link-local/metadata
    address``."""
    counts = dict.fromkeys((METADATA, PRIVATE, ROBOTS), 0)
    for page in pages:
        why = page.error
        if page.ok or not why:
            continue
        if "refused: " in why and METADATA in why:
            counts[METADATA] += 1
        elif "refused: " in why and PRIVATE in why:
            counts[PRIVATE] += 1
        elif why.endswith(ROBOTS):
            counts[ROBOTS] += 1
    total = sum(counts.values())
    if not total:
        return ""
    shown = {PRIVATE: f"{PRIVATE} ({PRIVATE_HINT})"}
    parts = [f"{n} {shown.get(kind, kind)}" for kind, n in
             sorted(counts.items(), key=lambda kv: -kv[1]) if n]
    return f"{total} page{'s' if total != 1 else ''} skipped: " + ", ".join(parts)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def _network_error(exc: Exception, timeout: float) -> str:
    """A one-line description of an httpx error."""
    import httpx

    if isinstance(exc, httpx.TimeoutException):
        return f"timed out after {timeout:g} s"
    if isinstance(exc, httpx.TooManyRedirects):
        return "too many redirects"
    why = _first_line(exc)
    low = why.lower()
    if isinstance(exc, httpx.ConnectError):
        if "refused" in low:
            return "connection refused"
        if "name or service not known" in low or "nodename nor servname" in low \
                or "getaddrinfo" in low or "no address associated" in low:
            return "host not found"
        if "certificate" in low or "ssl" in low:
            return f"TLS error: {why}"
        return f"cannot connect: {why}"
    if isinstance(exc, (httpx.InvalidURL, httpx.UnsupportedProtocol)):
        return f"invalid URL: {why}"
    return f"network error: {why}"


def _charset(content_type: str, head: bytes, declared: str | None) -> str:
    import codecs

    candidates = [declared]
    if content_type in HTML_TYPES:
        m = _META_CHARSET.search(head[:4096])
        if m:
            candidates.append(m.group(1).decode("ascii", "replace"))
    for name in candidates:
        if name:
            try:
                return codecs.lookup(name).name
            except LookupError:
                continue
    return "utf-8"


def _html_text(html: str, limits: Any = None) -> tuple[str, str]:
    """(main text as markdown, title) of an HTML page, as a saved page in a vault is read (by
    the converter worker, under its memory and time bounds ``limits``)."""
    from hybrid.sources.convert import main_text
    from hybrid.sources.sandbox import ConvertError
    try:
        return main_text(html, limits=limits)
    except ConvertError as exc:  # no text, or over convert_max_memory_mb / convert_timeout
        raise Failed(exc.reason) from None


def _pdf_text(data: bytes, limits: Any = None) -> tuple[str, str]:
    """(text of every page, blank lines between pages, title) of a PDF (read by the converter
    worker, under its memory and time bounds ``limits``)."""
    from hybrid.sources.pdf import Unreadable, pdf_text
    from hybrid.sources.sandbox import ConvertError

    try:
        got = pdf_text(data, "PDF", MAX_TEXT_CHARS, limits)
    except Unreadable as exc:
        raise Failed(f"unreadable PDF: {exc.reason}") from None
    except ConvertError as exc:
        raise Failed(exc.reason) from None
    return "\n\n".join(text for _, text in got.texts if text.strip()), got.title


def _cap(text: str) -> str:
    return text[:MAX_TEXT_CHARS] if len(text) > MAX_TEXT_CHARS else text


class _Fetcher:
    """One fetch run: the client, the address guard, the per-host limits and the robots.txt
    cache."""

    def __init__(self, client: Any, guard: Guard, *, timeout: float, max_bytes: int,
                 per_host: int, user_agent: str, robots: bool, convert: Any = None) -> None:
        self.client = client
        self.convert = convert  # the converter's bounds (sources.convert.Limits), None: defaults
        self.guard = guard
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.per_host = max(1, per_host)
        self.user_agent = user_agent
        self.robots = robots
        self.lock = threading.Lock()
        self.hosts: dict[str, threading.Semaphore] = {}
        self.robot_locks: dict[str, threading.Lock] = {}
        self.robot_rules: dict[str, Any] = {}

    def _host_gate(self, origin: str) -> threading.Semaphore:
        with self.lock:
            if origin not in self.hosts:
                self.hosts[origin] = threading.Semaphore(self.per_host)
            return self.hosts[origin]

    def _robots_lock(self, origin: str) -> threading.Lock:
        with self.lock:
            return self.robot_locks.setdefault(origin, threading.Lock())

    def _download(self, url: Any, limit: int) -> Any:
        """(response, body, content type) of a 2xx response, or the URL a redirect points to;
        Failed otherwise."""
        budget = max(self.timeout * 4, 30.0)
        deadline = time.monotonic() + budget
        with self.client.stream("GET", url) as resp:
            if resp.next_request is not None:  # a redirect, not followed by the client
                return resp.next_request.url
            ctype = resp.headers.get("content-type", "").split(";")[0].strip().lower()
            if not 200 <= resp.status_code < 300:
                raise Failed(f"HTTP {resp.status_code}", resp.status_code, ctype)
            declared = resp.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                raise Failed(f"larger than {limit:,} bytes; not indexed", resp.status_code, ctype)
            chunks: list[bytes] = []
            size = 0
            for chunk in resp.iter_bytes():
                size += len(chunk)
                if size > limit:
                    raise Failed(f"larger than {limit:,} bytes; not indexed", resp.status_code, ctype)
                chunks.append(chunk)
                if time.monotonic() > deadline:
                    raise Failed(f"timed out after {budget:g} s", resp.status_code, ctype)
            return resp, b"".join(chunks), ctype

    def _get(self, url: str, limit: int, *, page: bool) -> tuple[Any, bytes, str]:
        """(response, body, content type) of ``url``, following at most MAX_REDIRECTS
        redirects. Before each request its address is checked; for a page (not a robots.txt)
        robots.txt of the host it reaches is asked, and that host's gate is held."""
        import httpx

        try:
            target = httpx.URL(url)
        except (httpx.InvalidURL, UnicodeError, ValueError) as exc:
            raise Failed(f"invalid URL: {_first_line(exc)}") from None
        for hop in range(MAX_REDIRECTS + 1):
            try:
                origin = self._checked(target)
                gate: AbstractContextManager[Any] = self._host_gate(origin) if page else nullcontext()
                with gate:
                    if page and self.robots and not self.allowed(str(target), origin):
                        raise Refused(ROBOTS)
                    got = self._download(target, limit)
            except Refused as exc:
                if hop:
                    raise Refused(f"redirect to {_shown(target)}: {exc}") from None
                raise
            if isinstance(got, tuple):
                return got
            target = got
        raise Failed("too many redirects")

    def _checked(self, url: Any) -> str:
        """The origin (``scheme://host[:port]``) of ``url`` when it may be requested;
        Refused (or Failed: the host does not resolve) when not."""
        scheme = url.scheme
        host = url.raw_host.decode("ascii")
        if scheme not in ("http", "https") or not host:
            raise Refused("not an http(s) URL")
        self.guard.addresses(host, url.port or (443 if scheme == "https" else 80))
        return f"{scheme}://{url.netloc.decode('ascii')}"

    def allowed(self, url: str, origin: str) -> bool:
        """Whether robots.txt at ``origin`` lets us fetch ``url`` (fetched once per origin; a
        missing or unreadable robots.txt allows everything)."""
        from urllib.robotparser import RobotFileParser

        with self._robots_lock(origin):
            if origin not in self.robot_rules:
                rules: RobotFileParser | None = None
                try:
                    _resp, body, _ctype = self._get(origin + "/robots.txt", MAX_ROBOTS_BYTES, page=False)
                    rules = RobotFileParser()
                    rules.parse(body.decode("utf-8", errors="replace").splitlines())
                except Exception:  # noqa: BLE001 - no usable robots.txt: nothing is disallowed
                    rules = None
                self.robot_rules[origin] = rules
            rules = self.robot_rules[origin]
        return rules is None or rules.can_fetch(self.user_agent, url)

    def fetch(self, url: str) -> Page:
        """The page at ``url``; never raises."""
        import httpx

        try:
            resp, body, ctype = self._get(url, self.max_bytes, page=True)
            return self._page(url, resp, body, ctype)
        except Failed as exc:
            return Page(url, ok=False, error=str(exc), status=exc.status,
                        content_type=exc.content_type, fetched_at=time.time())
        except httpx.HTTPError as exc:
            return Page(url, ok=False, error=_network_error(exc, self.timeout), fetched_at=time.time())
        except Exception as exc:  # noqa: BLE001 - one page's failure is that page's
            return Page(url, ok=False, error=f"{type(exc).__name__}: {_first_line(exc)}",
                        fetched_at=time.time())

    def _page(self, url: str, resp: Any, body: bytes, ctype: str) -> Page:
        status = resp.status_code
        if not ctype:
            head = body[:1024].lstrip().lower()
            ctype = "application/pdf" if body.startswith(b"%PDF-") else \
                "text/html" if head.startswith((b"<!doctype html", b"<html")) else ""
        if ctype in HTML_TYPES:
            html = body.decode(_charset(ctype, body, resp.charset_encoding), errors="replace")
            text, title = _html_text(html, self.convert)
        elif ctype in TEXT_TYPES:
            text = body.decode(_charset(ctype, body, resp.charset_encoding), errors="replace")
            title = ""
        elif ctype in PDF_TYPES:
            text, title = _pdf_text(body, self.convert)
        else:
            raise Failed(f"unsupported content type {ctype or '(none)'}", status, ctype)
        text = _cap(text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", ""))
        return Page(url, ok=True, title=title, text=text, status=status, fetched_at=time.time(),
                    content_type=ctype)


def _shown(url: Any) -> str:
    """``url`` for an error line: no user info, at most 120 characters."""
    text = f"{url.scheme}://{url.netloc.decode('ascii')}{url.raw_path.decode('ascii')}"
    return text if len(text) <= 120 else text[:119] + "…"


def fetch_pages(urls: Sequence[str], *, timeout: float = 15.0, max_bytes: int = 5_000_000,
                concurrency: int = 4, per_host: int = 2, user_agent: str = USER_AGENT,
                robots: bool = True, private: bool = False,
                progress: Callable[[int, int], None] | None = None,
                transport: Any = None, convert: Any = None) -> dict[str, Page]:
    """Fetch each distinct URL once: ``{url: Page}``. ``progress(done, total)`` is called after
    each page. No page's failure raises.

    ``private`` lets pages on loopback and private-network addresses be fetched (the
    ``fetch_private`` setting); link-local and cloud metadata addresses are refused whatever it
    says. ``convert``: the bounds pages are converted under
    (:func:`hybrid.sources.sandbox.convert_limits`; default: those of the default settings).
    ``transport`` replaces the network (tests: an ``httpx.MockTransport``); addresses are
    still checked before each request. Proxies from the environment are not used: the
    addresses checked must be the ones connected to."""
    import httpx

    todo = list(dict.fromkeys(urls))
    total = len(todo)
    out: dict[str, Page] = {}
    if not todo:
        return out
    workers = max(1, min(concurrency, total))
    limits = httpx.Limits(max_connections=max(workers, 1) + 2, max_keepalive_connections=workers)
    guard = Guard(private)
    # Redirects are followed by _Fetcher, each hop checked; a transport given here also means
    # httpx mounts no proxies from the environment.
    with httpx.Client(transport=transport or guarded_transport(guard, limits),
                      follow_redirects=False, timeout=httpx.Timeout(timeout),
                      headers={"User-Agent": user_agent}) as client:
        fetcher = _Fetcher(client, guard, timeout=timeout, max_bytes=max_bytes, per_host=per_host,
                           user_agent=user_agent, robots=robots, convert=convert)
        with ThreadPoolExecutor(workers, thread_name_prefix="hybrid-fetch") as pool:
            futures = {pool.submit(fetcher.fetch, url): url for url in todo}
            for done, future in enumerate(as_completed(futures), 1):
                url = futures[future]
                try:
                    out[url] = future.result()
                except Exception as exc:  # noqa: BLE001 - fetch() never raises; belt and braces
                    out[url] = Page(url, ok=False, error=f"{type(exc).__name__}: {_first_line(exc)}")
                if progress is not None:
                    progress(done, total)
    return {url: out[url] for url in todo}
