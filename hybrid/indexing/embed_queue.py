"""The embedding side of an index run: chunk texts with no cached vector are embedded a window
at a time while notes are still being read, and each group's vectors are committed to the
catalog's cache before anything else changes (so a kill loses at most one group's work)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from hybrid.core.faults import checkpoint

if TYPE_CHECKING:
    from hybrid.embedders import Embedder
    from hybrid.indexing.report import IndexReport, Progress
    from hybrid.store.base import NoteRecord
    from hybrid.store.port import Store

EMBED_GROUP = 256


class EmbedQueue:
    """Embeds chunk texts that have no cached vector, a window at a time as records arrive, and
    commits each group's vectors to the catalog's cache. Within a window texts are sorted by
    length, so a batch pads to similar lengths (what encode() does within one call)."""

    WINDOW = 2048

    def __init__(self, store: Store, embedder: Embedder, report: IndexReport,
                 progress: Progress | None):
        self.store, self.embedder, self.report, self.progress = store, embedder, report, progress
        self.waiting: dict[str, str] = {}
        self.seen: set[str] = set()
        self.total_chunks = 0
        self.busy = 0.0
        self.loaded = False  # the model: loaded (and timed) as its own step before the first batch
        self.final = False   # no more records: the number of chunks to embed is known

    def add(self, record: NoteRecord) -> None:
        self.total_chunks += len(record.chunks)
        for c, t in zip(record.chunks, record.embed_texts):
            if c.embed_hash not in self.seen:
                self.seen.add(c.embed_hash)
                self.waiting[c.embed_hash] = t
        if len(self.waiting) >= self.WINDOW:
            self._flush()

    def finish(self) -> None:
        self.final = True
        done = self.report.chunks_embedded
        self._flush()
        if self.progress and done and done == self.report.chunks_embedded:
            self.progress("embed", done, done)  # the last window was all cached: say it is over
        self.report.cache_hits = self.total_chunks - self.report.chunks_embedded

    def _flush(self) -> None:
        if not self.waiting:
            return
        t = time.perf_counter()
        cat, model = self.store.catalog, self.embedder.id
        cached = cat.cached_hashes(model, self.waiting)
        todo = sorted(((h, x) for h, x in self.waiting.items() if h not in cached), key=lambda hx: len(hx[1]))
        self.waiting = {}
        if todo and not self.loaded:
            self._load()
        # after the last window the total is known: chunks embedded so far plus this window's
        total = self.report.chunks_embedded + len(todo) if self.final else None
        for i in range(0, len(todo), EMBED_GROUP):
            group = todo[i:i + EMBED_GROUP]
            vecs = self.embedder.embed_documents([x for _, x in group])
            cat.put_embeddings(model, [(h, v.tobytes()) for (h, _), v in zip(group, vecs)])
            self.report.chunks_embedded += len(group)
            if self.progress:
                self.progress("embed", self.report.chunks_embedded, total)
            checkpoint("after-embed-batch")
        self.busy += time.perf_counter() - t

    def _load(self) -> None:
        """Load the model (backends load lazily, on their first embedding) as a step of its own,
        so a progress display shows "loading model" rather than a stalled first batch. Only
        with a progress callback: without one, the first batch loads it as before."""
        self.loaded = True
        if self.progress:
            self.progress("load", 0, 1)
            self.embedder.embed_documents(["warm up"])
            self.progress("load", 1, 1)
