"""The ledger of one vault in PostgreSQL: files, chunks (with both arms' columns), sections,
document frequencies and cached embeddings. The same surface as :class:`hybrid.store.local.catalog.Catalog`,
so the indexer, the search and the agent view run on either.

A change to notes (:meth:`PgCatalog.apply`) is one transaction: the old chunks and sections of
every changed or removed note go, their document frequencies with them, the new ones come in
with their vectors (from the embedding cache, filled before) and their agent-view tsvector.
Nothing is journaled: no index lives outside the database, so there is nothing to replay.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from hybrid.core.faults import checkpoint
from hybrid.sources import FetchedPage
from hybrid.store.agent.vectors import entries, header_setting
from hybrid.store.base import CHUNK_COLUMNS as BASE_CHUNK_COLUMNS
from hybrid.store.base import (
    EVERY_NOTE,
    NO_NOTE,
    NOTE_COLUMNS,
    ChunkRow,
    FileRow,
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
from hybrid.store.lexicon import units
from hybrid.store.pg.cache import PgEmbeddingCache
from hybrid.store.pg.tsv import DF_COLUMN, field_df_counts, summed_lengths, tsvector_of
from hybrid.store.props import prop_rows
from hybrid.store.sql import kind_condition, like_escape, mention_condition, props_condition

if TYPE_CHECKING:
    pass

log = logging.getLogger("hybrid")
# without the note's own fields: read once per note of a batch (hybrid.store.base.CHUNK_COLUMNS)
CHUNK_COLUMNS = BASE_CHUNK_COLUMNS.format(dead="false")


class PgCatalog(OwnerReading, PgEmbeddingCache):
    def __init__(self, store: Any):
        self.store = store
        self.conn, self.vault_id = store.conn, store.vault_id
        self.fresh = False
        self.pending_meta: dict[str, str] | None = None  # a re-embed's, written with its chunks
        self.agent: tuple[str, Any] | None = None           # (fingerprint, redactor) of a writer
        self.changed = 0  # chunks (and notes) changed by this handle: a big load re-ANALYZEs
        self._fetched_table = False  # hybrid_fetched seen (it comes with the first fetch)

    def q(self, sql: str, params: Sequence[Any] = ()):
        return self.store.query(sql, params)

    def close(self) -> None:
        pass  # the store closes the connection

    # --- meta -----------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        if self.pending_meta is not None:
            return self.pending_meta.get(key)
        row = self.q("SELECT value FROM hybrid_meta WHERE vault=%s AND key=%s", (self.vault_id, key)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        if self.pending_meta is not None:
            self.pending_meta[key] = value
            return
        self._put_meta(key, value)

    def _put_meta(self, key: str, value: str) -> None:
        self.q("INSERT INTO hybrid_meta(vault, key, value) VALUES (%s,%s,%s) ON CONFLICT (vault, key) "
               "DO UPDATE SET value = EXCLUDED.value", (self.vault_id, key, value))

    # --- files ----------------------------------------------------------------------------
    def files(self) -> dict[str, FileRow]:
        if self.pending_meta is not None:
            return {}  # a re-embed reads every note again
        rows = self.q("SELECT id, path, size, mtime_ns, hash FROM hybrid_files WHERE vault=%s", (self.vault_id,))
        return {r[1]: FileRow(*r) for r in rows}

    def file_rows(self, file_ids: Sequence[int]) -> dict[int, FileRow]:
        """The rows of ``file_ids``: what the index saw of each file."""
        rows = self.q("SELECT id, path, size, mtime_ns, hash FROM hybrid_files WHERE id = ANY(%s)",
                      (list(file_ids),))
        return {r[0]: FileRow(*r) for r in rows}

    def touch_file(self, path: str, size: int, mtime_ns: int) -> None:
        self.q("UPDATE hybrid_files SET size=%s, mtime_ns=%s WHERE vault=%s AND path=%s",
               (size, mtime_ns, self.vault_id, path))

    def transaction(self):
        return self.conn.transaction()

    def apply(self, notes: Iterable[NoteRecord], removed: Iterable[str]) -> list[int]:
        """Replace the chunks of ``notes`` and remove the files ``removed`` in one transaction
        (a re-embed replaces every note). Returns the new chunk ids."""
        notes, removed = list(notes), list(removed)
        v = self.vault_id
        with self.store.guarded(), self.conn.transaction():
            self.q("SELECT 1 FROM hybrid_vaults WHERE id=%s FOR UPDATE", (v,))
            if self.pending_meta is not None:
                gone = [r[0] for r in self.q("SELECT id FROM hybrid_files WHERE vault=%s", (v,))]
            else:
                paths = removed + [n.path for n in notes]
                gone = [r[0] for r in self.q("SELECT id FROM hybrid_files WHERE vault=%s AND path = ANY(%s)",
                                             (v, paths))]
            self._drop_units(gone)
            if self.pending_meta is not None:
                self.q("DELETE FROM hybrid_files WHERE vault=%s", (v,))
            elif removed:
                self.q("DELETE FROM hybrid_files WHERE vault=%s AND path = ANY(%s)", (v, removed))
            new_ids = self._insert(notes)
            self.changed += len(new_ids) + len(gone)
            checkpoint("pg-mid-apply")  # inside the transaction: a kill here rolls it back
            self._stats()
            dim = self.q("SELECT vector_dims(embedding) FROM hybrid_vectors WHERE vault=%s LIMIT 1",
                         (v,)).fetchone()
            if dim:  # readers cast to it: it changes with the vectors, in their transaction
                (self.pending_meta.__setitem__ if self.pending_meta is not None else self._put_meta)(
                    "dim", str(dim[0]))
            if self.pending_meta is not None:
                for key, value in self.pending_meta.items():
                    self._put_meta(key, value)
                self.pending_meta = None
        return new_ids

    def _drop_units(self, file_ids: list[int]) -> None:
        """Delete the chunks and sections of ``file_ids``, taking their lexemes out of the
        document frequencies."""
        if not file_ids:
            return
        for unit, table in ((0, "hybrid_chunks"), (1, "hybrid_sections")):
            self.q(f"UPDATE hybrid_terms t SET df = t.df - g.n, "
                   f"{', '.join(f'{col} = t.{col} - g.{col}' for col in DF_COLUMN.values())} "
                   f"FROM (SELECT u.lexeme, count(*) AS n, {field_df_counts()} "
                   f"FROM {table} c, unnest(c.tsv) u WHERE c.file_id = ANY(%s) GROUP BY u.lexeme) g "
                   f"WHERE t.vault=%s AND t.unit=%s AND t.lexeme = g.lexeme",
                   (file_ids, self.vault_id, unit))
            self.q(f"DELETE FROM {table} WHERE file_id = ANY(%s)", (file_ids,))
        self.q("DELETE FROM hybrid_terms WHERE vault=%s AND df <= 0", (self.vault_id,))

    def _insert(self, notes: list[NoteRecord]) -> list[int]:
        v, now = self.vault_id, time.time()
        stem = self.store.stem
        total = sum(len(n.chunks) for n in notes)
        ids = [r[0] for r in self.q("SELECT nextval(pg_get_serial_sequence('hybrid_chunks', 'id')) "
                                    "FROM generate_series(1, %s)", (total,))] if total else []
        fp, redactor = self.agent or ("off", None)
        header = header_setting(self.get_meta("chunking"))
        chunk_rows, section_rows = [], []
        fids_of: list[int] = []
        k = 0
        for n in notes:
            fid = self.q(
                "INSERT INTO hybrid_files(vault, path, size, mtime_ns, hash, title, tags, aliases, "
                "properties, created, modified, indexed_at, agent_fp, links, tag_set) VALUES (%s,%s,%s,%s,%s,"
                "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (vault, path) DO UPDATE SET size=EXCLUDED.size, "
                "mtime_ns=EXCLUDED.mtime_ns, hash=EXCLUDED.hash, title=EXCLUDED.title, "
                "tags=EXCLUDED.tags, aliases=EXCLUDED.aliases, properties=EXCLUDED.properties, "
                "created=EXCLUDED.created, modified=EXCLUDED.modified, indexed_at=EXCLUDED.indexed_at, "
                "agent_fp=EXCLUDED.agent_fp, links=EXCLUDED.links, tag_set=EXCLUDED.tag_set RETURNING id",
                (v, n.path, n.size, n.mtime_ns, n.hash, n.title, json.dumps(n.tags), json.dumps(n.aliases),
                 json.dumps(n.properties), n.created, n.modified, now, fp, json.dumps(n.links),
                 tag_set(n.tags))).fetchone()[0]
            fids_of.append(fid)
            rows, props = [], json.dumps(n.properties)  # one copy for the note, not one a chunk
            for c in n.chunks:
                rows.append(ChunkRow(ids[k], n.path, n.title, c.heading, c.start_line, c.end_line,
                                     c.text, n.tags, n.aliases, n.modified, c.embed_hash, False,
                                     fid, props))
                k += 1
            agent_rows = self.redacted_rows(rows, redactor) if redactor is not None else rows
            tags, modified = tag_set(n.tags), n.modified
            embeds = {i: (h, t) for i, h, t in entries(rows, agent_rows, header)}
            for ord_, (r, a) in enumerate(zip(rows, agent_rows)):
                tsv, lens = tsvector_of(r, stem)
                agent_tsv, agent_lens = (None, None) if a is r else tsvector_of(a, stem)
                chunk_rows.append((r.id, v, fid, ord_, r.heading, r.start_line, r.end_line, r.text,
                                   r.embed_hash, r.path, tags, modified, tsv, lens, agent_tsv, agent_lens,
                                   *embeds.get(r.id, (None, None)), n.chunks[ord_].body_hash or None))
            for run, arun in section_pairs(rows, agent_rows):
                tsv, lens = tsvector_of(run[0], stem, run)
                same = all(a is r for a, r in zip(arun, run))
                agent_tsv, agent_lens = (None, None) if same else tsvector_of(arun[0], stem, arun)
                section_rows.append((v, fid, [r.id for r in run], n.path, tags, modified, tsv,
                                     lens, agent_tsv, agent_lens))
        self._put_texts(notes, fids_of)
        cur = self.conn.cursor()
        self.q("DELETE FROM hybrid_props WHERE file_id = ANY(%s)", (fids_of,))
        with cur.copy("COPY hybrid_props (file_id, key, val, num, day) FROM STDIN") as cp:
            for fid, n in zip(fids_of, notes):
                for prow in prop_rows(n.properties):
                    cp.write_row((fid, *prow))
        with cur.copy("COPY hybrid_chunks (id, vault, file_id, ord, heading, start_line, end_line, "
                      "text, embed_hash, path, tag_set, modified, tsv, lens, agent_tsv, agent_lens, "
                      "agent_embed_hash, agent_embed_text, body_hash) FROM STDIN") as cp:
            for row in chunk_rows:
                cp.write_row(row)
        with cur.copy("COPY hybrid_sections (vault, file_id, chunk_ids, path, tag_set, modified, "
                      "tsv, lens, agent_tsv, agent_lens) FROM STDIN") as cp:
            for srow in section_rows:
                cp.write_row(srow)
        if ids:
            model = self.get_meta("embedder") or ""
            self.q(VECTORS_FROM_CACHE + "c.id = ANY(%s)", (model, ids))
            fids = sorted({r[2] for r in chunk_rows})
            for unit, table in ((0, "hybrid_chunks"), (1, "hybrid_sections")):
                cols = ", ".join(DF_COLUMN.values())
                self.q(f"INSERT INTO hybrid_terms(vault, unit, lexeme, df, {cols}) SELECT %s, %s, u.lexeme, "
                       f"count(*), {field_df_counts()} FROM {table} c, unnest(c.tsv) u WHERE c.file_id = ANY(%s) "
                       f"GROUP BY u.lexeme ON CONFLICT (vault, unit, lexeme) DO UPDATE "
                       f"SET df = hybrid_terms.df + EXCLUDED.df, "
                       f"{', '.join(f'{c} = hybrid_terms.{c} + EXCLUDED.{c}' for c in DF_COLUMN.values())}",
                       (v, unit, fids))
        return ids

    def _put_texts(self, notes: list[NoteRecord], fids: list[int]) -> None:
        """Each note's text (a note given none holds none: a reader refuses it rather than
        show an older one)."""
        given = [(f, n.text) for f, n in zip(fids, notes) if n.text is not None]
        if given:
            self.q("INSERT INTO hybrid_texts(file_id, vault, text) SELECT f, %s, t FROM "
                   "unnest(%s::bigint[], %s::text[]) AS x(f, t) ON CONFLICT (file_id) DO UPDATE "
                   "SET text = EXCLUDED.text", (self.vault_id, [f for f, _ in given],
                                                [t.replace("\x00", "") for _, t in given]))
        if len(given) < len(notes):
            self.q("DELETE FROM hybrid_texts WHERE file_id = ANY(%s)",
                   ([f for f, n in zip(fids, notes) if n.text is None],))

    keeps_text = True  # readers without the folder read documents here (note_text)

    def note_text(self, path: str) -> str | None:
        """The text of the indexed document ``path`` as `get` shows it (None: not indexed, or
        indexed before the database held texts: schema 4)."""
        row = self.q("SELECT t.text FROM hybrid_files f JOIN hybrid_texts t ON t.file_id = f.id "
                     "WHERE f.vault=%s AND f.path=%s", (self.vault_id, path)).fetchone()
        return row[0] if row else None

    def redacted_rows(self, rows: list[ChunkRow], redactor: Any) -> list[ChunkRow]:
        """``rows`` (one note's, in order) as an agent is shown them: the same object where
        redaction changed nothing."""
        from hybrid.store.agent.view import shown_context
        texts = redactor.redact_parts([r.text for r in rows])
        out = []
        for r, text in zip(rows, texts):
            got = replace(r, text=text, heading=redactor.redact(r.heading), title=redactor.redact(r.title),
                          aliases=[redactor.redact(a) for a in r.aliases], tags=[redactor.redact(t) for t in r.tags],
                          props=shown_context(r.props, redactor.redact))
            same = (got.text, got.heading, got.title, got.aliases, got.tags, got.props) == \
                (r.text, r.heading, r.title, r.aliases, r.tags, r.props)
            out.append(r if same else got)
        return out

    def _stats(self) -> None:
        """The units' counts and total lengths (BM25's N and average length), and a new
        generation, in the change's transaction."""
        self.q("UPDATE hybrid_vaults v SET generation = generation + 1, "
               "n_chunks = (SELECT count(*) FROM hybrid_chunks WHERE vault = v.id), "
               f"chunk_lens = {summed_lengths('hybrid_chunks', 'v.id')}, "
               "n_sections = (SELECT count(*) FROM hybrid_sections WHERE vault = v.id), "
               f"section_lens = {summed_lengths('hybrid_sections', 'v.id')} "
               "WHERE id = %s", (self.vault_id,))

    def purge(self, synced: Sequence[int]) -> None:
        pass  # nothing is journaled

    def journal(self) -> list[int]:
        return []

    # --- chunks ---------------------------------------------------------------------------
    def chunk_count(self) -> int:
        return self.q("SELECT count(*) FROM hybrid_chunks WHERE vault=%s", (self.vault_id,)).fetchone()[0]

    def file_count(self) -> int:
        return self.q("SELECT count(*) FROM hybrid_files WHERE vault=%s", (self.vault_id,)).fetchone()[0]

    def chunks_per_file(self) -> dict[int, int]:
        """{file id: its chunks} (a file with none is absent)."""
        return dict(self.q("SELECT file_id, count(*) FROM hybrid_chunks WHERE vault=%s GROUP BY file_id",
                           (self.vault_id,)).fetchall())

    def data_version(self) -> int:
        """Changes with every committed change to the vault (from any machine)."""
        return self.q("SELECT generation FROM hybrid_vaults WHERE id=%s", (self.vault_id,)).fetchone()[0]

    def note_texts(self, file_ids: Sequence[int]) -> dict[int, list[tuple[int, str]]]:
        out: dict[int, list[tuple[int, str]]] = {}
        for fid, cid, text in self.q("SELECT file_id, id, text FROM hybrid_chunks WHERE file_id = ANY(%s) "
                                     "ORDER BY file_id, ord", (list(file_ids),)):
            out.setdefault(fid, []).append((cid, text))
        return out

    def chunks(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        rows = self.q(f"SELECT {CHUNK_COLUMNS} FROM hybrid_chunks c JOIN hybrid_files f ON f.id=c.file_id "
                      f"WHERE c.id = ANY(%s) AND c.vault=%s", (list(ids), self.vault_id)).fetchall()
        return {r.id: r for r in self._rows(rows)}

    def _rows(self, raw: list) -> list[ChunkRow]:
        """The chunk rows of ``raw``, each note's own fields read and decoded once and shared by
        its rows."""
        fids = sorted({r[9] for r in raw})
        notes = dict(map(note_fields, self.q(f"SELECT {NOTE_COLUMNS} FROM hybrid_files WHERE id = ANY(%s)",
                                             (fids,)))) if fids else {}
        return [chunk_row(r, notes.get(r[9], NO_NOTE)) for r in raw]

    def iter_chunks(self, ids: Sequence[int] | None = None, batch: int = 2000) -> Iterator[list[ChunkRow]]:
        """Rows of ``ids``, or of every chunk, in batches (:func:`chunk_batches`)."""
        return chunk_batches(ids, batch, self.chunks, lambda last, n: self._rows(self.q(
            f"SELECT {CHUNK_COLUMNS} FROM hybrid_chunks c JOIN hybrid_files f ON "
            f"f.id=c.file_id WHERE c.vault=%s AND c.id > %s ORDER BY c.id LIMIT %s",
            (self.vault_id, last, n)).fetchall()))

    def filter_ids(self, where: NoteFilter = EVERY_NOTE, among: Sequence[int] | None = None) -> set[int]:
        conds, args = note_filter(where, "c")
        if among is not None:
            conds.append("c.id = ANY(%s)")
            args.append(list(among))
        sql = "SELECT c.id FROM hybrid_chunks c WHERE " + " AND ".join(["c.vault=%s", *conds])
        return {r[0] for r in self.q(sql, (self.vault_id, *args))}

    def note_ids(self, where: NoteFilter = EVERY_NOTE) -> Iterator[int]:
        conds, args = note_filter(where, "f")
        sql = "SELECT f.id FROM hybrid_files f WHERE " + " AND ".join(["f.vault=%s", *conds])
        for (fid,) in self.q(sql, (self.vault_id, *args)):
            yield fid

    def note_properties(self, file_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """``{file id: frontmatter}`` of the notes ``file_ids``, as indexed."""
        out: dict[int, dict[str, Any]] = {}
        for fid, props in self.q("SELECT id, properties FROM hybrid_files WHERE vault=%s AND id = ANY(%s)",
                                 (self.vault_id, list(file_ids))):
            value = json.loads(props)
            out[fid] = value if isinstance(value, dict) else {}
        return out

    def property_keys(self) -> set[str]:
        """The property names (lower case) some note has."""
        return {r[0] for r in self.q("SELECT DISTINCT p.key FROM hybrid_props p JOIN hybrid_files f ON "
                                     "f.id = p.file_id WHERE f.vault=%s", (self.vault_id,))}

    # --- named queries: what the layers above ask of the ledger (they write no SQL) -------
    def notes(self, ids: Sequence[int] | None = None) -> Iterator[NoteMeta]:
        """The live notes (only those of ``ids`` when given)."""
        sql = "SELECT id, path, title, tags, aliases, modified, links FROM hybrid_files WHERE vault=%s"
        rows = self.q(sql, (self.vault_id,)) if ids is None else \
            self.q(sql + " AND id = ANY(%s)", (self.vault_id, list(ids)))
        for r in rows:
            yield NoteMeta(r[0], r[1], r[2], json_list(r[3]), json_list(r[4]), r[5], json_list(r[6]))

    def file_fields(self, path: str) -> tuple[list[str], dict[str, Any]] | None:
        """(tags, frontmatter) of the live note ``path`` as it was indexed; None when there is none."""
        row = self.q("SELECT tags, properties FROM hybrid_files WHERE vault=%s AND path=%s",
                     (self.vault_id, path)).fetchone()
        return None if row is None else (json.loads(row[0]), json.loads(row[1]))

    def file_paths(self, live: bool = True) -> Iterator[tuple[int, str]]:
        """(id, path) of every file (this ledger keeps no deleted ones)."""
        yield from self.q("SELECT id, path FROM hybrid_files WHERE vault=%s", (self.vault_id,))

    def file_ids(self, paths: Iterable[str]) -> dict[str, int]:
        """``{path: file id}`` of the files at ``paths`` (those there are)."""
        rows = self.q("SELECT path, id FROM hybrid_files WHERE vault=%s AND path = ANY(%s)",
                      (self.vault_id, list(paths)))
        return {r[0]: r[1] for r in rows}

    def files_mentioning(self, keys: Sequence[str], tags: Sequence[str],
                         live: bool = True) -> Iterator[tuple[int, str, list[str], dict[str, Any]]]:
        """As :meth:`hybrid.store.local.catalog.Catalog.files_mentioning` (case-insensitive
        matching for keys and ASCII tags alike)."""
        where, args = mention_condition(keys, tags, "%s", "ILIKE")
        if not where:
            return
        sql = f"SELECT id, path, tags, properties FROM hybrid_files f WHERE f.vault=%s AND ({where})"
        for fid, path, tags_json, props in self.q(sql, (self.vault_id, *args)):
            yield fid, path, json.loads(tags_json), json.loads(props)

    def chunk_ids_of(self, file_ids: Iterable[int]) -> set[int]:
        """Every chunk id of ``file_ids``."""
        return {r[0] for r in self.q("SELECT id FROM hybrid_chunks WHERE vault=%s AND file_id = ANY(%s)",
                                     (self.vault_id, list(file_ids)))}

    def live_counts(self, file_ids: Iterable[int]) -> tuple[int, int]:
        """(live notes, live chunks) among ``file_ids``."""
        ids = list(file_ids)
        notes = self.q("SELECT count(*) FROM hybrid_files WHERE vault=%s AND id = ANY(%s)",
                       (self.vault_id, ids)).fetchone()[0]
        chunks = self.q("SELECT count(*) FROM hybrid_chunks WHERE vault=%s AND file_id = ANY(%s)",
                        (self.vault_id, ids)).fetchone()[0]
        return notes, chunks

    def note_spans(self, file_ids: Iterable[int]) -> dict[int, tuple[int, int, int]]:
        """``{file id: (its first chunk's id, first line, last line of its chunks)}``."""
        spans: dict[int, tuple[int, int, int]] = {}
        for fid, cid, first, last in self.q(
                "SELECT file_id, id, start_line, end_line FROM hybrid_chunks WHERE vault=%s AND "
                "file_id = ANY(%s) ORDER BY file_id, ord", (self.vault_id, list(file_ids))):
            spans[fid] = widen_span(spans.get(fid), cid, first, last)
        return spans

    def all_chunk_ids(self) -> list[int]:
        return [r[0] for r in self.q("SELECT id FROM hybrid_chunks WHERE vault=%s ORDER BY id", (self.vault_id,))]

    # --- fetched pages (bookmarks sources) -------------------------------------------------
    # hybrid_fetched came after schema 2: a database made before has none until its indexer
    # first fetches (no schema change for readers meanwhile: they find no page fetched)
    FETCHED_TABLE = """CREATE TABLE IF NOT EXISTS hybrid_fetched (
        vault integer NOT NULL REFERENCES hybrid_vaults(id) ON DELETE CASCADE,
        url text NOT NULL, ok boolean NOT NULL, title text NOT NULL, text text NOT NULL,
        error text NOT NULL, status integer, fetched_at double precision NOT NULL,
        PRIMARY KEY (vault, url))"""

    def fetched(self, url: str | None = None) -> dict[str, FetchedPage]:
        """Every fetched page of this vault by URL, or only ``url``'s."""
        if not self._has_fetched_table():
            return {}
        sql = "SELECT url, ok, title, text, error, status, fetched_at FROM hybrid_fetched WHERE vault=%s"
        rows = self.q(sql, (self.vault_id,)) if url is None else self.q(sql + " AND url=%s", (self.vault_id, url))
        return {r[0]: FetchedPage(r[0], bool(r[1]), r[2], r[3], r[4], r[5], r[6]) for r in rows}

    def put_fetched(self, rows: Iterable[FetchedPage]) -> None:
        """Record fetch results; a failure never replaces a page fetched before."""
        v = self.vault_id
        with self.store.guarded(), self.conn.transaction():
            if not self._has_fetched_table():
                self.conn.execute(self.FETCHED_TABLE)  # seen by the next ask, once committed
            for r in rows:
                self.conn.execute(
                    "INSERT INTO hybrid_fetched(vault, url, ok, title, text, error, status, fetched_at) "
                    "VALUES (%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (vault, url) DO UPDATE SET ok=EXCLUDED.ok, "
                    "title=EXCLUDED.title, text=EXCLUDED.text, error=EXCLUDED.error, status=EXCLUDED.status, "
                    "fetched_at=EXCLUDED.fetched_at WHERE EXCLUDED.ok OR NOT hybrid_fetched.ok",
                    (v, r.url, r.ok, r.title, r.text, r.error, r.status, r.fetched_at))

    def _has_fetched_table(self) -> bool:
        """Whether the database has the table (asked once per handle, then remembered)."""
        if not self._fetched_table:
            self._fetched_table = self.q("SELECT to_regclass('hybrid_fetched')").fetchone()[0] is not None
        return self._fetched_table

    def drop_fetched(self, keep: Iterable[str]) -> int:
        """Forget fetched pages of URLs no longer bookmarked; returns how many."""
        keep = set(keep)
        gone = [u for u in self.fetched() if u not in keep]
        if gone:
            with self.store.guarded(), self.conn.transaction():
                self.conn.execute("DELETE FROM hybrid_fetched WHERE vault=%s AND url = ANY(%s)",
                                  (self.vault_id, gone))
        return len(gone)

    def vacuum(self) -> None:
        for table in ("hybrid_chunks", "hybrid_sections", "hybrid_terms", "hybrid_embeddings", "hybrid_files"):
            self.q(f"VACUUM (ANALYZE) {table}")


def section_pairs(rows: list[ChunkRow], agent_rows: list[ChunkRow]):
    """(section's rows, the same as an agent is shown them) of one note's rows, in order."""
    plain = [run for kind, run in units([rows]) if kind == "section"]
    shown = [run for kind, run in units([agent_rows]) if kind == "section"]
    return list(zip(plain, shown))


# a chunk's vector from the embedding cache, with the filter fields a vector search reads
# (PgVector.search), in the chunk's transaction; the caller appends the chunks' condition
VECTORS_FROM_CACHE = ("INSERT INTO hybrid_vectors(id, vault, file_id, embedding, path, tag_set, modified) "
                      "SELECT c.id, c.vault, c.file_id, e.vec, c.path, c.tag_set, c.modified "
                      "FROM hybrid_chunks c JOIN hybrid_embeddings e ON e.vault = c.vault AND e.model = %s "
                      "AND e.text_hash = c.embed_hash WHERE ")


def note_filter(nf: NoteFilter, alias: str) -> tuple[list[str], list[Any]]:
    """WHERE terms (over ``hybrid_chunks c``, ``hybrid_vectors v`` or ``hybrid_files f``) for
    the notes ``nf`` lets through: in one of its folders and none of its excluded ones, with
    every tag of it (or a nested child), modified at or after its ``since``, of one of its kinds
    and passing every property filter of it."""
    where: list[str] = []
    args: list[Any] = []
    if nf.folders:
        where.append("(" + " OR ".join(f"{alias}.path LIKE %s" for _ in nf.folders) + ")")
        args.extend(like_escape(f) + "/%" for f in nf.folders)
    for f in nf.exclude_folders:
        where.append(f"{alias}.path NOT LIKE %s")
        args.append(like_escape(f.strip("/")) + "/%")
    if nf.tags:  # each of these tables holds its notes' tag sets (tag_set: with ancestors)
        where.append(f"{alias}.tag_set @> %s::text[]")
        args.append(list(nf.tags))
    if nf.since is not None:
        where.append(f"{alias}.modified >= %s")
        args.append(nf.since)
    if nf.sources:
        cond, kargs = kind_condition(tuple(nf.sources), f"{alias}.path", "%s")
        where.append(cond)
        args.extend(kargs)
    if nf.props:
        more, more_args = props_condition(nf.props, "f.id" if alias == "f" else f"{alias}.file_id",
                                          "hybrid_props", "%s")
        where += more
        args += more_args
    return where, args
