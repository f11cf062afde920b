"""What a reader of a vault's catalog keeps between searches: the chunk rows and meta values it
read, while the ledger is unchanged (SQLite's data version, which changes when another
connection commits: an index run). A long-lived handle (a server, the search page, ``hybrid
eval``) so reads a passage once however many searches return it, and what a search derives
from a row alone (:meth:`hybrid.store.base.ChunkRow.derived`) is derived once. A writer keeps
nothing: its own commits do not change the data version."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hybrid.store.base import ChunkRow

ROW_CACHE = 8192  # chunk rows a reader keeps (about 16 MB of passages); past it, it starts again


class Held:
    """The rows and meta values read as of the ledger's current data version (``version``:
    reads it), emptied when it changes."""

    def __init__(self, version: Callable[[], int]):
        self._version = version
        self._lock = threading.Lock()
        self._at: int | None = None
        self._rows: dict[int, ChunkRow] = {}
        self._meta: dict[str, str | None] = {}

    def _now(self) -> tuple[dict[int, ChunkRow], dict[str, str | None]]:
        version = self._version()
        with self._lock:
            if self._at != version:
                self._at, self._rows, self._meta = version, {}, {}
            return self._rows, self._meta

    def rows(self, ids: Sequence[int], read: Callable[[Sequence[int]], dict[int, ChunkRow]]) -> dict[int, ChunkRow]:
        """The rows of ``ids`` (``read`` reads those not kept), in id order."""
        kept, _ = self._now()
        out = {i: r for i in ids if (r := kept.get(i)) is not None}
        missing = [i for i in ids if i not in out]
        if missing:
            got = read(missing)
            with self._lock:  # rows read after a change land in the old dict, no longer kept
                if len(kept) + len(got) > ROW_CACHE:
                    kept.clear()
                kept.update(got)
            out.update(got)
        return dict(sorted(out.items()))  # in id order, as the ledger gives them

    def meta(self, key: str, read: Callable[[str], str | None]) -> str | None:
        """The meta value ``key`` (``read`` reads it when not kept)."""
        _, kept = self._now()
        if key not in kept:
            kept[key] = read(key)
        return kept[key]
