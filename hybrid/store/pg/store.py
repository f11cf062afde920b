"""A vault's store in PostgreSQL: the catalog (:mod:`hybrid.store.pg.catalog`), the lexical arm
(:mod:`hybrid.store.pg.lexical`) and the vector arm (pgvector, cosine, HNSW), with the writer lock
as a PostgreSQL advisory lock. It implements :class:`hybrid.store.port.Store`.

Vectors live in ``hybrid_vectors`` (narrow rows: an exact scan reads little else). The HNSW
index is per vault, a partial expression index ``(embedding::vector(dim)) WHERE vault = id``,
so vaults of different dimensions share the tables. It is built once the vault holds
``ann_threshold`` vectors (as the local store switches from flat to IVF; an exact scan is fast
below that), after the bulk load that brings it there, and maintained by PostgreSQL from then
on. Filtered searches use pgvector's iterative scan, so a selective filter still fills the
result.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hybrid.core.errors import EmbedderMismatch, IndexLocked, StoreUnavailable
from hybrid.core.faults import checkpoint
from hybrid.core.store_url import redact, resolve
from hybrid.store.base import NoteFilter, SyncStats, VectorSpec
from hybrid.store.pg.catalog import VECTORS_FROM_CACHE, PgCatalog, note_filter
from hybrid.store.pg.connect import connect, ensure_schema, privilege_problem
from hybrid.store.pg.lexical import PgLexical
from hybrid.store.sql import like_escape

log = logging.getLogger("hybrid")
LOCK_POLL = 0.2
EF_SEARCH = 100  # HNSW candidates per search until calibrated (pgvector's default is 40)
EF_LADDER = (40, 100, 200, 400, 700, 1000)  # tried in order by the calibration (1000: pgvector's most)
# a filtered HNSW search scans on past ef_search candidates until LIMIT rows pass the filter
# (pgvector's iterative scan), visiting at most MAX_SCAN_TUPLES; see PgVector.search
ITERATIVE_SCAN = "relaxed_order"
MAX_SCAN_TUPLES = 20_000


class PgVector:
    def __init__(self, store: PgStore):
        self.store = store
        self.hidden_files: set[int] = set()  # an agent's: notes left out

    @property
    def dim(self) -> int | None:
        got = self.store.catalog.get_meta("dim")
        if got:
            return int(got)
        row = self.store.query("SELECT vector_dims(embedding) FROM hybrid_vectors WHERE vault=%s LIMIT 1",
                               (self.store.vault_id,)).fetchone()
        return int(row[0]) if row else None

    def _index_name(self, dim: int) -> str:
        return f"hybrid_vectors_hnsw_{int(self.store.vault_id)}_{int(dim)}"

    def has_index(self, dim: int | None = None) -> bool:
        dim = dim or self.dim
        if not dim:
            return False
        row = self.store.query("SELECT to_regclass(%s) IS NOT NULL", (self._index_name(dim),)).fetchone()
        return bool(row[0])

    @property
    def exact(self) -> bool:
        return not self.has_index()

    def count(self) -> int:
        return self.store.query("SELECT count(*) FROM hybrid_vectors WHERE vault=%s",
                                (self.store.vault_id,)).fetchone()[0]

    def ensure_index(self) -> bool:
        """Build the vault's HNSW index once it holds ``ann_threshold`` vectors (below that an
        exact scan is fast, and exact: the same rule as the local store's flat/IVF switch);
        whether it was built."""
        dim = self.dim
        if not dim or self.has_index():
            return False
        if not self.store.spec.wants_ivf(self.count()):
            return False
        t = time.perf_counter()
        self.store.query(f"CREATE INDEX IF NOT EXISTS {self._index_name(dim)} ON hybrid_vectors USING hnsw "
                         f"((embedding::vector({dim})) vector_cosine_ops) WHERE {self._predicate(dim)}")
        ef, recall = self.calibrate(dim, self.store.spec.ann_recall)
        self.store.catalog.set_meta("hnsw", json.dumps({"ef_search": ef, "recall": recall}))
        log.info("%s: HNSW index built in %.1f s (ef_search %d, calibrated recall@10 %.3f)",
                 self.store.name, time.perf_counter() - t, ef, recall)
        return True

    def calibrate(self, dim: int, target: float, k: int = 10) -> tuple[int, float]:
        """The smallest ``ef_search`` on the ladder whose recall@k against an exact scan reaches
        ``target`` both for stored vectors as queries and for queries near them (the local
        IVF's calibration: :func:`hybrid.store.base.calibration_queries`); the noisy ones alone
        overstated it (1.0 at ef_search 40 where stored vectors found 0.73 at 100k chunks).
        Returns (ef_search, the lower of the two recalls)."""
        import numpy as np

        from hybrid.store.base import CALIBRATION_QUERIES, calibration_queries
        from hybrid.store.pg.catalog import as_array
        rows = self.store.query(f"SELECT embedding FROM hybrid_vectors WHERE {self._predicate(dim)} "
                                f"ORDER BY md5(id::text) LIMIT %s", (CALIBRATION_QUERIES * 4,)).fetchall()
        vecs = np.stack([as_array(r[0]) for r in rows])
        rng = np.random.default_rng(1234)
        half = max(1, CALIBRATION_QUERIES // 2)
        queries = [*calibration_queries(vecs, half, rng), *vecs[rng.choice(len(vecs), min(half, len(vecs)),
                                                                          replace=False)]]
        noisy = min(half, len(vecs))
        expr = f"(embedding::vector({dim}))"
        sql = (f"SELECT id FROM hybrid_vectors WHERE {self._predicate(dim)} ORDER BY {expr} <=> "
               f"%s::vector({dim}) LIMIT {int(k)}")
        truth = []
        with self.store.conn.transaction():
            self.store.query("SET LOCAL enable_indexscan = off")
            self.store.query("SET LOCAL enable_bitmapscan = off")
            truth = [{r[0] for r in self.store.query(sql, (q,))} for q in queries]
        recall = 0.0
        for ef in EF_LADDER:
            with self.store.conn.transaction():
                self.store.query(f"SET LOCAL hnsw.ef_search = {ef}")
                found = [{r[0] for r in self.store.query(sql, (q,))} for q in queries]
            recall = min(_recall(found[:noisy], truth[:noisy]), _recall(found[noisy:], truth[noisy:]))
            if recall >= target:
                return ef, round(recall, 4)
        return EF_LADDER[-1], round(recall, 4)

    def ef_search(self, k: int) -> int:
        """HNSW candidates for a top-``k`` search: the calibrated value, and at least ``k``."""
        got = json.loads(self.store.catalog.get_meta("hnsw") or "{}")
        return max(int(got.get("ef_search", EF_SEARCH)), min(1000, int(k)))

    def _predicate(self, dim: int) -> str:
        """The rows of the vault's index: its vectors of dimension ``dim`` (a re-embed to
        another dimension commits rows the old index does not cover, so it never blocks)."""
        return f"vault = {int(self.store.vault_id)} AND vector_dims(embedding) = {int(dim)}"

    def drop_other_indexes(self) -> None:
        """Drop the vault's HNSW indexes of other dimensions than the current (left by a
        re-embed that changed the dimension)."""
        keep = self._index_name(self.dim) if self.dim else None
        rows = self.store.query("SELECT indexname FROM pg_indexes WHERE tablename='hybrid_vectors' AND "
                                "indexname LIKE %s", (f"hybrid_vectors_hnsw_{int(self.store.vault_id)}_%",))
        for (name,) in rows.fetchall():
            if name != keep:
                self.store.query(f"DROP INDEX IF EXISTS {name}")

    filters_in_query = True  # search() takes the note filters as conditions of its own query

    def search(self, query: Any, k: int, allowed: Any = None, banned: Any = (),
               where: NoteFilter | None = None) -> list[tuple[int, float]]:
        """Top ``k`` (chunk id, cosine) pairs among ``allowed`` ids (default: all) minus
        ``banned``, of the notes passing ``where`` (folders, tags, date, kinds and excluded
        folders: conditions on the vectors' own filter columns, inside the same scan). On HNSW a
        filtered search is pgvector's iterative scan; when it comes back short (a filter too
        selective for ``hnsw.max_scan_tuples``) the same query runs as an exact scan, which the
        filter columns' indexes make cheap for exactly such filters."""
        import numpy as np
        dim = self.dim
        if not dim or k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != dim:
            raise EmbedderMismatch(f"vault {self.store.name!r} holds {dim}-dimension vectors but the "
                                   f"query embedder gives {q.shape[0]}; run `hybrid index --vault "
                                   f"{self.store.name} --reembed`")
        conds, args = [self._predicate(dim)], []
        if allowed is not None:
            ids = sorted(set(allowed) - set(banned))
            if not ids:
                return []
            conds.append("v.id = ANY(%s)")
            args.append(ids)
        elif banned:
            conds.append("NOT v.id = ANY(%s)")
            args.append(sorted(banned))
        if self.hidden_files:
            conds.append("NOT v.file_id = ANY(%s)")
            args.append(sorted(self.hidden_files))
        if where is not None:
            more, more_args = vector_filter(where)
            conds += more
            args += more_args
        indexed = self.has_index(dim)
        filtered = len(conds) > 1
        rows = self._nearest(q, k, dim, conds, args, indexed, hnsw=indexed)
        if indexed and filtered and len(rows) < k:  # the iterative scan gave up: an exact scan
            rows = self._nearest(q, k, dim, conds, args, indexed, hnsw=False)
        out = [(int(i), float(s)) for i, s in rows]
        out.sort(key=lambda x: (-x[1], x[0]))
        return out

    def _nearest(self, q: Any, k: int, dim: int, conds: list[str], args: list[Any], indexed: bool,
                 hnsw: bool) -> list[tuple[int, float]]:
        """The rows of one nearest-neighbour query: by the vault's HNSW index (``hnsw``; an
        iterative scan when there are conditions beyond the vault's) or by an exact scan (with
        the HNSW index, when ``indexed``, kept out of the plan; ties by id, as FAISS breaks
        them, where an HNSW index orders by distance alone)."""
        expr = f"(v.embedding::vector({dim}))"
        tie = "" if hnsw else ", v.id"
        sql = (f"SELECT v.id, 1 - ({expr} <=> %s::vector({dim})) FROM hybrid_vectors v WHERE "
               f"{' AND '.join(conds)} ORDER BY {expr} <=> %s::vector({dim}){tie} LIMIT %s")
        with self.store.conn.transaction():
            if hnsw:
                self.store.query(f"SET LOCAL hnsw.ef_search = {self.ef_search(k)}")
                if len(conds) > 1:
                    self.store.query(f"SET LOCAL hnsw.iterative_scan = {ITERATIVE_SCAN}")
                    self.store.query(f"SET LOCAL hnsw.max_scan_tuples = {MAX_SCAN_TUPLES}")
            elif indexed:
                self.store.query("SET LOCAL enable_indexscan = off")  # bitmap scans of the filter columns stay
            return self.store.query(sql, (q, *args, q, k)).fetchall()


def vector_filter(where: NoteFilter) -> tuple[list[str], list[Any]]:
    """WHERE terms over ``hybrid_vectors v`` for the notes ``where`` lets through: the
    catalog's note filter on the vectors' copy of the filter fields, and the excluded folders."""
    conds, args = note_filter(where.folders, where.tags, where.since, "v", where.sources)
    for f in where.exclude_folders:
        conds.append("v.path NOT LIKE %s")
        args.append(like_escape(f.strip("/")) + "/%")
    return conds, args


def _recall(found: list[set[int]], truth: list[set[int]]) -> float:
    return sum(len(f & t) for f, t in zip(found, truth)) / max(1, sum(len(t) for t in truth))


class PgStore:
    """One vault's index in PostgreSQL (``writer``: the indexer's open, which holds the
    vault's advisory lock and may create or migrate the schema)."""

    hidden_files: frozenset[int] = frozenset()  # its owner sees every note
    # notes whose agent text is stale are left out inside each query meanwhile (agent_arms)
    serves_stale_agent_view = True

    def __init__(self, name: str, url: str, writer: bool = False, wait: float = 0):
        self.name, self.url, self.writable = name, url, writer
        self.where = redact(url)
        self.directory = Path(name)  # for messages that name a store's folder
        self.warnings: list[str] = []
        self.spec = VectorSpec()
        self.conn = connect(url, name)
        try:
            ensure_schema(self.conn, self.where, writer)
            if writer:
                self._lock(wait)
            self.vault_id = self._vault_id(create=writer)
            # a read replica (or a read-only role): it answers queries; what would write is skipped
            self.read_only = self.query("SHOW transaction_read_only").fetchone()[0] == "on"
            from hybrid.store.lexicon import stem_analyzer
            self.stem = stem_analyzer()
            self.catalog = PgCatalog(self)
            self.vector = PgVector(self)
            self.lexical = PgLexical(self)
        except BaseException:
            self.close()
            raise

    @contextmanager
    def guarded(self):
        """Statements run inside (COPY, executemany) refused for a missing privilege end in
        one line naming it, as those of :meth:`query` do."""
        import psycopg
        try:
            yield
        except psycopg.errors.InsufficientPrivilege as exc:
            raise privilege_problem(exc, self.conn.info.user, self.writable, self.where) from None

    def query(self, sql: str, params: Any = ()):
        """Run ``sql``; a privilege the role lacks and a lost connection (a restarted or
        unreachable server, a terminated session) are one line each, and after a lost
        connection a long-lived handle reopens the store at its next query (see :meth:`stale`)."""
        import psycopg
        try:
            return self.conn.execute(sql, params or None)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise privilege_problem(exc, self.conn.info.user, self.writable, self.where) from None
        except psycopg.OperationalError as exc:
            if not (self.conn.closed or self.conn.broken):
                raise
            text = " ".join(str(exc).split())[:160]
            raise StoreUnavailable(f"lost the connection to PostgreSQL at {self.where} ({text}); "
                                   f"the next query connects again") from None

    def _vault_id(self, create: bool) -> int:
        row = self.query("SELECT id FROM hybrid_vaults WHERE name=%s", (self.name,)).fetchone()
        if row is None and create:
            row = self.query("INSERT INTO hybrid_vaults(name) VALUES (%s) ON CONFLICT (name) DO UPDATE "
                             "SET name = EXCLUDED.name RETURNING id", (self.name,)).fetchone()
        if row is None:
            raise StoreUnavailable("not indexed yet")
        return int(row[0])

    def _lock(self, wait: float) -> None:
        """The vault's writer lock: one indexer per vault, across every machine."""
        key = f"hybrid:vault:{self.name}"
        deadline = time.monotonic() + max(wait, 0) + 1.0  # a holder that just quit: its backend exits async
        while True:
            got = self.query("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (key,)).fetchone()[0]
            if got:
                self.query("SELECT set_config('application_name', %s, false)",
                           (f"hybrid index {socket.gethostname()}"[:60],))
                return
            if time.monotonic() >= deadline:
                holder = self.query(
                    "SELECT a.application_name, a.client_addr FROM pg_locks l JOIN pg_stat_activity a "
                    "ON a.pid = l.pid WHERE l.locktype='advisory' AND l.granted AND "
                    "l.objid = (hashtextextended(%s, 0) & 4294967295)::bigint::oid LIMIT 1", (key,)).fetchone()
                who = f" ({holder[0]})" if holder and holder[0] else ""
                raise IndexLocked(f"another `hybrid index`{who} is writing {self.name!r} in "
                                  f"{self.where}; wait for it to finish or pass --wait SECONDS")
            time.sleep(LOCK_POLL)

    def lock(self, timeout: float = 0) -> _Held:
        """The writer lock on a connection of its own (as the local store's ``lock``): held
        until ``release()``."""
        other = PgStore(self.name, self.url, writer=True, wait=timeout)
        return _Held(other)

    def close(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None and not conn.closed:
            try:
                conn.close()  # a session lock goes with its session
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass

    def stale(self) -> bool:
        """Whether the connection is gone (a long-lived handle then opens the store again)."""
        return bool(self.conn.closed or self.conn.broken)

    def heal_note(self, message: str) -> None:
        self.warnings.append(message)
        log.warning("%s", message)

    @property
    def embedder_id(self) -> str | None:
        from hybrid.embedders.base import canonical_id
        return canonical_id(self.catalog.get_meta("embedder"))

    # --- the indexer's side ---------------------------------------------------------------
    def begin_reembed(self) -> None:
        """Until the next :meth:`PgCatalog.apply` commits, read as an empty vault (every note is
        read and embedded again) and hold back meta changes: readers keep the old vectors and
        model until the new ones replace them in one transaction."""
        self.catalog.pending_meta = {}

    def set_agent(self, fingerprint: str, redactor: Any) -> None:
        """Write agent-view tsvectors with ``redactor`` (None: no redaction) as notes change."""
        self.catalog.agent = (fingerprint, redactor)

    def sync_derived(self, model: str | None, batch: int = 5000, view: Any = None,
                     redactor: Any = None) -> SyncStats:
        """What the local store replays into tantivy and FAISS lives in the database already;
        here only the HNSW index is built after a first load, and notes whose agent tsvectors
        were written with other redaction rules are redone."""
        t = time.perf_counter()
        stats = SyncStats()
        if view is not None:
            stats.rebuilt_agent = int(self.refresh_agent(agent_fingerprint(view), redactor, batch))
            from hybrid.store.agent.view import META_KEY
            self.catalog.set_meta(META_KEY, view.fingerprint)  # the settings it was indexed under
        stats.lexical_seconds = round(time.perf_counter() - t, 3)
        t = time.perf_counter()
        if model:  # chunks whose vector was not cached when they came in (none, normally)
            self.query(VECTORS_FROM_CACHE + "c.vault = %s AND NOT EXISTS (SELECT 1 FROM hybrid_vectors x "
                       "WHERE x.id = c.id)", (model, self.vault_id))
        if self.catalog.changed > max(1000, self.catalog.chunk_count() // 10):
            # fresh planner statistics after a big load (autovacuum gets there within minutes):
            # which lexemes are rare decides between the GIN index and a scan
            for table in ("hybrid_chunks", "hybrid_sections", "hybrid_terms", "hybrid_vectors"):
                self.query(f"ANALYZE {table}")
            self.catalog.changed = 0
        checkpoint("pg-before-hnsw")
        self.vector.drop_other_indexes()
        stats.rebuilt_vector = bool(self.vector.ensure_index())
        stats.vector_seconds = round(time.perf_counter() - t, 3)
        return stats

    @property
    def ledger(self) -> PgCatalog:
        return self.catalog

    def agent_view_current(self, view: Any) -> bool:
        """Whether every note's agent text was written for ``view`` (a read replica: its
        primary's indexer sees to it)."""
        from hybrid.store.agent.view import META_KEY
        return self.read_only or (self.catalog.get_meta(META_KEY) == view.fingerprint
                                  and not self.stale_agent_files(agent_fingerprint(view)))

    def refresh_agent_view(self, view: Any, redactor: Any, wait: float) -> None:
        """Redo, as a writer, the agent text of the notes written with other redaction rules
        (IndexLocked when an indexer holds the vault: they stay hidden meanwhile)."""
        fingerprint = agent_fingerprint(view)
        if self.read_only or not self.stale_agent_files(fingerprint):
            return
        writer = PgStore(self.name, self.url, writer=True, wait=0)
        try:
            writer.refresh_agent(fingerprint, redactor)
        finally:
            writer.close()

    def stale_agent_files(self, fingerprint: str) -> set[int]:
        return {r[0] for r in self.query("SELECT id FROM hybrid_files WHERE vault=%s AND agent_fp IS "
                                         "DISTINCT FROM %s", (self.vault_id, fingerprint))}

    def refresh_agent(self, fingerprint: str, redactor: Any, batch: int = 5000) -> int:
        """Rewrite the agent tsvectors of notes written with other redaction rules (one
        transaction per note); how many notes were redone."""
        from hybrid.store.agent.vectors import entries, header_setting
        from hybrid.store.pg.catalog import section_pairs
        from hybrid.store.pg.lexical import tsvector_of
        header = header_setting(self.catalog.get_meta("chunking"))
        todo = sorted(self.stale_agent_files(fingerprint))
        for fid in todo:
            rows = []
            for part in self.catalog.iter_chunks(
                    [r[0] for r in self.query("SELECT id FROM hybrid_chunks WHERE file_id=%s ORDER BY id",
                                              (fid,))], batch):
                rows.extend(part)
            rows.sort(key=lambda r: r.id)
            agent_rows = self.catalog.redacted_rows(rows, redactor) if (redactor is not None and rows) else rows
            embeds = {i: (h, t) for i, h, t in entries(rows, agent_rows, header)}
            with self.conn.transaction():
                for r, a in zip(rows, agent_rows):
                    self.query("UPDATE hybrid_chunks SET agent_tsv=%s, agent_len=%s, agent_embed_hash=%s, "
                               "agent_embed_text=%s WHERE id=%s",
                               (*((None, None) if a is r else tsvector_of(a, self.stem)),
                                *embeds.get(r.id, (None, None)), r.id))
                for run, arun in section_pairs(rows, agent_rows):
                    same = all(a is r for a, r in zip(arun, run))
                    shown = (None, None) if same else tsvector_of(arun[0], self.stem, arun)
                    self.query("UPDATE hybrid_sections SET agent_tsv=%s, agent_len=%s WHERE file_id=%s "
                               "AND chunk_ids=%s::bigint[]", (*shown, fid, [r.id for r in run]))
                self.query("UPDATE hybrid_files SET agent_fp=%s WHERE id=%s", (fingerprint, fid))
        if todo:
            log.info("%s: agent view redone for %d notes", self.name, len(todo))
        return len(todo)

    def agent_arms(self, hidden_files: Any, view: Any) -> tuple[PgLexical, PgVector]:
        """Both arms as an agent sees them: the hidden notes, and notes whose agent tsvectors
        were written with other redaction rules than the view's, left out inside each query."""
        files = set(hidden_files) | self.stale_agent_files(agent_fingerprint(view))
        vector = PgVector(self)
        vector.hidden_files = files
        return PgLexical(self, agent=True, hidden_files=files), vector

    def reclaim(self, model: str | None, force: bool = False) -> int:
        return self.catalog.reclaim_embeddings(model, force) if model else 0


class _Held:
    def __init__(self, store: PgStore):
        self.store = store

    def release(self) -> None:
        self.store.close()


def agent_fingerprint(view: Any) -> str:
    """What the agent tsvectors depend on: the redaction rules, when redaction is on. (Which
    notes are hidden is decided at query time.)"""
    if not view.redact:
        return "off"
    from hybrid.store.agent.view import rules_version
    return "redact:" + rules_version()


def open_store(vault: Any, writer: bool = False, wait: float = 0) -> PgStore:
    """The PostgreSQL store of ``vault`` (its ``store`` set)."""
    url = resolve(vault.store, vault.name)
    try:
        return PgStore(vault.name, url, writer=writer, wait=wait)
    except StoreUnavailable as exc:
        if str(exc) == "not indexed yet":
            from hybrid.core.errors import VaultError
            raise VaultError(f"vault {vault.name!r} is not indexed yet: run "
                             f"`hybrid index --vault {vault.name}`") from None
        raise


def drop_vault(store: str, name: str) -> None:
    """Delete vault ``name`` and everything of it from the database ``store`` points at (its
    HNSW index too). Used for throwaway vaults (an evaluation's); nothing asks for a password."""
    url = resolve(store, name)
    conn = connect(url, name)
    try:
        row = conn.execute("SELECT id FROM hybrid_vaults WHERE name=%s", (name,)).fetchone()
        if row is None:
            return
        vid = int(row[0])
        for (index,) in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename='hybrid_vectors' "
                                     "AND indexname LIKE %s", (f"hybrid_vectors_hnsw_{vid}_%",)).fetchall():
            conn.execute(f"DROP INDEX IF EXISTS {index}")
        with conn.transaction():
            conn.execute("DELETE FROM hybrid_terms WHERE vault=%s", (vid,))
            conn.execute("DELETE FROM hybrid_files WHERE vault=%s", (vid,))
            conn.execute("DELETE FROM hybrid_vaults WHERE id=%s", (vid,))
    finally:
        conn.close()
