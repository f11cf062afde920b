"""A vault's store in PostgreSQL: the catalog (:mod:`hybrid.store.pg.catalog`), the lexical arm
(:mod:`hybrid.store.pg.lexical`) and the vector arm (pgvector, cosine, HNSW), with the writer lock
as a PostgreSQL advisory lock. It implements :class:`hybrid.store.port.Store`.

Vectors live in ``hybrid_vectors`` (narrow rows: an exact scan reads little else). The HNSW
index is per vault, a partial expression index ``(embedding::vector(dim)) WHERE vault = id``,
so vaults of different dimensions share the tables. It is built once the vault holds
``ann_threshold`` vectors (as the local store switches from flat to IVF; an exact scan is fast
below that), after the bulk load that brings it there, and maintained by PostgreSQL from then
on. The vector arm is :mod:`hybrid.store.pg.vector`.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Collection
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hybrid.core.errors import IndexLocked, StoreUnavailable
from hybrid.core.faults import checkpoint
from hybrid.core.store_url import redact, resolve
from hybrid.store.base import StoreNotes, SyncStats, VectorSpec, not_indexed_yet
from hybrid.store.pg.catalog import VECTORS_FROM_CACHE, PgCatalog
from hybrid.store.pg.connect import connect, ensure_schema, privilege_problem
from hybrid.store.pg.lexical import PgLexical
from hybrid.store.pg.packed import PackedReader, maintain
from hybrid.store.pg.standby import STANDBY, ReplayConflict, in_recovery, read_again, skipped
from hybrid.store.pg.vector import PgVector, vault_indexes

if TYPE_CHECKING:
    from hybrid.store.agent.redact import Redactor
    from hybrid.store.agent.view import AgentView

log = logging.getLogger("hybrid")
LOCK_POLL = 0.2


class PgStore(StoreNotes):
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
            # a hot standby refuses every write: an indexer stops here, before it touches anything
            self.standby = in_recovery(self.conn)
            if writer and self.standby:
                raise StoreUnavailable(STANDBY.format(where=self.where))
            ensure_schema(self.conn, self.where, writer)
            if writer:
                self._lock(wait)
            self.vault_id = self._vault_id(create=writer)
            # a standby (or a read-only role): it answers queries; what would write is skipped
            self.read_only = self.standby or self.query("SHOW transaction_read_only").fetchone()[0] == "on"
            from hybrid.store.lexicon import stem_analyzer
            self.stem = stem_analyzer()
            self.catalog = PgCatalog(self)
            self.vector = PgVector(self)
            self.packed = PackedReader(self)
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
        connection a long-lived handle reopens the store at its next query (see :meth:`stale`).
        A statement of its own (not inside a transaction block) that a standby cancelled for a
        recovery conflict is run once more (:meth:`read`)."""
        if self.standby:
            from psycopg.pq import TransactionStatus
            if self.conn.info.transaction_status == TransactionStatus.IDLE:
                return self.read(lambda: self._execute(sql, params))
        return self._execute(sql, params)

    def read(self, run: Any) -> Any:
        """``run()`` (reads), once more if a standby cancelled it for a recovery conflict
        (:func:`hybrid.store.pg.standby.read_again`)."""
        return read_again(self.where, run)

    def _execute(self, sql: str, params: Any = ()):
        import psycopg
        try:
            return self.conn.execute(sql, params or None)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise privilege_problem(exc, self.conn.info.user, self.writable, self.where) from None
        except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected) as exc:
            if not self.standby or self.conn.closed or self.conn.broken:
                raise
            raise ReplayConflict(self.where) from exc
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

    # --- the indexer's side ---------------------------------------------------------------
    def begin_reembed(self) -> None:
        """Until the next :meth:`PgCatalog.apply` commits, read as an empty vault (every note is
        read and embedded again) and hold back meta changes: readers keep the old vectors and
        model until the new ones replace them in one transaction."""
        self.catalog.pending_meta = {}

    def set_agent(self, fingerprint: str, redactor: Redactor | None) -> None:
        """Write agent-view tsvectors with ``redactor`` (None: no redaction) as notes change."""
        self.catalog.agent = (fingerprint, redactor)

    def sync_derived(self, model: str | None, batch: int = 5000, view: AgentView | None = None,
                     redactor: Redactor | None = None) -> SyncStats:
        """What the local store replays into tantivy and FAISS lives in the database already;
        here only the HNSW index is built after a first load, and notes whose agent tsvectors
        were written with other redaction rules are redone."""
        t = time.perf_counter()
        stats = SyncStats()
        if view is not None:
            stats.rebuilt_agent = int(self.refresh_agent(agent_fingerprint(view), redactor, batch))
            self.share_agent_settings(view)
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
        for unit, done in maintain(self).items():
            log.info("%s: packed postings of the %ss %s", self.name, unit, done)
        checkpoint("pg-before-hnsw")
        self.vector.drop_other_indexes()
        stats.rebuilt_vector = bool(self.vector.ensure_index())
        stats.vector_seconds = round(time.perf_counter() - t, 3)
        return stats

    def share_agent_settings(self, view: AgentView) -> None:
        """Write the agent view this run indexed under into the vault's meta, with its
        fingerprint, in one transaction: every server on the vault follows it
        (:func:`hybrid.store.agent.view.in_force`), so none re-indexes to impose its own."""
        from hybrid.store.agent.view import META_KEY, SETTINGS_KEY
        before = self.catalog.get_meta(SETTINGS_KEY)
        now = view.to_json()
        if before and before != now:
            log.warning("%s: the agent settings in the store were written by an index run with "
                        "other settings; this machine's replace them for every server", self.name)
        with self.conn.transaction():
            self.catalog.set_meta(SETTINGS_KEY, now)
            self.catalog.set_meta(META_KEY, view.fingerprint)  # the settings it was indexed under

    @property
    def ledger(self) -> PgCatalog:
        return self.catalog

    def agent_view_current(self, view: AgentView) -> bool:
        """Whether every note's agent text was written for ``view`` (a read replica: its
        primary's indexer sees to it)."""
        from hybrid.store.agent.view import META_KEY
        current = (self.catalog.get_meta(META_KEY) == view.fingerprint
                   and not self.stale_agent_files(agent_fingerprint(view)))
        if not current and self.read_only:
            skipped(self.where, "agent view", "%s is read-only (%s): the agent text of notes written under other "
                    "redaction rules is not redone here (they stay hidden from agents until the indexer on "
                    "the primary redoes them)", self.where, "a standby" if self.standby else "a read-only role")
        return current or self.read_only

    def refresh_agent_view(self, view: AgentView, redactor: Redactor | None, wait: float) -> None:
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

    def refresh_agent(self, fingerprint: str, redactor: Redactor | None, batch: int = 5000) -> int:
        """Rewrite the agent tsvectors of notes written with other redaction rules (one
        transaction per note); how many notes were redone."""
        from hybrid.store.agent.vectors import entries, header_setting
        from hybrid.store.pg.catalog import section_pairs
        from hybrid.store.pg.tsv import tsvector_of
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
                    self.query("UPDATE hybrid_chunks SET agent_tsv=%s, agent_lens=%s, agent_embed_hash=%s, "
                               "agent_embed_text=%s WHERE id=%s",
                               (*((None, None) if a is r else tsvector_of(a, self.stem)),
                                *embeds.get(r.id, (None, None)), r.id))
                for run, arun in section_pairs(rows, agent_rows):
                    same = all(a is r for a, r in zip(arun, run))
                    shown = (None, None) if same else tsvector_of(arun[0], self.stem, arun)
                    self.query("UPDATE hybrid_sections SET agent_tsv=%s, agent_lens=%s WHERE file_id=%s "
                               "AND chunk_ids=%s::bigint[]", (*shown, fid, [r.id for r in run]))
                self.query("UPDATE hybrid_files SET agent_fp=%s WHERE id=%s", (fingerprint, fid))
        if todo:
            log.info("%s: agent view redone for %d notes", self.name, len(todo))
        return len(todo)

    def agent_arms(self, hidden_files: Collection[int], view: AgentView) -> tuple[PgLexical, PgVector]:
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


def agent_fingerprint(view: AgentView) -> str:
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
            raise not_indexed_yet(vault.name) from None
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
        for index in vault_indexes(conn.execute, vid):
            conn.execute(f"DROP INDEX IF EXISTS {index}")
        with conn.transaction():
            conn.execute("DELETE FROM hybrid_terms WHERE vault=%s", (vid,))
            conn.execute("DELETE FROM hybrid_files WHERE vault=%s", (vid,))
            conn.execute("DELETE FROM hybrid_vaults WHERE id=%s", (vid,))
    finally:
        conn.close()
