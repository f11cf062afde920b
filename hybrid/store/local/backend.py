"""The local backend (:class:`hybrid.store.port.Backend`): a vault's store is its index folder
under hybrid's data folder (SQLite ledger, tantivy, FAISS), written by one process at a time
under a lock file beside it."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from hybrid.core.errors import CatalogCorrupt, HybridError, IndexCorrupt
from hybrid.core.files import lock_dir
from hybrid.store.base import StoreFacts, VacuumReport, not_indexed_yet
from hybrid.store.local.layout import folder_bytes, purge_index_dir, recover_reembed
from hybrid.store.local.store import (
    IndexPlace,
    VaultStore,
    open_writer,
    reembed_beside,
    reopen_without_catalog,
    vacuum_index,
)

if TYPE_CHECKING:
    from hybrid.core.config import Vault
    from hybrid.store.agent.redact import Redactor
    from hybrid.store.agent.view import AgentView
    from hybrid.store.port import Store

T = TypeVar("T")


class LocalBackend:
    """Subclassed by a backend that keeps the same ledger with its indexes elsewhere
    (:meth:`indexes`: :mod:`hybrid.store.milvus`)."""
    name = "local"

    def indexes(self, vault: Vault) -> IndexPlace | None:
        """Where ``vault``'s derived indexes are kept (None: tantivy and FAISS files beside the ledger)."""
        return None

    def open(self, vault: Vault, *, writer: bool = False, wait: float = 0) -> VaultStore:
        if writer:
            raise ValueError("a local store is written through write(), under its lock")
        try:
            return VaultStore(vault.index_dir, create=False, indexes=self.indexes(vault))
        except IndexCorrupt as exc:
            if str(exc) == "not indexed yet":
                raise not_indexed_yet(vault.name) from None
            raise

    def write(self, vault: Vault, run: Callable[[Store], T], *, reembed: bool, wait: float,
              view: AgentView, redactor: Redactor | None) -> T:
        """Under the folder's lock: a re-embed is built beside the old index and swapped in;
        otherwise the store is opened as the writer, and a ledger found damaged (at open or
        mid-run) is moved aside and ``run`` starts over from the notes (the ledger is a cache
        of notes and embeddings: nothing is lost but the time to embed again)."""
        directory, indexes = vault.index_dir, self.indexes(vault)
        lock = lock_dir(directory, wait)
        try:
            if reembed:
                recover_reembed(directory)
                return reembed_beside(directory, run, indexes)
            store = open_writer(directory, indexes)
            try:
                try:
                    return run(store)
                except CatalogCorrupt as exc:
                    store.close()
                    store = reopen_without_catalog(directory, exc, indexes)
                    return run(store)
            finally:
                store.close()
        finally:
            lock.release()

    def explain(self, exc: BaseException) -> HybridError | None:
        """Nothing of the local store's escapes unexplained (its errors are hybrid's own)."""
        return None

    def where(self, vault: Vault) -> str | None:
        return None

    def facts(self, vault: Vault, *, sizes: bool) -> StoreFacts | None:
        from hybrid.embedders.base import canonical_id
        from hybrid.store.local.catalog import Catalog
        index_dir = vault.index_dir
        if not (index_dir / "catalog.sqlite").exists():
            return None
        facts = StoreFacts()
        try:
            cat = Catalog(index_dir / "catalog.sqlite", readonly=True)
            try:
                facts.notes, facts.chunks = cat.file_count(), cat.chunk_count()
                facts.embedder = canonical_id(cat.get_meta("embedder"))  # as VaultStore.embedder_id reads it
                facts.dim = int(cat.get_meta("dim") or 0) or None
                ts = cat.get_meta("last_indexed")
                facts.last_indexed = dt.datetime.fromtimestamp(float(ts)).isoformat(timespec="seconds") \
                    if ts else None
                facts.pending = len(cat.journal())
                facts.vector_index = _layout_text(cat.get_meta("vector_layout"), facts.chunks)
                facts.documents = list(cat.files())
                facts.shared_chunks, facts.shared_texts = cat.sharing()
            finally:
                cat.close()
        except sqlite3.DatabaseError as exc:
            raise IndexCorrupt(str(exc) or type(exc).__name__) from None
        if sizes:
            facts.disk_bytes = folder_bytes(index_dir)
        return facts

    def vacuum(self, vault: Vault, wait: float) -> VacuumReport:
        from hybrid.sources.ocr import prune_cache
        return vacuum_index(vault.index_dir, vault.name, wait, self.indexes(vault),
                            prune=lambda catalog: prune_cache(vault, catalog))

    def purge(self, vault: Vault) -> list[str]:
        return purge_index_dir(vault.index_dir)

    def drop(self, vault: Vault) -> None:
        purge_index_dir(vault.index_dir)

    def rename(self, vault: Vault, new_name: str, new_index_dir: Path) -> None:
        if vault.index_dir.exists():
            vault.index_dir.rename(new_index_dir)


def _layout_text(meta: str | None, chunks: int) -> str:
    """`exact (flat, float32)` or `approximate (IVF 2048 lists, nprobe 24, float16, recall@10 0.992)`."""
    lay = json.loads(meta) if meta else {"kind": "flat", "storage": "float32"}
    if lay.get("kind") != "ivf":
        return f"exact (flat, {lay.get('storage', 'float32')})" if chunks else ""
    return (f"approximate (IVF {lay['nlist']} lists, nprobe {lay['nprobe']}, {lay['storage']}, "
            f"calibrated recall@10 {lay.get('calibrated_recall')})")


BACKEND = LocalBackend()
