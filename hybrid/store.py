"""One vault's on-disk index: the catalog plus its two derived projections, kept in step.

Layout under the vault's index dir: ``catalog.sqlite`` (the ledger), ``lexical/`` (tantivy),
``vectors.faiss`` (FAISS), ``index.lock`` (held by whoever writes).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

from .catalog import Catalog
from .errors import IndexCorrupt, IndexLocked
from .lexical import LexicalIndex
from .vector import VectorIndex, VectorSpec

log = logging.getLogger("hybrid")


def checkpoint(name: str) -> None:
    """Fault-injection point for the crash tests: ``HYBRID_FAULT=name`` kills the process
    here with SIGKILL, exactly as a power cut or OOM killer would."""
    if os.environ.get("HYBRID_FAULT") == name:
        import signal
        os.kill(os.getpid(), signal.SIGKILL)


class VaultStore:
    def __init__(self, directory: Path, create: bool = True):
        self.directory = directory
        if not create and not (directory / "catalog.sqlite").exists():
            raise IndexCorrupt("not indexed yet")
        # Readers never write the catalog's schema, so they cannot queue behind an indexer.
        self.catalog = Catalog(directory / "catalog.sqlite", readonly=not create)
        self.lexical = LexicalIndex(directory / "lexical")
        self.vector = VectorIndex(directory / "vectors.faiss")
        self.spec = VectorSpec()  # the indexer sets it from the settings

    def close(self) -> None:
        self.catalog.close()

    @property
    def embedder_id(self) -> str | None:
        return self.catalog.get_meta("embedder")

    def lock(self, timeout: float = 0):
        """The writer lock; raises IndexLocked naming the holder when it cannot be had."""
        from filelock import FileLock, Timeout

        lock = FileLock(str(self.directory / "index.lock"), timeout=timeout)
        try:
            lock.acquire()
        except Timeout:
            raise IndexLocked(f"another `hybrid index` is writing {self.directory.name!r}; "
                              f"wait for it to finish or pass --wait SECONDS") from None
        return lock

    def sync_derived(self, model: str | None, batch: int = 5000) -> dict[str, int]:
        """Bring tantivy and FAISS in line with the catalog: replay the journal, then check
        counts and layout, rebuilding a projection from the catalog if it disagrees (no
        re-embedding: vectors come from the catalog's cache). Idempotent; safe to repeat after
        a crash: the journal is cleared only once both projections hold its changes."""
        import numpy as np
        import time
        stats = {"journal": 0, "rebuilt_lexical": 0, "rebuilt_vector": 0,
                 "lexical_seconds": 0.0, "vector_seconds": 0.0}
        n = self.catalog.chunk_count()
        ids = self.catalog.journal()
        if ids:
            stats["journal"] = len(ids)
            t = time.perf_counter()
            live: list[int] = []

            def batches():  # streamed: a million journaled chunks never sit in memory at once
                for part in self.catalog.iter_chunks(ids, batch):
                    rows = [r for r in part if not r.dead]
                    live.extend(r.id for r in rows)
                    yield rows

            self.lexical.apply(ids, batches())
            stats["lexical_seconds"] += time.perf_counter() - t
            checkpoint("after-lexical")
            t = time.perf_counter()
            if model is not None:
                if self._vector_needs_rebuild(n):
                    stats["rebuilt_vector"] = self._rebuild_vector(model)
                else:
                    got = self.catalog.vectors(model, live)
                    dim = self._dim(got)
                    if dim:
                        vec_ids = [i for i, _ in got]
                        vecs = np.frombuffer(b"".join(v for _, v in got), dtype=np.float32).reshape(len(got), dim)
                        self.vector.apply(ids, vec_ids, vecs, dim, self.spec)
                    elif self.vector.count():
                        self.vector.apply(ids, [], None, self.vector.dim or 1, self.spec)
            stats["vector_seconds"] += time.perf_counter() - t
            checkpoint("after-vector")
            self.catalog.purge(ids)
        t = time.perf_counter()
        if self.lexical.count() != n:
            log.warning("%s: lexical index out of step (%d docs, %d chunks); rebuilding from the catalog",
                        self.directory.name, self.lexical.count(), n)
            self.lexical.rebuild(self.catalog.iter_chunks(batch=batch))
            stats["rebuilt_lexical"] = 1
        stats["lexical_seconds"] += time.perf_counter() - t
        t = time.perf_counter()
        if model is not None and not stats["rebuilt_vector"]:
            if self.vector.count() != n:
                log.warning("%s: vector index out of step (%d vectors, %d chunks); rebuilding from the catalog",
                            self.directory.name, self.vector.count(), n)
                stats["rebuilt_vector"] = self._rebuild_vector(model)
            elif self._vector_needs_rebuild(n):
                stats["rebuilt_vector"] = self._rebuild_vector(model)
        stats["vector_seconds"] += time.perf_counter() - t
        return stats

    def _vector_needs_rebuild(self, n: int) -> bool:
        if not self.vector.count():
            return n > 0 and (self.spec.wants_ivf(n) or self.spec.storage != "float32")
        layout = json.loads(self.catalog.get_meta("vector_layout") or "{}")
        return self.vector.needs_rebuild(n, self.spec, layout.get("trained_on"))

    def _rebuild_vector(self, model: str) -> int:
        """Rebuild FAISS from the catalog's cached vectors with the layout the spec asks for."""
        dim = int(self.catalog.get_meta("dim") or 0) or self.vector.dim or 0
        if not dim:
            row = self.catalog.vectors(model, self.catalog.all_chunk_ids()[:1])
            dim = self._dim(row) or 1
        ids, mat = self.catalog.vector_matrix(model, dim)
        info = self.vector.rebuild(ids, mat, dim, self.spec)
        log.info("%s: vector index built: %s", self.directory.name, info)
        self.catalog.set_meta("vector_layout", json.dumps(info, sort_keys=True))
        return 1

    @staticmethod
    def _dim(got: list[tuple[int, bytes]]) -> int:
        return len(got[0][1]) // 4 if got else 0

    def wipe(self) -> None:
        """Delete everything but the lock (used by --reembed)."""
        self.catalog.close()
        for p in self.directory.iterdir():
            if p.name == "index.lock":
                continue
            shutil.rmtree(p) if p.is_dir() else p.unlink()
        self.__init__(self.directory)
