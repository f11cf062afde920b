"""One vault's on-disk index: the catalog plus its two derived projections, kept in step.

Layout under the vault's index dir: ``catalog.sqlite`` (the ledger), ``lexical/`` (tantivy),
``lexical-agent/`` (tantivy, the agent view: :mod:`hybrid.store.agent.view`), ``vectors.faiss``
(FAISS). The folder itself (its lock, the names hybrid may delete, the re-embed swap) is
:mod:`hybrid.store.local.layout`'s.

The derived indexes are projections of the catalog, so a writer that finds one unreadable
deletes its files and rebuilds it from the catalog; an unreadable catalog is moved aside (to
``catalog.sqlite.corrupt-<time>``) and rebuilt from the notes. A re-embed builds a complete new
index beside the old one and swaps folders when it is done, so until then the old one answers.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from hybrid.core.errors import CatalogCorrupt, IndexCorrupt
from hybrid.core.faults import checkpoint
from hybrid.core.files import lock_dir, sibling
from hybrid.store import sync
from hybrid.store.agent import index as agent_index
from hybrid.store.agent.view import META_KEY, AgentView
from hybrid.store.base import NoteFilter, StoreNotes, SyncStats, VacuumReport, VectorSpec
from hybrid.store.local.catalog import Catalog
from hybrid.store.local.layout import (
    AGENT_LEXICAL,
    LEXICAL_DIRS,
    REEMBED_READY,
    REEMBED_TMP,
    folder_bytes,
    recover_reembed,
    remove_tree,
    swap_in,
)
from hybrid.store.local.lexical import TantivyIndex
from hybrid.store.local.vector import FaissIndex
from hybrid.store.port import LexicalIndex, VectorIndex

if TYPE_CHECKING:
    from hybrid.store.agent.redact import Redactor

log = logging.getLogger("hybrid")
T = TypeVar("T")



def reembed_beside(directory: Path, build: Callable[[VaultStore], T], indexes: IndexPlace | None = None) -> T:
    """Run ``build`` on an empty store in ``<dir>.reembed-tmp`` and, once it returns, swap that
    folder in for ``directory`` (the caller holds the lock). Until the swap the old index keeps
    answering; if ``build`` fails or the process dies, the old one stays."""
    tmp, ready = sibling(directory, REEMBED_TMP), sibling(directory, REEMBED_READY)
    remove_tree(tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    store = VaultStore(tmp, indexes=indexes)
    try:
        result = build(store)
    finally:
        store.close()
    checkpoint("reembed-before-swap")
    os.rename(tmp, ready)
    swap_in(directory)
    return result


def open_writer(directory: Path, indexes: IndexPlace | None = None) -> VaultStore:
    """Open a vault's store for the indexer, which holds the lock: finish an interrupted
    re-embed, and move an unreadable catalog aside (it is rebuilt from the notes)."""
    recover_reembed(directory)
    directory.mkdir(parents=True, exist_ok=True)
    try:
        if _empty_catalog(directory):
            raise CatalogCorrupt("it is an empty file")
        return VaultStore(directory, indexes=indexes)
    except CatalogCorrupt as exc:
        return reopen_without_catalog(directory, exc, indexes)


def reopen_without_catalog(directory: Path, problem: Exception, indexes: IndexPlace | None = None) -> VaultStore:
    """Move the unreadable catalog aside and open a fresh store in its place (the caller holds
    the lock; the notes rebuild it), noting the repair for the index report."""
    moved = quarantine_catalog(directory)
    store = VaultStore(directory, indexes=indexes)
    store.heal_note(f"{directory.name}: the catalog is unreadable ({problem}); moved it to "
                    f"{moved.name} and rebuilding the index from the notes")
    return store


def _empty_catalog(directory: Path) -> bool:
    """A zero-byte catalog with no WAL content (SQLite would read it as a new, empty database,
    silently orphaning the derived indexes). With a WAL beside it, it is a first index whose
    pages are all still in the WAL, which SQLite reads correctly."""
    cat, wal = directory / "catalog.sqlite", directory / "catalog.sqlite-wal"
    try:
        return cat.stat().st_size == 0 and (not wal.exists() or wal.stat().st_size == 0)
    except FileNotFoundError:
        return False


def quarantine_catalog(directory: Path) -> Path:
    """Move ``catalog.sqlite`` (and its WAL, which belongs to it) aside to
    ``catalog.sqlite.corrupt-<time>``; drop its -shm (a cache SQLite rebuilds)."""
    src = directory / "catalog.sqlite"
    stamp = time.strftime("%Y%m%dT%H%M%S")
    dst = directory / f"catalog.sqlite.corrupt-{stamp}"
    n = 1
    while dst.exists():
        n += 1
        dst = directory / f"catalog.sqlite.corrupt-{stamp}-{n}"
    os.replace(src, dst)
    wal = directory / "catalog.sqlite-wal"
    if wal.exists():
        os.replace(wal, directory / f"{dst.name}-wal")
    (directory / "catalog.sqlite-shm").unlink(missing_ok=True)
    return dst


def _file_identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _check_kinds(directory: Path) -> None:
    """Each of hybrid's names must be what hybrid makes (a folder ``lexical``, files for the
    rest). Something else under those names was not made by hybrid, so it is not deleted:
    one line says what to move away."""
    kinds = [*((d, True) for d in LEXICAL_DIRS), ("catalog.sqlite", False), ("vectors.faiss", False)]
    for name, want_dir in kinds:
        path = directory / name
        if path.exists() and path.is_dir() != want_dir:
            kind = "a folder" if path.is_dir() else "a file"
            raise IndexCorrupt(f"{path} is {kind}, which hybrid did not create there; move it "
                               f"away and run `hybrid index`")


class IndexPlace(Protocol):
    """Where a store over the SQLite ledger keeps its derived indexes: tantivy and FAISS files
    in the index folder (:class:`LocalIndexes`), or a search service's collections
    (:mod:`hybrid.store.milvus`). A new search backend is this and its two index classes."""

    def lexical(self, store: VaultStore, agent: bool) -> LexicalIndex:
        """The owner's lexical index, or (``agent``) the agent view's; a writer's open heals
        one it finds unreadable (emptied, to be rebuilt from the ledger)."""
        ...

    def vector(self, store: VaultStore) -> VectorIndex:
        """The vector index."""
        ...

    def drop(self, store: VaultStore) -> None:
        """Delete what it holds for ``store`` (the ledger is new: they project an old one)."""
        ...

    def close(self) -> None:
        """Let go of what it holds open (a connection); the store closes it."""
        ...


class LocalIndexes:
    """tantivy folders (``lexical/``, ``lexical-agent/``) and a FAISS file (``vectors.faiss``)
    beside the ledger in the index folder."""

    def vector(self, store: VaultStore) -> FaissIndex:
        return FaissIndex(store.directory / "vectors.faiss")

    def lexical(self, store: VaultStore, agent: bool) -> TantivyIndex:
        name = AGENT_LEXICAL if agent else "lexical"
        path = store.directory / name
        if not store.writable:
            return TantivyIndex(path, create=not agent)  # as before: a reader never creates the agent index
        lex: TantivyIndex | None = None
        meta = f"{name}_verified" if agent else "lexical_verified"
        try:
            lex = TantivyIndex(path)
            known = json.loads(store.catalog.get_meta(meta) or "{}")
            checked = lex.verify(known)
            if checked != known:
                store.catalog.set_meta(meta, json.dumps(checked, sort_keys=True))
            return lex
        except IndexCorrupt as exc:
            problem = str(exc)
        lex = None  # close tantivy's handle on the damaged files before they go
        store.heal_note(f"{store.name}: {name} index unreadable ({problem}); rebuilding it from the catalog")
        TantivyIndex.remove_files(path)
        if agent:
            store.catalog.set_meta(META_KEY, "")  # rebuilt by the next sync
        return TantivyIndex(path)

    def drop(self, store: VaultStore) -> None:
        if (store.directory / "lexical").exists() or (store.directory / "vectors.faiss").exists():
            log.info("%s: new catalog; dropping the old derived indexes", store.name)
        for sub in LEXICAL_DIRS:
            TantivyIndex.remove_files(store.directory / sub)
        FaissIndex(store.directory / "vectors.faiss").destroy()

    def close(self) -> None:
        """Nothing is held open between calls but files the indexes reopen."""


class VaultStore(StoreNotes):
    """A vault's store over the SQLite ledger in its index folder (:class:`hybrid.store.port.Store`),
    its derived indexes where ``indexes`` keeps them (default: tantivy and FAISS files beside it)."""

    hidden_files: frozenset[int] = frozenset()  # its owner sees every note
    serves_stale_agent_view = False  # an agent index built for other settings serves nothing

    def __init__(self, directory: Path, create: bool = True, indexes: IndexPlace | None = None):
        """``create``: a writer's open (the indexer's, under the lock), which creates what is
        missing and heals unreadable derived indexes; otherwise a reader's, which never
        writes the catalog's schema, so it cannot queue behind an indexer."""
        self.writable = create
        self.warnings: list[str] = []
        if not create and not (directory / "catalog.sqlite").exists():
            ready = sibling(directory, REEMBED_READY)  # a re-embed killed mid-swap: its
            if (ready / "catalog.sqlite").exists():    # complete new index answers meanwhile
                directory = ready
        self.directory = directory
        _check_kinds(directory)
        catalog = directory / "catalog.sqlite"
        if not create and not catalog.exists():
            raise IndexCorrupt("not indexed yet")
        self.catalog = Catalog(catalog, readonly=not create)
        if not create and self.catalog.get_meta("schema_version") is None:
            self.catalog.close()  # an empty file: a first index that has not got far yet
            raise IndexCorrupt("not indexed yet")
        self._identity = _file_identity(catalog)
        self.indexes: IndexPlace = indexes or LocalIndexes()
        self._lexical: LexicalIndex | None = None
        self._agent_lexical: LexicalIndex | None = None
        self.spec = VectorSpec()  # the indexer sets it from the settings
        if create and self.catalog.fresh:
            self.indexes.drop(self)  # projections of a catalog that no longer exists
        self.vector = self.indexes.vector(self)

    def close(self) -> None:
        self.catalog.close()
        self.indexes.close()

    @property
    def name(self) -> str:
        """Its vault's name (its folder's), for messages."""
        return self.directory.name

    @property
    def ledger(self) -> Catalog:
        return self.catalog

    def agent_arms(self, hidden_files: Collection[int], view: AgentView) -> tuple[LexicalIndex, VectorIndex]:
        """The agent view's own lexical index (redacted text; hidden notes are left out by
        :class:`hybrid.store.agent.store.AgentStore`) and the one vector index."""
        return self.agent_lexical, self.vector

    def agent_view_current(self, view: AgentView) -> bool:
        """Whether the agent index was built with ``view``'s settings."""
        return agent_index.current(self, view)

    def refresh_agent_view(self, view: AgentView, redactor: Redactor | None, wait: float) -> None:
        """Rebuild the agent index from the ledger as a writer (the lock held, waiting up to
        ``wait`` seconds: IndexLocked when an indexer keeps it)."""
        lock = lock_dir(self.directory, wait)
        try:
            writer = VaultStore(self.directory, indexes=self.indexes)
            try:
                agent_index.check(writer, view, redactor, 5000)
            finally:
                writer.close()
        finally:
            lock.release()

    def stale(self) -> bool:
        """Whether the catalog this store reads was replaced on disk since it was opened (a
        re-embed swapped folders, or the indexer rebuilt an unreadable catalog): a long-lived
        reader should then reopen."""
        return _file_identity(self.directory / "catalog.sqlite") != self._identity

    @property
    def lexical(self) -> LexicalIndex:
        """Opened on first use, so a command that does not need it (a re-embed) is never
        stopped by it; a writer that finds it unreadable rebuilds it."""
        if self._lexical is None:
            self._lexical = self._open_lexical(agent=False)
        return self._lexical

    @property
    def agent_lexical(self) -> LexicalIndex:
        """The agent view's lexical index (see :mod:`hybrid.store.agent.view`): opened, and on
        the writer path verified or healed, like the owner's."""
        if self._agent_lexical is None:
            self._agent_lexical = self._open_lexical(agent=True)
        return self._agent_lexical

    def _open_lexical(self, agent: bool) -> LexicalIndex:
        lex = self.indexes.lexical(self, agent)
        lex.prop_ids = lambda props: self.catalog.filter_ids(NoteFilter(props=props))
        return lex

    def lock(self, timeout: float = 0):
        """The writer lock; raises IndexLocked naming the holder when it cannot be had."""
        return lock_dir(self.directory, timeout)

    def sync_derived(self, model: str | None, batch: int = 5000, view: AgentView | None = None,
                     redactor: Redactor | None = None) -> SyncStats:
        """Bring tantivy and FAISS (and, with ``view``, the agent index) in line with the
        catalog (:func:`hybrid.store.sync.sync_derived`)."""
        return sync.sync_derived(self, model, batch, view, redactor)

    def reclaim(self, model: str | None, force: bool = False) -> int:
        """End-of-run housekeeping: drop unused cached embeddings past the cache bound (all of
        them with ``force``) and truncate the WAL. Returns the embeddings deleted."""
        deleted = self.catalog.reclaim_embeddings(model, force) if model else 0
        self.catalog.checkpoint_wal()
        return deleted


def vacuum_index(directory: Path, name: str, wait: float = 0, indexes: IndexPlace | None = None,
                 prune: Callable[[Any], int] | None = None) -> VacuumReport:
    """Reclaim a vault index's disk space under the writer lock: delete every unused cached
    embedding, compact tantivy if it holds deleted documents, VACUUM the catalog and truncate
    its WAL, and ``prune(catalog)`` (the OCR cache's unused entries: its count is the report's
    ``ocr_removed``). Readers keep working throughout (they see the old pages until they are
    done)."""
    if not (directory / "catalog.sqlite").exists():
        raise IndexCorrupt(f"vault {name!r} is not indexed yet: run `hybrid index --vault {name}`")
    report = VacuumReport(name)
    lock = lock_dir(directory, wait)
    try:
        recover_reembed(directory)
        report.bytes_before = folder_bytes(directory)
        store = VaultStore(directory, indexes=indexes)
        try:
            report.embeddings_removed = store.reclaim(store.embedder_id, force=True)
            if prune is not None:
                report.ocr_removed = prune(store.catalog)
            if not store.catalog.journal() and store.lexical.deleted_docs():
                store.lexical.rebuild(store.catalog.iter_chunks())
                report.lexical_compacted = True
            store.catalog.vacuum()
        finally:
            store.close()
        report.bytes_after = folder_bytes(directory)
    finally:
        lock.release()
    return report
