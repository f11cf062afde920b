"""Reading one document for an index run: its size against the limits, its bytes and hash,
parsed into a note and chunked (:func:`read_document`), on a thread that reads ahead of the
embedder (:class:`ReadAhead`). One document's failure is a warning on the report, never the
run's end; the note keeps its previous chunks."""

from __future__ import annotations

import enum
import hashlib
import logging
import time
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from hybrid.core.dates import NameDates
from hybrid.core.settings import Settings
from hybrid.core.timing import Stopwatch
from hybrid.indexing.chunk import Chunker
from hybrid.indexing.report import IndexReport
from hybrid.indexing.skipped import FAILED, Skip, bounds_of, size_limit
from hybrid.sources import KIND, kind_of, sections, walk
from hybrid.sources import markdown as notes_mod
from hybrid.sources.convert import to_note
from hybrid.sources.links import link_places
from hybrid.sources.markdown import TAGS_CUT
from hybrid.sources.sandbox import ConvertError, Limits, convert_limits
from hybrid.sources.sections import NOTHING, LeaveOut
from hybrid.store.base import MAX_NOTE_TAGS, NewChunk, NoteRecord, bounded_aliases, bounded_tags

log = logging.getLogger("hybrid")


def text_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def file_hash(data: bytes) -> str:
    """A file's content hash as the catalog records it (:func:`hybrid.sources.walk.file_digest`)."""
    return walk.file_digest(data)


def modified_of(note: notes_mod.Note, mtime_ns: int, names: NameDates | None = None) -> float:
    """The note's own date (its frontmatter's, :func:`hybrid.core.dates.note_date`) when it
    has one, else the date its file name holds (a daily note's, read by ``names``: given for a
    folder vault's files), else the file's mtime."""
    if note.date is not None:
        return note.date
    named = names.date(note.path) if names is not None else None
    return named if named is not None else mtime_ns / 1e9


class ReadStatus(enum.Enum):
    CHANGED = "changed"      # new content: ``record`` holds its chunks
    TOUCHED = "touched"      # same content, new stat
    VANISHED = "vanished"    # deleted since the scan
    SKIPPED = "skipped"      # could not be indexed (a warning says why); previous chunks stay


@dataclass(frozen=True)
class Lent:
    """A picture's words from other files: the lines of the notes that show it
    (:mod:`hybrid.indexing.context`), and the headings it starts under as a page of a series
    (:mod:`hybrid.indexing.pages`)."""
    context: list[list[str]] = field(default_factory=list)
    carried: list[tuple[str, str, float]] = field(default_factory=list)


@dataclass(frozen=True)
class ReadResult:
    """What reading one changed file came to."""
    status: ReadStatus
    record: NoteRecord | None = None


def read_document(entry: walk.FileEntry, row, chunker: Chunker, settings: Settings, report: IndexReport,
          force: bool, clock: Stopwatch, skips: dict[str, Skip] | None = None,
          names: NameDates | None = None, leave_out: LeaveOut = NOTHING,
          limits: Limits | None = None, lent: Lent | None = None) -> ReadResult:
    """Read, hash and chunk one changed document. Any failure of one document (unreadable,
    binary, a PDF without text, a PDF or web page over the converter's memory or time bound, a
    canvas or drawing over its reader's bound, a RecursionError, or an exception while
    decoding, parsing or chunking it) is one warning naming it and counts in
    ``report.skipped``; a version indexed before keeps its chunks. All but the unreadable and
    the unforeseen exceptions are remembered (not read again until the file or the limits
    change). A PDF is hashed as a
    stream and read page by page, never whole into memory. ``skips`` (the ledger's skipped
    files, :mod:`hybrid.indexing.skipped`) gains each file skipped and loses each one read.
    ``names``: how the vault names notes by their day (a folder vault's, from its files; None:
    a source's documents, dated by their text). ``leave_out``: what the vault's markdown notes
    leave out (:mod:`hybrid.sources.sections`; their markers apply always). ``limits``: the
    converter's bounds and the vault's OCR (default: the settings' bounds, no OCR).
    ``lent``: a picture's words from other files (:class:`Lent`)."""
    skips = {} if skips is None else skips
    limits = limits or convert_limits(settings)
    bounds = bounds_of(settings, entry.path, limits.ocr_key)

    def skip(reason: str, digest: str | None = None, remember: bool = True) -> ReadResult:
        # a failure is recorded too (for `status --files`), under bounds no run holds to
        report.skipped += 1
        report.warn(reason)
        skips[entry.path] = Skip(entry.size, entry.mtime_ns, reason, bounds if remember else FAILED, digest)
        return ReadResult(ReadStatus.SKIPPED)

    limit, setting = size_limit(settings, entry.path)
    if entry.size > limit:
        return skip(f"{entry.path}: {entry.size:,} bytes is over {setting} ({limit:,}); skipped")
    streamed = entry.load is None and KIND[kind_of(entry.path)].streamed
    try:
        data = None if streamed else read_bytes(entry)
        digest = content_hash(entry) if data is None else file_hash(data)
    except FileNotFoundError:
        log.info("%s: vanished while indexing; treated as deleted", entry.path)
        skips.pop(entry.path, None)
        return ReadResult(ReadStatus.VANISHED)
    except OSError as exc:  # not remembered: fixing permissions changes no mtime
        return skip(f"{entry.path}: cannot read ({exc.strerror or exc}); kept its previous chunks",
                    remember=False)
    except Exception as exc:  # noqa: BLE001 - a source's document that cannot be rendered
        return skip(f"{entry.path}: cannot read ({_first_line(exc)}); kept its previous chunks",
                    remember=False)
    if row is not None and row.hash == digest and not force:
        skips.pop(entry.path, None)
        return ReadResult(ReadStatus.TOUCHED)
    known = skips.get(entry.path)
    if known is not None and known.hash == digest and known.bounds == bounds:
        # touched, not changed: a decompression bomb costs one attempt, not one a run
        report.skipped += 1
        log.info("%s: the same content as when it was skipped; not tried again", entry.path)
        skips[entry.path] = Skip(entry.size, entry.mtime_ns, known.reason, bounds, digest)
        return ReadResult(ReadStatus.SKIPPED)
    try:
        record = _record(entry, data, digest, chunker, report, clock, settings,
                         names if entry.load is None else None, leave_out, limits, lent)
    except (notes_mod.BinaryFile, ConvertError) as exc:  # no text, or over the converter's bounds
        return skip(str(exc), digest)
    except RecursionError as exc:
        # the file's shape past what a reader's stack holds: a bound like the others, so it is
        # remembered rather than tried (and warned about) on every run
        return skip(f"{entry.path}: nested too deep to read ({_first_line(exc)}); skipped", digest)
    except Exception as exc:  # noqa: BLE001 - one odd note must never stop the whole vault
        # not remembered: an error nobody foresaw may be hybrid's, gone with an upgrade
        return skip(f"{entry.path}: cannot index ({_first_line(exc)}); kept its previous chunks",
                    remember=False)
    skips.pop(entry.path, None)
    return ReadResult(ReadStatus.CHANGED, record)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:200] if text else ''}"


def _record(entry: walk.FileEntry, data: bytes | None, digest: str, chunker: Chunker,
            report: IndexReport, clock: Stopwatch, settings: Settings,
            names: NameDates | None = None, leave_out: LeaveOut = NOTHING,
            limits: Limits | None = None, lent: Lent | None = None) -> NoteRecord:
    """Turn one document (``data``, or a PDF read from its file) into the record the catalog
    stores. Whatever it raises is caught by ``_read`` and costs only this document. What
    ``leave_out`` leaves out is blanked before chunking, in the chunks and in the text a store
    keeps alike. A picture given words by other files (``lent``) keeps them in its properties,
    and its chunks' header names them."""
    lent = lent or Lent()
    note = sections.leave_out(to_note(entry.path, data, entry.abspath, limits or convert_limits(settings),
                                      carried=lent.carried), leave_out)
    if lent.context:
        note = replace(note, properties={**note.properties, notes_mod.CONTEXT: lent.context})
    for w in note.warnings:
        report.warn(w)
    with clock("chunk"):
        chunks = chunker.chunk(note)
    if not chunks:
        log.info("%s: no text to index", entry.path)
    size = len(data) if data is not None else entry.size
    tags, left_out = bounded_tags(note.tags)
    properties = note.properties
    if left_out:
        why = (f"{left_out:,} of its {len(note.tags):,} tags left out (over {MAX_NOTE_TAGS:,} tags "
               f"and parent tags)")
        report.warn(f"{entry.path}: {why}; indexed with its first {len(tags):,}, and hidden from "
                    f"agents (a private tag may be among the rest)")
        properties = {**properties, TAGS_CUT: why}
    aliases, cut = bounded_aliases(note.aliases)
    if cut:
        report.warn(f"{entry.path}: {cut:,} of its {len(note.aliases):,} aliases left out; indexed with its "
                    f"first {len(aliases):,} (docs/sources.md: bounds)")
    return NoteRecord(
        path=entry.path, size=size, mtime_ns=entry.mtime_ns, hash=digest, title=note.title,
        tags=tags, aliases=aliases, properties=properties, created=note.created,
        modified=modified_of(note, entry.source_mtime_ns or entry.mtime_ns, names),
        chunks=[NewChunk(c.heading, c.start_line, c.end_line, c.text, text_hash(c.embed_text))
                for c in chunks],
        embed_texts=[c.embed_text for c in chunks], links=note.links, text="\n".join(note.lines),
        places=link_places(note) if note.links and kind_of(entry.path) == "note" else None,
    )


def read_bytes(entry: walk.FileEntry) -> bytes:
    if entry.load is not None:
        return entry.load()
    with open(entry.abspath, "rb") as fh:
        return fh.read()


def content_hash(entry: walk.FileEntry) -> str:
    """:func:`file_hash` of a document, reading a file in blocks (a large PDF never whole)."""
    return walk.file_digest(entry.load() if entry.load is not None else entry.abspath)


class Read(NamedTuple):
    """One document as the read-ahead hands it over: its entry, the ledger's row of it (None:
    new) and what reading it gave."""
    entry: walk.FileEntry
    row: object
    result: ReadResult


class ReadAhead:
    """Reads (entry, row) items on a background thread, in order, into :class:`Read` s: taken
    by :meth:`take` (all that are ready) or by iterating. ``depth`` bounds how far the thread
    reads ahead (0: no bound; the records are kept for the catalog anyway, and reading ahead
    makes the number of chunks to embed known early). An exception there (a bug in the reader
    itself: one file's failure is already a warning from ``read_document``) is re-raised to
    the taker; :meth:`close` (or leaving the loop early) stops the thread."""

    def __init__(self, items, chunker: Chunker, settings: Settings, report: IndexReport, force: bool,
                 clock: Stopwatch, skips: dict[str, Skip] | None = None, depth: int = 0,
                 names: NameDates | None = None, leave_out: LeaveOut = NOTHING,
                 limits: Limits | None = None):
        import queue
        import threading
        self.items, self.busy = items, 0.0
        self._args = (chunker, settings, report, force, clock, skips, names, leave_out, limits)
        self._q: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hybrid-read", daemon=True)
        self._over = not items

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
                result = read_document(entry, row, *self._args)
                self.busy += time.perf_counter() - t  # time spent reading, not waiting to hand over
                if not self._put(("ok", Read(entry, row, result))):
                    return
        except BaseException as exc:  # handed to the consumer, which raises it
            self._put(("error", exc))
            return
        self._put(("done", None))

    def take(self, wait: bool = True) -> list[Read] | None:
        """Every read ready now (with ``wait``, at least one: it waits for it; without, maybe
        none), or None once all are taken."""
        import queue
        if self._over:
            return None
        if not self._thread.is_alive() and not self._stop.is_set() and self._thread.ident is None:
            self._thread.start()
        out: list[Read] = []
        got: list[tuple[str, object]] = []
        try:
            got.append(self._q.get(block=wait))
            while True:
                got.append(self._q.get_nowait())
        except queue.Empty:
            pass
        for kind, value in got:
            if kind == "error":
                self.close()
                raise value  # type: ignore[misc]
            if kind == "done":
                self._over = True
                break
            out.append(value)  # type: ignore[arg-type]
        if self._over and not out:
            return None
        return out

    def close(self) -> None:
        self._over = True
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join()

    def __iter__(self):
        try:
            while (batch := self.take()) is not None:
                yield from batch
        finally:
            self.close()
