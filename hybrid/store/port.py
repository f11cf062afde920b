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

from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from hybrid.sources import FetchedPage
    from hybrid.store.base import ChunkRow, FileRow, NoteMeta, NoteRecord, VectorSpec
    from hybrid.store.lexicon import LexicalQuery


class LexicalArm(Protocol):
    """BM25 over chunks and whole sections (:mod:`hybrid.store.lexicon`). ``opts`` are the
    filters (``folders``, ``tags``, ``since``, ``sources``, ``exclude_folders``) and switches
    (``fuzzy``, ``scored``, ``stopwords``) every backend takes alike."""

    stem: Any  # the analyzer the arm reads text with (:func:`hybrid.store.lexicon.stem_analyzer`)

    def corrections(self, words: Sequence[str]) -> dict[str, str]:
        """Spelling repairs for ``words`` from the indexed vocabulary (``{typed: repaired}``)."""
        ...

    def search(self, q: LexicalQuery, limit: int, **opts: Any) -> list[tuple[int, float]]:
        """(chunk id, score) of the best chunks, best first."""
        ...

    def search_units(self, q: LexicalQuery, limit: int, unit: str = "chunk",
                     **opts: Any) -> list[tuple[list[int], float]]:
        """(chunk ids of a unit, score) of the best ``unit`` s (``chunk`` or ``section``)."""
        ...

    def matching_ids(self, q: LexicalQuery, limit: int = 1_000_000, **opts: Any) -> set[int]:
        """The chunk ids that match ``q`` at all (unranked)."""
        ...


class VectorArm(Protocol):
    """Nearest neighbours by inner product over normalised vectors, keyed by chunk id."""

    hidden_files: Collection[int]  # notes this arm leaves out itself (an agent's, in SQL)

    @property
    def exact(self) -> bool:
        """Whether a search scans every vector (no approximate index)."""
        ...

    def count(self) -> int:
        ...

    def search(self, query: np.ndarray, k: int, allowed: Collection[int] | None = None,
               banned: Collection[int] = ()) -> list[tuple[int, float]]:
        """(chunk id, score) of the ``k`` nearest, best first; only ``allowed`` ids when given
        (inside the search, not by trimming), never ``banned`` ones."""
        ...


class Reading(Protocol):
    """What a search reads of a ledger, as its reader (the owner, or an agent) may see it."""

    def shows(self, text: str) -> bool:
        """Whether ``text`` (a tag, a name) may be shown to this reader as it is."""
        ...

    def filter_ids(self, folders: Sequence[str] = (), tags: Sequence[str] = (),
                   since: float | None = None, among: Sequence[int] | None = None,
                   sources: Sequence[str] = ()) -> set[int]:
        """Chunk ids of the notes passing the filters (only those in ``among`` when given)."""
        ...

    def note_ids(self, folders: Sequence[str] = (), tags: Sequence[str] = (),
                 since: float | None = None, sources: Sequence[str] = ()) -> Iterator[int]:
        """File ids of the live notes passing the filters, lazily."""
        ...

    def chunks(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        """The rows of the live chunks ``ids`` (an agent's: redacted, hidden ones left out)."""
        ...


class Catalog(Reading, Protocol):
    """The ledger of one vault: files, chunks, cached embeddings, the sync journal, and the
    named queries the layers above ask instead of writing SQL."""

    fresh: bool  # this open created the schema

    def close(self) -> None: ...
    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def transaction(self) -> AbstractContextManager[Any]: ...
    def data_version(self) -> int:
        """Changes whenever any writer committed to this ledger."""
        ...

    # files and chunks, as the indexer keeps them
    def files(self) -> dict[str, FileRow]: ...
    def file_rows(self, file_ids: Sequence[int]) -> dict[int, FileRow]: ...
    def touch_file(self, path: str, size: int, mtime_ns: int) -> None: ...
    def apply(self, notes: Iterable[NoteRecord], removed: Iterable[str]) -> list[int]: ...
    def journal(self) -> list[int]: ...
    def purge(self, synced: Sequence[int]) -> None: ...
    def chunk_count(self) -> int: ...
    def file_count(self) -> int: ...
    def all_chunk_ids(self) -> list[int]: ...
    def iter_chunks(self, ids: Sequence[int] | None = None,
                    batch: int = 2000) -> Iterator[list[ChunkRow]]: ...
    def note_texts(self, file_ids: Sequence[int]) -> dict[int, list[tuple[int, str]]]: ...

    # named queries
    def notes(self, ids: Sequence[int] | None = None) -> Iterator[NoteMeta]: ...
    def file_fields(self, path: str) -> tuple[list[str], dict[str, Any]] | None: ...
    def file_paths(self, live: bool = True) -> Iterator[tuple[int, str]]: ...
    def files_mentioning(self, keys: Sequence[str], tags: Sequence[str],
                         live: bool = True) -> Iterator[tuple[int, str, list[str], dict[str, Any]]]: ...
    def chunk_ids_of(self, file_ids: Iterable[int]) -> set[int]: ...
    def live_counts(self, file_ids: Iterable[int]) -> tuple[int, int]: ...
    def note_spans(self, file_ids: Iterable[int]) -> dict[int, tuple[int, int, int]]: ...

    # embeddings, and the vectors of what agents are shown redacted
    def cached_hashes(self, model: str, hashes: Iterable[str]) -> set[str]: ...
    def put_embeddings(self, model: str, items: Iterable[tuple[str, bytes]]) -> None: ...
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

    lexical: LexicalArm
    vector: VectorArm
    catalog: Reading
    ledger: Catalog                 # the whole ledger under it (notes of no text, counts)
    hidden_files: Collection[int]   # file ids its reader may not see

    @property
    def embedder_id(self) -> str | None: ...


class Store(Searchable, Protocol):
    """One vault's store, as a backend opens it (:func:`hybrid.store.open_store`)."""

    catalog: Catalog
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
                     redactor: Any = None) -> dict[str, Any]:
        """Bring both arms (and the agent view's, with ``view``) in line with the ledger."""
        ...

    def reclaim(self, model: str | None, force: bool = False) -> int:
        """Drop cached embeddings no chunk uses, beyond the cache kept; rows removed."""
        ...

    def agent_arms(self, hidden_files: Collection[int], view: Any) -> tuple[LexicalArm, VectorArm]:
        """The arms an agent searches: its own lexical index over redacted text, and the
        vector arm (hidden notes are left out by :mod:`hybrid.store.agent.store` or here)."""
        ...
