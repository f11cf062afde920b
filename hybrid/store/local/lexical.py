"""The lexical arm: a tantivy BM25 index over chunks and over sections.

Two tantivy indexes with one schema: ``lexical/`` holds one document per **chunk** (what hits
cite); ``lexical/sections/`` one per heading **section** of a note, whole (its chunks joined,
the repeated overlap removed; a note without headings is one section). BM25 wants the unit a
writer wrote: scoring 128-token pieces in isolation loses evidence spread across them. Two
indexes, not two kinds of document in one, because tantivy's BM25 statistics (document count,
average field length) are per index: mixing the kinds would skew both.

Fields: ``title`` (title, aliases, file name), ``headings`` (heading path and tags), ``body``
(chunk text) share one English-stemming analyzer (:class:`hybrid.store.lexicon.StemAnalyzer`:
CJK runs as character bigrams, given to tantivy already split); ``ident`` keeps identifiers whole
(``orders-created``, ``10.0.0.0/24``, ``--advertise-routes``, ``obsidian://open``) plus their
parts, lowercased and unstemmed, and serves exact-identifier and typo-tolerant matching.
``chunk_id`` holds a chunk's id, or every chunk id of a section (so deleting any chunk of a
note deletes its sections too); ``folder``, ``tag`` and ``modified`` serve filters. Queries
are built as query objects, never through tantivy's query-string parser, so no user text can
be a syntax error here.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import struct
import zlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hybrid.core.errors import HybridError, IndexCorrupt
from hybrid.core.tokens import identifiers, query_idents, within_one_edit
from hybrid.sources import kind_term
from hybrid.store.base import EVERY_NOTE, ChunkRow, NoteFilter
from hybrid.store.lexicon import (
    FIELD_BOOSTS,
    FUZZY_BOOST,
    IDENT_BOOST,
    LexicalQuery,
    doc_fields,
    only_stopwords,
    spellable,
    stem_analyzer,
    typo_candidates,
    units,
    without_stopwords,
)
from hybrid.store.local.db import disk_full, is_disk_full

if TYPE_CHECKING:
    from hybrid.store.props import PropFilter

log = logging.getLogger("hybrid")
SECTIONS = "sections"  # the section index's folder, inside the chunk index's
# The files tantivy writes in its folder: segment files are named by a 32-hex segment id.
TANTIVY_FILE_RE = re.compile(r"^(meta\.json|\.managed\.json|\.tantivy-[a-z-]+\.lock|"
                             r"[0-9a-f]{32}(\.\d+)?\.(idx|term|pos|store|fast|fieldnorm|del|"
                             r"positions|fieldnorms))$")
FOOTER_MAGIC = 1337  # tantivy's file footer: body | JSON {version, crc} | u32 len | u32 magic
# A tantivy error that means the files on disk are unreadable (not a bad query or a bug).
UNREADABLE_HINTS = ("IO error", "corrupt", "Failed to open", "Footer", "magic", "does not exist",
                    "Meta file", "deserializ")

class TantivyIndex:
    store_kind = "local"  # tantivy's BM25: the parameters the settings ship with (hybrid.retrieval.fitted)

    # the chunk ids of the notes passing property filters (the catalog's filter_ids, set by the
    # store): property filters are tested on the catalog, then given to tantivy as those ids
    prop_ids: Callable[[tuple[PropFilter, ...]], set[int]] | None = None

    def __init__(self, directory: Path, create: bool = True):
        import tantivy
        self._t = tantivy
        self.directory = directory
        self.schema = self._schema()
        exists = directory.exists() and any(directory.glob("meta.json"))
        if not exists and not create:
            raise IndexCorrupt(f"{directory}: no lexical index; run `hybrid index`")
        (directory / SECTIONS).mkdir(parents=True, exist_ok=True)
        self.stem = stem_analyzer()
        ident = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build()
        with self._guard("open"):
            self.index = tantivy.Index(self.schema, path=str(directory), reuse=True)
            self.sections = tantivy.Index(self.schema, path=str(directory / SECTIONS), reuse=True)
        for index in (self.index, self.sections):
            index.register_tokenizer("hy_stem", self.stem.tokenizer)
            index.register_tokenizer("hy_ident", ident)

    @contextlib.contextmanager
    def _guard(self, doing: str):
        """Turn tantivy's failures into one-line errors: ENOSPC into DiskFull; unreadable files
        (an error naming IO or corruption, or a Rust panic while decoding them) into
        IndexCorrupt, whose fix (`hybrid index`) rebuilds the index from the catalog."""
        try:
            yield
        except (KeyboardInterrupt, SystemExit, GeneratorExit, HybridError):
            raise
        except BaseException as exc:  # pyo3's PanicException derives from BaseException
            if is_disk_full(exc):
                raise disk_full(self.directory, exc) from None
            panic = type(exc).__name__ == "PanicException"
            if panic or (isinstance(exc, (ValueError, OSError))
                         and any(h in str(exc) for h in UNREADABLE_HINTS)):
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
                raise IndexCorrupt(f"{self.directory}: cannot {doing} the lexical index ({first}); "
                                   f"run `hybrid index` to rebuild it from the catalog") from None
            raise

    def verify(self, verified: dict[str, list[int]] | None = None) -> dict[str, list[int]]:
        """Raise IndexCorrupt unless meta.json parses and every file of every committed segment
        is whole: tantivy ends each file with a CRC32 of its body, which catches damage that
        opening the index does not (a garbled term dictionary, postings or field norms).

        ``verified`` maps file names to the (size, mtime_ns) they had when last found whole;
        such files are not read again (a no-op index run must not read a 400 MB index). Returns
        the map for the files checked now."""
        verified, now = verified or {}, {}
        for directory, prefix in ((self.directory, ""), (self.directory / SECTIONS, f"{SECTIONS}/")):
            try:
                segments = {seg["segment_id"].replace("-", "") for seg in self._meta(directory)["segments"]}
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise IndexCorrupt(f"{directory}/meta.json: unreadable ({exc}); run `hybrid "
                                   f"index` to rebuild the lexical index") from None
            for path in sorted(directory.iterdir()):
                if path.name.split(".")[0] not in segments:
                    continue
                try:
                    st = path.stat()
                except OSError:
                    st = None
                ident = [st.st_size, st.st_mtime_ns] if st else None
                key = prefix + path.name
                if ident is None or (verified.get(key) != ident and not _footer_ok(path)):
                    raise IndexCorrupt(f"{path}: checksum mismatch; run `hybrid index` to rebuild "
                                       f"the lexical index")
                now[key] = ident
        with self._guard("read"):
            self.count()
            self.section_count()
        return now

    def deleted_docs(self) -> int:
        """Deleted documents still held in segments, of the chunk and the section index both.
        tantivy counts them in BM25's statistics (document frequencies, average field length)
        until their segment merges, so scores drift from a clean build's as they pile up."""
        out = 0
        for folder in (self.directory, self.directory / SECTIONS):
            try:
                meta = self._meta(folder)
            except (OSError, ValueError):
                continue
            out += sum((seg.get("deletes") or {}).get("num_deleted_docs", 0) for seg in meta.get("segments", []))
        return out

    @staticmethod
    def _meta(directory: Path) -> dict:
        """tantivy's meta.json: the committed segments and their deleted-document counts."""
        return json.loads((directory / "meta.json").read_text(encoding="utf-8"))

    def _schema(self):
        sb = self._t.SchemaBuilder()
        sb.add_integer_field("chunk_id", stored=True, indexed=True, fast=True)
        for name in ("title", "headings", "body"):
            sb.add_text_field(name, tokenizer_name="hy_stem")
        sb.add_text_field("ident", tokenizer_name="hy_ident")
        sb.add_text_field("folder", tokenizer_name="raw", index_option="basic")
        sb.add_text_field("tag", tokenizer_name="raw", index_option="basic")
        sb.add_integer_field("modified", indexed=True, fast=True)
        return sb.build()

    # --- writing --------------------------------------------------------------------------
    def _doc(self, c: ChunkRow, section: Sequence[ChunkRow] = ()):
        """The chunk document of ``c``, or (``section`` given: its chunks, ``c`` the first) the
        section document."""
        f = doc_fields(c, section)
        prep = self.stem.prepare
        return self._t.Document(
            chunk_id=[r.id for r in section] if section else c.id,
            title=prep(f.title), headings=prep(f.headings), body=prep(f.body), ident=" ".join(f.ident),
            folder=f.folders or [""], tag=f.tags or [""], modified=int(c.modified))

    def _docs(self, batches: Iterable[list[ChunkRow]]):
        for kind, rows in units(batches):
            yield (SECTIONS, self._doc(rows[0], rows)) if kind == "section" else ("", self._doc(rows[0]))

    def apply(self, removed: Iterable[int], added: Iterable[list[ChunkRow]]) -> None:
        """Delete ``removed`` ids, add the chunks of ``added`` (batches; their ids must be among
        ``removed``, as the journal guarantees, so a replay never duplicates), commit. Idempotent."""
        self._write(64_000_000, added, delete_ids=removed)

    def rebuild(self, batches: Iterable[list[ChunkRow]]) -> None:
        """Replace every document by those of ``batches`` in one commit (readers see the old
        index until it lands); the result holds no deleted documents."""
        self._write(128_000_000, batches, delete_all=True)

    def _write(self, heap_size: int, batches: Iterable[list[ChunkRow]], *,
               delete_ids: Iterable[int] = (), delete_all: bool = False) -> None:
        """One commit: the deletes, then the chunks of ``batches``. Every delete is queued
        before any add: tantivy applies a delete only to documents added before it, so a replay
        can never delete what it re-adds. On error the writer is rolled back and dropped at
        once, which frees tantivy's writer lock (a retry in this process would otherwise find it
        busy while the traceback keeps the writer alive)."""
        with self._guard("write"):
            writers = {"": self.index.writer(heap_size=heap_size, num_threads=1),
                       SECTIONS: self.sections.writer(heap_size=heap_size // 2, num_threads=1)}
            try:
                delete_ids = set(delete_ids)
                for writer in writers.values():
                    if delete_all:
                        writer.delete_all_documents()
                    for cid in delete_ids:
                        writer.delete_documents_by_term("chunk_id", cid)
                for which, doc in self._docs(batches):
                    writers[which].add_document(doc)
                for writer in writers.values():  # a crash between the two: the journal replays
                    writer.commit()
                    writer.wait_merging_threads()
            except BaseException:
                for w in writers.values():
                    try:
                        w.rollback()
                        w.wait_merging_threads()  # consumes the writer: its lock is free now
                    except BaseException:  # noqa: BLE001 - the first error is the one to report
                        pass
                # no name in this frame may keep a writer alive: the traceback keeps the frame
                del writers, w
                writer = None  # noqa: F841 - the loop variable of the try block above
                raise
            self.index.reload()
            self.sections.reload()

    def count(self) -> int:
        """Chunk documents (what the catalog's chunk count must equal)."""
        with self._guard("read"):
            self.index.reload()
            return self.index.searcher().num_docs

    def section_count(self) -> int:
        with self._guard("read"):
            self.sections.reload()
            return self.sections.searcher().num_docs

    def destroy(self) -> None:
        """Delete every document (the index stays open and valid, empty)."""
        self.rebuild([])

    @staticmethod
    def remove_files(directory: Path) -> list[str]:
        """Delete tantivy's own files in ``directory`` and its section index, then the folders
        if that empties them. Anything else is left where it is; the names left are returned
        (and logged)."""
        inner = remove_known(directory / SECTIONS, TANTIVY_FILE_RE)
        return [f"{SECTIONS}/{n}" for n in inner] + [
            n for n in remove_known(directory, TANTIVY_FILE_RE) if not (n == SECTIONS and inner)]

    # --- querying -------------------------------------------------------------------------
    def known(self, words: Sequence[str]) -> set[str]:
        """The ``words`` (lower case) some chunk holds, as typed or by their stem."""
        with self._guard("read"):
            searcher = self.index.searcher()
            return {w for w in dict.fromkeys(x.lower() for x in words) if self._holds(searcher, w)}

    def _holds(self, searcher, word: str) -> bool:
        return bool(searcher.doc_freq("ident", word)) or any(
            searcher.doc_freq(f, st) for st in self.stem.analyze(word) for f in FIELD_BOOSTS)

    def corrections(self, words: Sequence[str]) -> dict[str, str]:
        """Typo repair: each word of 5+ letters that no chunk holds (as typed or by its stem),
        mapped to the most frequent indexed word within one edit that starts with the same
        letter."""
        with self._guard("read"):
            return self._corrections(words)

    def _corrections(self, words: Sequence[str]) -> dict[str, str]:
        searcher = self.index.searcher()
        out: dict[str, str] = {}
        for word in dict.fromkeys(w.lower() for w in words):
            if not spellable(word) or self._holds(searcher, word):
                continue
            best, best_df = None, 0
            for term, df in searcher.terms_with_prefix("ident", word[0]):
                if df > best_df and abs(len(term) - len(word)) <= 1 and within_one_edit(term, word):
                    best, best_df = term, df
            if best is not None:
                out[word] = best
        return out

    def _text_clause(self, text: str, *, phrase: bool, stopwords: bool = False):
        """Should-clauses matching ``text`` in title/headings/body (stemmed) and ident."""
        Q, s = self._t.Query, self.schema
        if stopwords and not phrase:
            text = without_stopwords(text)
        stems: list[str | tuple[int, str]] = list(self.stem.analyze(text))
        clauses = []
        idents = query_idents(text)
        if phrase and len(stems) > 1:
            for f, b in FIELD_BOOSTS.items():
                clauses.append(Q.boost_query(Q.phrase_query(s, f, stems), b))
            whole = identifiers(text.lower())
            if len(whole) == 1:
                clauses.append(Q.boost_query(Q.term_query(s, "ident", whole[0]), IDENT_BOOST))
        else:
            for st in dict.fromkeys(stems):
                for f, b in FIELD_BOOSTS.items():
                    clauses.append(Q.boost_query(Q.term_query(s, f, st), b))
        if phrase and stems:
            # a phrase is matched whole: its parts (`://` of a URL, `slack.com` of it) are no
            # alternative to it, or any note with any URL would satisfy `"https://hooks…"`
            idents = [t for t in idents if t == " ".join(text.lower().split())]
        for tok in dict.fromkeys(idents):
            clauses.append(Q.boost_query(Q.term_query(s, "ident", tok), IDENT_BOOST))
        return clauses

    def build_query(self, q: LexicalQuery, *, where: NoteFilter = EVERY_NOTE, fuzzy: bool = True,
                    scored: bool = True, stopwords: bool = True):
        Q, s, Occur = self._t.Query, self.schema, self._t.Occur
        parts = []
        should = []
        free = " ".join(q.terms)
        if stopwords and only_stopwords(q.terms):
            stopwords = False  # a query of nothing but stopwords ("the who") keeps them
        if free:
            should.extend(self._text_clause(free, phrase=False, stopwords=stopwords))
        if fuzzy and q.terms:
            for word in self._fuzzed(q):
                should.append(Q.boost_query(Q.fuzzy_term_query(s, "ident", word, 1, True, False),
                                            FUZZY_BOOST))
        if should:
            occur = Occur.Should if q.phrases else Occur.Must
            parts.append((occur, Q.boolean_query([(Occur.Should, c) for c in should])))
        for ph in q.phrases:
            clauses = self._text_clause(ph, phrase=True)
            if clauses:
                parts.append((Occur.Must, Q.boolean_query([(Occur.Should, c) for c in clauses])))
        for ex in q.excludes:
            clauses = self._text_clause(ex, phrase=True)
            if clauses:
                parts.append((Occur.MustNot, Q.boolean_query([(Occur.Should, c) for c in clauses])))
        filters = self._filters(where)
        if filters is not None:
            parts.append((Occur.Must, filters))
        for f in where.exclude_folders:
            parts.append((Occur.MustNot, Q.term_query(s, "folder", f)))
        if not any(o != Occur.MustNot for o, _ in parts):
            parts.append((Occur.Must, Q.all_query()))
        query = Q.boolean_query(parts)
        return query if scored else Q.const_score_query(query, 1.0)

    def _fuzzed(self, q: LexicalQuery) -> list[str]:
        """The words of ``q`` also matched one edit away: the caller's ``q.typos`` (the search
        pipeline judges them over every vault searched and the word lists), else each word of
        5+ letters this index does not hold."""
        if q.typos is not None:
            return [w.lower() for w in q.typos]
        searcher = self.index.searcher()
        return [w for w in typo_candidates(q.terms) if not self._holds(searcher, w)]

    def _filters(self, where: NoteFilter):
        """The must-clause of ``where``'s narrowing tests (its exclusions are must-nots)."""
        Q, s, Occur = self._t.Query, self.schema, self._t.Occur
        must = []
        if where.props:
            if self.prop_ids is None:
                raise RuntimeError("a property filter needs TantivyIndex.prop_ids (set by the store)")
            must.append(Q.term_set_query(s, "chunk_id", sorted(self.prop_ids(where.props))))
        if where.folders:
            must.append(Q.boolean_query([(Occur.Should, Q.term_query(s, "folder", f))
                                         for f in where.folders]))
        if where.sources:
            must.append(Q.boolean_query([(Occur.Should, Q.term_query(s, "folder", kind_term(k)))
                                         for k in where.sources]))
        for t in where.tags:
            must.append(Q.term_query(s, "tag", t))
        if where.since is not None:
            must.append(Q.range_query(s, "modified", self._t.FieldType.Integer, int(where.since), None))
        if not must:
            return None
        return Q.const_score_query(Q.boolean_query([(Occur.Must, m) for m in must]), 0.0)

    def search(self, q: LexicalQuery, limit: int, **opts) -> list[tuple[int, float]]:
        """Top ``limit`` (chunk id, BM25 score) pairs."""
        return [(ids[0], score) for ids, score in self.search_units(q, limit, **opts)]

    def search_units(self, q: LexicalQuery, limit: int, unit: str = "chunk",
                     **opts) -> list[tuple[list[int], float]]:
        """Top ``limit`` documents of kind ``unit`` as (chunk ids, BM25 score): one id for a
        chunk, every chunk id of a section in order."""
        index = self.sections if unit == "section" else self.index
        with self._guard("read"):
            index.reload()
            searcher = index.searcher()
            result = searcher.search(self.build_query(q, **opts), limit)
            return [(sorted(searcher.doc(addr)["chunk_id"]), float(score))
                    for score, addr in result.hits]

    def matching_ids(self, q: LexicalQuery, limit: int = 1_000_000, **opts) -> set[int]:
        """Every chunk id the query matches (unranked), for restricting the vector arm."""
        with self._guard("read"):
            self.index.reload()
            searcher = self.index.searcher()
            result = searcher.search(self.build_query(q, scored=False, **opts),
                                     min(limit, max(1, searcher.num_docs)))
            return {searcher.doc(addr)["chunk_id"][0] for _, addr in result.hits}


def _footer_ok(path: Path, block: int = 1 << 22) -> bool:
    """Whether ``path`` ends in a tantivy footer whose CRC32 matches the file's body (read in
    blocks: a segment's store file can be hundreds of MB)."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, 2)
            if size < 8:
                return False
            fh.seek(size - 8)
            length, magic = struct.unpack("<II", fh.read(8))
            if magic != FOOTER_MAGIC or length + 8 > size:
                return False
            body = size - 8 - length
            fh.seek(body)
            want = json.loads(fh.read(length))["crc"]
            fh.seek(0)
            crc, left = 0, body
            while left:
                chunk = fh.read(min(block, left))
                if not chunk:
                    return False
                crc, left = zlib.crc32(chunk, crc), left - len(chunk)
            return crc == want
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return False


def remove_known(directory: Path, known: re.Pattern[str]) -> list[str]:
    """Delete the files of ``directory`` whose names ``known`` matches, then the folder if that
    empties it. Never touches anything else: the names left are logged and returned. (A
    tantivy reader still open elsewhere may recreate its lock file meanwhile: hence the retry.)"""
    for _ in range(3):
        if not directory.is_dir():
            return []
        left = []
        for p in sorted(directory.iterdir()):
            if known.match(p.name) and not p.is_dir():
                p.unlink(missing_ok=True)
            else:
                left.append(p.name)
        if left:
            log.warning("%s: left %d file(s) hybrid did not create: %s", directory, len(left),
                        ", ".join(left[:5]))
            return left
        try:
            directory.rmdir()
            return []
        except OSError:
            continue  # something appeared since the listing
    return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []
    return [p.name for p in directory.iterdir()] if directory.is_dir() else []


