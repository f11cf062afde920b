"""What every store backend shares, and the contract each one keeps.

A vault's store is a ledger (the catalog: files, chunks, cached embeddings) and two derived
arms (lexical, vector) kept in step with it. Two backends implement it: :mod:`hybrid.store.local`
(SQLite + tantivy + FAISS files) and :mod:`hybrid.store.pg` (PostgreSQL + pgvector); the agent
view (:mod:`hybrid.store.agent`) wraps either. This module holds the rows they exchange and the
policies they apply alike; the protocols they implement are in :mod:`hybrid.store.port`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from hybrid.core.errors import VaultError
from hybrid.store.props import Row, raw_values

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence

    import numpy as np

    from hybrid.core.settings import Settings
    from hybrid.store.props import PropFilter

log = logging.getLogger("hybrid")

# Unused cached embeddings (edited-away chunk texts, another model's vectors) are kept as a cache
# for undo and renames, but only up to max(EMBED_CACHE_MIN, live chunks) of them.
EMBED_CACHE_MIN = 1000

# Lexical compaction: tantivy keeps deleted documents in BM25's statistics until their segment
# merges, so after edits scores drift from a clean build's. The index is rebuilt from the
# catalog when any are left in a small index (a rebuild there costs ~0.1-0.25 s), or when they
# exceed LEXICAL_DRIFT of the live documents. (A note edited again and again leaves at most one
# stale copy: the segments of its later versions are dropped whole once fully deleted.)
LEXICAL_EXACT_BELOW = 1000
LEXICAL_DRIFT = 0.05


class OwnerReading:
    """The owner's answers to :class:`hybrid.store.port.Reading`, as both backends' catalogs
    give them: every tag, name, value and row is shown as it is (the agent view answers for an
    agent, :mod:`hybrid.store.agent.store`)."""

    def shows(self, text: str) -> bool:
        """Its owner is shown every tag and name as it is (:meth:`hybrid.store.port.Reading.shows`)."""
        return True

    def hints_lone_values(self) -> bool:
        """Its owner is told every value (:meth:`hybrid.store.port.Reading.hints_lone_values`)."""
        return True

    def shows_value(self, key: str, value: str) -> bool:
        """Its owner is shown every value as it is (:meth:`hybrid.store.port.Reading.shows_value`)."""
        return True

    def shown_rows(self, properties: dict[str, Any]) -> list[tuple[Row, str]]:
        """Its owner is shown every row (:meth:`hybrid.store.port.Reading.shown_rows`)."""
        return [(r, raw) for r, _, raw in raw_values(properties)]


class StoreNotes:
    """What both backends' stores keep alike: the repairs made on the way (``warnings``, for
    the index report) and the embedder their ledger (``catalog``) records."""
    warnings: list[str]
    catalog: Any

    def heal_note(self, message: str) -> None:
        """Record (for the index report) and log a repair made on the way."""
        self.warnings.append(message)
        log.warning("%s", message)

    @property
    def embedder_id(self) -> str | None:
        from hybrid.embedders.base import canonical_id
        return canonical_id(self.catalog.get_meta("embedder"))


def chunk_batches(ids: Sequence[int] | None, batch: int, read: Callable[[Sequence[int]], dict[int, ChunkRow]],
                  after: Callable[[int, int], list[ChunkRow]]) -> Iterator[list[ChunkRow]]:
    """A catalog's ``iter_chunks``: the rows of ``ids`` (``read(ids)``, live or dead), or of
    every live chunk (``after(id, n)``: the first ``n`` after chunk ``id``, in id order), in
    batches of ``batch``, in id order (a note's chunks have consecutive ids: the lexical index
    groups them into sections)."""
    if ids is not None:
        ids = sorted(ids)
        for i in range(0, len(ids), batch):
            yield list(read(ids[i:i + batch]).values())
        return
    last = 0
    while rows := after(last, batch):
        yield rows
        last = rows[-1].id


class Reread:
    """Batches of chunk rows that may be read more than once: each iteration calls ``read``
    afresh (a second read starts from the first row). A lexical index that wants two passes
    over what it writes (Milvus: the exact mean field lengths before any weight is written)
    may take both; one pass is what any other index takes. A plain generator is read once."""

    def __init__(self, read: Callable[[], Iterable[list[ChunkRow]]]):
        self.read = read

    def __iter__(self) -> Iterator[list[ChunkRow]]:
        return iter(self.read())


def rereadable(batches: Iterable[list[ChunkRow]]) -> bool:
    """Whether ``batches`` can be read again from its start (a :class:`Reread`, a list), not a
    one-pass iterator."""
    return iter(batches) is not batches


def not_indexed_yet(vault: str) -> VaultError:
    """The error for opening vault ``vault`` to read before its first index run."""
    return VaultError(f"vault {vault!r} is not indexed yet: run `hybrid index --vault {vault}`")


def lexical_drifted(deleted: int, live: int) -> bool:
    """Whether ``deleted`` documents still counted in a lexical index of ``live`` ones weigh on
    BM25 enough to rebuild it (see above)."""
    return deleted > 0 and (live <= LEXICAL_EXACT_BELOW or deleted > LEXICAL_DRIFT * live)


@dataclass
class FileRow:
    id: int
    path: str
    size: int
    mtime_ns: int
    hash: str


T = TypeVar("T")


@dataclass
class ChunkRow:
    id: int
    path: str
    title: str
    heading: str
    start_line: int
    end_line: int
    text: str
    tags: list[str]
    aliases: list[str]
    modified: float
    embed_hash: str
    dead: bool = False
    file_id: int = 0
    props: str = "{}"    # the note's frontmatter as JSON (parsed on demand: see ``properties``)

    @property
    def properties(self) -> dict[str, Any]:
        try:
            value = json.loads(self.props)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    def derived(self, key: Hashable, make: Callable[[ChunkRow], T]) -> T:
        """``make(self)``, made once per row object under ``key`` and kept with it: a reader's
        catalog keeps its rows between searches while its ledger is unchanged, so what a search
        derives from a row alone (its readable text, its stems, the fields of its hit) is
        derived once. A copy (``dataclasses.replace``: a redacted row) derives its own."""
        memo = self.__dict__.setdefault("_derived", {})
        try:
            return memo[key]
        except KeyError:
            memo[key] = value = make(self)
            return value


# The columns of a chunk's row, without its note's own fields (``{alias}`` of the files table;
# ``{dead}``: the chunk's dead flag or ``false``): those are read once per note of a batch
# (:func:`note_fields`) and shared by its rows. A note's tags, aliases and properties grow with
# it (one note of 200,000 nested tags; a canvas's ``hybrid:cards`` with its cards), and a copy of
# them per chunk made reading it cost n² in time and memory (issue #47).
CHUNK_COLUMNS = ("c.id, f.path, c.heading, c.start_line, c.end_line, c.text, f.modified, "
                 "c.embed_hash, {dead}, c.file_id")
NOTE_COLUMNS = "id, title, tags, aliases, properties"  # of the files table, for note_fields


@dataclass(frozen=True)
class NoteFields:
    """A note's own fields, as every chunk row of it shares them (the very same objects)."""
    title: str
    tags: list[str]
    aliases: list[str]
    props: str  # its frontmatter as JSON


def note_fields(r: Sequence[Any]) -> tuple[int, NoteFields]:
    """(file id, fields) of a row of :data:`NOTE_COLUMNS`. Its tags and aliases are bounded here too: a
    ledger written before :data:`MAX_NOTE_TAGS` may hold a note of 200,000 (a journal replaying
    it otherwise wedged every index run of the vault)."""
    return r[0], NoteFields(r[1], bounded_tags(json.loads(r[2]))[0], bounded_aliases(json.loads(r[3]))[0], r[4])


NO_NOTE = NoteFields("", [], [], "{}")  # a chunk whose note row is gone (never, in one transaction)


def chunk_row(r: Sequence[Any], note: NoteFields) -> ChunkRow:
    """The row of a chunk (a row of :data:`CHUNK_COLUMNS`) whose note's fields are ``note``."""
    return ChunkRow(r[0], r[1], note.title, r[2], r[3], r[4], r[5], note.tags, note.aliases, r[6],
                    r[7], bool(r[8]), r[9], note.props)


@dataclass
class VacuumReport:
    vault: str
    embeddings_removed: int = 0     # cached vectors no live chunk used
    lexical_compacted: bool = False  # tantivy rebuilt without its deleted documents
    ocr_removed: int = 0             # OCR cache files no picture of the vault uses now
    bytes_before: int = 0            # the index folder's size before and after
    bytes_after: int = 0

    @property
    def reclaimed_bytes(self) -> int:
        return self.bytes_before - self.bytes_after

    def to_dict(self) -> dict:
        return {**asdict(self), "reclaimed_bytes": self.reclaimed_bytes}


@dataclass
class SyncStats:
    """What bringing a store's arms in line with its ledger did (``Store.sync_derived``)."""
    journal: int = 0              # journal entries replayed (an interrupted run's, or this one's)
    rebuilt_lexical: bool = False  # the lexical index rebuilt whole from the ledger
    rebuilt_vector: bool = False   # the vector index rebuilt whole
    rebuilt_agent: int = 0         # the agent view rebuilt (local: 1) or notes redone (PostgreSQL)
    lexical_seconds: float = 0.0
    vector_seconds: float = 0.0


@dataclass
class StoreFacts:
    """What `hybrid status` shows of a vault's store, read without opening its arms."""
    notes: int = 0
    chunks: int = 0
    embedder: str | None = None
    dim: int | None = None
    last_indexed: str | None = None
    pending: int = 0           # journal entries not yet replayed into the arms
    vector_index: str = ""     # the vector arm's layout, in words
    server: str = ""           # a shared store's server when it may not be written (a standby), in words
    disk_bytes: int = 0        # the index folder's size (a local store's, with ``sizes``)
    shared_chunks: int = 0     # live chunks whose embedded text another live chunk shares
    shared_texts: int = 0      # … the distinct texts they share (each embedded and stored once)
    documents: list[str] = field(default_factory=list)  # vault-relative paths of the live notes


@dataclass
class NoteMeta:
    """What the layers above read of a live note without its chunks (listing, lookup by name,
    the page's facets, filter hints)."""
    id: int
    path: str
    title: str
    tags: list[str]
    aliases: list[str]
    modified: float
    links: list[str] = field(default_factory=list)  # link targets as written (hybrid.store.graph)


# A note's tags are copied into each of its chunks' index entries (the tag filter and BM25's
# headings field, in both stores), so their cost is the note's chunks times its tags: a note of
# n tags has about n/40 chunks, and 20,000 tags took 91 s and 1.9 GB to index (issue #47). Past
# these bounds a note keeps its first tags (docs/sources.md#bounds-one-file-never-stops-indexing);
# the rest stay searchable as words of its text.
MAX_NOTE_TAGS = 1000  # tags and parent tags of one note (``#a/b/c`` counts three: a, a/b, a/b/c)
MAX_TAG_CHARS = 200   # a longer tag is cut to this: its parents alone cost its length squared


def bounded_tags(tags: Sequence[str]) -> tuple[list[str], int]:
    """(the tags a note with ``tags`` is indexed with, how many of ``tags`` were left out): in
    order, each cut to ``MAX_TAG_CHARS`` (a cut tag keeps its parents: a private tag's child
    stays private), until their :func:`tag_set` would pass ``MAX_NOTE_TAGS``."""
    kept: list[str] = []
    seen: set[str] = set()
    for n, t in enumerate(tags):
        t = t[:MAX_TAG_CHARS].rstrip("/")
        segs = t.split("/")
        new = {"/".join(segs[:i]) for i in range(1, len(segs) + 1)} - seen
        if len(seen) + len(new) > MAX_NOTE_TAGS:
            return list(dict.fromkeys(kept)), len(tags) - n
        seen |= new
        kept.append(t)
    return list(dict.fromkeys(kept)), 0


# Every chunk's title field carries its note's aliases too: 5,500 aliases in a note of 3,000
# sections took 114 s to index (fourth re-test of issue #47). Past these a note keeps its first.
MAX_NOTE_ALIASES = 100     # Obsidian notes hold a handful
MAX_ALIAS_CHARS = 4000     # all of a note's aliases together


def bounded_aliases(aliases: Sequence[str]) -> tuple[list[str], int]:
    """(the aliases a note with ``aliases`` is indexed with, how many were left out): the first,
    while they number at most ``MAX_NOTE_ALIASES`` and hold at most ``MAX_ALIAS_CHARS``."""
    kept: list[str] = []
    size = 0
    for a in aliases:
        size += len(a)
        if len(kept) == MAX_NOTE_ALIASES or size > MAX_ALIAS_CHARS:
            break
        kept.append(a)
    return kept, len(aliases) - len(kept)


def tag_set(tags: Sequence[str]) -> list[str]:
    """Every tag and its ancestors (``a/b`` gives ``a`` and ``a/b``), first seen first: what a
    tag filter tests (a tag matches its nested children). Both stores keep each note's."""
    out: list[str] = []
    for t in tags:
        segs = t.split("/")
        out.extend("/".join(segs[:i]) for i in range(1, len(segs) + 1))
    return list(dict.fromkeys(out))


def json_list(text: str | None) -> list:
    """A JSON array stored by a catalog, as a list (empty when it is not one)."""
    try:
        value = json.loads(text or "[]")
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def widen_span(span: tuple[int, int, int] | None, chunk_id: int, first: int,
               last: int) -> tuple[int, int, int]:
    """A note's span (first chunk id, first line, last line) with one more of its chunks, met in
    order: the first chunk met stays the cited one."""
    return (chunk_id, first, last) if span is None else (span[0], min(span[1], first), max(span[2], last))


@dataclass
class NewChunk:
    heading: str
    start_line: int
    end_line: int
    text: str
    embed_hash: str    # the key of its vector: its embedded text's hash, or an identical copy's
    body_hash: str = ""  # its text's hash, whitespace normalised ("": empty, never shared)


@dataclass
class NoteRecord:
    path: str
    size: int
    mtime_ns: int
    hash: str
    title: str
    tags: list[str]
    aliases: list[str]
    properties: dict[str, Any]
    created: str | None
    modified: float
    chunks: list[NewChunk]
    embed_texts: list[str] = field(default_factory=list)  # what was embedded; not stored
    links: list[str] = field(default_factory=list)  # link targets as written (sources.markdown.note_links)
    # the document's text as a reader is shown it (`get`): kept by a store whose readers may not
    # have the folder (PostgreSQL); None: not given (that store then holds no text of it)
    text: str | None = None
    # where a markdown note links to what (hybrid.sources.links.link_places): for the
    # pictures it shows (hybrid.indexing.context); not stored
    places: list[Any] | None = None


@dataclass(frozen=True)
class NoteFilter:
    """Which notes a search may return: the request's filters merged with the query's inline
    ``folder:`` / ``tag:`` / ``since:`` ones (:class:`hybrid.retrieval.request.Filters`). Both
    arms apply them inside their own search."""
    folders: tuple[str, ...] = ()           # any of these folders (or below)
    tags: tuple[str, ...] = ()              # every one of these tags (or a nested child)
    since: float | None = None              # modified at or after (epoch seconds)
    exclude_folders: tuple[str, ...] = ()   # none of these folders
    sources: tuple[str, ...] = ()           # any of these document kinds (hybrid.sources)
    props: tuple[PropFilter, ...] = ()      # every one of these frontmatter property filters

    @property
    def narrows(self) -> bool:
        """Whether a note must pass a folder, tag, date, kind or property test (exclusions aside)."""
        return bool(self.folders or self.tags or self.since is not None or self.sources or self.props)


EVERY_NOTE = NoteFilter()  # no filter: every note passes


@dataclass(frozen=True)
class VectorSpec:
    """How the vector index should be laid out (from the settings)."""
    storage: str = "float32"
    ann_threshold: int = 50_000   # vectors at which IVF replaces flat; 0 = always flat
    ann_recall: float = 0.99      # recall@10 target for the nprobe calibration
    graph: tuple[int, int] = (16, 64)  # PostgreSQL's HNSW graph: m, ef_construction

    @classmethod
    def from_settings(cls, settings: Settings) -> VectorSpec:
        m = int(settings.hnsw_m)
        return cls(settings.vector_storage, int(settings.ann_threshold), float(settings.ann_recall),
                   (m, max(2 * m, int(settings.hnsw_ef_construction))))

    def wants_ivf(self, n: int) -> bool:
        return bool(self.ann_threshold) and n >= self.ann_threshold


# Calibrating an approximate vector index: queries made from the stored vectors (every backend
# measures its recall against exact search on these).
CALIBRATION_QUERIES = 300
CALIBRATION_NOISE = 1.0  # noise norm relative to the stored vector a query is made from


def calibration_queries(vecs: np.ndarray, count: int, rng,
                        noise_ratio: float | None = None) -> np.ndarray:
    """Queries near the data but not on it: stored vectors plus isotropic noise, renormalized,
    so a query sits between stored points rather than on one (noise of equal norm puts its
    source at cosine ≈ 0.7)."""
    import numpy as np
    ratio = CALIBRATION_NOISE if noise_ratio is None else noise_ratio
    pick = vecs[rng.choice(len(vecs), min(count, len(vecs)), replace=False)]
    noise = rng.standard_normal(pick.shape).astype(np.float32)
    noise *= ratio / np.linalg.norm(noise, axis=1, keepdims=True)
    q = pick + noise
    return np.ascontiguousarray(q / np.linalg.norm(q, axis=1, keepdims=True), dtype=np.float32)
