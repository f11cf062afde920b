"""A Slack export (the zip, or the folder it unpacks to) → one markdown document per channel per day.

Slack's standard export holds ``users.json``, ``channels.json`` (public channels), optionally
``groups.json`` (private ones), and per channel a folder of day files ``<channel>/YYYY-MM-DD.json``.
Each day file becomes a :class:`hybrid.sources.VirtualDoc` at ``<channel>/<date>.slack`` whose
text is markdown with YAML frontmatter: a ``## `` section per thread, and per run of messages
outside threads (a new run after a 30-minute pause), so the chunker cuts along conversations.
Direct messages (``dms.json``, ``mpims.json``) are left out.

The export is untrusted input: nothing is extracted to disk, zip members with unsafe names are
ignored, the number of day files and a day file's size are capped, and a day file is read only
when its document is loaded.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import threading
import zipfile
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from hybrid.core.errors import VaultError
from hybrid.sources import VirtualDoc

MAX_DAY_FILES = 100_000
MAX_DAY_BYTES = 50 * 1024 * 1024
MAX_META_BYTES = 200 * 1024 * 1024
MAX_WARNINGS = 100
RUN_GAP_SECONDS = 30 * 60
HEADING_WORDS = 8
HEADING_CHARS = 100
NAME_CHARS = 100

META_FILES = ("users.json", "channels.json", "groups.json")
NOISE_SUBTYPES = frozenset(
    f"{kind}_{event}" for kind in ("channel", "group")
    for event in ("join", "leave", "purpose", "topic", "name", "archive", "unarchive"))
BROADCASTS = frozenset({"here", "channel", "everyone"})

_DAY_RE = re.compile(r"(\d{4}-\d{2}-\d{2})\.json")
_UNSAFE_CHARS_RE = re.compile(r"[/\\\x00-\x1f\x7f]")
_MARKUP_RE = re.compile(r"<([^<>\n]{1,4000})>|&(amp|lt|gt);")
_ENTITIES = {"amp": "&", "lt": "<", "gt": ">"}
_BLOCK_START_RE = re.compile(r"\s*(#|`{3}|~{3})")


_READ_ERRORS = (OSError, zipfile.BadZipFile, zlib.error, RuntimeError, KeyError, EOFError)


class _TooLarge(Exception):
    pass


@dataclass(frozen=True)
class _Member:
    """One file of the export: where to read it, its size, and what says it changed."""
    where: str
    size: int
    sig: str


_Listing = tuple[dict[str, _Member], dict[tuple[str, str], _Member]]


@dataclass(frozen=True)
class _Day:
    folder: str
    channel: str
    date: str
    member: _Member


@dataclass
class _Msg:
    ts: str
    seconds: float
    author: str
    text: str
    thread: str
    replies: int


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def safe_channel(name: str) -> str:
    """A channel folder's name as a path part: no slashes, control characters or leading dot."""
    return _UNSAFE_CHARS_RE.sub("", name).lstrip(".")


def _unsafe_member(name: str) -> bool:
    return (name.startswith("/") or "\\" in name or "\x00" in name or re.match(r"[A-Za-z]:", name) is not None
            or ".." in name.split("/"))


def _hhmm(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC).strftime("%H:%M")


def _seconds(ts: str, date: str) -> float:
    try:
        value = float(ts)
        dt.datetime.fromtimestamp(value, tz=dt.UTC)
        return value
    except (ValueError, OverflowError, OSError):
        return dt.datetime.fromisoformat(date).replace(tzinfo=dt.UTC).timestamp()


def _first_words(text: str) -> str:
    words = text.split()
    head = " ".join(words[:HEADING_WORDS]) + (" …" if len(words) > HEADING_WORDS else "")
    return _one_line(head, HEADING_CHARS)


def _paragraph(prefix: str, text: str) -> list[str]:
    """A message as lines of one paragraph; no line of it can open a heading or a code fence."""
    lines = text.split("\n")
    out = [prefix + lines[0]]
    for line in lines[1:]:
        if _BLOCK_START_RE.match(line):
            indent = len(line) - len(line.lstrip())
            line = line[:indent] + "\\" + line[indent:]
        out.append(line)
    return out


class SlackExport:
    """A Slack export, zip or folder: its channel days as documents (see the module docstring)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.warnings: list[str] = []
        self._dropped_warnings = 0
        self._zip: zipfile.ZipFile | None = None
        self._lock = threading.Lock()
        if self.path.is_dir():
            files, days = self._scan_folder()
        elif self.path.is_file():
            files, days = self._scan_zip()
        elif self.path.exists():
            raise VaultError(f"{self.path}: not a Slack export (neither a zip file nor a folder)")
        else:
            raise VaultError(f"{self.path}: no such file or folder")
        listed = [name for name in ("channels.json", "groups.json") if name in files]
        if not listed and not days:
            self.close()
            raise VaultError(f"{self.path}: not a Slack export (no channels.json, groups.json or "
                             "<channel>/YYYY-MM-DD.json files)")
        self._files = files
        self._users: dict[str, str] = {}
        self._channel_names: dict[str, str] = {}
        self._load_users()
        channels = self._load_channels(listed)
        self._days = self._select_days(days, channels if listed else None)
        meta = "|".join(f"{name}={files[name].sig if name in files else '-'}" for name in META_FILES)
        self._meta_sig = hashlib.blake2b(meta.encode(), digest_size=16).digest()

    def close(self) -> None:
        """Close the zip file (a folder holds nothing open); ``load()`` fails afterwards."""
        if self._zip is not None:
            self._zip.close()

    def __enter__(self) -> SlackExport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _warn(self, message: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(message)
        else:
            self._dropped_warnings += 1
            self.warnings[-1] = f"{self.path}: {self._dropped_warnings + 1} more warnings not shown"

    def _scan_zip(self) -> _Listing:
        try:
            self._zip = zipfile.ZipFile(self.path)
            infos = self._zip.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise VaultError(f"{self.path}: not a readable zip file ({reason})") from None
        entries: dict[str, _Member] = {}
        for info in infos:
            name = info.filename
            if info.is_dir():
                continue
            if _unsafe_member(name):
                self._warn(f"{self.path}: zip member {name!r} has an unsafe name; ignored")
                continue
            entries[name] = _Member(name, info.file_size, f"{info.CRC:08x}:{info.file_size}")
        root = ""
        if not any(self._relevant(name) for name in entries):
            tops = {name.split("/", 1)[0] for name in entries if "/" in name}
            if len(tops) == 1:
                root = tops.pop() + "/"
        return self._classify((name[len(root):], m) for name, m in entries.items() if name.startswith(root))

    @staticmethod
    def _relevant(name: str) -> bool:
        parts = name.split("/")
        return (len(parts) == 1 and parts[0] in META_FILES) or \
            (len(parts) == 2 and _DAY_RE.fullmatch(parts[1]) is not None)

    def _scan_folder(self) -> _Listing:
        root = self.path
        try:
            top = sorted(os.scandir(root), key=lambda e: e.name)
            if not any(e.name in META_FILES for e in top):
                subdirs = [e for e in top if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)]
                if len(subdirs) == 1 and any((Path(subdirs[0].path) / n).is_file() for n in META_FILES):
                    root = Path(subdirs[0].path)
        except OSError as exc:
            raise VaultError(f"{self.path}: cannot list the folder ({exc.strerror or exc})") from None
        return self._classify(self._walk_folder(root))

    def _walk_folder(self, root: Path) -> Iterator[tuple[str, _Member]]:
        try:
            top = sorted(os.scandir(root), key=lambda e: e.name)
        except OSError as exc:
            raise VaultError(f"{root}: cannot list the folder ({exc.strerror or exc})") from None
        for entry in top:
            if entry.name.startswith("."):
                continue
            if entry.is_file(follow_symlinks=False):
                if entry.name.endswith(".json"):
                    yield entry.name, self._stat_member(entry)
            elif entry.is_dir(follow_symlinks=False):
                try:
                    inner = sorted(os.scandir(entry.path), key=lambda e: e.name)
                except OSError as exc:
                    self._warn(f"{entry.path}: cannot list the folder ({exc.strerror or exc}); skipped")
                    continue
                for day in inner:
                    if _DAY_RE.fullmatch(day.name) and day.is_file(follow_symlinks=False):
                        yield f"{entry.name}/{day.name}", self._stat_member(day)

    @staticmethod
    def _stat_member(entry: os.DirEntry[str]) -> _Member:
        st = entry.stat(follow_symlinks=False)
        return _Member(entry.path, st.st_size, f"{st.st_mtime_ns}:{st.st_size}")

    def _classify(self, entries: Iterable[tuple[str, _Member]]) -> _Listing:
        """Top-level JSON files and day files (those within the size cap) of an export."""
        files: dict[str, _Member] = {}
        days: dict[tuple[str, str], _Member] = {}
        for name, member in entries:
            parts = name.split("/")
            if any(p.startswith(".") for p in parts):
                continue
            if len(parts) == 1 and name.endswith(".json"):
                files[name] = member
                continue
            match = _DAY_RE.fullmatch(parts[-1]) if len(parts) == 2 else None
            if match is None:
                continue
            if member.size > MAX_DAY_BYTES:
                self._warn(f"{self.path}: {name} is {member.size:,} bytes, over {MAX_DAY_BYTES:,}; skipped")
                continue
            days[(parts[0], match.group(1))] = member
        return files, days

    def _read(self, member: _Member, limit: int) -> bytes:
        if member.size > limit:
            raise _TooLarge
        if self._zip is not None:
            with self._lock, self._zip.open(member.where) as fh:
                data = fh.read(limit + 1)
        else:
            with open(member.where, "rb") as fh:
                data = fh.read(limit + 1)
        if len(data) > limit:
            raise _TooLarge
        return data

    def _read_json(self, name: str) -> Any:
        """A top-level JSON file's content, or None with a warning when it cannot be read."""
        member = self._files.get(name)
        if member is None:
            return None
        try:
            return json.loads(self._read(member, MAX_META_BYTES).decode("utf-8", errors="replace"))
        except _TooLarge:
            self._warn(f"{self.path}: {name} is over {MAX_META_BYTES:,} bytes; ignored")
        except (ValueError, RecursionError):
            self._warn(f"{self.path}: {name} is not valid JSON; ignored")
        except _READ_ERRORS as exc:
            self._warn(f"{self.path}: cannot read {name} ({type(exc).__name__}); ignored")
        return None

    def _load_users(self) -> None:
        users = self._read_json("users.json")
        if users is None:
            self._warn(f"{self.path}: no readable users.json; names are shown as user ids")
            return
        for user in users if isinstance(users, list) else []:
            if isinstance(user, dict) and isinstance(user.get("id"), str):
                name = self._person(user, user.get("profile"))
                if name:
                    self._users[user["id"]] = name

    @staticmethod
    def _person(user: dict[str, Any], profile: Any) -> str:
        profile = profile if isinstance(profile, dict) else {}
        for value in (profile.get("display_name"), profile.get("real_name"), user.get("real_name"),
                      user.get("name")):
            name = _one_line(_str(value), NAME_CHARS)
            if name:
                return name
        return ""

    def _load_channels(self, listed: Sequence[str]) -> set[str]:
        """Names of the channels the export lists; fills the id → name map for ``<#C…>``."""
        names: set[str] = set()
        for file in listed:
            data = self._read_json(file)
            for channel in data if isinstance(data, list) else []:
                if isinstance(channel, dict) and _str(channel.get("name")):
                    names.add(channel["name"])
                    if _str(channel.get("id")):
                        self._channel_names[channel["id"]] = _one_line(channel["name"], NAME_CHARS)
        return names

    def _select_days(self, days: dict[tuple[str, str], _Member], listed: set[str] | None) -> dict[str, _Day]:
        private: set[str] = set()
        for file, key in (("dms.json", "id"), ("mpims.json", "name")):
            data = self._read_json(file) if file in self._files else None
            private.update(_str(c.get(key)) for c in (data if isinstance(data, list) else [])
                           if isinstance(c, dict))
        out: dict[str, _Day] = {}
        unlisted: set[str] = set()
        for (folder, date), member in sorted(days.items()):
            if folder in private:
                continue
            if listed is not None and folder not in listed:
                unlisted.add(folder)
                continue
            try:
                dt.date.fromisoformat(date)
            except ValueError:
                continue
            channel = safe_channel(folder)
            if not channel:
                self._warn(f"{self.path}: channel folder {folder!r} has no usable name; skipped")
                continue
            if len(out) >= MAX_DAY_FILES:
                self._warn(f"{self.path}: more than {MAX_DAY_FILES:,} channel day files; the rest are skipped")
                break
            path = f"{channel}/{date}.slack"
            if path in out:
                self._warn(f"{self.path}: {folder}/{date}.json has the same name as another channel's; skipped")
                continue
            out[path] = _Day(folder, channel, date, member)
        if unlisted:
            self._warn(f"{self.path}: {len(unlisted)} folder(s) not listed in channels.json or groups.json "
                       f"skipped ({', '.join(sorted(unlisted)[:5])})")
        return out

    def documents(self) -> list[VirtualDoc]:
        """One document per channel day, sorted by path; nothing is read until ``load()``."""
        docs = []
        for path in sorted(self._days):
            day = self._days[path]
            digest = hashlib.blake2b(self._meta_sig + day.member.sig.encode(), digest_size=8).digest()
            docs.append(VirtualDoc(path=path, size=day.member.size,
                                   stamp=int.from_bytes(digest, "big") >> 1,
                                   load=partial(self.render, day.channel, day.date)))
        return docs

    def render(self, channel: str, date: str) -> str:
        """The day ``date`` of ``channel`` (its name as in the document path) as markdown.
        Raises ValueError (one line) when the day file is missing, unreadable or not a list."""
        path = f"{channel}/{date}.slack"
        day = self._days.get(path)
        if day is None:
            raise ValueError(f"{self.path}: no day file for {path}")
        source = f"{self.path}: {day.folder}/{date}.json"
        try:
            data = self._read(day.member, MAX_DAY_BYTES)
        except _TooLarge:
            raise ValueError(f"{source}: over {MAX_DAY_BYTES:,} bytes; skipped") from None
        except _READ_ERRORS as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ValueError(f"{source}: cannot be read ({reason})") from None
        try:
            raw = json.loads(data.decode("utf-8", errors="replace"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{source}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        except (ValueError, RecursionError):
            raise ValueError(f"{source}: not valid JSON") from None
        if not isinstance(raw, list):
            raise ValueError(f"{source}: not a list of messages")
        return self._markdown(channel, date, self._messages(raw, date))

    def _messages(self, raw: list[Any], date: str) -> list[_Msg]:
        out = []
        for item in raw:
            if not isinstance(item, dict) or item.get("type", "message") != "message":
                continue
            if item.get("subtype") in NOISE_SUBTYPES:
                continue
            text = self.clean(_str(item.get("text"))).strip()
            if not text:
                attachments = item.get("attachments")
                text = "\n".join(self.clean(_str(a.get("fallback")) or _str(a.get("text"))).strip()
                                 for a in (attachments if isinstance(attachments, list) else [])
                                 if isinstance(a, dict)).strip()
            files = item.get("files")
            for f in files if isinstance(files, list) else []:
                if isinstance(f, dict):
                    label = _one_line(_str(f.get("title")) or _str(f.get("name")), HEADING_CHARS)
                    if label:
                        text += f" [file: {label}]"
            text = text.strip()
            if not text:
                continue
            ts = _str(item.get("ts"))
            replies = item.get("reply_count")
            out.append(_Msg(ts=ts, seconds=_seconds(ts, date), author=self._author(item), text=text,
                            thread=_str(item.get("thread_ts")),
                            replies=replies if isinstance(replies, int) else 0))
        out.sort(key=lambda m: m.seconds)
        return out

    def _author(self, item: dict[str, Any]) -> str:
        if item.get("subtype") == "bot_message":
            bot = item.get("bot_profile")
            name = _str(item.get("username")) or (_str(bot.get("name")) if isinstance(bot, dict) else "")
            return _one_line(name, NAME_CHARS) or "bot"
        user = _str(item.get("user"))
        if user in self._users:
            return self._users[user]
        return self._person({}, item.get("user_profile")) or _one_line(user, NAME_CHARS) or "unknown"

    def clean(self, text: str) -> str:
        """Slack markup as plain text: mentions by name, links as ``label (url)``, entities unescaped."""
        return _MARKUP_RE.sub(self._markup, text)

    def _markup(self, match: re.Match[str]) -> str:
        if match.group(2):
            return _ENTITIES[match.group(2)]
        target, _, label = match.group(1).partition("|")
        label = _MARKUP_RE.sub(lambda m: _ENTITIES[m.group(2)] if m.group(2) else m.group(0), label)
        if target.startswith("@"):
            return "@" + (label.lstrip("@") or self._users.get(target[1:], target[1:]))
        if target.startswith("#"):
            return "#" + (label or self._channel_names.get(target[1:], target[1:]))
        if target.startswith("!"):
            word = target[1:].split("^", 1)[0]
            return f"@{word}" if word in BROADCASTS or not label else label
        if not label or label == target or f"mailto:{label}" == target:
            return label or target
        return f"{label} ({target})"

    def _markdown(self, channel: str, date: str, msgs: list[_Msg]) -> str:
        parents = {m.thread for m in msgs if m.thread and m.thread != m.ts}
        threads: dict[str, list[_Msg]] = {}
        loose: list[_Msg] = []
        for m in msgs:
            if m.ts and (m.ts in parents or (m.thread == m.ts and m.replies > 0)):
                threads.setdefault(m.ts, []).append(m)
            elif m.thread and m.thread != m.ts:
                threads.setdefault(m.thread, []).append(m)
            else:
                loose.append(m)
        sections: list[tuple[float, str, list[_Msg]]] = []
        for key, group in threads.items():
            first = group[0]
            if first.ts == key:
                title = f"{_hhmm(first.seconds)} {first.author}: {_first_words(first.text)}"
            else:
                title = f"{_hhmm(first.seconds)} thread continued: {_first_words(first.text)}"
            sections.append((first.seconds, title, group))
        runs: list[list[_Msg]] = []
        for m in loose:
            if runs and m.seconds - runs[-1][-1].seconds <= RUN_GAP_SECONDS:
                runs[-1].append(m)
            else:
                runs.append([m])
        for run in runs:
            first, last = run[0], run[-1]
            span = _hhmm(first.seconds) if len(run) == 1 else f"{_hhmm(first.seconds)}–{_hhmm(last.seconds)}"
            sections.append((first.seconds, f"{span} {first.author}: {_first_words(first.text)}", run))
        sections.sort(key=lambda s: s[0])

        import yaml

        authors = sorted({m.author for m in msgs}, key=lambda a: (a.casefold(), a))
        meta = {"title": f"#{channel} {date}", "channel": channel, "date": date, "updated": date,
                "authors": authors}
        lines = ["---", yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1_000_000).rstrip("\n"),
                 "---", "", f"# #{channel} {date}"]
        for _, title, group in sections:
            lines += ["", f"## {title}"]
            for m in group:
                lines.append("")
                lines += _paragraph(f"**{m.author}** ({_hhmm(m.seconds)}): ", m.text)
        return "\n".join(lines) + "\n"
