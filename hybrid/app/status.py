"""`hybrid status`: one row per vault, read from its catalog without opening the indexes."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hybrid.app.freshness import Changes, changes_on_disk
from hybrid.core.errors import IndexCorrupt

if TYPE_CHECKING:
    from hybrid.core.config import Vault
    from hybrid.core.settings import Settings


@dataclass
class VaultStatus:
    name: str
    path: str
    exists: bool
    indexed: bool
    notes: int = 0
    chunks: int = 0
    embedder: str | None = None
    dim: int | None = None
    last_indexed: str | None = None
    pending: int = 0
    disk_bytes: int = 0
    vector_index: str = ""
    error: str | None = None   # the index cannot be read (run `hybrid index` to rebuild it)
    store: str | None = None   # a PostgreSQL vault's database (no password)
    changes: Changes | None = None  # files new, changed, deleted on disk since (owners only)
    kind: str = "notes"        # where its documents come from: notes (a folder), bookmarks, slack
    sources: dict[str, int] = field(default_factory=dict)  # documents per kind (owners only)

    def to_dict(self) -> dict:
        return asdict(self)



def vault_status(v: Vault, settings: Settings, *,
                 agent_counts: Callable[[Vault], tuple[int, int]] | None = None) -> VaultStatus:
    """The status of vault ``v``. With ``agent_counts`` (given for an agent's view): its
    (notes, chunks) replace the catalog's, and there are no sizes, pending work or changes."""
    if v.store:
        return _pg_status(v, settings, agent_counts)
    st = VaultStatus(v.name, str(v.path), v.path.is_dir() if v.is_folder else v.path.exists(),
                     (v.index_dir / "catalog.sqlite").exists(), kind=v.kind)
    if not st.indexed:
        return st
    try:
        _fill_status(st, v.index_dir, sizes=agent_counts is None)
        if agent_counts is not None:  # what agents see: their counts, no sizes, pending work or changes
            st.notes, st.chunks = agent_counts(v)
            st.pending = 0
            st.sources = {}
        else:
            st.changes = changes_on_disk(v, settings)
    except (IndexCorrupt, sqlite3.DatabaseError) as exc:
        # One damaged vault must not hide the others; `hybrid index` heals it.
        st.error = f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    return st


def _pg_status(v: Vault, settings: Settings,
               agent_counts: Callable[[Vault], tuple[int, int]] | None) -> VaultStatus:
    """The status of a vault kept in PostgreSQL (its store URL shown without a password)."""
    from hybrid.core.errors import HybridError, VaultError
    from hybrid.core.store_url import redact, resolve
    from hybrid.embedders.base import canonical_id
    from hybrid.store.pg.store import open_store
    st = VaultStatus(v.name, str(v.path), v.path.is_dir(), False)
    try:
        st.store = redact(resolve(v.store or "", v.name))
        store = open_store(v)
    except VaultError:
        return st  # not indexed yet
    except HybridError as exc:
        st.error = str(exc)
        return st
    try:
        cat = store.catalog
        st.indexed = True
        st.notes, st.chunks = cat.file_count(), cat.chunk_count()
        st.embedder = canonical_id(cat.get_meta("embedder"))
        st.dim = store.vector.dim
        ts = cat.get_meta("last_indexed")
        st.last_indexed = dt.datetime.fromtimestamp(float(ts)).isoformat(timespec="seconds") if ts else None
        hnsw = json.loads(cat.get_meta("hnsw") or "{}")
        st.vector_index = ((f"approximate (pgvector HNSW, ef_search {hnsw.get('ef_search')}, calibrated "
                            f"recall@10 {hnsw.get('recall')})") if store.vector.has_index()
                           else "exact (pgvector scan)") if st.chunks else ""
        if agent_counts is not None:
            st.notes, st.chunks = agent_counts(v)
        else:
            st.sources = kind_counts(cat.files())
            st.changes = changes_on_disk(v, settings)
    finally:
        store.close()
    return st


def kind_counts(paths: Iterable[str]) -> dict[str, int]:
    """Documents per kind (:mod:`hybrid.sources`), in the kinds' order, kinds with none left out."""
    from hybrid.sources import KINDS, kind_of
    got = Counter(kind_of(p) for p in paths)
    return {k: got[k] for k in KINDS if got[k]}


def _fill_status(st: VaultStatus, index_dir: Path, sizes: bool = True) -> None:
    """Counts, model, last run and layout of one vault, read from its catalog (and, with
    ``sizes``, the bytes its index folder takes)."""
    from hybrid.embedders.base import canonical_id
    from hybrid.store.local.catalog import Catalog
    cat = Catalog(index_dir / "catalog.sqlite", readonly=True)
    try:
        st.notes, st.chunks = cat.file_count(), cat.chunk_count()
        st.embedder = canonical_id(cat.get_meta("embedder"))  # as VaultStore.embedder_id reads it
        st.dim = int(cat.get_meta("dim") or 0) or None
        ts = cat.get_meta("last_indexed")
        st.last_indexed = dt.datetime.fromtimestamp(float(ts)).isoformat(timespec="seconds") if ts else None
        st.pending = len(cat.journal())
        st.vector_index = _layout_text(cat.get_meta("vector_layout"), st.chunks)
        st.sources = kind_counts(cat.files())
    finally:
        cat.close()
    if sizes:
        st.disk_bytes = sum(p.stat().st_size for p in index_dir.rglob("*") if p.is_file())


def _layout_text(meta: str | None, chunks: int) -> str:
    """`exact (flat, float32)` or `approximate (IVF 2048 lists, nprobe 24, float16, recall@10 0.992)`."""
    import json
    lay = json.loads(meta) if meta else {"kind": "flat", "storage": "float32"}
    if lay.get("kind") != "ivf":
        return f"exact (flat, {lay.get('storage', 'float32')})" if chunks else ""
    return (f"approximate (IVF {lay['nlist']} lists, nprobe {lay['nprobe']}, {lay['storage']}, "
            f"calibrated recall@10 {lay.get('calibrated_recall')})")
