"""Keeping a store's derived indexes in step with its ledger, for any lexical and vector index.

A store whose indexes live outside its ledger (the local store's tantivy and FAISS files, Milvus
collections) is brought in line by :func:`sync_derived`: replay the ledger's journal (chunk ids
added, changed or dead since the last sync) into both indexes, then check each one's count and
layout against the ledger and rebuild it from the ledger when they disagree: no re-embedding,
vectors come from the ledger's cache. The journal is cleared only once every index holds its
changes, so a sync interrupted anywhere is simply run again. The agent view is one more lexical
index, fed the visible, redacted rows (:mod:`hybrid.store.agent.index`).

A PostgreSQL store needs none of this: its arms read the ledger's own tables, written in the
same transaction as the notes (:meth:`hybrid.store.pg.store.PgStore.sync_derived`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

from hybrid.core.errors import IndexCorrupt
from hybrid.core.faults import checkpoint
from hybrid.core.timing import Stopwatch
from hybrid.store.agent import index as agent_index
from hybrid.store.agent.index import RedactingLedger
from hybrid.store.base import Reread, SyncStats, VectorSpec, lexical_drifted
from hybrid.store.port import LexicalIndex, VectorIndex

if TYPE_CHECKING:
    import numpy as np

    from hybrid.store.agent.redact import Redactor
    from hybrid.store.agent.view import AgentView

log = logging.getLogger("hybrid")


class JournaledLedger(RedactingLedger, Protocol):
    """A ledger that journals its changes for indexes kept outside it (the SQLite ledger), and
    records the agent view's redacted chunks (:class:`hybrid.store.agent.index.RedactingLedger`)."""

    def vector_matrix(self, model: str, dim: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, float32 matrix) of every live chunk's cached vector under ``model``."""
        ...


class Projected(Protocol):
    """A store as :func:`sync_derived` keeps it: a ledger and the indexes derived from it."""

    @property
    def name(self) -> str:
        """The vault's name, for log lines."""
        ...

    @property
    def catalog(self) -> JournaledLedger: ...
    @property
    def lexical(self) -> LexicalIndex: ...
    @property
    def vector(self) -> VectorIndex: ...
    @property
    def agent_lexical(self) -> LexicalIndex: ...

    spec: VectorSpec
    writable: bool

    def heal_note(self, message: str) -> None: ...


def sync_derived(store: Projected, model: str | None, batch: int = 5000, view: AgentView | None = None,
                 redactor: Redactor | None = None) -> SyncStats:
    """Bring ``store``'s lexical and vector indexes (and, with ``view``, the agent view's) in
    line with its ledger: replay the journal, then check counts and layout, rebuilding an index
    from the ledger if it disagrees. Idempotent; safe to repeat after a crash."""
    clock = Stopwatch()
    stats = SyncStats()
    if store.writable:
        _check_vector(store)
    n = store.catalog.chunk_count()
    ids = store.catalog.journal()
    if ids:
        stats.journal = len(ids)
        _replay_journal(store, ids, model, n, batch, clock, stats, view, redactor)
        store.catalog.purge(ids)
    with clock("lexical"):
        stats.rebuilt_lexical = _check_lexical(store, n, batch)
        if view is not None:
            stats.rebuilt_agent = int(agent_index.check(store, view, redactor, batch))
    with clock("vector"):
        if model is not None and not stats.rebuilt_vector:
            stats.rebuilt_vector = _check_vector_count(store, model, n)
    stats.lexical_seconds = clock.seconds["lexical"]
    stats.vector_seconds = clock.seconds["vector"]
    return stats


def _check_vector(store: Projected) -> None:
    """On the writer path: an unreadable vector index is emptied, to be rebuilt from the
    ledger's cached vectors by the count check."""
    try:
        store.vector.count()
    except IndexCorrupt as exc:
        store.heal_note(f"{store.name}: vector index unreadable ({exc}); rebuilding it from the catalog")
        store.vector.destroy()


def _replay_journal(store: Projected, ids: list[int], model: str | None, n: int, batch: int, clock: Stopwatch,
                    stats: SyncStats, view: AgentView | None, redactor: Redactor | None) -> None:
    """Apply the journaled chunk ids (added, changed or dead) to the lexical index, then to the
    vector index from the cached vectors (or rebuild it when its layout must change)."""
    live: dict[int, None] = {}  # the live ids, in order, of the last read

    def batches() -> Iterator[list]:  # streamed: a million journaled chunks never sit in memory at once
        live.clear()
        for part in store.catalog.iter_chunks(ids, batch):
            rows = [r for r in part if not r.dead]
            live.update(dict.fromkeys(r.id for r in rows))
            yield rows

    with clock("lexical"):
        store.lexical.apply(ids, Reread(batches))
        if view is not None and agent_index.current(store, view):  # else rebuilt just after
            agent_index.apply_journal(store, ids, view, redactor, batch)
    checkpoint("after-lexical")
    with clock("vector"):
        if model is not None:
            if _vector_needs_rebuild(store, n):
                stats.rebuilt_vector = _rebuild_vector(store, model)
            else:
                _apply_vectors(store, ids, list(live), model)
    checkpoint("after-vector")


def _apply_vectors(store: Projected, ids: Sequence[int], live: list[int], model: str) -> None:
    import numpy as np
    got = store.catalog.vectors(model, live)
    dim = _dim(got)
    if dim:
        vec_ids = [i for i, _ in got]
        vecs = np.frombuffer(b"".join(v for _, v in got), dtype=np.float32).reshape(len(got), dim)
        store.vector.apply(ids, vec_ids, vecs, dim, store.spec)
    elif store.vector.count():
        store.vector.apply(ids, [], None, store.vector.dim or 1, store.spec)


def _check_lexical(store: Projected, n: int, batch: int) -> bool:
    """Rebuild the lexical index from the ledger when its count is off or deleted documents
    skew BM25 (:func:`hybrid.store.base.lexical_drifted`); whether it was rebuilt."""
    lex = store.lexical
    if n and not lex.section_count():
        log.info("%s: building the section index", store.name)
    elif lex.count() != n:
        log.warning("%s: lexical index out of step (%d docs, %d chunks); rebuilding from the catalog",
                    store.name, lex.count(), n)
    elif lexical_drifted(lex.deleted_docs(), n):
        log.info("%s: compacting the lexical index (%d deleted documents in its statistics)",
                 store.name, lex.deleted_docs())
    else:
        return False
    lex.rebuild(Reread(lambda: store.catalog.iter_chunks(batch=batch)))
    return True


def _check_vector_count(store: Projected, model: str, n: int) -> bool:
    """Rebuild the vector index from the cached vectors when its count is off or its layout is
    due to change; whether it was rebuilt."""
    if store.vector.count() != n:
        log.warning("%s: vector index out of step (%d vectors, %d chunks); rebuilding from the catalog",
                    store.name, store.vector.count(), n)
        return _rebuild_vector(store, model)
    if _vector_needs_rebuild(store, n):
        return _rebuild_vector(store, model)
    return False


def _vector_needs_rebuild(store: Projected, n: int) -> bool:
    spec = store.spec
    if not store.vector.count():
        return n > 0 and (spec.wants_ivf(n) or spec.storage != "float32")
    layout = json.loads(store.catalog.get_meta("vector_layout") or "{}")
    return store.vector.needs_rebuild(n, spec, layout.get("trained_on"))


def _rebuild_vector(store: Projected, model: str) -> bool:
    """Rebuild the vector index from the ledger's cached vectors with the layout the spec asks for."""
    dim = int(store.catalog.get_meta("dim") or 0) or store.vector.dim or 0
    if not dim:
        row = store.catalog.vectors(model, store.catalog.all_chunk_ids()[:1])
        dim = _dim(row) or 1
    ids, mat = store.catalog.vector_matrix(model, dim)
    info = store.vector.rebuild(ids, mat, dim, store.spec)
    log.info("%s: vector index built: %s", store.name, info)
    store.catalog.set_meta("vector_layout", json.dumps(info, sort_keys=True))
    return True


def _dim(got: list[tuple[int, bytes]]) -> int:
    return len(got[0][1]) // 4 if got else 0
