"""Full and incremental sync of one vault into its store.

Order of work, chosen so that a kill at any instant loses nothing: (1) embed every chunk text
that has no cached vector and commit the vectors to the catalog's cache, batch by batch;
(2) swap the changed notes' chunks in one catalog transaction, journaling touched ids;
(3) replay the journal into tantivy and FAISS. A rerun after a crash redoes only what is missing.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from hybrid.core.config import Vault
from hybrid.core.errors import EmbedderMismatch, VaultError
from hybrid.core.faults import checkpoint
from hybrid.core.settings import Settings
from hybrid.core.timing import Stopwatch
from hybrid.embedders import Embedder
from hybrid.indexing.chunk import Chunker
from hybrid.indexing.embed_queue import EmbedQueue
from hybrid.indexing.report import STAGES, IndexReport, Progress
from hybrid.sources import KIND, SOURCES, kind_of
from hybrid.sources import markdown as notes_mod
from hybrid.sources.convert import to_note
from hybrid.sources.sandbox import ConvertError, convert_limits
from hybrid.sources.sandbox import shutdown as shutdown_converters
from hybrid.store import backend
from hybrid.store.agent.vectors import embed_missing
from hybrid.store.agent.view import AgentView, agent_redactor
from hybrid.store.base import NewChunk, NoteRecord, VectorSpec
from hybrid.store.port import Store

log = logging.getLogger("hybrid")
def text_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def _warn(report: IndexReport, message: str) -> None:
    report.warnings.append(message)
    log.warning("%s", message)


def _modified(note: notes_mod.Note, mtime_ns: int) -> float:
    """The note's ``updated`` date when it is a usable one, else the file's mtime."""
    if note.updated:
        from hybrid.core.dates import parse_date
        try:
            return parse_date(note.updated[:10])
        except Exception:
            pass
    return mtime_ns / 1e9


def index_vault(vault: Vault, embedder: Embedder, settings: Settings, *, reembed: bool = False,
                wait: float = 0, progress: Progress | None = None,
                fetch: str | None = None) -> IndexReport:
    """Bring one vault's index up to date with its folder (or, for a source, its export). See
    the module docstring. ``fetch`` (``"new"`` or ``"all"``): first fetch a bookmarks source's
    pages (:func:`hybrid.sources.entries.fetch_bookmarks`)."""
    clock = Stopwatch()
    report = IndexReport(vault.name)
    if not (vault.path.is_dir() if vault.is_folder else vault.path.exists()):
        what = "folder" if vault.is_folder else f"{vault.kind} export"
        raise VaultError(f"vault {vault.name!r}: {what} {vault.path} is missing; nothing was "
                         f"changed in its index (if it moved: `hybrid vault move {vault.name} NEW_PATH`)")
    job = _Job(vault, embedder, settings, progress, clock, fetch)
    attempts: list[IndexReport] = []

    def run(store: Store) -> IndexReport:
        # a second attempt (the ledger proved unreadable mid-run and was moved aside) starts
        # over with a fresh report that keeps what the first one warned
        this = report if not attempts else IndexReport(vault.name, warnings=[*attempts[-1].warnings])
        attempts.append(this)
        _sync(store, job, this)
        return this

    try:
        report = backend(vault).write(vault, run, reembed=reembed, wait=wait, view=job.view,
                                      redactor=job.redactor)
    finally:
        shutdown_converters()  # the converter worker lives for one run (hybrid.sources.sandbox)
    report.seconds = round(clock.elapsed(), 3)
    return report


@dataclass
class _Job:
    """What one index run works with, passed from stage to stage."""
    vault: Vault
    embedder: Embedder
    settings: Settings
    progress: Progress | None
    clock: Stopwatch
    fetch: str | None = None

    @functools.cached_property
    def view(self) -> AgentView:
        return AgentView.of(self.vault, self.settings)

    @functools.cached_property
    def redactor(self):
        return agent_redactor() if self.view.redact else None

    @property
    def chunking(self) -> str:
        return chunking_meta(self.settings)


def chunking_meta(s: Settings) -> str:
    """The chunking parameters as recorded in the catalog: a change re-chunks every note.
    (Version 3: every lexical document carries its kind for ``--source``; version 4: tags in
    any script and a front block that cannot be read recorded, both for the agent view. The
    re-read costs no embedding, the chunks being the same.)"""
    return json.dumps({"tokens": s.chunk_tokens, "overlap": s.chunk_overlap,
                       "header": s.context_header, "version": 4})


def file_hash(data: bytes) -> str:
    """A file's content hash as the catalog records it."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@dataclass
class _Plan:
    """The folder compared with the catalog: which files to read, which are still there."""
    known: dict[str, Any]
    present: set[str]
    to_read: list[tuple[notes_mod.FileEntry, Any]]
    rechunk_all: bool


def _sync(store: Store, job: _Job, report: IndexReport) -> None:
    """Bring ``store`` up to date with the vault's folder (the caller holds the lock), then
    reclaim unused cached embeddings past their bound and truncate the WAL."""
    store.spec = VectorSpec.from_settings(job.settings)
    _check_model(store, job, report)
    if "open" not in job.clock.seconds:  # lock, open, model check, journal replay
        job.clock.add("open", job.clock.elapsed())
    with job.clock("discover"):
        plan = _plan(store, job, report)
    with job.clock("read_embed_wall"):
        pending = _read_and_embed(store, job, plan, report)
    removed = [p for p in plan.known if p not in plan.present]  # after the reads: files vanish
    report.removed = len(removed)
    _report_progress(job, "write", 0, 2)
    with job.clock("catalog"):
        _apply(store, job, pending, removed)
    _report_progress(job, "write", 1, 2)
    synced = store.sync_derived(job.embedder.id, view=job.view, redactor=job.redactor)
    with job.clock("embed"):  # the redacted texts agents are scored by (hybrid.store.agent.vectors)
        embed_missing(store.catalog, job.embedder)
    _report_progress(job, "write", 2, 2)
    job.clock.add("tantivy", synced["lexical_seconds"])
    job.clock.add("faiss", synced["vector_seconds"])
    _finish(store, job, report)


def _report_progress(job: _Job, stage: str, done: int, total: int | None) -> None:
    if job.progress:
        job.progress(stage, done, total)


def _check_model(store: Store, job: _Job, report: IndexReport) -> None:
    """Refuse a vault indexed with another model; label a new catalog with this one; finish
    whatever an interrupted run left in the journal (cheap when nothing is pending)."""
    cat, stored, vault = store.catalog, store.embedder_id, job.vault
    if stored is not None and stored != job.embedder.id:
        raise EmbedderMismatch(
            f"vault {vault.name!r} was indexed with {stored}, but the configured embedder is "
            f"{job.embedder.id}; run `hybrid index --vault {vault.name} --reembed` to rebuild its vectors")
    if cat.get_meta("embedder") is None:
        cat.set_meta("embedder", job.embedder.id)  # before any chunk exists, so none is unlabelled
    if cat.journal():
        report.recovered = store.sync_derived(stored or job.embedder.id, view=job.view,
                                              redactor=job.redactor)["journal"]


def _plan(store: Store, job: _Job, report: IndexReport) -> _Plan:
    """List the folder and compare each file's size and mtime with the catalog's record; an
    unchanged file is counted and not read (all are read when the chunking changed)."""
    vault, known = job.vault, store.catalog.files()
    rechunk_all = store.catalog.get_meta("chunking") not in (None, job.chunking)
    if vault.is_folder:
        entries = list(notes_mod.discover(vault.path, vault.include, vault.exclude,
                                          link_exclude=job.view.exclude_patterns))
    else:
        from hybrid.sources.entries import fetch_bookmarks, source_entries
        if job.fetch and SOURCES[vault.kind].fetches:
            fetched = fetch_bookmarks(vault, store.catalog, job.fetch, job.settings)
            report.fetched, report.fetch_failed = fetched.fetched, fetched.failed
            report.warnings.extend(fetched.warnings)
        entries, warnings = source_entries(vault, store.catalog)
        for w in warnings:
            _warn(report, w)
    if not entries and known:
        # An empty folder where notes were is far more often a drive or share that is not
        # mounted than a user who deleted every note: keep the index (and its embeddings).
        where = "folder" if vault.is_folder else f"{vault.kind} export"
        raise VaultError(f"vault {vault.name!r}: {where} {vault.path} has no documents now, but "
                         f"the index has {len(known):,}; nothing was removed (a drive not "
                         f"mounted?). If they really are gone, run `hybrid vault remove {vault.name}`")
    plan = _Plan(known, set(), [], rechunk_all)
    for entry in entries:
        plan.present.add(entry.path)
        row = known.get(entry.path)
        if row and not rechunk_all and row.size == entry.size and row.mtime_ns == entry.mtime_ns:
            report.unchanged += 1
        else:
            plan.to_read.append((entry, row))
    return plan


def _read_and_embed(store: Store, job: _Job, plan: _Plan, report: IndexReport) -> list[NoteRecord]:
    """Read, parse and chunk the changed files on a background thread while this one embeds
    what is ready (the model's forward pass releases the GIL, so both overlap). Returns the
    records to store; their vectors are already in the catalog's cache."""
    s = job.settings
    chunker = Chunker(job.embedder.count_tokens, job.embedder.max_tokens, s.chunk_tokens,
                      s.chunk_overlap, s.context_header)
    embedding = EmbedQueue(store, job.embedder, report, job.progress)
    failed = _unconvertible(store, s)
    reader = _ReadAhead(plan.to_read, chunker, s, report, plan.rechunk_all, job.clock, failed)
    pending: list[NoteRecord] = []
    if plan.to_read:
        _report_progress(job, "scan", 0, len(plan.to_read))
    for n, (entry, row, result) in enumerate(reader, 1):
        _report_progress(job, "scan", n, len(plan.to_read))
        if result.status is ReadStatus.VANISHED:
            plan.present.discard(entry.path)
        elif result.status is ReadStatus.TOUCHED:
            store.catalog.touch_file(entry.path, entry.size, entry.mtime_ns)
            report.unchanged += 1
        elif result.record is not None:
            pending.append(result.record)
            embedding.add(result.record)
            if row is None:
                report.added += 1
            else:
                report.updated += 1
    embedding.finish()
    # kept for the files still there: one that failed is not converted again until it changes
    store.catalog.set_meta(UNCONVERTIBLE, json.dumps({p: f for p, f in failed.items() if p in plan.present}))
    job.clock.add("read_parse", reader.busy - job.clock.seconds.get("chunk", 0.0))
    job.clock.add("embed", embedding.busy)
    return pending


# catalog meta: {path: [content hash, converter bounds, warning]} of the documents the converter
# could not turn into text (over its memory or time bound, crashed, no text): tried again only
# when the file or the bounds change, so a decompression bomb costs one attempt, not one a run
UNCONVERTIBLE = "unconvertible"


def _unconvertible(store: Store, settings: Settings) -> dict[str, list]:
    try:
        got = json.loads(store.catalog.get_meta(UNCONVERTIBLE) or "{}")
    except ValueError:
        return {}
    return got if isinstance(got, dict) else {}


def _bounds_key(settings: Settings) -> str:
    return f"{settings.convert_max_memory_mb}MB/{settings.convert_timeout}s"


def _apply(store: Store, job: _Job, pending: list[NoteRecord], removed: list[str]) -> None:
    """Swap the changed notes' chunks and drop the removed notes in one catalog transaction
    (journaling the touched ids for the derived indexes)."""
    cat = store.catalog
    checkpoint("before-catalog")
    cat.apply(pending, removed)
    checkpoint("after-catalog")
    cat.set_meta("embedder", job.embedder.id)
    cat.set_meta("chunking", job.chunking)


def _finish(store: Store, job: _Job, report: IndexReport) -> None:
    """Record the run (dimension, time, counts, stage timings), reclaim unused cached
    embeddings past their bound, and gather the store's warnings."""
    cat = store.catalog
    if report.chunks_embedded:
        cat.set_meta("dim", str(job.embedder.dim))
    cat.set_meta("last_indexed", str(time.time()))
    report.chunks = cat.chunk_count()
    store.reclaim(job.embedder.id)
    report.warnings.extend(w for w in store.warnings if w not in report.warnings)
    timed = job.clock.rounded()
    report.stage_seconds = {k: timed.get(k, 0.0) for k in STAGES}


class ReadStatus(enum.Enum):
    CHANGED = "changed"      # new content: ``record`` holds its chunks
    TOUCHED = "touched"      # same content, new stat
    VANISHED = "vanished"    # deleted since the scan
    SKIPPED = "skipped"      # could not be indexed (a warning says why); previous chunks stay


@dataclass(frozen=True)
class ReadResult:
    """What reading one changed file came to."""
    status: ReadStatus
    record: NoteRecord | None = None


def _read(entry: notes_mod.FileEntry, row, chunker: Chunker, settings: Settings, report: IndexReport,
          force: bool, clock: Stopwatch, failed: dict[str, list] | None = None) -> ReadResult:
    """Read, hash and chunk one changed document. Any failure of one document (unreadable,
    binary, a PDF without text, a PDF or web page over the converter's memory or time bound,
    or an exception while decoding, parsing or chunking it) is one warning naming it and counts
    in ``report.skipped``; a version indexed before keeps its chunks. A PDF is hashed as a
    stream and read page by page, never whole into memory."""
    skipped = ReadResult(ReadStatus.SKIPPED)
    limit, setting = size_limit(settings, entry.path)
    if entry.size > limit:
        report.skipped += 1
        _warn(report, f"{entry.path}: {entry.size:,} bytes is over {setting} ({limit:,}); skipped")
        return skipped
    streamed = entry.load is None and KIND[kind_of(entry.path)].streamed
    try:
        data = None if streamed else read_bytes(entry)
        digest = content_hash(entry) if data is None else file_hash(data)
    except FileNotFoundError:
        log.info("%s: vanished while indexing; treated as deleted", entry.path)
        return ReadResult(ReadStatus.VANISHED)
    except OSError as exc:
        report.skipped += 1
        _warn(report, f"{entry.path}: cannot read ({exc.strerror or exc}); kept its previous chunks")
        return skipped
    except Exception as exc:  # noqa: BLE001 - a source's document that cannot be rendered
        report.skipped += 1
        _warn(report, f"{entry.path}: cannot read ({_first_line(exc)}); kept its previous chunks")
        return skipped
    if row is not None and row.hash == digest and not force:
        return ReadResult(ReadStatus.TOUCHED)
    known = (failed or {}).get(entry.path)
    if isinstance(known, list) and known[:2] == [digest, _bounds_key(settings)]:
        report.skipped += 1  # the converter failed on this very file under these bounds
        _warn(report, f"{known[2]} (not tried again until the file or the converter's bounds change)")
        return skipped
    try:
        record = _record(entry, data, digest, chunker, report, clock, settings)
        if failed:
            failed.pop(entry.path, None)
        return ReadResult(ReadStatus.CHANGED, record)
    except (notes_mod.BinaryFile, ConvertError) as exc:  # no text, or over the converter's bounds
        report.skipped += 1
        _warn(report, str(exc))
        if isinstance(exc, ConvertError) and failed is not None:
            failed[entry.path] = [digest, _bounds_key(settings), str(exc)]
    except Exception as exc:  # noqa: BLE001 - one odd note must never stop the whole vault
        report.skipped += 1
        _warn(report, f"{entry.path}: cannot index ({_first_line(exc)}); kept its previous chunks")
    return skipped


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:200] if text else ''}"


def size_limit(settings: Settings, path: str) -> tuple[int, str]:
    """(bytes, setting name): the largest document of this kind that is indexed."""
    if KIND[kind_of(path)].streamed:
        return settings.max_pdf_bytes, "max_pdf_bytes"
    return settings.max_file_bytes, "max_file_bytes"


def _record(entry: notes_mod.FileEntry, data: bytes | None, digest: str, chunker: Chunker,
            report: IndexReport, clock: Stopwatch, settings: Settings) -> NoteRecord:
    """Turn one document (``data``, or a PDF read from its file) into the record the catalog
    stores. Whatever it raises is caught by ``_read`` and costs only this document."""
    note = to_note(entry.path, data, entry.abspath, convert_limits(settings))
    for w in note.warnings:
        _warn(report, w)
    with clock("chunk"):
        chunks = chunker.chunk(note)
    if not chunks:
        log.info("%s: no text to index", entry.path)
    size = len(data) if data is not None else entry.size
    return NoteRecord(
        path=entry.path, size=size, mtime_ns=entry.mtime_ns, hash=digest, title=note.title,
        tags=note.tags, aliases=note.aliases, properties=note.properties, created=note.created,
        modified=_modified(note, entry.source_mtime_ns or entry.mtime_ns),
        chunks=[NewChunk(c.heading, c.start_line, c.end_line, c.text, text_hash(c.embed_text))
                for c in chunks],
        embed_texts=[c.embed_text for c in chunks],
    )


def read_bytes(entry: notes_mod.FileEntry) -> bytes:
    if entry.load is not None:
        return entry.load()
    with open(entry.abspath, "rb") as fh:
        return fh.read()


def content_hash(entry: notes_mod.FileEntry) -> str:
    """:func:`file_hash` of a document, reading a file in blocks (a large PDF never whole)."""
    if entry.load is not None:
        return file_hash(entry.load())
    h = hashlib.blake2b(digest_size=16)
    with open(entry.abspath, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


class _ReadAhead:
    """Iterates (entry, row, _read result) in order, computed by a background thread that stays
    at most ``depth`` files ahead. An exception there (a bug in the reader itself: one file's
    failure is already a warning from ``_read``) is re-raised here; leaving the loop early (an
    error in the consumer) stops the thread."""

    def __init__(self, items, chunker: Chunker, settings: Settings, report: IndexReport, force: bool,
                 clock: Stopwatch, failed: dict[str, list] | None = None, depth: int = 64):
        import queue
        import threading
        self.items, self.busy = items, 0.0
        self._args = (chunker, settings, report, force, clock, failed)
        self._q: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hybrid-read", daemon=True)

    def _put(self, item) -> bool:
        import queue
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            for entry, row in self.items:
                t = time.perf_counter()
                result = _read(entry, row, *self._args)
                self.busy += time.perf_counter() - t  # time spent reading, not waiting to hand over
                if not self._put(("ok", (entry, row, result))):
                    return
        except BaseException as exc:  # handed to the consumer, which raises it
            self._put(("error", exc))
            return
        self._put(("done", None))

    def __iter__(self):
        if not self.items:
            return
        self._thread.start()
        try:
            while True:
                kind, value = self._q.get()
                if kind == "done":
                    break
                if kind == "error":
                    raise value
                yield value
        finally:
            self._stop.set()
            self._thread.join()
