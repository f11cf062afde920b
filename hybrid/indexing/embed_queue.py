"""The embedding side of an index run: chunk texts with no cached vector are embedded a window
at a time while notes are still being read, and each group's vectors are committed to the
catalog's cache before anything else changes (so a kill loses at most one group's work)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hybrid.core.errors import EmbedderMismatch
from hybrid.core.faults import checkpoint
from hybrid.embedders.base import parts_of
from hybrid.indexing.report import Estimate

if TYPE_CHECKING:
    from hybrid.embedders import Embedder
    from hybrid.indexing.report import IndexReport, Progress
    from hybrid.store.base import NoteRecord
    from hybrid.store.port import Store

EMBED_GROUP = 256


class EmbedQueue:
    """Embeds chunk texts that have no cached vector, a window at a time, and commits each
    group's vectors to the catalog's cache. Texts are looked up in the cache as records arrive,
    so the number left to embed is known for every note read; within a window texts are sorted
    by length, so a batch pads to similar lengths (what encode() does within one call).

    Progress (``embed``): while notes are still being read the total is an :class:`Estimate`
    (the texts found so far, scaled by the bytes still to read), exact once the reads are over;
    the caller says how much there is to read (``expect_bytes``, ``expect_files``) and what
    was read (:meth:`read`)."""

    WINDOW = 2048

    def __init__(self, store: Store, embedder: Embedder, report: IndexReport,
                 progress: Progress | None, expect_bytes: int = 0, expect_files: int = 0):
        self.store, self.embedder, self.report, self.progress = store, embedder, report, progress
        self.waiting: dict[str, str] = {}      # uncached texts not yet in a window
        self.window: list[tuple[str, str]] = []  # the window being embedded, shortest first
        self.seen: set[str] = set()
        self.found = 0          # distinct uncached texts met so far: embedded, in the window, waiting
        self.total_chunks = 0
        self.busy = 0.0
        self.loaded = False  # the model: loaded (and timed) as its own step before the first batch
        self.final = False   # no more records: the number of chunks to embed is known
        self.expect = (expect_bytes, expect_files)
        self.got = [0, 0]    # bytes and files read so far
        self.shown: int | None = None  # the last total reported
        # what the index holds, when it holds this model's vectors (0: none yet, or an upgrade)
        self.dim = int(store.catalog.get_meta("dim") or 0) if store.embedder_id == embedder.id else 0

    def read(self, size: int) -> None:
        """One more file read (whatever came of it), ``size`` bytes: refines the estimate."""
        self.got[0] += size
        self.got[1] += 1

    def add(self, records: Sequence[NoteRecord]) -> None:
        """Records read: their texts with no cached vector wait to be embedded."""
        new: dict[str, str] = {}
        for record in records:
            self.total_chunks += len(record.chunks)
            for c, t in zip(record.chunks, record.embed_texts):
                if c.embed_hash not in self.seen:
                    self.seen.add(c.embed_hash)
                    new[c.embed_hash] = t
        if not new:
            return
        t0 = time.perf_counter()
        cached = self.store.catalog.cached_hashes(self.embedder.id, new)
        self.busy += time.perf_counter() - t0
        for h, t in new.items():
            if h not in cached:
                self.waiting[h] = t
                self.found += 1

    def pending(self) -> bool:
        """Whether a group is ready to embed now (a window is open, or a full one waits)."""
        return bool(self.window) or len(self.waiting) >= self.WINDOW

    def step(self) -> None:
        """Embed one group, if one is ready: the caller reads more in between."""
        if not self.window and len(self.waiting) >= self.WINDOW:
            self._open_window()
        if self.window:
            self._embed_group()

    def finish(self) -> None:
        """The reads are over: embed everything left, with the exact total."""
        self.final = True
        while self.window or self.waiting:
            if not self.window:
                self._open_window()
            self._embed_group()
        done = self.report.chunks_embedded
        if self.progress and self.shown is not None and (isinstance(self.shown, Estimate) or self.shown != done):
            self.progress("embed", done, done)  # the estimate is over: say the exact end
        self.report.cache_hits = self.total_chunks - done

    def total(self) -> int:
        """The texts to embed in all: exact when the reads are over, else an :class:`Estimate`."""
        if self.final:
            return self.found
        (want_bytes, want_files), (got_bytes, got_files) = self.expect, self.got
        if want_bytes and got_bytes:
            guess = self.found * want_bytes / got_bytes
        elif want_files and got_files:
            guess = self.found * want_files / got_files
        else:
            guess = self.found
        return Estimate(max(self.found, round(guess)))

    def _open_window(self) -> None:
        """Take up to WINDOW waiting texts (in the order met) as the next window, shortest first."""
        take = list(itertools.islice(self.waiting.items(), self.WINDOW))
        for h, _ in take:
            del self.waiting[h]
        self.window = sorted(take, key=lambda hx: len(hx[1]))

    def _embed_group(self) -> None:
        t = time.perf_counter()
        if not self.loaded:
            self._load()
        group, self.window = self.window[:EMBED_GROUP], self.window[EMBED_GROUP:]
        texts = [x for _, x in group]
        known = self._known_parts([h for h, _ in group])
        vecs = (self.embedder.embed_documents(texts, known)  # type: ignore[call-arg]  # a mix's
                if known else self.embedder.embed_documents(texts))
        self._check_dim(vecs.shape[1] if vecs.ndim == 2 else 0)
        self.store.catalog.put_embeddings(self.embedder.id, [(h, v.tobytes()) for (h, _), v in zip(group, vecs)])
        self.report.chunks_embedded += len(group)
        self.busy += time.perf_counter() - t
        if self.progress:
            self.shown = self.total()
            self.progress("embed", self.report.chunks_embedded, self.shown)
        checkpoint("after-embed-batch")

    def _check_dim(self, dim: int) -> None:
        """EmbedderMismatch when a model server's vectors are not the dimension the index
        holds (the model behind a name such as ``openai:<model>`` was changed): they are never
        mixed in. The first vectors of a new index set it."""
        if self.dim and dim != self.dim:
            raise EmbedderMismatch(
                f"{self.embedder.id} now returns {dim}-dimensional vectors where vault "
                f"{self.report.vault!r}'s index holds {self.dim}: the model behind that name "
                f"changed; run `hybrid index --vault {self.report.vault} --reembed`")
        self.dim = dim

    def _known_parts(self, hashes: list[str]) -> list[dict] | None:
        """For an embedder made of parts (:class:`hybrid.embedders.mix.MixEmbedder`): each
        part's vectors of ``hashes`` already cached under that part's own id (an index the part
        built alone, being upgraded), by position; None for any other embedder, or when no
        part has any."""
        parts = parts_of(self.embedder)
        if not parts:
            return None
        import numpy as np
        known: list[dict] = []
        for part in parts:
            got = self.store.catalog.cached_vectors(part.id, hashes)
            known.append({i: np.frombuffer(got[h], dtype=np.float32) for i, h in enumerate(hashes)
                          if h in got and len(got[h]) == 4 * part.dim})
        self.report.chunk_parts_reused += sum(map(len, known))
        return known if any(known) else None

    def _load(self) -> None:
        """Load the model (backends load lazily, on their first embedding) as a step of its own,
        so a progress display shows "loading model" rather than a stalled first batch. Only
        with a progress callback: without one, the first batch loads it as before."""
        self.loaded = True
        if self.progress:
            self.progress("load", 0, 1)
            self.embedder.embed_documents(["warm up"])
            self.progress("load", 1, 1)
