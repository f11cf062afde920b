"""The audit trail of agent calls: one JSON line per call in ``<data>/audit.jsonl``, rotated by size.

Every call an agent makes (the MCP tools ``search``, ``get_note``, ``list_vaults``,
``propose_note``, and ``POST /api/search`` when the caller is not the owner) is appended by the
server as one record; ``hybrid audit`` shows them. A record is a plain dict::

    {"time": "2026-11-30T14:05:01.123Z",   # UTC, millisecond precision; added by append if absent
     "tool": "search",                     # the MCP tool, or "api/search" for the HTTP endpoint
     "client": "claude-code 1.0.3",        # MCP clientInfo name + version, or "http ADDR USER-AGENT"
     "args": {"query": "tailscale acl", "top_k": 8},   # the call's arguments as received
     "returned": ["work:net/acl.md:1-20"], # citations (vault:path:start-end) given back
     "count": 1,                           # how many results (hits, notes, vaults) were returned
     "ms": 12.5,                           # wall time of the call, milliseconds
     "error": None}                        # None, or the one-line error the agent got

Only ``tool`` is needed by the reader; other keys may be missing and extra keys are kept. A
record too big for one sane line (over :data:`MAX_RECORD_BYTES` encoded) has its long strings
and lists clipped, in ``args`` and everywhere else, and gets ``"truncated": true``.

Writing. Several processes append at once (a stdio MCP server per client, plus the HTTP server),
so each record is written with a single ``os.write`` on a descriptor opened ``O_APPEND`` (mode
0o600, the data dir made 0o700 if missing): such writes do not interleave on a local filesystem.
Nothing else is locked on the hot path. When a write would take the file past ``max_bytes`` the
writer takes ``audit.jsonl.lock`` (a cross-process lock), checks the size again (another process
may have rotated meanwhile), shifts ``audit.K.jsonl`` to ``audit.K+1.jsonl`` (``audit.1.jsonl`` is
the newest rotated file), deletes what would pass ``keep``, renames the current file to
``audit.1.jsonl`` and writes the record to a fresh file. ``keep=0`` keeps no rotated file (the
current one is deleted). A writer that opened the file just before another process rotated it
writes into ``audit.1.jsonl``: the record is kept, slightly out of order.

A write that fails (disk full, permissions, a file where the folder should be) raises
:class:`AuditError`, naming the file and the reason: the caller refuses the agent call, since a
call that cannot be recorded must not be served.

Reading. :meth:`AuditLog.records` yields records oldest first, across the rotated files then the
current one. Lines that are not JSON objects (a torn last line after a crash or a full disk) are
skipped and counted in :attr:`AuditLog.skipped`.
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hybrid.core.dates import utc_epoch
from hybrid.core.errors import HybridError, QuerySyntaxError

#: Largest encoded record (the JSON line, newline included); bigger ones are clipped.
MAX_RECORD_BYTES = 64 * 1024
#: How long a writer waits for another process's rotation before giving up (AuditError).
LOCK_TIMEOUT = 10.0
_HOURS_RE = re.compile(r"^(\d+)\s*(h|hr|hrs|hours?|min|mins|minutes?|s|sec|secs|seconds?)$", re.I)
_UNIT_SECONDS = {"h": 3600, "m": 60, "s": 1}


class AuditError(HybridError):
    """The audit log cannot be written (or a ``--since`` value is not understood)."""


def audit_path(data_dir: Path) -> Path:
    """The current audit log: ``<data>/audit.jsonl`` (rotated ones are ``audit.N.jsonl`` beside it)."""
    return Path(data_dir) / "audit.jsonl"


def utc_now() -> str:
    """The current time as records store it: ``2026-11-30T14:05:01.123Z``."""
    now = dt.datetime.now(dt.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def record_epoch(record: dict) -> float | None:
    """A record's ``time`` as epoch seconds (a time without offset is taken as UTC); None when
    missing or unreadable."""
    value = record.get("time")
    return utc_epoch(value) if isinstance(value, str) else None


def parse_since(value: str) -> float:
    """Epoch seconds for ``--since``: what ``since:`` in queries takes (``YYYY-MM-DD`` at local
    midnight, an ISO date-time, ``30d``/``6w``/``3m``/``1y`` ago, with ``m`` = months as there),
    plus ages in hours, minutes or seconds: ``12h``, ``90min``, ``30s``. AuditError otherwise."""
    from hybrid.core.dates import parse_date

    text = value.strip()
    m = _HOURS_RE.match(text)
    if m:
        return time.time() - int(m.group(1)) * _UNIT_SECONDS[m.group(2)[0].lower()]
    try:
        return parse_date(text)
    except QuerySyntaxError:
        raise AuditError(f"bad --since {value!r}: use YYYY-MM-DD, YYYY-MM-DDTHH:MM, or an age like "
                         f"30min, 12h, 7d, 2w, 6m (months), 1y") from None


def encode_record(record: dict) -> bytes:
    """``record`` as one JSON line (``time`` first, newline-terminated, never a raw line break
    inside), clipped to :data:`MAX_RECORD_BYTES` with ``"truncated": true`` when it is bigger."""
    record = {"time": record.get("time") or utc_now(), **{k: v for k, v in record.items() if k != "time"}}
    line = _dump(record)
    if len(line) <= MAX_RECORD_BYTES:
        return line
    for limit in (4096, 1024, 256, 64):
        clipped = {k: (v if k == "time" else _clip(v, limit)) for k, v in record.items()}
        clipped["truncated"] = True
        line = _dump(clipped)
        if len(line) <= MAX_RECORD_BYTES:
            return line
    # Still too big (deep nesting of many small parts): keep what identifies the call.
    keep = {k: _clip(record.get(k), 64) for k in ("tool", "client", "count", "ms", "error") if k in record}
    return _dump({"time": record["time"], **keep, "args": None, "returned": None, "truncated": True})


def _dump(record: dict) -> bytes:
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
    # json escapes \n, \r and other controls; these two are line breaks to some readers.
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    # A lone surrogate (from a JSON \ud800 escape in the agent's call) becomes the same escape.
    return text.encode("utf-8", "backslashreplace") + b"\n"


def _clip(value: Any, limit: int) -> Any:
    """``value`` with strings cut to ``limit`` characters and lists/dicts to ``limit`` items."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + "…"
    if isinstance(value, dict):
        return {_clip(str(k), limit): _clip(v, limit) for k, v in list(value.items())[:limit]}
    if isinstance(value, list | tuple | set | frozenset):
        return [_clip(v, limit) for v in list(value)[:limit]]
    if value is None or isinstance(value, bool | int | float):
        return value
    return _clip(str(value), limit)


class AuditLog:
    """The audit log at ``path`` (see the module docstring). ``enabled=False`` makes
    :meth:`append` a no-op (the ``audit_log`` setting is off); reading works either way."""

    def __init__(self, path: Path, max_bytes: int, keep: int, *, enabled: bool = True):
        self.path = Path(path)
        self.max_bytes = int(max_bytes)
        self.keep = max(0, int(keep))
        self.enabled = enabled
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        #: Lines the last :meth:`records` iteration could not read (so far).
        self.skipped = 0

    @classmethod
    def from_settings(cls, data_dir: Path, settings) -> AuditLog:
        """The log in ``data_dir`` as ``settings`` configure it. Always an object: when
        ``audit_log`` is off its ``enabled`` is False and :meth:`append` does nothing. Costs no
        I/O, so a server can build it per call and follow a reloaded config."""
        return cls(audit_path(data_dir), int(settings.audit_max_mb * 1_000_000), settings.audit_keep,
                   enabled=bool(settings.audit_log))

    # --- writing ----------------------------------------------------------------------------
    def append(self, record: dict) -> None:
        """Append ``record`` (``time`` added when absent) as one line; AuditError when it cannot
        be written. Safe from several threads and processes at once."""
        if not self.enabled:
            return
        data = encode_record(record)
        try:
            fd = self._open()
            try:
                size = os.fstat(fd).st_size
                if size > 0 and size + len(data) > self.max_bytes:
                    os.close(fd)
                    fd = -1
                    self._rotate_and_write(data)
                    return
                self._write(fd, data)
            finally:
                if fd >= 0:
                    os.close(fd)
        except OSError as exc:
            raise self._error(exc) from None

    def _open(self) -> int:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        try:
            return os.open(self.path, flags, 0o600)
        except FileNotFoundError:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            return os.open(self.path, flags, 0o600)

    def _write(self, fd: int, data: bytes) -> None:
        written = os.write(fd, data)
        if written != len(data):  # a full disk: end the torn line so the next record stays readable
            try:
                os.write(fd, b"\n")
            except OSError:
                pass
            raise OSError(errno.ENOSPC, f"short write ({written} of {len(data)} bytes)")

    def _rotate_and_write(self, data: bytes) -> None:
        from filelock import FileLock, Timeout

        try:
            with FileLock(self.lock_path, timeout=LOCK_TIMEOUT, mode=0o600):
                try:
                    size = self.path.stat().st_size
                except FileNotFoundError:
                    size = 0
                if size > 0 and size + len(data) > self.max_bytes:  # nobody rotated meanwhile
                    self._rotate()
                fd = self._open()
                try:
                    self._write(fd, data)
                finally:
                    os.close(fd)
        except Timeout:
            raise AuditError(f"cannot write the audit log {self.path}: another process has held "
                             f"{self.lock_path} for {LOCK_TIMEOUT:g} s") from None

    def _rotate(self) -> None:
        """Shift the rotated files up by one, dropping those past ``keep``; the current file
        becomes ``audit.1.jsonl`` (or is deleted when keep is 0). Called under the lock."""
        for n, old in reversed(self.rotated_files()):  # oldest first, so no rename overwrites
            if n >= self.keep:
                old.unlink(missing_ok=True)
            else:
                os.replace(old, self._rotated(n + 1))
        if self.keep >= 1:
            os.replace(self.path, self._rotated(1))
        else:
            self.path.unlink(missing_ok=True)

    def _rotated(self, n: int) -> Path:
        return self.path.with_name(f"{self.path.stem}.{n}{self.path.suffix}")

    def _error(self, exc: OSError) -> AuditError:
        reason = exc.strerror or str(exc)
        if exc.errno == errno.ENOSPC:
            hint = f"; free space on the disk holding {self.path.parent}"
        elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            hint = f"; check the permissions of {self.path.parent}"
        else:
            hint = ""
        return AuditError(f"cannot write the audit log {self.path}: {reason}{hint}")

    # --- reading ----------------------------------------------------------------------------
    def rotated_files(self) -> list[tuple[int, Path]]:
        """The rotated files present, as (N, path), newest (N = 1) first."""
        stem = re.compile(rf"^{re.escape(self.path.stem)}\.(\d+){re.escape(self.path.suffix)}$")
        try:
            names = os.listdir(self.path.parent)
        except OSError:
            return []
        found = [(int(m.group(1)), self.path.parent / name) for name in names if (m := stem.match(name))]
        return sorted(found)

    def files(self) -> list[Path]:
        """Every log file present, oldest first (the current one last)."""
        files = [p for _, p in reversed(self.rotated_files())]
        return files + [self.path] if self.path.exists() else files

    def exists(self) -> bool:
        return bool(self.files())

    def records(self, since: float | None = None, tool: str | None = None,
                client: str | None = None) -> Iterator[dict]:
        """Records oldest first, across rotated files then the current one. ``since``: epoch
        seconds, records at or after it (a record without a readable time is left out); ``tool``:
        exact name; ``client``: case-insensitive substring of the client. Unreadable lines are
        skipped and counted in :attr:`skipped`."""
        self.skipped = 0
        want_client = client.lower() if client else None
        # Open every file before reading any, so a rotation meanwhile neither hides nor repeats one.
        handles = []
        for p in self.files():
            try:
                handles.append(open(p, "rb"))  # closed below
            except OSError:
                continue
        try:
            for f in handles:
                for raw in f:
                    record = self._decode(raw)
                    if record is None:
                        continue
                    if tool is not None and record.get("tool") != tool:
                        continue
                    if want_client is not None and want_client not in str(record.get("client") or "").lower():
                        continue
                    if since is not None:
                        when = record_epoch(record)
                        if when is None or when < since:
                            continue
                    yield record
        finally:
            for f in handles:
                f.close()

    def _decode(self, raw: bytes) -> dict | None:
        line = raw.strip()
        if not line:
            return None
        record = _loads(line)
        if record is None:
            self.skipped += 1
            # A torn line (a crash mid-write) with the next record appended to it: keep that one.
            start = line.rfind(b'{"time":')
            record = _loads(line[start:]) if start > 0 else None
        return record


def _loads(line: bytes) -> dict | None:
    try:
        value = json.loads(line)
    except ValueError:  # UnicodeDecodeError is one too
        return None
    return value if isinstance(value, dict) else None


def record_call(data_dir: Path, settings, record: dict, started: float) -> str | None:
    """Append an agent call's ``record`` with its duration since ``started`` (``perf_counter``)
    to the log ``settings`` configure, what agents are shown redacted redacted in it
    (:func:`shown_record`). None when it is written (or the log is off); else the one-line
    refusal the caller answers with instead of the result (and logs it), since a call that
    cannot be recorded must not be served."""
    import logging
    record["ms"] = round((time.perf_counter() - started) * 1000, 1)
    told = tuple(record.pop("secret_values", None) or ())  # what the call's refusal did not say back
    if getattr(settings, "redact_secrets", True):
        from hybrid.store.agent.view import agent_redactor
        record = shown_record(record, agent_redactor(), told)
    try:
        AuditLog.from_settings(data_dir, settings).append(record)
    except AuditError as exc:
        logging.getLogger("hybrid").error("%s", exc)
        return f"refused: this call could not be recorded in the audit log ({exc})"
    return None


def shown_record(record: dict, redactor: Any, told: Sequence[str] = ()) -> dict:
    """``record`` as the log keeps it: no value an agent is shown redacted in clear. Every
    string of its arguments and error is redacted, and the value of each property filter it
    names (``props``, a query's ``prop:KEY=VALUE`` and ``KEY:VALUE`` words) that the agent view
    hides (judged with its key: :func:`hybrid.store.agent.values.hides_value`) is replaced
    wherever it occurs, so a guess at a secret, right or wrong, is not written down; so is each
    value of ``told`` (what the call's refusal did not say back:
    :attr:`hybrid.retrieval.filters.NoMatchingNotes.secret_values`)."""
    from hybrid.store.agent.redact import REDACTED
    args = record.get("args")
    hidden = sorted(_hidden_filter_values(args if isinstance(args, dict) else {}, redactor) | set(told),
                    key=len, reverse=True)

    def shown(value: Any) -> Any:
        if isinstance(value, str):
            for h in hidden:
                value = value.replace(h, REDACTED)
            return redactor.redact(value)
        if isinstance(value, list):
            return [shown(x) for x in value]
        if isinstance(value, dict):
            return {k: shown(v) for k, v in value.items()}
        return value
    out = dict(record)
    for key in ("args", "error"):
        if out.get(key) is not None:
            out[key] = shown(out[key])
    return out


def _hidden_filter_values(args: dict, redactor: Any) -> set[str]:
    """The values of the property filters in ``args`` that agents are shown redacted."""
    from hybrid.retrieval.query import parse_query
    from hybrid.store.agent.values import hides_value
    from hybrid.store.props import split_prop
    filters = []
    props = args.get("props")
    for text in props if isinstance(props, list) else []:
        try:
            filters.append(split_prop(text))  # a refused one (`password>=guess`) too
        except QuerySyntaxError:
            continue
    query = args.get("query")
    if isinstance(query, str) and query.strip():
        try:
            parsed = parse_query(query)
        except QuerySyntaxError:
            parsed = None
        if parsed is not None:
            filters += list(parsed.props) + [pf for _, pf in parsed.maybe_props]
    return {v for pf in filters if (v := pf.value.strip()) and hides_value(redactor, pf.key, v)}
