"""Fetch bookmarked pages' main text, once, when asked (never in the background).

:func:`fetch_pages` downloads each http(s) URL with a few workers and at most ``per_host``
requests to one host at a time, honours robots.txt, stops a body at ``max_bytes``, and reduces
what it got to text: an HTML page to its main text as markdown (trafilatura: navigation, ads
and footers left out), plain text and markdown as they are, a PDF to the text of its pages.
One page's failure is that page's :class:`Page` (``ok=False`` and a one-line ``error``); the
call never raises for it.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any
from urllib.parse import urlsplit

from ..catalog import FetchedRow as Page


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
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_\-:.]+)""", re.I)


class _Failed(Exception):
    """One page's failure; its message is the page's error."""

    def __init__(self, error: str, status: int | None = None, content_type: str = "") -> None:
        super().__init__(error)
        self.status = status
        self.content_type = content_type


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


def _html_text(html: str) -> tuple[str, str]:
    """(main text as markdown, title) of an HTML page, as a saved page in a vault is read."""
    from .convert import main_text
    return main_text(html)


def _pdf_text(data: bytes) -> tuple[str, str]:
    """(text of every page, blank lines between pages, title) of a PDF."""
    from .pdf import Unreadable, metadata_title, page_texts

    texts: list[str] = []
    chars = 0
    try:
        for _number, text in page_texts(data, "PDF"):
            if text.strip():
                texts.append(text)
                chars += len(text)
            if chars > MAX_TEXT_CHARS:
                break
        title = metadata_title(data, "PDF")
    except Unreadable as exc:
        why = str(exc).removeprefix("PDF: ").removesuffix("; skipped")
        raise _Failed(f"unreadable PDF: {why}") from None
    return "\n\n".join(texts), title


def _cap(text: str) -> str:
    return text[:MAX_TEXT_CHARS] if len(text) > MAX_TEXT_CHARS else text


class _Fetcher:
    """One fetch run: the client, the per-host limits and the robots.txt cache."""

    def __init__(self, client: Any, *, timeout: float, max_bytes: int, per_host: int,
                 user_agent: str, robots: bool) -> None:
        self.client = client
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

    def _download(self, url: str, limit: int) -> tuple[Any, bytes, str]:
        """(response, body, content type) of a 2xx response; _Failed otherwise."""
        budget = max(self.timeout * 4, 30.0)
        deadline = time.monotonic() + budget
        with self.client.stream("GET", url) as resp:
            ctype = resp.headers.get("content-type", "").split(";")[0].strip().lower()
            if not 200 <= resp.status_code < 300:
                raise _Failed(f"HTTP {resp.status_code}", resp.status_code, ctype)
            declared = resp.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                raise _Failed(f"larger than {limit:,} bytes; not indexed", resp.status_code, ctype)
            chunks: list[bytes] = []
            size = 0
            for chunk in resp.iter_bytes():
                size += len(chunk)
                if size > limit:
                    raise _Failed(f"larger than {limit:,} bytes; not indexed", resp.status_code, ctype)
                chunks.append(chunk)
                if time.monotonic() > deadline:
                    raise _Failed(f"timed out after {budget:g} s", resp.status_code, ctype)
            return resp, b"".join(chunks), ctype

    def allowed(self, url: str, origin: str) -> bool:
        """Whether robots.txt at ``origin`` lets us fetch ``url`` (fetched once per origin; a
        missing or unreadable robots.txt allows everything)."""
        from urllib.robotparser import RobotFileParser

        with self._robots_lock(origin):
            if origin not in self.robot_rules:
                rules: RobotFileParser | None = None
                try:
                    _resp, body, _ctype = self._download(origin + "/robots.txt", MAX_ROBOTS_BYTES)
                    rules = RobotFileParser()
                    rules.parse(body.decode("utf-8", errors="replace").splitlines())
                except Exception:  # noqa: BLE001 - no usable robots.txt: nothing is disallowed
                    rules = None
                self.robot_rules[origin] = rules
            rules = self.robot_rules[origin]
        return rules is None or rules.can_fetch(self.user_agent, url)

    def fetch(self, url: str) -> Page:
        """The page at ``url``; never raises."""
        try:
            parts = urlsplit(url)
            scheme = parts.scheme.lower()
            host = parts.hostname
        except ValueError:
            return Page(url, ok=False, error="not an http(s) URL")
        if scheme not in ("http", "https") or not host:
            return Page(url, ok=False, error="not an http(s) URL")
        origin = f"{scheme}://{parts.netloc.rsplit('@', 1)[-1].lower()}"
        import httpx

        with self._host_gate(origin):
            try:
                if self.robots and not self.allowed(url, origin):
                    return Page(url, ok=False, error="disallowed by robots.txt", fetched_at=time.time())
                resp, body, ctype = self._download(url, self.max_bytes)
                return self._page(url, resp, body, ctype)
            except _Failed as exc:
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
            text, title = _html_text(html)
        elif ctype in TEXT_TYPES:
            text = body.decode(_charset(ctype, body, resp.charset_encoding), errors="replace")
            title = ""
        elif ctype in PDF_TYPES:
            text, title = _pdf_text(body)
        else:
            raise _Failed(f"unsupported content type {ctype or '(none)'}", status, ctype)
        text = _cap(text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", ""))
        return Page(url, ok=True, title=title, text=text, status=status, fetched_at=time.time(),
                    content_type=ctype)


def fetch_pages(urls: Sequence[str], *, timeout: float = 15.0, max_bytes: int = 5_000_000,
                concurrency: int = 4, per_host: int = 2, user_agent: str = USER_AGENT,
                robots: bool = True, progress: Callable[[int, int], None] | None = None
                ) -> dict[str, Page]:
    """Fetch each distinct URL once: ``{url: Page}``. ``progress(done, total)`` is called after
    each page. No page's failure raises."""
    import httpx

    todo = list(dict.fromkeys(urls))
    total = len(todo)
    out: dict[str, Page] = {}
    if not todo:
        return out
    workers = max(1, min(concurrency, total))
    limits = httpx.Limits(max_connections=max(workers, 1) + 2, max_keepalive_connections=workers)
    with httpx.Client(follow_redirects=True, max_redirects=5, timeout=httpx.Timeout(timeout),
                      headers={"User-Agent": user_agent}, limits=limits) as client:
        fetcher = _Fetcher(client, timeout=timeout, max_bytes=max_bytes, per_host=per_host,
                           user_agent=user_agent, robots=robots)
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
