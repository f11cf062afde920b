"""Browser bookmark exports → one markdown document per bookmark.

:func:`read_bookmarks` reads the three export formats browsers and tools write, detected from
the file's content: Netscape bookmark HTML (every browser's "Export bookmarks"), a Firefox JSON
backup, and a plain JSON list of ``{url, title, …}``. :func:`documents` turns the bookmarks
(and the pages fetched for them, :mod:`hybrid.sources.fetch`) into :class:`VirtualDoc` s whose
text is markdown with YAML frontmatter: title, URL, folder, tags, the date added, and the
page's main text when it was fetched.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from hybrid.core.dates import utc_epoch
from hybrid.core.errors import VaultError
from hybrid.core.folding import fold
from hybrid.sources import VirtualDoc
from hybrid.sources.markdown import FENCE_RE

if TYPE_CHECKING:
    from hybrid.sources.fetch import Page

SUFFIX = ".bookmark"
MAX_BOOKMARKS = 200_000
MAX_DEPTH = 100
MAX_TITLE = 500
MAX_FILE_BYTES = 100 * 1024 * 1024
MAX_PART = 80
_FORMATS = ("expected Netscape bookmark HTML, a Firefox JSON backup "
            "or a JSON list of {url, title}")
_LAST_EPOCH = 253402300799.0  # 9999-12-31T23:59:59Z
_HEADING = re.compile(r"^( {0,3})(#{1,6})(?=\s|$)")
_HASHTAG = re.compile(r"(?:(?<=\s)|^)#(?=[A-Za-z0-9_\-/]*[A-Za-z_\-])")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_LEADING = re.compile(r"^[\s.]+")
# Firefox's built-in folders by their "root" key, named as its Library window shows them
_FIREFOX_ROOTS = {"bookmarksMenuFolder": "Bookmarks Menu", "toolbarFolder": "Bookmarks Toolbar",
                  "unfiledBookmarksFolder": "Other Bookmarks", "mobileFolder": "Mobile Bookmarks",
                  "placesRoot": ""}


@dataclass(frozen=True)
class Bookmark:
    """One bookmark: ``added`` is epoch seconds (None when unknown)."""
    url: str
    title: str
    folder: tuple[str, ...]
    tags: tuple[str, ...]
    added: float | None


class _Collector:
    """Bookmarks as they are found: http(s) only, titled, capped, with the warnings."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.items: list[Bookmark] = []
        self.not_http = 0
        self.over_cap = 0
        self.too_deep = False

    def add(self, url: Any, title: Any, folder: Iterable[str], tags: Iterable[str],
            added: float | None) -> None:
        url = str(url or "").strip()
        try:
            parts = urlsplit(url)
        except ValueError:
            parts = None
        if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            self.not_http += 1
            return
        if len(self.items) >= MAX_BOOKMARKS:
            self.over_cap += 1
            return
        name = _one_line(title)[:MAX_TITLE].strip()
        if not name:
            name = (parts.netloc.rsplit("@", 1)[-1] + parts.path).rstrip("/")[:MAX_TITLE]
        folder_t = tuple(f for f in (_one_line(x)[:MAX_TITLE].strip() for x in folder) if f)
        tag_t = tuple(dict.fromkeys(t for t in (_one_line(x)[:MAX_TITLE].strip() for x in tags) if t))
        self.items.append(Bookmark(url, name, folder_t[:MAX_DEPTH], tag_t, added))

    def warnings(self) -> list[str]:
        out = []
        if self.not_http:
            out.append(f"{self.path}: skipped {self.not_http:,} bookmarks that are not http(s) links")
        if self.over_cap:
            out.append(f"{self.path}: more than {MAX_BOOKMARKS:,} bookmarks; "
                       f"{self.over_cap:,} left out")
        if self.too_deep:
            out.append(f"{self.path}: folders nested deeper than {MAX_DEPTH} levels; "
                       f"their bookmarks are filed under level {MAX_DEPTH}")
        return out


def _one_line(value: Any) -> str:
    return " ".join(_CONTROL.sub(" ", str(value if value is not None else "")).split())


def _epoch(value: Any) -> float | None:
    """Seconds since the epoch from seconds, milliseconds or microseconds, an ISO date string,
    or None for anything else (zero, negative, beyond the year 9999)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            return _epoch(float(text))
        except ValueError:
            pass
        when = utc_epoch(text)
        return None if when is None else _epoch(when)
    if not isinstance(value, (int, float)):
        return None
    seconds = float(value)
    if seconds != seconds:
        return None
    if seconds > 1e14:
        seconds /= 1e6
    elif seconds > 1e11:
        seconds /= 1e3
    return seconds if 0 < seconds <= _LAST_EPOCH else None


def _split_tags(value: Any) -> list[str]:
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    if isinstance(value, (list, tuple)):
        return [str(t).strip() for t in value if t is not None and str(t).strip()]
    return []


class _NetscapeParser(HTMLParser):
    """Netscape bookmark HTML: ``<DL>`` opens the folder its preceding ``<H3>`` named."""

    def __init__(self, out: _Collector) -> None:
        super().__init__(convert_charrefs=True)
        self.out = out
        self.stack: list[str | None] = []
        self.depth = 0
        self.pending: str | None = None
        self.h3: list[str] | None = None
        self.anchor: dict[str, str | None] | None = None
        self.anchor_text: list[str] = []

    def folder(self) -> list[str]:
        return [f for f in self.stack if f]

    def finish_anchor(self) -> None:
        if self.anchor is not None:
            attrs = self.anchor
            self.anchor = None
            self.out.add(attrs.get("href"), "".join(self.anchor_text), self.folder(),
                         _split_tags(attrs.get("tags") or ""), _epoch(attrs.get("add_date")))
        self.anchor_text = []

    def finish_h3(self) -> None:
        if self.h3 is not None:
            self.pending = _one_line("".join(self.h3))
            self.h3 = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("a", "h3", "dl", "dt", "dd"):
            self.finish_anchor()
            self.finish_h3()
        if tag == "a":
            self.pending = None
            self.anchor = dict(attrs)
        elif tag == "h3":
            self.pending = None
            self.h3 = []
        elif tag == "dl":
            if self.pending and self.depth >= MAX_DEPTH:
                self.out.too_deep = True
                self.pending = None
            self.stack.append(self.pending)
            self.depth += bool(self.pending)
            self.pending = None

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self.finish_anchor()
        elif tag == "h3":
            self.finish_h3()
        elif tag == "dl":
            self.finish_anchor()
            self.finish_h3()
            self.pending = None
            if self.stack:
                self.depth -= bool(self.stack.pop())

    def handle_data(self, data: str) -> None:
        if self.anchor is not None:
            self.anchor_text.append(data)
        elif self.h3 is not None:
            self.h3.append(data)

    def close(self) -> None:
        super().close()
        self.finish_anchor()


def _read_netscape(text: str, out: _Collector) -> None:
    parser = _NetscapeParser(out)
    parser.feed(text)
    parser.close()


def _read_firefox_json(root: dict[str, Any], out: _Collector) -> None:
    stack: list[tuple[Any, tuple[str, ...]]] = [(root, ())]
    while stack:
        node, folder = stack.pop()
        if not isinstance(node, dict):
            continue
        kind = node.get("type")
        if kind == "text/x-moz-place":
            out.add(node.get("uri"), node.get("title"), folder, _split_tags(node.get("tags")),
                    _epoch(node.get("dateAdded")))
        elif kind == "text/x-moz-place-container" or "children" in node:
            special = node.get("root")
            title = _FIREFOX_ROOTS[special] if isinstance(special, str) and special in _FIREFOX_ROOTS \
                else _one_line(node.get("title"))
            if title:
                if len(folder) >= MAX_DEPTH:
                    out.too_deep = True
                else:
                    folder = (*folder, title)
            children = node.get("children")
            if isinstance(children, list):
                stack.extend((child, folder) for child in reversed(children))


def _read_json_list(items: list[Any], out: _Collector) -> int:
    """Reads the list's bookmarks; returns how many entries had no URL."""
    missing = 0
    for item in items:
        if not isinstance(item, dict):
            missing += 1
            continue
        url = item.get("url") or item.get("uri") or item.get("href")
        if not url:
            missing += 1
            continue
        folder = item.get("folder")
        parts = (folder.split("/") if isinstance(folder, str)
                 else [str(f) for f in folder] if isinstance(folder, (list, tuple)) else [])
        added = next((item[k] for k in ("added", "dateAdded", "date_added", "created") if k in item), None)
        out.add(url, item.get("title") or item.get("name"), parts, _split_tags(item.get("tags")),
                _epoch(added))
    return missing


def read_bookmarks(path: Path) -> tuple[list[Bookmark], list[str]]:
    """The http(s) bookmarks of an export file, in file order, and warnings about what was
    left out. Raises VaultError for a file that is missing, unreadable, too large or in no
    known format."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise VaultError(f"{path}: {size:,} bytes is over the {MAX_FILE_BYTES // 2**20} MB "
                             "limit for a bookmarks export")
        data = path.read_bytes()
    except FileNotFoundError:
        raise VaultError(f"{path}: no such bookmarks file") from None
    except IsADirectoryError:
        raise VaultError(f"{path}: is a folder, not a bookmarks export file") from None
    except OSError as exc:
        raise VaultError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if data.startswith(b"mozLz40\x00"):
        raise VaultError(f"{path}: a compressed Firefox backup (.jsonlz4); export the bookmarks as "
                         "HTML or JSON from Firefox's Library window (Import and Backup)")
    if b"\x00" in data[:8192]:
        raise VaultError(f"{path}: binary content, not a bookmarks export ({_FORMATS})")
    text = data.decode("utf-8-sig", errors="replace")
    out = _Collector(path)
    warnings: list[str] = []
    head = text.lstrip()[:1]
    if head in ("{", "["):
        try:
            loaded = json.loads(text)
        except RecursionError:
            raise VaultError(f"{path}: JSON nested too deeply to be a bookmarks export") from None
        except ValueError as exc:
            raise VaultError(f"{path}: not a bookmarks export ({_FORMATS}); "
                             f"invalid JSON: {str(exc).splitlines()[0][:200]}") from None
        if isinstance(loaded, dict) and (loaded.get("type") == "text/x-moz-place-container"
                                         or isinstance(loaded.get("children"), list)):
            _read_firefox_json(loaded, out)
        elif isinstance(loaded, list):
            missing = _read_json_list(loaded, out)
            if missing and missing == len(loaded):
                raise VaultError(f"{path}: not a bookmarks export ({_FORMATS}); "
                                 "no entry of the JSON list has a url")
            if missing:
                warnings.append(f"{path}: skipped {missing:,} entries without a url")
        else:
            raise VaultError(f"{path}: not a bookmarks export ({_FORMATS})")
    elif re.search(r"<!DOCTYPE\s+NETSCAPE-Bookmark-file", text[:4096], re.I) or (
            re.search(r"<dl\b", text, re.I) and re.search(r"<dt\b", text, re.I)):
        _read_netscape(text, out)
    else:
        raise VaultError(f"{path}: not a bookmarks export ({_FORMATS})")
    return out.items, out.warnings() + warnings


def _safe_part(part: str) -> str:
    part = unicodedata.normalize("NFC", part).replace("/", "-").replace("\\", "-")
    part = "".join(c for c in " ".join(part.split()) if unicodedata.category(c) != "Cc")
    part = _LEADING.sub("", part).strip()
    part = part[:MAX_PART].rstrip()
    return part or "untitled"


def bookmark_paths(bookmarks: Sequence[Bookmark]) -> list[str]:
    """The vault-relative path of each bookmark, in order: its folders and title made safe,
    ``.bookmark`` appended; a repeat (ignoring case) gets `` (2)``, `` (3)`` …"""
    seen: set[str] = set()
    out = []
    for b in bookmarks:
        stem = "/".join(_safe_part(p) for p in (*b.folder, b.title))
        path, n = stem + SUFFIX, 1
        while fold(path) in seen:
            n += 1
            path = f"{stem} ({n}){SUFFIX}"
        seen.add(fold(path))
        out.append(path)
    return out


def _day(epoch: float | None) -> dt.date | None:
    if epoch is None or not 0 < epoch <= _LAST_EPOCH:
        return None
    return dt.datetime.fromtimestamp(epoch, dt.UTC).date()


def _no_hashtags(line: str) -> str:
    """``#word`` escaped (``\\#word``) so a page's or title's prose adds no tags to the note."""
    return _HASHTAG.sub(r"\\#", line)


def _page_lines(text: str) -> list[str]:
    """The page's text with each heading one level lower (at most six ``#``) and no hashtag
    read as a tag; code blocks are kept as they are."""
    lines = []
    fence: str | None = None
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        m = FENCE_RE.match(line)
        if m:
            mark = m.group(1)
            if fence is None:
                fence = mark
            elif mark[0] == fence[0] and len(mark) >= len(fence) and not line.strip().strip(mark[0]):
                fence = None
            lines.append(line)
            continue
        if fence is not None:
            lines.append(line)
            continue
        h = _HEADING.match(line)
        if h:
            hashes = h.group(2) + ("#" if len(h.group(2)) < 6 else "")
            line = h.group(1) + hashes + _no_hashtags(line[h.end():])
        else:
            line = _no_hashtags(line)
        lines.append(line)
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def render(b: Bookmark, page: Page | None) -> str:
    """The bookmark as markdown with YAML frontmatter, followed by the fetched page's main
    text (its headings demoted, so the bookmark's title stays the only H1)."""
    import yaml

    meta: dict[str, Any] = {"title": b.title, "url": b.url}
    folder = " / ".join(b.folder)
    if folder:
        meta["folder"] = folder
    if b.tags:
        meta["tags"] = list(b.tags)
    day = _day(b.added)
    if day is not None:
        meta["created"] = day
        meta["updated"] = day
    fetched = _day(page.fetched_at) if page is not None and page.ok else None
    if fetched is not None:
        meta["fetched"] = fetched
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, default_flow_style=False,
                           width=1_000_000)
    lines = ["---", front.rstrip("\n"), "---", "", "# " + _no_hashtags(_one_line(b.title)), "", f"<{b.url}>"]
    if folder:
        lines += ["", "Folder: " + _no_hashtags(_one_line(folder))]
    if page is not None and page.ok and page.text.strip():
        lines += ["", *_page_lines(page.text)]
    return "\n".join(lines) + "\n"


def _constant(text: str) -> Callable[[], str]:
    return lambda: text


def documents(bookmarks: Sequence[Bookmark], pages: Mapping[str, Page]) -> list[VirtualDoc]:
    """One document per bookmark; its size and stamp change exactly when its text does."""
    docs = []
    for b, path in zip(bookmarks, bookmark_paths(bookmarks)):
        text = render(b, pages.get(b.url))
        data = text.encode()
        stamp = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big") >> 1
        docs.append(VirtualDoc(path=path, size=len(data), stamp=stamp, load=_constant(text)))
    return docs
