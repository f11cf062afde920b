"""Full and incremental sync of one vault into its store.

Order of work, chosen so that a kill at any instant loses nothing: (1) embed every chunk text
that has no cached vector and commit the vectors to the catalog's cache, batch by batch;
(2) swap the changed notes' chunks in one catalog transaction, journaling touched ids;
(3) replay the journal into tantivy and FAISS. A rerun after a crash redoes only what is missing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

from . import notes as notes_mod
from .catalog import NewChunk, NoteRecord
from .chunk import Chunker
from .config import Vault
from .embed import Embedder
from .errors import EmbedderMismatch, VaultError
from .store import VaultStore, checkpoint
from .vector import VectorSpec

log = logging.getLogger("hybrid")
Progress = Callable[[str, int, int], None]
EMBED_GROUP = 256


@dataclass
class IndexReport:
    vault: str
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    skipped: int = 0
    chunks: int = 0
    chunks_embedded: int = 0
    cache_hits: int = 0
    seconds: float = 0.0
    recovered: int = 0
    stage_seconds: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def text_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def _warn(report: IndexReport, message: str) -> None:
    report.warnings.append(message)
    log.warning("%s", message)


def _modified(note: notes_mod.Note, mtime_ns: int) -> float:
    if note.updated:
        from .query import parse_date
        try:
            return parse_date(note.updated[:10])
        except Exception:
            pass
    return mtime_ns / 1e9


def index_vault(vault: Vault, embedder: Embedder, settings: dict, *, reembed: bool = False,
                wait: float = 0, progress: Progress | None = None) -> IndexReport:
    """Bring one vault's index up to date with its folder. See the module docstring."""
    t0 = time.perf_counter()
    report = IndexReport(vault.name)
    if not vault.path.is_dir():
        raise VaultError(f"vault {vault.name!r}: folder {vault.path} is missing; nothing was "
                         f"changed in its index (fix the path with `hybrid vault add PATH --name {vault.name}`)")
    vault.index_dir.mkdir(parents=True, exist_ok=True)
    store = VaultStore(vault.index_dir)
    store.spec = VectorSpec.from_settings(settings)
    lock = store.lock(wait)
    try:
        cat = store.catalog
        stored = store.embedder_id
        if reembed:
            store.wipe()
            store.spec = VectorSpec.from_settings(settings)
            cat = store.catalog
        elif stored is not None and stored != embedder.id:
            raise EmbedderMismatch(
                f"vault {vault.name!r} was indexed with {stored}, but the configured embedder is "
                f"{embedder.id}; run `hybrid index --vault {vault.name} --reembed` to rebuild its vectors")
        if cat.get_meta("embedder") is None:
            cat.set_meta("embedder", embedder.id)  # before any chunk exists, so none is unlabelled
        # Finish whatever an interrupted run left half done (cheap when nothing is pending).
        if cat.journal():
            report.recovered = store.sync_derived(stored or embedder.id)["journal"]
        chunking = json.dumps({"tokens": settings["chunk_tokens"], "overlap": settings["chunk_overlap"],
                               "header": settings["context_header"], "version": 1})
        rechunk_all = cat.get_meta("chunking") not in (None, chunking)
        chunker = Chunker(embedder.count_tokens, embedder.max_tokens, settings["chunk_tokens"],
                          settings["chunk_overlap"], settings["context_header"])

        known = cat.files()
        present: set[str] = set()
        pending: list[NoteRecord] = []
        entries = list(notes_mod.discover(vault.path, vault.include, vault.exclude))
        for n, entry in enumerate(entries, 1):
            if progress:
                progress("scan", n, len(entries))
            present.add(entry.path)
            row = known.get(entry.path)
            if row and not rechunk_all and row.size == entry.size and row.mtime_ns == entry.mtime_ns:
                report.unchanged += 1
                continue
            record = _read(entry, row, chunker, settings, report, rechunk_all)
            if record == "vanished":
                present.discard(entry.path)
            elif record == "touched":
                cat.touch_file(entry.path, entry.size, entry.mtime_ns)
                report.unchanged += 1
            elif record is not None:
                pending.append(record)
                if row is None:
                    report.added += 1
                else:
                    report.updated += 1
        removed = [p for p in known if p not in present]
        report.removed = len(removed)

        t1 = time.perf_counter()
        _embed_missing(store, embedder, pending, report, progress)
        checkpoint("before-catalog")
        t2 = time.perf_counter()
        cat.apply(pending, removed)
        checkpoint("after-catalog")
        cat.set_meta("embedder", embedder.id)
        cat.set_meta("chunking", chunking)
        t3 = time.perf_counter()
        store.sync_derived(embedder.id)
        t4 = time.perf_counter()
        report.stage_seconds = {"scan_parse_chunk": round(t1 - t0, 4), "embed": round(t2 - t1, 4),
                                "catalog": round(t3 - t2, 4), "lexical_vector": round(t4 - t3, 4)}
        if report.chunks_embedded:
            cat.set_meta("dim", str(embedder.dim))
        cat.set_meta("last_indexed", str(time.time()))
        report.chunks = cat.chunk_count()
    finally:
        lock.release()
        store.close()
    report.seconds = round(time.perf_counter() - t0, 3)
    return report


def _read(entry: notes_mod.FileEntry, row, chunker: Chunker, settings: dict, report: IndexReport,
          force: bool):
    """Read, hash and chunk one changed file. Returns a NoteRecord, "touched" (same content,
    new stat), "vanished" (deleted since the scan) or None (skipped: previous chunks stay)."""
    if entry.size > settings["max_file_bytes"]:
        report.skipped += 1
        _warn(report, f"{entry.path}: {entry.size:,} bytes is over max_file_bytes "
                      f"({settings['max_file_bytes']:,}); skipped")
        return None
    try:
        data = read_bytes(entry)
    except FileNotFoundError:
        log.info("%s: vanished while indexing; treated as deleted", entry.path)
        return "vanished"
    except OSError as exc:
        report.skipped += 1
        _warn(report, f"{entry.path}: cannot read ({exc.strerror or exc}); kept its previous chunks")
        return None
    digest = hashlib.blake2b(data, digest_size=16).hexdigest()
    if row is not None and row.hash == digest and not force:
        return "touched"
    try:
        text, warnings = notes_mod.decode(data, entry.path)
    except notes_mod.BinaryFile as exc:
        report.skipped += 1
        _warn(report, str(exc))
        return None
    note = notes_mod.parse_note(entry.path, text)
    for w in warnings + note.warnings:
        _warn(report, w)
    chunks = chunker.chunk(note)
    if not chunks:
        log.info("%s: no text to index", entry.path)
    return NoteRecord(
        path=entry.path, size=len(data), mtime_ns=entry.mtime_ns, hash=digest, title=note.title,
        tags=note.tags, aliases=note.aliases, properties=note.properties, created=note.created,
        modified=_modified(note, entry.mtime_ns),
        chunks=[NewChunk(c.heading, c.start_line, c.end_line, c.text, text_hash(c.embed_text))
                for c in chunks],
        embed_texts=[c.embed_text for c in chunks],
    )


def read_bytes(entry: notes_mod.FileEntry) -> bytes:
    with open(entry.abspath, "rb") as fh:
        return fh.read()


def _embed_missing(store: VaultStore, embedder: Embedder, pending: list[NoteRecord],
                   report: IndexReport, progress: Progress | None) -> None:
    texts: dict[str, str] = {}
    for rec in pending:
        for c, t in zip(rec.chunks, rec.embed_texts):
            texts.setdefault(c.embed_hash, t)
    total_chunks = sum(len(r.chunks) for r in pending)
    cached = store.catalog.cached_hashes(embedder.id, texts)
    # Length-sorted so each batch pads to similar lengths (what encode() does within one call).
    todo = sorted(((h, t) for h, t in texts.items() if h not in cached), key=lambda ht: len(ht[1]))
    report.cache_hits = total_chunks - len(todo)
    done = 0
    for i in range(0, len(todo), EMBED_GROUP):
        group = todo[i:i + EMBED_GROUP]
        vecs = embedder.embed_documents([t for _, t in group])
        store.catalog.put_embeddings(embedder.id, [(h, v.tobytes()) for (h, _), v in zip(group, vecs)])
        done += len(group)
        report.chunks_embedded = done
        if progress:
            progress("embed", done, len(todo))
        checkpoint("after-embed-batch")
