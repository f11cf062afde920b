"""The lexical arm: a tantivy BM25 index over chunks.

Fields: ``title`` (title, aliases, file name), ``headings`` (heading path and tags), ``body``
(chunk text) share one English-stemming analyzer; ``ident`` keeps identifiers whole
(``orders-created``, ``10.0.0.0/24``, ``--advertise-routes``, ``obsidian://open``) plus their
parts, lowercased and unstemmed, and serves exact-identifier and typo-tolerant matching;
``folder``, ``tag`` and ``modified`` serve filters. Queries are built as query objects, never
through tantivy's query-string parser, so no user text can be a syntax error here.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import struct
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .catalog import ChunkRow
from .db import disk_full, is_disk_full
from .errors import HybridError, IndexCorrupt

log = logging.getLogger("hybrid")
# The files tantivy writes in its folder: segment files are named by a 32-hex segment id.
TANTIVY_FILE_RE = re.compile(r"^(meta\.json|\.managed\.json|\.tantivy-[a-z-]+\.lock|"
                             r"[0-9a-f]{32}(\.\d+)?\.(idx|term|pos|store|fast|fieldnorm|del|"
                             r"positions|fieldnorms))$")
FOOTER_MAGIC = 1337  # tantivy's file footer: body | JSON {version, crc} | u32 len | u32 magic
# A tantivy error that means the files on disk are unreadable (not a bad query or a bug).
UNREADABLE_HINTS = ("IO error", "corrupt", "Failed to open", "Footer", "magic", "does not exist",
                    "Meta file", "deserializ")

IDENT_RE = re.compile(r"-{0,2}\w[\w.\-/:@+=%~#?&\[\]()]*[\w/\])]|-{0,2}\w")
SPLIT_RE = re.compile(r"[=?&#\[\]()]")
BRACKETS = {")": "(", "]": "["}
WORD_RE = re.compile(r"[^\W_]+|\d+", re.U)
# Dropped from free-text queries (never from phrases, never from the index): question words and
# function words that only add noise to BM25 for natural-language questions.
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has
have having he her here hers herself him himself his how i if in into is it its itself just me
more most my myself no nor not now of off on once only or other our ours ourselves out over own
same she should so some such than that the their theirs them themselves then there these they
this those through to too under until up very was we were what when where which while who whom
why will with would you your yours yourself yourselves get got also
""".split())
FIELD_BOOSTS = {"title": 2.0, "headings": 1.5, "body": 1.0}
IDENT_BOOST = 3.0
FUZZY_BOOST = 1.5
FUZZY_MIN_LEN = 5


def identifiers(text: str) -> list[str]:
    """Identifier-shaped tokens of ``text`` as written: ``orders-created``, ``10.0.0.0/24``,
    ``--advertise-routes=10.0.0.0/24``, ``error[E0502]``, ``pg_try_advisory_lock(42001)``.
    Closing brackets without an opening one inside the token (prose like ``(see x)``) are
    dropped."""
    out = []
    for tok in IDENT_RE.findall(text):
        while tok and tok[-1] in BRACKETS and tok.count(tok[-1]) > tok.count(BRACKETS[tok[-1]]):
            tok = tok[:-1]
        if tok:
            out.append(tok)
    return out


def literals(words: Sequence[str]) -> list[str]:
    """The query tokens that name something verbatim: identifiers with inner punctuation
    (``FORGE-1533``), letter-digit codes (``K7QX2M``) and all-caps names (``GOMEMLIMIT``)."""
    out = []
    for tok in identifiers(" ".join(words)):
        core = tok.lstrip("-")
        if is_compound(tok) or (core.isalnum() and len(core) >= 4 and (
                (any(c.isdigit() for c in core) and any(c.isalpha() for c in core))
                or (core.isupper() and core.isalpha()))):
            out.append(tok)
    return list(dict.fromkeys(out))


def ident_tokens(text: str) -> list[str]:
    """Identifier-preserving tokens: each whitespace-delimited identifier, its ``=?&#``- and
    bracket-separated parts, and its word parts, lowercased."""
    out: list[str] = []
    for tok in identifiers(text.lower()):
        out.append(tok)
        if not tok.isalnum():
            parts = [p.strip("./:-") for p in SPLIT_RE.split(tok)]
            out.extend(p for p in parts if p and p != tok)
            out.extend(w for w in WORD_RE.findall(tok) if w != tok)
    return out


def within_one_edit(a: str, b: str) -> bool:
    """Damerau-Levenshtein distance(a, b) <= 1 (one insertion, deletion, substitution or
    transposition of neighbours)."""
    if a == b:
        return True
    la, lb = len(a), len(b)
    if abs(la - lb) > 1:
        return False
    i = 0
    while i < min(la, lb) and a[i] == b[i]:
        i += 1
    if la == lb:
        return a[i + 1:] == b[i + 1:] or (a[i:i + 2] == b[i:i + 2][::-1] and a[i + 2:] == b[i + 2:])
    return a[i + 1:] == b[i:] if la > lb else a[i:] == b[i + 1:]


def is_compound(tok: str) -> bool:
    """True for identifiers with inner punctuation (worth an exact ``ident`` match)."""
    return not tok.isalnum() and bool(re.search(r"\w", tok)) and len(tok) > 1


@dataclass
class LexicalQuery:
    terms: list[str] = field(default_factory=list)      # free words as typed
    phrases: list[str] = field(default_factory=list)    # required phrases
    excludes: list[str] = field(default_factory=list)   # words or phrases that must not occur


class LexicalIndex:
    def __init__(self, directory: Path, create: bool = True):
        import tantivy
        self._t = tantivy
        self.directory = directory
        self.schema = self._schema()
        exists = directory.exists() and any(directory.glob("meta.json"))
        if not exists and not create:
            raise IndexCorrupt(f"{directory}: no lexical index; run `hybrid index`")
        directory.mkdir(parents=True, exist_ok=True)
        with self._guard("open"):
            self.index = tantivy.Index(self.schema, path=str(directory), reuse=True)
        self.stem = (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
                     .filter(tantivy.Filter.remove_long(40))
                     .filter(tantivy.Filter.lowercase())
                     .filter(tantivy.Filter.ascii_fold())
                     .filter(tantivy.Filter.stemmer("english")).build())
        self.index.register_tokenizer("hy_stem", self.stem)
        self.index.register_tokenizer(
            "hy_ident", tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())

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
        try:
            segments = {seg["segment_id"].replace("-", "") for seg in self._meta()["segments"]}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IndexCorrupt(f"{self.directory}/meta.json: unreadable ({exc}); run `hybrid "
                               f"index` to rebuild the lexical index") from None
        verified, now = verified or {}, {}
        for path in sorted(self.directory.iterdir()):
            if path.name.split(".")[0] not in segments:
                continue
            try:
                st = path.stat()
            except OSError:
                st = None
            ident = [st.st_size, st.st_mtime_ns] if st else None
            if ident is None or (verified.get(path.name) != ident and not _footer_ok(path)):
                raise IndexCorrupt(f"{path}: checksum mismatch; run `hybrid index` to rebuild "
                                   f"the lexical index")
            now[path.name] = ident
        with self._guard("read"):
            self.count()
        return now

    def deleted_docs(self) -> int:
        """Deleted documents still held in segments. tantivy counts them in BM25's statistics
        (document count, document frequencies) until their segment merges, so scores drift from
        a clean build's as they pile up."""
        try:
            meta = self._meta()
        except (OSError, ValueError):
            return 0
        return sum((seg.get("deletes") or {}).get("num_deleted_docs", 0)
                   for seg in meta.get("segments", []))

    def _meta(self) -> dict:
        """tantivy's meta.json: the committed segments and their deleted-document counts."""
        return json.loads((self.directory / "meta.json").read_text(encoding="utf-8"))

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
    def _doc(self, c: ChunkRow):
        stem = c.path.rsplit("/", 1)[-1].removesuffix(".md")
        folders = []
        parts = c.path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            folders.append("/".join(parts[:i]))
        tags: list[str] = []
        for t in c.tags:
            segs = t.split("/")
            tags.extend("/".join(segs[:i]) for i in range(1, len(segs) + 1))
        title = " ".join([c.title, stem, *c.aliases])
        return self._t.Document(
            chunk_id=c.id,
            title=title,
            headings=" ".join([c.heading, *c.tags]),
            body=c.text,
            ident=" ".join(ident_tokens(" ".join([c.text, c.heading, title, c.path]))),
            folder=folders or [""],
            tag=tags or [""],
            modified=int(c.modified),
        )

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
            writer = self.index.writer(heap_size=heap_size, num_threads=1)
            try:
                if delete_all:
                    writer.delete_all_documents()
                for cid in set(delete_ids):
                    writer.delete_documents_by_term("chunk_id", cid)
                for batch in batches:
                    for c in batch:
                        writer.add_document(self._doc(c))
                writer.commit()
                writer.wait_merging_threads()
            except BaseException:
                try:
                    writer.rollback()
                except BaseException:  # noqa: BLE001 - the first error is the one to report
                    pass
                del writer
                raise
            self.index.reload()

    def count(self) -> int:
        with self._guard("read"):
            self.index.reload()
            return self.index.searcher().num_docs

    @staticmethod
    def destroy(directory: Path) -> list[str]:
        """Delete tantivy's own files in ``directory``, then the folder if that empties it.
        Anything else is left where it is; the names left are returned (and logged)."""
        return remove_known(directory, TANTIVY_FILE_RE)

    # --- querying -------------------------------------------------------------------------
    def corrections(self, words: Sequence[str]) -> dict[str, str]:
        """Typo repair: each word of 5+ letters that no chunk contains, mapped to the most
        frequent indexed word within one edit that starts with the same letter."""
        with self._guard("read"):
            return self._corrections(words)

    def _corrections(self, words: Sequence[str]) -> dict[str, str]:
        searcher = self.index.searcher()
        out: dict[str, str] = {}
        for word in dict.fromkeys(w.lower() for w in words):
            if len(word) < FUZZY_MIN_LEN or not word.isalpha() or searcher.doc_freq("ident", word):
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
            kept = " ".join(w for w in re.findall(r"\S+", text) if w.lower() not in STOPWORDS)
            text = kept or text
        stems: list[str | tuple[int, str]] = list(self.stem.analyze(text))
        clauses = []
        idents = [t for t in ident_tokens(text) if is_compound(t)]
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
        for tok in dict.fromkeys(idents):
            clauses.append(Q.boost_query(Q.term_query(s, "ident", tok), IDENT_BOOST))
        return clauses

    def build_query(self, q: LexicalQuery, *, fuzzy: bool = True, folders: Sequence[str] = (),
                    tags: Sequence[str] = (), since: float | None = None, scored: bool = True,
                    stopwords: bool = True, exclude_folders: Sequence[str] = ()):
        Q, s, Occur = self._t.Query, self.schema, self._t.Occur
        parts = []
        should = []
        free = " ".join(q.terms)
        if stopwords and not any(w.lower() not in STOPWORDS for w in q.terms):
            stopwords = False  # a query of nothing but stopwords ("the who") keeps them
        if free:
            should.extend(self._text_clause(free, phrase=False, stopwords=stopwords))
        if fuzzy and q.terms:
            searcher = self.index.searcher()
            for word in dict.fromkeys(w for t in q.terms for w in WORD_RE.findall(t.lower())):
                if len(word) >= FUZZY_MIN_LEN and not word.isdigit() \
                        and searcher.doc_freq("ident", word) == 0:
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
        filters = self._filters(folders, tags, since)
        if filters is not None:
            parts.append((Occur.Must, filters))
        for f in exclude_folders:
            parts.append((Occur.MustNot, Q.term_query(s, "folder", f)))
        if not any(o != Occur.MustNot for o, _ in parts):
            parts.append((Occur.Must, Q.all_query()))
        query = Q.boolean_query(parts)
        return query if scored else Q.const_score_query(query, 1.0)

    def _filters(self, folders: Sequence[str], tags: Sequence[str], since: float | None):
        Q, s, Occur = self._t.Query, self.schema, self._t.Occur
        must = []
        if folders:
            must.append(Q.boolean_query([(Occur.Should, Q.term_query(s, "folder", f))
                                         for f in folders]))
        for t in tags:
            must.append(Q.term_query(s, "tag", t))
        if since is not None:
            must.append(Q.range_query(s, "modified", self._t.FieldType.Integer, int(since), None))
        if not must:
            return None
        return Q.const_score_query(Q.boolean_query([(Occur.Must, m) for m in must]), 0.0)

    def search(self, q: LexicalQuery, limit: int, **opts) -> list[tuple[int, float]]:
        """Top ``limit`` (chunk id, BM25 score) pairs."""
        with self._guard("read"):
            self.index.reload()
            searcher = self.index.searcher()
            result = searcher.search(self.build_query(q, **opts), limit)
            return [(searcher.doc(addr)["chunk_id"][0], float(score)) for score, addr in result.hits]

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
