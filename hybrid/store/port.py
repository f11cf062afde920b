"""The store port: what every store backend offers the layers above, as typed protocols.

A vault's store is three seams (docs/internals.md#stores):

- the :class:`Ledger`: files, chunks, cached embeddings, the sync journal and meta; the named
  queries the layers above ask instead of writing SQL;
- a :class:`LexicalIndex` (BM25 over chunks and sections) and a :class:`VectorIndex` (nearest
  neighbours), each a projection of the ledger with a write side (apply the journal's removed and
  added rows, rebuild from batches, count, destroy) and a search side (:class:`LexicalArm`,
  :class:`VectorArm`). :func:`hybrid.store.sync.sync_derived` drives any pair from the ledger's
  journal; the agent view is one more lexical index fed the visible, redacted rows
  (:mod:`hybrid.store.agent.index`).

A backend (:mod:`hybrid.store.local`, :mod:`hybrid.store.pg`, or one a package declares:
:mod:`hybrid.core.store_url`) implements :class:`Backend` and :class:`Store`; the agent view
(:class:`hybrid.store.agent.store.AgentStore`) wraps a store and offers :class:`Searchable`, the
part a search reads. Nothing above ``hybrid.store`` names a backend. The contract is checked by
one suite run against every store kind and the agent view (tests/contract/store).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from hybrid.store.base import EVERY_NOTE
from hybrid.store.ledger import Ledger, Reading

if TYPE_CHECKING:
    import numpy as np

    from hybrid.core.config import Vault
    from hybrid.core.errors import HybridError
    from hybrid.store.agent.redact import Redactor
    from hybrid.store.agent.view import AgentView
    from hybrid.store.base import (
        ChunkRow,
        NoteFilter,
        StoreFacts,
        SyncStats,
        VacuumReport,
        VectorSpec,
    )
    from hybrid.store.lexicon import LexicalQuery, StemAnalyzer
    from hybrid.store.props import PropFilter

T = TypeVar("T")


class LexicalArm(Protocol):
    """BM25 over chunks and whole sections (:mod:`hybrid.store.lexicon`), filtered inside the
    query by ``where`` (folder, tag, date, kind, frontmatter property); ``fuzzy`` lets misspelled
    words match one edit away (the query's ``typos``, else each word of 5+ letters the vault does
    not hold),
    ``scored=False`` skips scoring, ``stopwords=False`` keeps stopwords as terms."""

    # whose fitted fusion and confidence parameters its rankings take (hybrid.retrieval.fitted):
    # "local" (tantivy's BM25), "postgresql" (BM25F in SQL)
    store_kind: str

    @property
    def stem(self) -> StemAnalyzer:
        """The analyzer the arm reads text with (:func:`hybrid.store.lexicon.stem_analyzer`)."""
        ...

    def known(self, words: Sequence[str]) -> set[str]:
        """The ``words`` (lower case) some chunk holds, as typed or by their stem: no typos."""
        ...

    def corrections(self, words: Sequence[str]) -> dict[str, str]:
        """Spelling repairs for ``words`` from the indexed vocabulary (``{typed: repaired}``):
        each word of 5+ letters not :meth:`known`, to the most frequent indexed word one edit
        away with the same first letter."""
        ...

    def search(self, q: LexicalQuery, limit: int, *, where: NoteFilter = EVERY_NOTE, fuzzy: bool = True,
               scored: bool = True, stopwords: bool = True) -> list[tuple[int, float]]:
        """(chunk id, score) of the best chunks of the notes ``where`` lets through, best first."""
        ...

    def search_units(self, q: LexicalQuery, limit: int, unit: str = "chunk", *,
                     where: NoteFilter = EVERY_NOTE, fuzzy: bool = True, scored: bool = True,
                     stopwords: bool = True) -> list[tuple[list[int], float]]:
        """(chunk ids of a unit, score) of the best ``unit`` s (``chunk`` or ``section``)."""
        ...

    def matching_ids(self, q: LexicalQuery, limit: int = 1_000_000, *, where: NoteFilter = EVERY_NOTE,
                     fuzzy: bool = True, scored: bool = True, stopwords: bool = True) -> set[int]:
        """The chunk ids that match ``q`` at all (unranked)."""
        ...


class VectorArm(Protocol):
    """Nearest neighbours by inner product over normalised vectors, keyed by chunk id."""

    @property
    def hidden_files(self) -> Collection[int]:
        """Notes this arm leaves out itself (an agent's, in SQL)."""
        ...

    @property
    def exact(self) -> bool:
        """Whether a search scans every vector (no approximate index)."""
        ...

    def count(self) -> int:
        ...

    @property
    def filters_in_query(self) -> bool:
        """Whether :meth:`search` takes note filters (``where``) as conditions of its own
        query (PostgreSQL); else the caller turns them into ``allowed``/``banned`` ids."""
        ...

    def search(self, query: np.ndarray, k: int, allowed: Collection[int] | None = None,
               banned: Collection[int] = (), where: NoteFilter | None = None) -> list[tuple[int, float]]:
        """(chunk id, score) of the ``k`` nearest, best first; only ``allowed`` ids when given
        (inside the search, not by trimming), never ``banned`` ones, and only of notes passing
        ``where`` (only where ``filters_in_query``)."""
        ...


class LexicalIndex(LexicalArm, Protocol):
    """A lexical arm with its write side: a projection of the ledger's live chunks (and their
    heading sections: :func:`hybrid.store.lexicon.units`), kept by :func:`hybrid.store.sync.sync_derived`."""

    # the chunk ids of the notes passing property filters (the ledger's filter_ids, set by the
    # store): property filters are tested on the ledger, then given to the index as those ids
    prop_ids: Callable[[tuple[PropFilter, ...]], set[int]] | None

    def apply(self, removed: Iterable[int], added: Iterable[list[ChunkRow]]) -> None:
        """Delete the documents of chunk ids ``removed`` (a section goes with any chunk of it),
        add those of the chunks in ``added`` (batches, in id order; their ids are among
        ``removed``, so a replay never duplicates). Idempotent; what readers see changes once.
        ``added`` may be a :class:`hybrid.store.base.Reread`, which an index may read twice."""
        ...

    def rebuild(self, batches: Iterable[list[ChunkRow]]) -> None:
        """Replace every document by those of ``batches`` (read twice if need be when a
        :class:`hybrid.store.base.Reread`); readers see the old ones meanwhile."""
        ...

    def count(self) -> int:
        """Chunk documents held."""
        ...

    def section_count(self) -> int:
        """Section documents held."""
        ...

    def deleted_docs(self) -> int:
        """Deleted documents still weighing on its BM25 statistics (0 where deletes are exact)."""
        ...

    def destroy(self) -> None:
        """Delete everything it holds (it is rebuilt from the ledger)."""
        ...


class VectorIndex(VectorArm, Protocol):
    """A vector arm with its write side: one vector per live chunk, from the ledger's cache."""

    @property
    def dim(self) -> int | None:
        """The vectors' dimension (None: empty)."""
        ...

    def apply(self, removed: Iterable[int], added_ids: list[int], added_vecs: np.ndarray | None,
              dim: int, spec: VectorSpec) -> None:
        """Remove ``removed`` and ``added_ids``, then add ``added_vecs`` under ``added_ids``."""
        ...

    def rebuild(self, ids: list[int] | np.ndarray, vecs: np.ndarray, dim: int, spec: VectorSpec) -> dict:
        """Replace every vector by these, laid out as ``spec`` asks; the layout, in words (the
        ledger keeps it as ``vector_layout``)."""
        ...

    def needs_rebuild(self, n: int, spec: VectorSpec, trained_on: int | None) -> bool:
        """Whether ``n`` vectors under ``spec`` want a rebuild rather than a patch (a trained
        layout ``trained_on`` vectors has grown past it, the storage changed)."""
        ...

    def destroy(self) -> None:
        """Delete every vector (they are rebuilt from the ledger's cache)."""
        ...


class Searchable(Protocol):
    """What a search reads of one vault (:func:`hybrid.retrieval.pipeline.run_search`): its
    owner's store, or the agent view of it."""

    @property
    def lexical(self) -> LexicalArm: ...
    @property
    def vector(self) -> VectorArm: ...
    @property
    def catalog(self) -> Reading: ...
    @property
    def ledger(self) -> Ledger:
        """The whole ledger under it (notes of no text, counts)."""
        ...
    @property
    def hidden_files(self) -> Collection[int]:
        """File ids its reader may not see."""
        ...
    @property
    def embedder_id(self) -> str | None: ...


class Store(Searchable, Protocol):
    """One vault's store, as a backend opens it (:func:`hybrid.store.open_store`)."""

    @property
    def catalog(self) -> Ledger: ...

    directory: Path          # its folder (a PostgreSQL store: the vault's name, for messages)
    warnings: list[str]      # what opening it repaired or found, for the index report
    writable: bool
    spec: VectorSpec         # the vector layout the indexer asks for

    def stale(self) -> bool:
        """Whether the store was replaced under this handle (re-embedded, rebuilt)."""
        ...

    def close(self) -> None: ...

    def heal_note(self, message: str) -> None:
        """Record that opening the store repaired something (one warning)."""
        ...

    def sync_derived(self, model: str | None, batch: int = 5000, view: AgentView | None = None,
                     redactor: Redactor | None = None) -> SyncStats:
        """Bring both arms (and the agent view's, with ``view``) in line with the ledger."""
        ...

    def reclaim(self, model: str | None, force: bool = False) -> int:
        """Drop cached embeddings no chunk uses, beyond the cache kept; rows removed."""
        ...

    def agent_arms(self, hidden_files: Collection[int], view: AgentView) -> tuple[LexicalArm, VectorArm]:
        """The arms an agent searches: its own lexical index over redacted text, and the
        vector arm (hidden notes are left out by :mod:`hybrid.store.agent.store` or here)."""
        ...

    # the agent view's upkeep: the facade asks, the backend knows how
    @property
    def serves_stale_agent_view(self) -> bool:
        """Whether it can serve agents while their view is being redone."""
        ...

    def agent_view_current(self, view: AgentView) -> bool:
        """Whether what agents read was written for ``view`` (its settings and redaction rules)."""
        ...

    def refresh_agent_view(self, view: AgentView, redactor: Redactor | None, wait: float) -> None:
        """Redo, as a writer, what agents read that was written for another view
        (IndexLocked when an indexer holds the vault for longer than ``wait`` seconds)."""
        ...


class Backend(Protocol):
    """Where a vault's store lives, and what can be done to it whole. :func:`hybrid.store.backend`
    picks one from the vault's ``store`` setting; nothing above ``hybrid.store`` reads that
    setting or names a backend."""

    name: str  # its kind's name (hybrid.core.store_url.StoreKind): "local", "postgresql"

    def open(self, vault: Vault, *, writer: bool = False, wait: float = 0) -> Store:
        """The vault's store; a reader's open (VaultError when it is not indexed yet) unless
        ``writer`` (the indexer's, holding the vault's writer lock, waiting ``wait`` seconds)."""
        ...

    def write(self, vault: Vault, run: Callable[[Store], T], *, reembed: bool, wait: float,
              view: AgentView, redactor: Redactor | None) -> T:
        """Run one index job as the vault's only writer; crash-safe at every step. ``reembed``:
        a store built anew, replacing the old one when ``run`` returns (until then the old one
        answers). ``run`` may be called again on a fresh ledger when the old one proves
        unreadable mid-run (the notes rebuild it)."""
        ...

    def explain(self, exc: BaseException) -> HybridError | None:
        """The one-line error for an exception of its driver that escaped a store method
        unexplained (None: not one it knows)."""
        ...

    def where(self, vault: Vault) -> str | None:
        """Where the store is, to show (a database URL without its password; None: the
        vault's own index folder)."""
        ...

    def facts(self, vault: Vault, *, sizes: bool) -> StoreFacts | None:
        """Its counts, model and layout for `hybrid status` (None: not indexed yet);
        IndexCorrupt when it cannot be read."""
        ...

    def vacuum(self, vault: Vault, wait: float) -> VacuumReport:
        """Reclaim space: unused cached embeddings, deleted documents, free pages."""
        ...

    def purge(self, vault: Vault) -> list[str]:
        """Remove what this machine keeps of the store (a shared database is left to the
        team: :meth:`drop` deletes it); the names that could not be removed."""
        ...

    def drop(self, vault: Vault) -> None:
        """Delete the store wherever it is (a throwaway vault's: an evaluation's)."""
        ...

    def rename(self, vault: Vault, new_name: str, new_index_dir: Path) -> None:
        """Keep the store under a new vault name (VaultError where a name is shared)."""
        ...
