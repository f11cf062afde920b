"""The store port: what every store backend offers the layers above, as typed protocols.

A backend (:mod:`hybrid.store.local`, :mod:`hybrid.store.pg`) implements :class:`Store`; the
agent view (:class:`hybrid.store.agent.store.AgentStore`) wraps one and offers
:class:`Searchable`, the part a search reads. Nothing above ``hybrid.store`` names a backend:
:func:`hybrid.store.open_store` picks it from the vault's ``store`` setting. The contract is
checked by one suite run against every backend and the agent view (tests/contract/store); a
third backend starts by passing it.

The ledger (:class:`Catalog`) answers named queries: no SQL is written above the store.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from hybrid.store.base import EVERY_NOTE

if TYPE_CHECKING:
    import numpy as np

    from hybrid.core.config import Vault
    from hybrid.core.errors import HybridError
    from hybrid.sources import FetchedPage
    from hybrid.store.base import (
        ChunkRow,
        FileRow,
        NoteFilter,
        NoteMeta,
        NoteRecord,
        StoreFacts,
        SyncStats,
        VacuumReport,
        VectorSpec,
    )
    from hybrid.store.lexicon import LexicalQuery
    from hybrid.store.props import Row

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
    def stem(self) -> Any:
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


class Reading(Protocol):
    """What a search reads of a ledger, as its reader (the owner, or an agent) may see it."""

    def shows(self, text: str) -> bool:
        """Whether ``text`` (a tag, a name) may be shown to this reader as it is."""
        ...

    def shows_value(self, key: str, value: str) -> bool:
        """Whether property ``key``'s ``value`` (both as written) may be shown to this reader as
        it is, and so be matched, suggested or ranged for it."""
        ...

    def hints_lone_values(self) -> bool:
        """Whether a property value that one visible note alone holds may be suggested to this
        reader, or end a range it is told, when a filter matches nothing: the owner's yes; an
        agent's no, since a secret under a key no rule names (``lockbox: 4821``) is one note's,
        while the values hints are for (a status, a year) are shared by notes."""
        ...

    def shown_rows(self, properties: dict[str, Any]) -> list[tuple[Row, str]]:
        """The property rows of a note's frontmatter (with each value as written,
        :func:`hybrid.store.props.raw_values`) this reader is shown as they are: the ones it may
        match, be suggested or be given a range of (the note judged whole)."""
        ...

    def filter_ids(self, where: NoteFilter = EVERY_NOTE, among: Sequence[int] | None = None) -> set[int]:
        """Chunk ids of the notes ``where`` lets through (only those in ``among`` when given)."""
        ...

    def note_ids(self, where: NoteFilter = EVERY_NOTE) -> Iterator[int]:
        """File ids of the live notes ``where`` lets through, lazily (``where.props``: every one
        of these frontmatter property filters, :mod:`hybrid.store.props`)."""
        ...

    def chunks(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        """The rows of the live chunks ``ids`` (an agent's: redacted, hidden ones left out)."""
        ...

    def data_version(self) -> int:
        """Changes whenever any writer committed to this ledger."""
        ...

    @property
    def keeps_text(self) -> bool:
        """Whether the ledger keeps each document's text, so a machine without the vault's
        folder can read notes (`get`, get_note, backlinks: :mod:`hybrid.app.reader`):
        PostgreSQL's does; the local store's readers have the folder and read the files."""
        ...

    def note_text(self, path: str) -> str | None:
        """The indexed document ``path``'s text as `get` shows it, from the ledger (an agent's:
        redacted, None for a note it may not see); None when the ledger holds none of it."""
        ...


class Catalog(Reading, Protocol):
    """The ledger of one vault: files, chunks, cached embeddings, the sync journal, and the
    named queries the layers above ask instead of writing SQL."""

    fresh: bool  # this open created the schema

    def close(self) -> None: ...
    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def transaction(self) -> AbstractContextManager[Any]: ...

    # files and chunks, as the indexer keeps them
    def files(self) -> dict[str, FileRow]: ...
    def file_rows(self, file_ids: Sequence[int]) -> dict[int, FileRow]: ...
    def touch_file(self, path: str, size: int, mtime_ns: int) -> None: ...
    def apply(self, notes: Iterable[NoteRecord], removed: Iterable[str]) -> list[int]: ...
    def journal(self) -> list[int]: ...
    def purge(self, synced: Sequence[int]) -> None: ...
    def chunk_count(self) -> int: ...
    def file_count(self) -> int: ...
    def chunks_per_file(self) -> dict[int, int]: ...  # live file id -> its live chunks (0: absent)
    def all_chunk_ids(self) -> list[int]: ...
    def iter_chunks(self, ids: Sequence[int] | None = None,
                    batch: int = 2000) -> Iterator[list[ChunkRow]]: ...
    def note_texts(self, file_ids: Sequence[int]) -> dict[int, list[tuple[int, str]]]: ...

    # named queries
    def notes(self, ids: Sequence[int] | None = None) -> Iterator[NoteMeta]: ...
    def file_fields(self, path: str) -> tuple[list[str], dict[str, Any]] | None: ...
    def note_properties(self, file_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """``{file id: frontmatter as indexed}`` of the live notes ``file_ids``."""
        ...
    def property_keys(self) -> set[str]:
        """The frontmatter property names (lower case) some live note has."""
        ...
    def file_paths(self, live: bool = True) -> Iterator[tuple[int, str]]: ...
    def files_mentioning(self, keys: Sequence[str], tags: Sequence[str],
                         live: bool = True) -> Iterator[tuple[int, str, list[str], dict[str, Any]]]: ...
    def chunk_ids_of(self, file_ids: Iterable[int]) -> set[int]: ...
    def live_counts(self, file_ids: Iterable[int]) -> tuple[int, int]: ...
    def note_spans(self, file_ids: Iterable[int]) -> dict[int, tuple[int, int, int]]: ...

    # embeddings, and the vectors of what agents are shown redacted
    def cached_hashes(self, model: str, hashes: Iterable[str]) -> set[str]: ...
    def cached_vectors(self, model: str, hashes: Iterable[str]) -> dict[str, bytes]:
        """The cached vectors of ``hashes`` under ``model`` (those it has)."""
        ...
    def put_embeddings(self, model: str, items: Iterable[tuple[str, bytes]]) -> None: ...
    def shared_texts(self, model: str, body_hashes: Iterable[str]) -> dict[str, str]:
        """``{body hash: embed hash}`` for the live chunks of those ``body_hashes`` (their text,
        whitespace normalised) whose vector is cached under ``model``: an identical section met
        again takes that vector instead of being embedded (:mod:`hybrid.indexing.shared`)."""
        ...
    def sharing(self) -> tuple[int, int]:
        """(live chunks whose embed hash another live chunk has too, distinct such hashes)."""
        ...
    def vectors(self, model: str, chunk_ids: Sequence[int]) -> list[tuple[int, bytes]]: ...
    def reclaim_embeddings(self, model: str, force: bool = False) -> int: ...
    def redacted_ids(self) -> set[int]: ...
    def redacted_missing(self, model: str) -> list[tuple[str, str]]: ...
    def redacted_vectors(self, model: str) -> list[tuple[int, int, bytes]]: ...

    # pages a bookmarks source fetched
    def fetched(self, url: str | None = None) -> dict[str, FetchedPage]: ...
    def put_fetched(self, rows: Iterable[FetchedPage]) -> None: ...
    def drop_fetched(self, keep: Iterable[str]) -> int: ...

    def vacuum(self) -> None: ...


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
    def ledger(self) -> Catalog:
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
    def catalog(self) -> Catalog: ...

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

    def sync_derived(self, model: str | None, batch: int = 5000, view: Any = None,
                     redactor: Any = None) -> SyncStats:
        """Bring both arms (and the agent view's, with ``view``) in line with the ledger."""
        ...

    def reclaim(self, model: str | None, force: bool = False) -> int:
        """Drop cached embeddings no chunk uses, beyond the cache kept; rows removed."""
        ...

    def agent_arms(self, hidden_files: Collection[int], view: Any) -> tuple[LexicalArm, VectorArm]:
        """The arms an agent searches: its own lexical index over redacted text, and the
        vector arm (hidden notes are left out by :mod:`hybrid.store.agent.store` or here)."""
        ...

    # the agent view's upkeep: the facade asks, the backend knows how
    @property
    def serves_stale_agent_view(self) -> bool:
        """Whether it can serve agents while their view is being redone."""
        ...

    def agent_view_current(self, view: Any) -> bool:
        """Whether what agents read was written for ``view`` (its settings and redaction rules)."""
        ...

    def refresh_agent_view(self, view: Any, redactor: Any, wait: float) -> None:
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
              view: Any, redactor: Any) -> T:
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
