"""The review queue of tag suggestions: one JSON file per vault in hybrid's data folder
(``<data>/tags/<vault>.json``), never in the vault nor in the index (a re-embed replaces the
index folder whole; a PostgreSQL store has no local folder), so it works alike for both stores.

Per note (by its vault-relative path) it keeps the pending suggestions (tag, score, who
suggested it and why), the content hash of the file they were made for (an accept is refused
once the file changed), and the tags the owner rejected, which are never suggested again for
that note. Writers take a lock file beside it and replace it atomically; readers read it whole.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from hybrid.core.errors import HybridError
from hybrid.core.files import fsync_dir

log = logging.getLogger("hybrid")
T = TypeVar("T")

VERSION = 1
MAX_PENDING_NOTE = 20     # pending tags of one note: an agent in a loop stops there
MAX_NOTES = 20_000        # notes with pending tags in one queue


class QueueError(HybridError):
    """The review queue cannot be read or written, or is full."""


@dataclass
class Suggestion:
    tag: str
    score: float = 0.0
    by: str = "offline"          # offline | ollama:MODEL | agent:CLIENT
    why: str = ""
    new: bool = False            # not yet a tag of the vault
    at: str = ""                 # ISO 8601 UTC

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Entry:
    path: str
    hash: str                    # the file's content hash when suggested (see frontmatter.content_hash)
    pending: list[Suggestion] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"path": self.path, "hash": self.hash, "pending": [s.to_dict() for s in self.pending],
                "rejected": self.rejected}

    def tags(self) -> list[str]:
        return [s.tag for s in self.pending]


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _entry(path: str, raw: Any) -> Entry | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("hash"), str):
        return None
    pending = []
    for s in raw.get("pending") or []:
        if isinstance(s, dict) and isinstance(s.get("tag"), str):
            pending.append(Suggestion(s["tag"], float(s.get("score") or 0.0), str(s.get("by") or ""),
                                      str(s.get("why") or ""), bool(s.get("new")), str(s.get("at") or "")))
    rejected = [t for t in raw.get("rejected") or [] if isinstance(t, str)]
    return Entry(path, raw["hash"], pending, rejected)


class TagQueue:
    """The queue of one vault."""

    def __init__(self, data: Path, vault: str):
        from hybrid.core.config import check_vault_name
        check_vault_name(vault)
        self.vault = vault
        self.path = data / "tags" / f"{vault}.json"

    def load(self) -> dict[str, Entry]:
        """Every note's entry, by path (empty when there is no queue yet)."""
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise QueueError(f"the tag review queue {self.path} cannot be read ({exc}): move it aside "
                             f"and suggest again") from None
        notes = raw.get("notes") if isinstance(raw, dict) else None
        if not isinstance(notes, dict):
            raise QueueError(f"the tag review queue {self.path} is not one hybrid wrote: move it aside "
                             f"and suggest again")
        return {p: e for p, r in notes.items() if isinstance(p, str) and (e := _entry(p, r)) is not None}

    def update(self, change: Callable[[dict[str, Entry]], T]) -> T:
        """Run ``change`` on the entries read under the writer lock, then write them (entries
        left with nothing pending and nothing rejected are dropped); returns what it returned."""
        from filelock import FileLock, Timeout
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.path) + ".lock", timeout=10)
        try:
            with lock:
                entries = self.load()
                out = change(entries)
                keep = {p: e for p, e in sorted(entries.items()) if e.pending or e.rejected}
                if len([e for e in keep.values() if e.pending]) > MAX_NOTES:
                    raise QueueError(f"the tag review queue of {self.vault!r} holds over {MAX_NOTES:,} notes: "
                                     f"review it with `hybrid tags review` first")
                self._write({"version": VERSION, "vault": self.vault,
                             "notes": {p: e.to_dict() for p, e in keep.items()}})
                return out
        except Timeout:
            raise QueueError(f"the tag review queue of {self.vault!r} is being written by another "
                             f"process; try again") from None

    def _write(self, data: dict) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        body = json.dumps(data, ensure_ascii=False, indent=1).encode("utf-8")
        with open(tmp, "wb") as fh:
            fh.write(body)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)

    def drop(self) -> None:
        """Forget the whole queue (its vault was removed)."""
        self.path.unlink(missing_ok=True)
