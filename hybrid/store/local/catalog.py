"""The per-vault SQLite ledger: files, chunks, cached embeddings and the sync journal.

tantivy and FAISS are projections of this catalog. Every change to chunks is written in one
transaction together with a journal row per touched chunk id; the derived indexes are then
brought in line and the journal rows cleared. After a crash the journal says exactly which ids
to re-sync (delete, and re-add if the chunk is live), and that is idempotent.

Replaced chunks and removed files are only marked (``dead`` / ``deleted``) in that transaction
and purged once the derived indexes no longer return them, so a query that runs meanwhile
still finds the rows behind every id the indexes give it: readers see the last synced state.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from hybrid.core.errors import DiskFull, IndexCorrupt
from hybrid.sources import FetchedPage
from hybrid.store.base import (
    EVERY_NOTE,
    NO_NOTE,
    NOTE_COLUMNS,
    ChunkRow,
    FileRow,
    NoteFields,
    NoteFilter,
    NoteMeta,
    NoteRecord,
    OwnerReading,
    chunk_batches,
    chunk_row,
    json_list,
    note_fields,
    tag_set,
    widen_span,
)
from hybrid.store.local.cache import EmbeddingCache
from hybrid.store.local.db import Connection, Transaction
from hybrid.store.local.held import Held
from hybrid.store.local.props import PropertyRows
from hybrid.store.local.schema import (
    BODY_INDEX,
    CHUNK_COLUMNS,
    MIGRATIONS,
    SCHEMA,
    SCHEMA_VERSION,
)
from hybrid.store.props import prop_rows
from hybrid.store.sql import kind_condition, like_escape, mention_condition, props_condition

log = logging.getLogger("hybrid")
WAL_LIMIT = 64 * 1024 * 1024  # bytes the WAL file is truncated to after a checkpoint



class Catalog(OwnerReading, EmbeddingCache, PropertyRows):
    def __init__(self, path: Path, readonly: bool = False):
        self.path = path
        self._held: Held | None = None  # what a reader keeps between searches; a writer: None
        self.fresh = False  # True when this open created the schema (an empty or new file)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(str(path), timeout=30, isolation_level=None,
                                      check_same_thread=False, factory=Connection)
            self.db.where = path
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            version = self.get_meta("schema_version")
            if not readonly:
                self.db.execute(f"PRAGMA journal_size_limit={WAL_LIMIT}")
                self.db.executescript(SCHEMA)
            if version is None and not readonly:
                self.fresh = True
                self.set_meta("schema_version", str(SCHEMA_VERSION))
            elif version is not None and int(version) != SCHEMA_VERSION:
                version = str(self._migrate(int(version), readonly))
            self.has_links = version is None or int(version) >= 3  # schema 3 added files.links
            self.has_tag_sets = version is None or int(version) >= 5  # schema 5 added file_tags
            self.has_props = version is None or int(version) >= 6  # schema 6 added file_props
            self._legacy_props: int | None = None  # data_version the temporary copy was made at
            if not readonly:
                self.db.execute(BODY_INDEX)
                self._relabel_legacy_model()
            else:
                self._held = Held(self.data_version)
        except sqlite3.DatabaseError as exc:  # untranslated: cannot open (permissions, ...)
            self.close()
            raise IndexCorrupt(f"{path}: cannot open the catalog ({exc}); check that folder's "
                               f"permissions and free space") from None
        except (IndexCorrupt, DiskFull):  # damaged (CatalogCorrupt) or disk full
            self.close()
            raise

    def _migrate(self, version: int, readonly: bool) -> int:
        """Bring a catalog of an older schema up to this one (a writer), or read it as it is
        (a reader, of a version it can read); IndexCorrupt when neither can be."""
        if version > SCHEMA_VERSION or any(v not in MIGRATIONS for v in range(version, SCHEMA_VERSION)):
            raise IndexCorrupt(f"{self.path}: index schema {version}, this hybrid reads "
                               f"{SCHEMA_VERSION}; rebuild with `hybrid index --reembed`")
        if readonly:
            return version
        with self.transaction():
            for v in range(version, SCHEMA_VERSION):
                step = MIGRATIONS[v]
                step(self.db) if callable(step) else self.db.execute(step)
            self.set_meta("schema_version", str(SCHEMA_VERSION))
        log.info("%s: index schema %d migrated to %d", self.path, version, SCHEMA_VERSION)
        return SCHEMA_VERSION

    def _relabel_legacy_model(self) -> None:
        """A catalog labelled with an id whose vectors now go by another name (minilm-onnx's
        ``…+onnx``: the same vectors as ``minilm``) takes the new name, its cached vectors too,
        so that neither runtime asks for ``--reembed``."""
        from hybrid.embedders.base import LEGACY_IDS
        old = self.get_meta("embedder")
        if old not in LEGACY_IDS:
            return
        new = LEGACY_IDS[old]
        with self.transaction():
            self.db.execute("UPDATE OR IGNORE embeddings SET model=? WHERE model=?", (new, old))
            self.db.execute("DELETE FROM embeddings WHERE model=?", (old,))
            self.set_meta("embedder", new)
        log.info("%s: embedder %s is now called %s", self.path.parent.name, old, new)

    def close(self) -> None:
        db = getattr(self, "db", None)
        if db is not None:
            db.close()

    # --- meta -----------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """The meta value ``key`` (None: not set); a reader's kept while the ledger is unchanged
        (:mod:`hybrid.store.local.held`: a search asks for the vault's model and languages)."""
        return self._read_meta(key) if self._held is None else self._held.meta(key, self._read_meta)

    def _read_meta(self, key: str) -> str | None:
        try:
            row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return None  # an empty file, or a read-only open before the schema exists
            raise
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    # --- files ----------------------------------------------------------------------------
    def files(self) -> dict[str, FileRow]:
        rows = self.db.execute("SELECT id, path, size, mtime_ns, hash FROM files WHERE deleted=0")
        return {r[1]: FileRow(*r) for r in rows}

    def file_rows(self, file_ids: Sequence[int]) -> dict[int, FileRow]:
        """The rows of ``file_ids`` (live or deleted): what the index saw of each file."""
        ids = list(file_ids)
        out: dict[int, FileRow] = {}
        for i in range(0, len(ids), 900):
            part = ids[i:i + 900]
            for r in self.db.execute(f"SELECT id, path, size, mtime_ns, hash FROM files WHERE id IN "
                                     f"({','.join('?' * len(part))})", part):
                out[r[0]] = FileRow(*r)
        return out

    def touch_file(self, path: str, size: int, mtime_ns: int) -> None:
        self.db.execute("UPDATE files SET size=?, mtime_ns=? WHERE path=?", (size, mtime_ns, path))

    def apply(self, notes: Iterable[NoteRecord], removed: Iterable[str]) -> list[int]:
        """Replace the chunks of ``notes`` and remove the files ``removed``, in one transaction.
        Old chunks are marked dead, removed files deleted; every touched chunk id is journaled.
        Returns the new chunk ids."""
        new_ids: list[int] = []
        now = time.time()
        with self.transaction():
            for path in removed:
                self._kill_chunks(path)
                self.db.execute("UPDATE files SET deleted=1 WHERE path=?", (path,))
            for n in notes:
                self._kill_chunks(n.path)
                values = (n.size, n.mtime_ns, n.hash, n.title, json.dumps(n.tags), json.dumps(n.aliases),
                          json.dumps(n.properties), n.created, n.modified, now, json.dumps(n.links))
                row = self.db.execute("SELECT id FROM files WHERE path=?", (n.path,)).fetchone()
                if row is None:
                    file_id = self.db.execute(
                        "INSERT INTO files(size, mtime_ns, hash, title, tags, aliases, properties,"
                        " created, modified, indexed_at, links, path) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                        (*values, n.path)).lastrowid
                else:
                    file_id = row[0]
                    self.db.execute(
                        "UPDATE files SET size=?, mtime_ns=?, hash=?, title=?, tags=?, aliases=?, "
                        "properties=?, created=?, modified=?, indexed_at=?, links=?, deleted=0 WHERE id=?",
                        (*values, file_id))
                    self.db.execute("DELETE FROM file_tags WHERE file_id=?", (file_id,))
                    self.db.execute("DELETE FROM file_props WHERE file_id=?", (file_id,))
                self.db.executemany("INSERT OR IGNORE INTO file_tags(tag, file_id) VALUES (?, ?)",
                                    [(t, file_id) for t in tag_set(n.tags)])
                self.db.executemany("INSERT INTO file_props(file_id, key, val, num, day) VALUES (?,?,?,?,?)",
                                    [(file_id, *r) for r in prop_rows(n.properties)])
                for ord_, c in enumerate(n.chunks):
                    cur = self.db.execute(
                        "INSERT INTO chunks(file_id, ord, heading, start_line, end_line, text, embed_hash,"
                        " body_hash) VALUES (?,?,?,?,?,?,?,?)",
                        (file_id, ord_, c.heading, c.start_line, c.end_line, c.text, c.embed_hash,
                         c.body_hash or None))
                    new_ids.append(cur.lastrowid)
            self.db.executemany("INSERT OR IGNORE INTO journal(chunk_id) VALUES (?)",
                                [(i,) for i in new_ids])
        return new_ids

    def _kill_chunks(self, path: str) -> None:
        ids = "SELECT c.id FROM chunks c JOIN files f ON f.id=c.file_id WHERE f.path=? AND c.dead=0"
        self.db.execute(f"INSERT OR IGNORE INTO journal(chunk_id) {ids}", (path,))
        self.db.execute(f"UPDATE chunks SET dead=1 WHERE id IN ({ids})", (path,))

    def purge(self, synced: Sequence[int]) -> None:
        """After the derived indexes have applied ``synced`` journal ids: drop dead chunks and
        deleted files, and clear those journal rows, in one transaction."""
        with self.transaction():
            self.db.execute("DELETE FROM chunks WHERE dead=1")
            self.db.execute("DELETE FROM files WHERE deleted=1")
            self.db.executemany("DELETE FROM journal WHERE chunk_id=?", [(i,) for i in synced])

    def transaction(self):
        return Transaction(self.db)

    # --- chunks ---------------------------------------------------------------------------
    def chunk_count(self) -> int:
        return self.db.execute("SELECT count(*) FROM chunks WHERE dead=0").fetchone()[0]

    def file_count(self) -> int:
        return self.db.execute("SELECT count(*) FROM files WHERE deleted=0").fetchone()[0]

    def chunks_per_file(self) -> dict[int, int]:
        """{live file id: its live chunks} (a file with none is absent)."""
        return dict(self.db.execute("SELECT file_id, count(*) FROM chunks WHERE dead=0 GROUP BY file_id"))

    def data_version(self) -> int:
        """Changes whenever another connection commits (SQLite's ``PRAGMA data_version``)."""
        return self.db.execute("PRAGMA data_version").fetchone()[0]

    keeps_text = False  # documents are read from the vault's folder, on the machine that has it

    def note_text(self, path: str) -> str | None:
        """None: this ledger keeps no document's text (see :attr:`keeps_text`)."""
        return None

    def note_texts(self, file_ids: Sequence[int]) -> dict[int, list[tuple[int, str]]]:
        """``{file id: [(chunk id, text), …]}``, the live chunks of each note in order."""
        out: dict[int, list[tuple[int, str]]] = {}
        ids = list(file_ids)
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            q = (f"SELECT file_id, id, text FROM chunks WHERE dead=0 AND file_id IN "
                 f"({','.join('?' * len(part))}) ORDER BY file_id, ord")
            for fid, cid, text in self.db.execute(q, part):
                out.setdefault(fid, []).append((cid, text))
        return out

    def chunks(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        """The rows of ``ids`` (live or dead; an id not in the ledger is absent); a reader's kept
        while the ledger is unchanged (:mod:`hybrid.store.local.held`)."""
        return self._read_chunks(ids) if self._held is None else self._held.rows(ids, self._read_chunks)

    def _read_chunks(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        out: dict[int, ChunkRow] = {}
        ids = list(ids)
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            q = (f"SELECT {CHUNK_COLUMNS} FROM chunks c JOIN files f ON f.id=c.file_id "
                 f"WHERE c.id IN ({','.join('?' * len(part))})")
            out.update((r.id, r) for r in self._rows(self.db.execute(q, part).fetchall()))
        return out

    def _rows(self, raw: list) -> list[ChunkRow]:
        """The chunk rows of ``raw`` (rows of CHUNK_COLUMNS), each note's own fields read and
        decoded once and shared by its rows."""
        fids = sorted({r[9] for r in raw})
        notes: dict[int, NoteFields] = {}
        for i in range(0, len(fids), 500):
            part = fids[i:i + 500]
            notes.update(map(note_fields, self.db.execute(
                f"SELECT {NOTE_COLUMNS} FROM files WHERE id IN ({','.join('?' * len(part))})", part)))
        return [chunk_row(r, notes.get(r[9], NO_NOTE)) for r in raw]

    def iter_chunks(self, ids: Sequence[int] | None = None, batch: int = 2000) -> Iterator[list[ChunkRow]]:
        """Rows of ``ids`` (live or dead), or of every live chunk, in batches (:func:`chunk_batches`)."""
        return chunk_batches(ids, batch, self._read_chunks, lambda last, n: self._rows(self.db.execute(
            f"SELECT {CHUNK_COLUMNS} FROM chunks c JOIN files f ON f.id=c.file_id "
            f"WHERE c.id > ? AND c.dead=0 ORDER BY c.id LIMIT ?", (last, n)).fetchall()))

    def filter_ids(self, where: NoteFilter = EVERY_NOTE, among: Sequence[int] | None = None) -> set[int]:
        """Chunk ids whose note ``where`` lets through: in one of its folders and none of its
        excluded ones, carrying every tag of it (a tag also matches its nested children),
        modified at or after its ``since``, a document of one of its kinds and passing every
        property filter of it; only those in ``among`` when given (a cheap membership test for
        a few candidates)."""
        if among is not None:
            out: set[int] = set()
            ids = list(among)
            for i in range(0, len(ids), 900):
                out |= self._filter_ids(where, ids[i:i + 900])
            return out
        return self._filter_ids(where, None)

    def note_ids(self, where: NoteFilter = EVERY_NOTE) -> Iterator[int]:
        """Live file ids of the notes ``where`` lets through (as :meth:`filter_ids`), lazily:
        a caller asking whether any does stops at the first."""
        conds, args = self._where(where)
        sql = "SELECT f.id FROM files f WHERE " + " AND ".join(["f.deleted=0", *conds])
        for (fid,) in self.db.execute(sql, args):
            yield fid

    def _where(self, where: NoteFilter) -> tuple[list[str], list[Any]]:
        conds, args = _note_filter(where, self.has_tag_sets)
        if where.props:
            more, more_args = props_condition(where.props, "f.id", self._props_table(), "?")
            conds += more
            args += more_args
        return conds, args

    def _filter_ids(self, note_filter: NoteFilter, _in: Sequence[int] | None) -> set[int]:
        where, args = self._where(note_filter)
        if _in is not None:  # a few chunks: each one's note is looked up
            where.append(f"c.id IN ({','.join('?' * len(_in))})")
            args.extend(_in)
            sql = "SELECT c.id FROM chunks c JOIN files f ON f.id=c.file_id WHERE " + " AND ".join(where)
        elif where:
            # the notes first, then their chunks: joined, SQLite tested each chunk's note again
            # (a tag filter read a note's tags once per chunk: 106 ms at 100k chunks, 13 so)
            sql = ("SELECT c.id FROM chunks c WHERE c.file_id IN (SELECT f.id FROM files f WHERE "
                   + " AND ".join(where) + ")")
        else:
            sql = "SELECT c.id FROM chunks c"
        return {r[0] for r in self.db.execute(sql, args)}

    # --- named queries: what the layers above ask of the ledger (they write no SQL) -------
    def notes(self, ids: Sequence[int] | None = None) -> Iterator[NoteMeta]:
        """The live notes (only those of ``ids`` when given)."""
        links = "links" if self.has_links else "'[]'"
        sql = f"SELECT id, path, title, tags, aliases, modified, {links} FROM files WHERE deleted=0"
        if ids is None:
            for r in self.db.execute(sql):
                yield NoteMeta(r[0], r[1], r[2], json_list(r[3]), json_list(r[4]), r[5], json_list(r[6]))
            return
        wanted = list(ids)
        for i in range(0, len(wanted), 900):
            part = wanted[i:i + 900]
            for r in self.db.execute(sql + f" AND id IN ({','.join('?' * len(part))})", part):
                yield NoteMeta(r[0], r[1], r[2], json_list(r[3]), json_list(r[4]), r[5], json_list(r[6]))

    def file_fields(self, path: str) -> tuple[list[str], dict[str, Any]] | None:
        """(tags, frontmatter) of the live note ``path`` as it was indexed; None when there is none."""
        row = self.db.execute("SELECT tags, properties FROM files WHERE path=? AND deleted=0",
                              (path,)).fetchone()
        return None if row is None else (json.loads(row[0]), json.loads(row[1]))

    def file_paths(self, live: bool = True) -> Iterator[tuple[int, str]]:
        """(id, path) of every file: only the live ones when ``live``, else deleted ones too."""
        yield from self.db.execute("SELECT id, path FROM files" + (" WHERE deleted=0" if live else ""))

    def file_ids(self, paths: Iterable[str]) -> dict[str, int]:
        """``{path: file id}`` of the live files at ``paths`` (those there are)."""
        wanted, out = list(paths), {}
        for i in range(0, len(wanted), 900):
            part = wanted[i:i + 900]
            out.update(self.db.execute(
                f"SELECT path, id FROM files WHERE deleted=0 AND path IN ({','.join('?' * len(part))})", part))
        return out

    def files_mentioning(self, keys: Sequence[str], tags: Sequence[str],
                         live: bool = True) -> Iterator[tuple[int, str, list[str], dict[str, Any]]]:
        """(id, path, tags, frontmatter) of the files whose frontmatter may hold one of ``keys``
        (any case) or whose tags one of ``tags``: a superset, cheap to find, of those that do
        (the caller judges each). Tags are stored as JSON with non-ASCII characters escaped:
        a tag that is not ASCII is looked for in every note with a non-ASCII tag (few)."""
        where, args = mention_condition(keys, tags, "?", "LIKE")  # SQLite: LIKE ignores ASCII case
        if not where:
            return
        sql = f"SELECT id, path, tags, properties FROM files f WHERE ({where})"
        for fid, path, tags_json, props in self.db.execute(sql + (" AND f.deleted=0" if live else ""), args):
            yield fid, path, json.loads(tags_json), json.loads(props)

    def chunk_ids_of(self, file_ids: Iterable[int]) -> set[int]:
        """Every chunk id (live or dead: an arm may still hold a replaced one) of ``file_ids``."""
        ids, out = list(file_ids), set[int]()
        for i in range(0, len(ids), 900):
            part = ids[i:i + 900]
            out.update(r[0] for r in self.db.execute(
                f"SELECT id FROM chunks WHERE file_id IN ({','.join('?' * len(part))})", part))
        return out

    def live_counts(self, file_ids: Iterable[int]) -> tuple[int, int]:
        """(live notes, live chunks) among ``file_ids``."""
        ids, notes, chunks = list(file_ids), 0, 0
        for i in range(0, len(ids), 900):
            part, marks = ids[i:i + 900], ",".join("?" * len(ids[i:i + 900]))
            notes += self.db.execute(f"SELECT count(*) FROM files WHERE deleted=0 AND id IN ({marks})",
                                     part).fetchone()[0]
            chunks += self.db.execute(f"SELECT count(*) FROM chunks WHERE dead=0 AND file_id IN ({marks})",
                                      part).fetchone()[0]
        return notes, chunks

    def note_spans(self, file_ids: Iterable[int]) -> dict[int, tuple[int, int, int]]:
        """``{file id: (its first live chunk's id, first line, last line of its live chunks)}``."""
        ids = list(file_ids)
        spans: dict[int, tuple[int, int, int]] = {}
        for i in range(0, len(ids), 900):
            part = ids[i:i + 900]
            sql = (f"SELECT file_id, id, start_line, end_line FROM chunks WHERE dead=0 AND file_id IN "
                   f"({','.join('?' * len(part))}) ORDER BY file_id, ord")
            for fid, cid, first, last in self.db.execute(sql, part):
                spans[fid] = widen_span(spans.get(fid), cid, first, last)
        return spans

    # --- fetched pages (bookmarks sources) -------------------------------------------------
    def fetched(self, url: str | None = None) -> dict[str, FetchedPage]:
        """Every fetched page by URL, or only ``url``'s (empty for a catalog made before the
        table existed)."""
        sql = "SELECT url, ok, title, text, error, status, fetched_at FROM fetched"
        try:
            rows = self.db.execute(sql, ()) if url is None else self.db.execute(sql + " WHERE url=?", (url,))
            return {r[0]: FetchedPage(r[0], bool(r[1]), r[2], r[3], r[4], r[5], r[6]) for r in rows}
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return {}
            raise

    def put_fetched(self, rows: Iterable[FetchedPage]) -> None:
        """Record fetch results; a failure never replaces a page fetched before."""
        with self.transaction():
            for r in rows:
                if not r.ok and self.db.execute("SELECT 1 FROM fetched WHERE url=? AND ok=1",
                                                (r.url,)).fetchone():
                    continue
                self.db.execute("INSERT OR REPLACE INTO fetched(url, ok, title, text, error, status, "
                                "fetched_at) VALUES (?,?,?,?,?,?,?)",
                                (r.url, int(r.ok), r.title, r.text, r.error, r.status, r.fetched_at))

    def drop_fetched(self, keep: Iterable[str]) -> int:
        """Forget fetched pages of URLs no longer bookmarked; returns how many."""
        keep = set(keep)
        gone = [u for u in self.fetched() if u not in keep]
        with self.transaction():
            self.db.executemany("DELETE FROM fetched WHERE url=?", [(u,) for u in gone])
        return len(gone)

    def all_chunk_ids(self) -> list[int]:
        """Live chunk ids."""
        return [r[0] for r in self.db.execute("SELECT id FROM chunks WHERE dead=0 ORDER BY id")]

    # --- journal --------------------------------------------------------------------------
    def journal(self) -> list[int]:
        return [r[0] for r in self.db.execute("SELECT chunk_id FROM journal ORDER BY chunk_id")]

    # --- housekeeping ---------------------------------------------------------------------
    def checkpoint_wal(self) -> None:
        """Fold the WAL into the database file and truncate it (after big writes the WAL would
        otherwise stay at its largest size). Skipped, not waited for, while a reader pins it."""
        self.db.execute("PRAGMA busy_timeout=200")
        try:
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.OperationalError:
            pass  # busy: the next run tries again
        finally:
            self.db.execute("PRAGMA busy_timeout=30000")

    def vacuum(self) -> None:
        """Rewrite the database without its free pages, then truncate the WAL."""
        self.db.execute("VACUUM")
        self.checkpoint_wal()


def _note_filter(nf: NoteFilter, tag_sets: bool = True) -> tuple[list[str], list[Any]]:
    """WHERE terms over ``files f`` for the notes ``nf`` lets through (its property filters
    aside): in one of its folders and none of its excluded ones, with every tag of it (or a
    nested child), modified at or after its ``since`` and of one of its kinds. A tag is looked
    up in ``file_tags`` (``tag_sets``; a reader of a catalog older than schema 5 reads the
    notes' JSON tags instead: 13 ms a tag filter at 15,000 notes)."""
    where: list[str] = []
    args: list[Any] = []
    if nf.sources:
        cond, kargs = kind_condition(tuple(nf.sources))
        where.append(cond)
        args.extend(kargs)
    if nf.folders:
        where.append("(" + " OR ".join("f.path LIKE ? ESCAPE '\\'" for _ in nf.folders) + ")")
        args.extend(like_escape(f + "/") + "%" for f in nf.folders)
    for f in nf.exclude_folders:
        where.append("f.path NOT LIKE ? ESCAPE '\\'")
        args.append(like_escape(f + "/") + "%")
    for tag in nf.tags:
        if tag_sets:
            where.append("f.id IN (SELECT file_id FROM file_tags WHERE tag = ?)")
            args.append(tag)
            continue
        where.append("EXISTS (SELECT 1 FROM json_each(f.tags) t WHERE t.value = ? OR t.value LIKE ? ESCAPE '\\')")
        args.extend([tag, like_escape(tag + "/") + "%"])
    if nf.since is not None:
        where.append("f.modified >= ?")
        args.append(nf.since)
    return where, args
