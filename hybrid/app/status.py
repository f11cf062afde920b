"""`hybrid status`: one row per vault, read from its catalog without opening the indexes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from hybrid.app.freshness import Changes, changes_on_disk
from hybrid.core.errors import HybridError, IndexCorrupt

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
    server: str = ""           # … when it is read-only: a standby (with its replay lag) or a read-only role
    changes: Changes | None = None  # files new, changed, deleted on disk since (owners only)
    kind: str = "notes"        # where its documents come from: notes (a folder), bookmarks, slack
    sources: dict[str, int] = field(default_factory=dict)  # documents per kind (owners only)
    # deduplication (owners only): chunks sharing their text with another, the distinct texts
    # they share, and so the embeddings (and cached vectors) saved: shared_chunks - shared_texts
    shared_chunks: int = 0
    shared_texts: int = 0
    # the model servers its text is sent to (hybrid.app.remote): "URL (what, where[, not confirmed])"
    sends_to: list[str] = field(default_factory=list)

    @property
    def embeddings_saved(self) -> int:
        return self.shared_chunks - self.shared_texts

    def to_dict(self) -> dict:
        return {**asdict(self), "embeddings_saved": self.embeddings_saved}



def vault_status(v: Vault, settings: Settings, *,
                 agent_counts: Callable[[Vault], tuple[int, int]] | None = None) -> VaultStatus:
    """The status of vault ``v``. With ``agent_counts`` (given for an agent's view): its
    (notes, chunks) replace the catalog's, and there are no sizes, pending work or changes."""
    from hybrid.store import backend
    store = backend(v)
    st = VaultStatus(v.name, str(v.path), v.path.is_dir() if v.is_folder else v.path.exists(), False,
                     kind=v.kind)
    try:
        st.store = store.where(v)
        facts = store.facts(v, sizes=agent_counts is None)
        if facts is None:
            return st  # not indexed yet
        st.indexed = True
        st.notes, st.chunks, st.embedder, st.dim = facts.notes, facts.chunks, facts.embedder, facts.dim
        st.last_indexed, st.vector_index, st.server = facts.last_indexed, facts.vector_index, facts.server
        if agent_counts is not None:  # what agents see: their counts, no sizes, pending work or changes
            st.notes, st.chunks = agent_counts(v)
        else:
            st.pending, st.disk_bytes = facts.pending, facts.disk_bytes
            st.sources = kind_counts(facts.documents)
            st.shared_chunks, st.shared_texts = facts.shared_chunks, facts.shared_texts
            st.changes = changes_on_disk(v, settings)
    except HybridError as exc:
        # One damaged vault must not hide the others; `hybrid index` heals it.
        st.indexed = isinstance(exc, IndexCorrupt)  # there, but unreadable
        st.error = f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    return st


def kind_counts(paths: Iterable[str]) -> dict[str, int]:
    """Documents per kind (:mod:`hybrid.sources`), in the kinds' order, kinds with none left out."""
    from hybrid.sources import KINDS, kind_of
    got = Counter(kind_of(p) for p in paths)
    return {k: got[k] for k in KINDS if got[k]}
