"""Full and incremental sync of one vault into its store.

Order of work, chosen so that a kill at any instant loses nothing: (1) embed every chunk text
that has no cached vector and commit the vectors to the catalog's cache, batch by batch;
(2) swap the changed notes' chunks in one catalog transaction, journaling touched ids;
(3) replay the journal into tantivy and FAISS. A rerun after a crash redoes only what is missing.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from hybrid.core import lang
from hybrid.core.config import Vault
from hybrid.core.dates import NameDates
from hybrid.core.errors import EmbedderMismatch, VaultError
from hybrid.core.faults import checkpoint
from hybrid.core.settings import Settings
from hybrid.core.timing import Stopwatch
from hybrid.embedders import Embedder
from hybrid.embedders.base import part_of
from hybrid.indexing import context, pages, skipped
from hybrid.indexing.chunk import Chunker
from hybrid.indexing.embed_queue import EmbedQueue
from hybrid.indexing.reading import Lent, ReadAhead, ReadStatus, read_document
from hybrid.indexing.report import STAGES, IndexReport, Progress
from hybrid.indexing.shared import SharedTexts
from hybrid.sources import KIND, SOURCES, kind_of, walk
from hybrid.sources.daily import name_dates
from hybrid.sources.markdown import CONTEXT, LENT
from hybrid.sources.ocr import PLAN_META, vault_plan, with_plan
from hybrid.sources.sandbox import Limits, convert_limits
from hybrid.sources.sandbox import shutdown as shutdown_converters
from hybrid.sources.sections import LeaveOut
from hybrid.store import backend
from hybrid.store.agent.vectors import embed_missing
from hybrid.store.agent.view import AgentView, agent_redactor
from hybrid.store.base import NoteRecord, VectorSpec
from hybrid.store.port import Store

log = logging.getLogger("hybrid")
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
    upgrading: bool = False  # adding a mix's other half to an index of one of its parts

    @functools.cached_property
    def view(self) -> AgentView:
        return AgentView.of(self.vault, self.settings)

    @functools.cached_property
    def redactor(self):
        return agent_redactor() if self.view.redact else None

    @functools.cached_property
    def names(self) -> NameDates | None:
        """How a folder vault names its daily notes (read once a run)."""
        return name_dates(self.vault.path) if self.vault.is_folder else None

    @property
    def chunking(self) -> str:
        return chunking_meta(self.settings, self.names, self.vault)

    @functools.cached_property
    def leave_out(self) -> LeaveOut:
        return LeaveOut.of(self.vault)


def chunking_meta(s: Settings, names: NameDates | None = None, vault: Vault | None = None) -> str:
    """The chunking parameters as recorded in the catalog: a change re-chunks every note.
    (Version 3: every lexical document carries its kind for ``--source``; version 4: tags in
    any script and a front block that cannot be read recorded, both for the agent view;
    version 5: a note's date from its ``date``/``created`` fields too, see
    :data:`hybrid.core.dates.NOTE_DATE_FIELDS`; version 6: the lexical arm reads CJK text as
    character bigrams, :func:`hybrid.core.tokens.split_cjk`, so every lexical document, in
    tantivy or PostgreSQL, is written again; version 7: each note's links recorded for the
    link graph, :mod:`hybrid.store.graph`; version 8: every chunk records its text's hash,
    and identical sections share one vector, :mod:`hybrid.indexing.shared`; version 9: a note
    without a frontmatter date dated by its file name, :class:`hybrid.core.dates.NameDates`,
    whose vault's own daily-note formats (``names``) are recorded too, so changing them re-reads
    every note; and an Excalidraw drawing, ``*.excalidraw.md``, is its own kind, read as its
    text elements and links, :mod:`hybrid.sources.excalidraw`; version 10: drawings are left
    out of as notes are, and a note's title is never a heading left out,
    :mod:`hybrid.sources.sections`; version 11: a tag starting a line of a drawing's text is a
    tag, :mod:`hybrid.sources.excalidraw` (it was escaped as a heading: a drawing's
    ``#private`` there did not hide it), and an element's links follow its text, so a region
    left out takes them with it; version 12: a fenced block in a callout or block quote is left
    out by ``exclude_blocks`` as one at the top level is, and a drawing's tags come from its
    whole file, :mod:`hybrid.sources.sections`, :mod:`hybrid.sources.excalidraw`; version 13:
    a PDF's headings (its outline's, else from type) are headings inside its pages, and images are
    read by OCR, :mod:`hybrid.sources.pdf`, :mod:`hybrid.sources.ocr`; version 14: a markdown
    link to a picture (``![alt](scan.png)``) is recorded as a link, and a picture takes the
    words of the notes that show it, :mod:`hybrid.indexing.context`; version 15: a picture
    that is a page of a series starts under the headings of the page before,
    :mod:`hybrid.indexing.pages`. The re-read costs no embedding where the chunks are the
    same; a picture's text is not read again, its OCR is kept by content hash.) The OCR
    languages a vault sets (``ocr_languages``) are recorded too: a change of them reads its
    pictures again. What ``vault``'s notes leave out (:mod:`hybrid.sources.sections`) is
    recorded too, only when there is something: a change of it re-chunks every note."""
    meta = {"tokens": s.chunk_tokens, "overlap": s.chunk_overlap, "header": s.context_header,
            "version": 15}
    own = names.fingerprint if names is not None else []
    rule = LeaveOut.of(vault).meta() if vault is not None else {}
    ocr = list(vault.ocr_languages) if vault is not None else []
    return json.dumps({**meta, **({"names": own} if own else {}), **rule, **({"ocr": ocr} if ocr else {})})


@dataclass
class _Plan:
    """The folder compared with the catalog: which files to read, which are still there."""
    known: dict[str, Any]
    present: set[str]
    to_read: list[tuple[walk.FileEntry, Any]]
    rechunk_all: bool
    skips: dict[str, skipped.Skip] = field(default_factory=dict)  # the ledger's skipped files
    skips_before: str | None = None  # … as the ledger held them
    limits: Limits | None = None  # the converter's bounds and the vault's OCR (hybrid.sources.ocr)
    entries: dict[str, walk.FileEntry] = field(default_factory=dict)  # every file listed, by path


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
        _apply(store, job, plan, pending, removed)
    _report_progress(job, "write", 1, 2)
    synced = store.sync_derived(job.embedder.id, view=job.view, redactor=job.redactor)
    with job.clock("embed"):  # the redacted texts agents are scored by (hybrid.store.agent.vectors)
        embed_missing(store.catalog, job.embedder)
    _report_progress(job, "write", 2, 2)
    job.clock.add("tantivy", synced.lexical_seconds)
    job.clock.add("faiss", synced.vector_seconds)
    _finish(store, job, report)


def _report_progress(job: _Job, stage: str, done: int, total: int | None) -> None:
    if job.progress:
        job.progress(stage, done, total)


def _check_model(store: Store, job: _Job, report: IndexReport) -> None:
    """Refuse a vault indexed with another model; label a new catalog with this one; finish
    whatever an interrupted run left in the journal (cheap when nothing is pending)."""
    cat, stored, vault = store.catalog, store.embedder_id, job.vault
    if stored is not None and stored != job.embedder.id and upgrades(job.embedder, stored):
        # an index of one part of a mix (MiniLM alone, before the multilingual default): every
        # note is read again, and only the other part's half of each vector is embedded
        report.upgraded = job.embedder.id
        job.upgrading = True
        log.info("%s: adding %s's vectors to an index of %s (only the new half is embedded)",
                 vault.name, job.embedder.id, stored)
    elif stored is not None and stored != job.embedder.id:
        raise EmbedderMismatch(
            f"vault {vault.name!r} was indexed with {stored}, but the configured embedder is "
            f"{job.embedder.id}; run `hybrid index --vault {vault.name} --reembed` to rebuild its vectors")
    if cat.get_meta("embedder") is None:
        cat.set_meta("embedder", job.embedder.id)  # before any chunk exists, so none is unlabelled
    if cat.journal():
        report.recovered = store.sync_derived(stored or job.embedder.id, view=job.view,
                                              redactor=job.redactor).journal


LANGUAGE_SAMPLE = 300
SAMPLE_BYTES = 8192  # read of each note sampled for its language before a first index


def _languages_held(store: Store, vault: Vault, entries: list[walk.FileEntry]) -> str | None:
    """The languages the vault's notes are in besides English (:data:`lang.LANGUAGES_META`), as
    the ledger records them; before a folder vault's first index with pictures to read (when
    no ``ocr_languages`` says which), told from the start of up to :data:`LANGUAGE_SAMPLE` of
    its notes spread over the folder, so the pictures are read in them from the first run."""
    held = store.catalog.get_meta(lang.LANGUAGES_META)
    if held is not None or not vault.is_folder or not vault.ocr or vault.ocr_languages:
        return held
    if not any(KIND[kind_of(e.path)].ocr for e in entries):
        return held
    notes = [e for e in entries if kind_of(e.path) == "note"]
    sample = []
    for e in notes[::max(1, len(notes) // LANGUAGE_SAMPLE)][:LANGUAGE_SAMPLE]:
        try:
            with open(e.abspath, "rb") as fh:
                sample.append(fh.read(SAMPLE_BYTES).decode("utf-8", "replace"))
        except OSError:
            continue
    return ",".join(lang.languages_held(sample))


def _language_sample(cat) -> list[str]:
    """The texts of up to :data:`LANGUAGE_SAMPLE` chunks spread evenly over the ledger, from
    which the vault's languages are told (hybrid.core.lang): the share in other languages than
    English (a multilingual embedder then weighs its multilingual half on English questions
    too), and which (typo repair takes their words as words)."""
    ids = cat.all_chunk_ids()
    step = max(1, len(ids) // LANGUAGE_SAMPLE)
    return [r.text for r in cat.chunks(ids[::step][:LANGUAGE_SAMPLE]).values()]


def upgrades(embedder: Embedder, stored: str) -> bool:
    """Whether an index of model ``stored`` becomes ``embedder``'s by adding vectors: ``stored``
    is a part of it (:class:`hybrid.embedders.mix.MixEmbedder`)."""
    return part_of(embedder, stored) is not None


def _plan(store: Store, job: _Job, report: IndexReport) -> _Plan:
    """List the folder and compare each file's size and mtime with the catalog's record; an
    unchanged file is counted and not read (all are read when the chunking changed)."""
    vault, known = job.vault, store.catalog.files()
    rechunk_all = store.catalog.get_meta("chunking") not in (None, job.chunking) or bool(report.upgraded)
    if vault.is_folder:
        entries = list(walk.discover(vault.path, vault.include, vault.exclude,
                                          link_exclude=job.view.exclude_patterns))
    else:
        from hybrid.sources.entries import fetch_bookmarks, source_entries
        if job.fetch and SOURCES[vault.kind].fetches:
            fetched = fetch_bookmarks(vault, store.catalog, job.fetch, job.settings)
            report.fetched, report.fetch_failed = fetched.fetched, fetched.failed
            report.warnings.extend(fetched.warnings)
        entries, warnings = source_entries(vault, store.catalog)
        for w in warnings:
            report.warn(w)
    if not entries and known:
        # An empty folder where notes were is far more often a drive or share that is not
        # mounted than a user who deleted every note: keep the index (and its embeddings).
        where = "folder" if vault.is_folder else f"{vault.kind} export"
        raise VaultError(f"vault {vault.name!r}: {where} {vault.path} has no documents now, but "
                         f"the index has {len(known):,}; nothing was removed (a drive not "
                         f"mounted?). If they really are gone, run `hybrid vault remove {vault.name}`")
    ocr = vault_plan(vault, _languages_held(store, vault, entries), store.catalog.get_meta(PLAN_META))
    for w in ocr.warnings:
        report.warn(w)
    plan = _Plan(known, set(), [], rechunk_all, skipped.load(store.catalog),
                 store.catalog.get_meta(skipped.SKIPPED_META), with_plan(convert_limits(job.settings), ocr))
    ocr_key = plan.limits.ocr_key if plan.limits is not None else ""
    for entry in entries:
        plan.present.add(entry.path)
        plan.entries[entry.path] = entry
        row = known.get(entry.path)
        skip = plan.skips.get(entry.path)
        if row and not rechunk_all and row.size == entry.size and row.mtime_ns == entry.mtime_ns:
            report.unchanged += 1
        elif skip is not None and skip.holds(entry, job.settings, ocr_key):
            report.skipped += 1  # skipped before, unchanged since: not read, not warned again
        else:
            plan.to_read.append((entry, row))
    return plan


def _read_and_embed(store: Store, job: _Job, plan: _Plan, report: IndexReport) -> list[NoteRecord]:
    """Read, parse and chunk the changed files on a background thread while this one embeds
    what is ready (the model's forward pass releases the GIL, so both overlap): between two
    groups it takes every read that is ready, so the number of chunks to embed is known as
    soon as the reads are over. Returns the records to store; their vectors are already in the
    catalog's cache."""
    s = job.settings
    chunker = Chunker(job.embedder.count_tokens, job.embedder.max_tokens, s.chunk_tokens,
                      s.chunk_overlap, s.context_header)
    embedding = EmbedQueue(store, job.embedder, report, job.progress,
                           expect_bytes=sum(e.size for e, _ in plan.to_read), expect_files=len(plan.to_read))
    reader = ReadAhead(plan.to_read, chunker, s, report, plan.rechunk_all, job.clock, plan.skips,
                       names=job.names, leave_out=job.leave_out, limits=plan.limits)
    shared = SharedTexts(store.catalog, job.embedder.id)  # identical sections: one vector
    pending: list[NoteRecord] = []
    held: list[NoteRecord] = []  # a folder's pictures: embedded once the notes that show them are read
    keeps_text = store.catalog.keeps_text
    if plan.to_read:
        _report_progress(job, "scan", 0, len(plan.to_read))
    n = 0
    try:
        while (batch := reader.take(wait=not embedding.pending())) is not None:
            records = []
            for entry, row, result in batch:
                n += 1
                _report_progress(job, "scan", n, len(plan.to_read))
                embedding.read(entry.size)
                if result.status is ReadStatus.VANISHED:
                    plan.present.discard(entry.path)
                elif result.status is ReadStatus.TOUCHED:
                    store.catalog.touch_file(entry.path, entry.size, entry.mtime_ns)
                    report.unchanged += 1
                elif result.record is not None:
                    if not keeps_text:  # read from the folder by its readers: not held twice meanwhile
                        result.record.text = None
                    records.append(result.record)
                    if row is None:
                        report.added += 1
                    else:
                        report.updated += 1
            pending += records
            late = [job.vault.is_folder and kind_of(r.path) == "image" for r in records]
            held += [r for r, wait in zip(records, late) if wait]
            now = [r for r, wait in zip(records, late) if not wait]
            shared.assign(now)
            embedding.add(now)
            embedding.step()  # one group at most: then whatever was read meanwhile
    finally:
        reader.close()
    pending, redone = _with_context(store, job, plan, report, chunker, pending)
    again = {r.path for r in redone}
    pictures = [r for r in held if r.path not in again] + redone  # each picture embedded once
    shared.assign(pictures)
    embedding.add(pictures)
    embedding.finish()
    report.chunks_shared = shared.shared
    # kept for the files still there: one skipped is not read again until it changes
    skipped.save(store.catalog, {p: k for p, k in plan.skips.items() if p in plan.present},
                 plan.skips_before)
    job.clock.add("read_parse", reader.busy - job.clock.seconds.get("chunk", 0.0))
    job.clock.add("embed", embedding.busy)
    return pending


def _with_context(store: Store, job: _Job, plan: _Plan, report: IndexReport, chunker: Chunker,
                  pending: list[NoteRecord]) -> tuple[list[NoteRecord], list[NoteRecord]]:
    """(``pending`` with the pictures whose words from other files changed read again with
    their new words, from the OCR cache; those records). The words: the lines of the notes that
    show a picture (:mod:`hybrid.indexing.context`), and the headings a page of a series starts
    under (:mod:`hybrid.indexing.pages`). A picture not read before in this run counts as
    updated."""
    removed = {p for p in plan.known if p not in plan.present}
    with job.clock("context"):
        lines = context.changed(store.catalog, job.vault, job.view, job.settings, job.leave_out,
                                pending, removed, plan.entries)
        heads = pages.changed(store.catalog, job.vault, job.view, plan.limits, pending, removed,
                              plan.known, plan.entries)
    if not lines and not heads:
        return pending, []
    by_path = {r.path: i for i, r in enumerate(pending)}
    held = {path: props for _, path, _, props in store.catalog.files_mentioning(LENT, ())
            if path in lines or path in heads}
    records = []
    for path in sorted({*lines, *heads}):
        entry = plan.entries.get(path)
        if entry is None:
            continue
        now = pending[by_path[path]].properties if path in by_path else held.get(path, {})
        lent = Lent(lines[path] if path in lines else list(now.get(CONTEXT) or []),
                    heads[path] if path in heads else pages.held(now))
        result = read_document(entry, plan.known.get(path), chunker, job.settings, report, True, job.clock,
                               plan.skips, job.names, job.leave_out, plan.limits, lent)
        if result.record is None:
            continue
        if not store.catalog.keeps_text:
            result.record.text = None
        if path in by_path:
            pending[by_path[path]] = result.record
        else:
            pending.append(result.record)
            report.unchanged -= 1
            report.updated += 1
        records.append(result.record)
    return pending, records


def _apply(store: Store, job: _Job, plan: _Plan, pending: list[NoteRecord], removed: list[str]) -> None:
    """Swap the changed notes' chunks and drop the removed notes in one catalog transaction
    (journaling the touched ids for the derived indexes); record what the run read by."""
    cat = store.catalog
    checkpoint("before-catalog")
    if job.upgrading:  # the new chunks' vectors are the mix's (a store may copy them in apply)
        cat.set_meta("embedder", job.embedder.id)
    cat.apply(pending, removed)
    checkpoint("after-catalog")
    cat.set_meta("embedder", job.embedder.id)
    cat.set_meta("chunking", job.chunking)
    if job.vault.is_folder:
        cat.set_meta(context.VIEW_META, job.view.fingerprint)
    if plan.limits is not None and plan.limits.ocr and not job.vault.ocr_languages \
            and any(KIND[kind_of(p)].ocr for p in plan.present):  # read in these from now on
        cat.set_meta(PLAN_META, plan.limits.ocr)


def _finish(store: Store, job: _Job, report: IndexReport) -> None:
    """Record the run (dimension, time, counts, stage timings), reclaim unused cached
    embeddings past their bound, and gather the store's warnings."""
    cat = store.catalog
    if report.chunks_embedded:
        cat.set_meta("dim", str(job.embedder.dim))
    cat.set_meta("last_indexed", str(time.time()))
    report.chunks = cat.chunk_count()
    if report.added or report.updated or report.removed or cat.get_meta(lang.LANGUAGES_META) is None:
        sample = _language_sample(cat)
        cat.set_meta(lang.SHARE_META, f"{lang.other_language_share(sample):.4f}")
        cat.set_meta(lang.LANGUAGES_META, ",".join(lang.languages_held(sample)))
    store.reclaim(job.embedder.id, force=bool(report.upgraded))  # an upgrade: the part's vectors go
    report.warnings.extend(w for w in store.warnings if w not in report.warnings)
    timed = job.clock.rounded()
    report.stage_seconds = {k: timed.get(k, 0.0) for k in STAGES}
