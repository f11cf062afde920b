"""Packed postings: the PostgreSQL keyword arm's common words, read whole and scored with numpy.

A word found in most chunks defeats the GIN + MaxScore path of :mod:`hybrid.store.pg.lexical`:
every unit holding it is a candidate, and each candidate's BM25 is computed in SQL from its
tsvector (1.6 s at 100k chunks for a query of such words). Here the postings of every lexeme
found in at least ``max(MIN_DF, N/DF_SHARE)`` units are kept packed: one row per lexeme holding
its units' ordinals (int32) and term frequencies per field (int16 each, the positions' counts
the SQL scorer computes), and one row per unit kind holding the units' ids and field lengths in
id order (the *base*). A query fetches the rows of its lexemes (a few hundred kB each; a reader
keeps recent ones in memory, keyed by the base's build, which never changes once written) and
adds up BM25 in a dense array, as tantivy scores a block: no per-candidate SQL.

The base is a snapshot, written by the indexer (:func:`maintain`, at the end of an index run)
and rebuilt once enough units changed since; between builds a query stays exact:

* units written after the build (ids above its ``max_id``; a changed note gets new ids) and,
  for an agent, units shown redacted are scored by the SQL scorer, as are units holding a
  query lexeme too rare to be packed (few, by definition: the GIN index finds them);
* every other unit's score is the sum over the packed lexemes it holds; the best are checked,
  a batch at a time, against the filters, the agent view and deletion in one indexed query;
* a query the base cannot answer cheaply (a phrase, a lexeme grown common since the build, a
  filter so narrow that the walk down the ranking gets long) goes the SQL path.

Scores equal the SQL scorer's to the last bits of a float sum, and the order is the same
(score, then id).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from hybrid.store.base import NoteFilter
from hybrid.store.pg.tsv import FIELD_BOOST, FIELDS, K1, UNIT_CODE, UNIT_TABLE, B, Plan, Stats, quote

log = logging.getLogger("hybrid")

MIN_UNITS = 2000        # a vault with fewer units of a kind keeps no base (the SQL path is fast there)
MIN_DF = 32             # a lexeme is packed when at least this many units hold it ...
DF_SHARE = 1000         # ... and at least one in DF_SHARE of them
REBUILD_MIN = 500       # rebuilt once this many units (and REBUILD_SHARE of them) came or went
REBUILD_SHARE = 0.05
RARE_LIMIT = 20_000     # units holding unpacked query lexemes the SQL scorer may score here
PASS_SHARE = 10         # under 1 in PASS_SHARE of the best units pass the filter: list what passes
PASS_LIMIT = 50_000     # ... at most this many
WALK_LIMIT = 30_000     # units checked one by one before the SQL path answers
CACHE_BYTES = 96 << 20  # packed rows a reader keeps in memory


class ScoringArm(Protocol):
    """What the packed path asks of the lexical arm (:class:`hybrid.store.pg.lexical.PgLexical`):
    its store, the view it searches, its SQL conditions and its exact scorer."""
    store: Any
    agent: bool
    answered: str

    def _where(self, plan: Plan, nf: NoteFilter) -> tuple[list[str], list[Any]]: ...

    def _scored_rows(self, unit: str, plan: Plan, lexemes: list[str], stats: Stats,
                     where: list[str], args: list[Any], limit: int) -> list[tuple[list[int], float, int]]: ...


@dataclass
class Base:
    """One build of a unit kind's packed postings, as a reader holds it."""
    build: int
    max_id: int
    ids: np.ndarray      # int64, ascending: ordinal -> unit id
    lens: np.ndarray     # float64, (units, fields): ordinal -> each field's length (tsv.FIELDS)


def tf_sql() -> str:
    """The SQL of a posting's term frequencies from ``unnest(tsv)``'s ``x.weights``: its
    positions' count in each field of :data:`FIELDS`, as int2, concatenated (what the SQL
    scorer's ``ts_rank_cd`` of one field counts)."""
    return " || ".join(f"int2send(cardinality(array_positions(x.weights, '{f}'))::int2)" for f in FIELDS)


# --- the indexer's side ----------------------------------------------------------------------
def maintain(store: Any, force: bool = False) -> dict[str, str]:
    """Build each unit kind's base where there is none or enough changed since (``force``:
    always); drop it below ``MIN_UNITS``. What was done per kind, for the log."""
    out = {}
    for unit, table in UNIT_TABLE.items():
        code = UNIT_CODE[unit]
        v = store.vault_id
        row = store.query("SELECT build, max_id, n FROM hybrid_packed_base WHERE vault=%s AND unit=%s",
                          (v, code)).fetchone()
        if row is None:
            total = store.query(f"SELECT count(*) FROM {table} WHERE vault=%s", (v,)).fetchone()[0]
            changed = total
        else:
            _, max_id, n = row
            old, new = store.query(f"SELECT count(*) FILTER (WHERE id <= %s), count(*) FILTER (WHERE id > %s) "
                                   f"FROM {table} WHERE vault=%s", (max_id, max_id, v)).fetchone()
            total, changed = old + new, (n - old) + new
        if total < MIN_UNITS:
            if row is not None:
                with store.conn.transaction():
                    store.query("DELETE FROM hybrid_packed WHERE vault=%s AND unit=%s", (v, code))
                    store.query("DELETE FROM hybrid_packed_base WHERE vault=%s AND unit=%s", (v, code))
                out[unit] = "dropped"
            continue
        if not force and row is not None and changed < max(REBUILD_MIN, REBUILD_SHARE * total):
            continue
        t = time.perf_counter()
        lexemes = build(store, unit)
        out[unit] = f"built ({total} units, {lexemes} lexemes, {time.perf_counter() - t:.1f} s)"
    return out


def build(store: Any, unit: str) -> int:
    """Write ``unit``'s base anew from the stored tsvectors, in one transaction (readers see
    the old build or the new one). Returns how many lexemes were packed."""
    table, code, v = UNIT_TABLE[unit], UNIT_CODE[unit], store.vault_id
    with store.conn.transaction():
        store.query("SET LOCAL work_mem = '256MB'")
        # the vault's lock serialises builds; the build number only has to differ from the last
        build_no, max_id, n = store.query(
            f"SELECT (extract(epoch FROM clock_timestamp()) * 1e6)::bigint, coalesce(max(id), 0), count(*) "
            f"FROM {table} WHERE vault=%s", (v,)).fetchone()
        min_df = max(MIN_DF, n // DF_SHARE)
        store.query("DELETE FROM hybrid_packed WHERE vault=%s AND unit=%s", (v, code))
        store.query("DELETE FROM hybrid_packed_base WHERE vault=%s AND unit=%s", (v, code))
        store.query(f"INSERT INTO hybrid_packed_base(vault, unit, build, max_id, n, ids, lens) "
                    f"SELECT %s, %s, %s, %s, count(*), "
                    f"coalesce(string_agg(int8send(c.id), ''::bytea ORDER BY c.id), ''), "
                    f"coalesce(string_agg({' || '.join(f'int4send(c.lens[{i + 1}])' for i in range(len(FIELDS)))}, "
                    f"''::bytea ORDER BY c.id), '') "
                    f"FROM {table} c WHERE c.vault=%s AND c.id <= %s", (v, code, build_no, max_id, v, max_id))
        got = store.query(
            f"WITH o AS MATERIALIZED (SELECT c.id, (row_number() OVER (ORDER BY c.id) - 1)::int AS ord "
            f"FROM {table} c WHERE c.vault=%s AND c.id <= %s), "
            f"w AS MATERIALIZED (SELECT lexeme FROM hybrid_terms WHERE vault=%s AND unit=%s AND df >= %s) "
            f"INSERT INTO hybrid_packed(vault, unit, build, lexeme, n, ords, tfs) "
            f"SELECT %s, %s, %s, p.lexeme, count(*), string_agg(int4send(p.ord), ''::bytea ORDER BY p.ord), "
            f"string_agg(p.tf, ''::bytea ORDER BY p.ord) FROM "
            f"(SELECT x.lexeme, o.ord, {tf_sql()} AS tf FROM {table} c JOIN o ON o.id = c.id, "
            f"unnest(c.tsv) x WHERE x.lexeme IN (SELECT lexeme FROM w)) p GROUP BY p.lexeme",
            (v, max_id, v, code, min_df, v, code, build_no))
        packed = got.rowcount
    log.info("%s: packed the postings of %d common lexemes over %d %ss", store.name, packed, n, unit)
    return packed


# --- the reader's side -----------------------------------------------------------------------
class PackedReader:
    """A store's bases and packed rows as read, cached by build (a build never changes)."""

    def __init__(self, store: Any):
        self.store = store
        self.bases: dict[int, Base] = {}
        self.rows: OrderedDict[tuple[int, int, str], tuple[np.ndarray, np.ndarray] | None] = OrderedDict()
        self.held = 0
        self.denied = False  # the role may not read the tables (granted before they came)

    def base(self, code: int) -> Base | None:
        row = self.store.query("SELECT build, max_id FROM hybrid_packed_base WHERE vault=%s AND unit=%s",
                               (self.store.vault_id, code)).fetchone()
        if row is None:
            return None
        got = self.bases.get(code)
        if got is None or got.build != row[0]:
            full = self.store.query("SELECT build, max_id, ids, lens FROM hybrid_packed_base WHERE vault=%s "
                                    "AND unit=%s", (self.store.vault_id, code)).fetchone()
            if full is None:
                return None
            got = Base(int(full[0]), int(full[1]), np.frombuffer(full[2], dtype=">i8").astype(np.int64),
                       np.frombuffer(full[3], dtype=">i4").astype(np.float64).reshape(-1, len(FIELDS)))
            self.bases[code] = got
            self._forget(code)
        return got

    def _forget(self, code: int) -> None:
        for key in [k for k in self.rows if k[1] == code]:
            self._drop(key)

    def _drop(self, key) -> None:
        self.held -= _size(self.rows.pop(key))

    def postings(self, base: Base, code: int, lexemes: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The packed (ordinals, tfs per field) of those ``lexemes`` that are packed in ``base``."""
        out, wanted = {}, []
        for x in lexemes:
            key = (base.build, code, x)
            if key in self.rows:
                self.rows.move_to_end(key)
                held = self.rows[key]
                if held is not None:
                    out[x] = held
            else:
                wanted.append(x)
        if wanted:
            # kept as integers (12 bytes a posting): as float64 a common lexeme at 1M units took
            # 36 MB and the cache held two or three of them
            found = {r[0]: (np.frombuffer(r[1], dtype=">i4").astype(np.int32),
                            np.frombuffer(r[2], dtype=">i2").astype(np.int16).reshape(-1, len(FIELDS)))
                     for r in self.store.query(
                         "SELECT lexeme, ords, tfs FROM hybrid_packed WHERE vault=%s AND unit=%s AND build=%s "
                         "AND lexeme = ANY(%s)", (self.store.vault_id, code, base.build, wanted))}
            for x in wanted:  # a lexeme not packed is remembered too (it costs a lookup)
                got = found.get(x)
                self.rows[(base.build, code, x)] = got
                self.held += _size(got)
                if got is not None:
                    out[x] = got
            while self.held > CACHE_BYTES and self.rows:
                self._drop(next(iter(self.rows)))
        return out


def _size(row: tuple[np.ndarray, np.ndarray] | None) -> int:
    return 64 if row is None else 64 + row[0].nbytes + row[1].nbytes


def answer(arm: ScoringArm, unit: str, plan: Plan, lexemes: list[str], stats: Stats,
           filters: NoteFilter, limit: int) -> list[tuple[list[int], float]] | None:
    """:func:`search` in one read-only snapshot (the base, the rows and the units' checks
    agree), run again after a standby's recovery conflict; ``arm.answered`` says how it went.
    A role that may not read the packed tables (granted SELECT before schema 7 made them) is
    told once how to grant it, and searches without them."""
    from psycopg.pq import TransactionStatus

    from hybrid.core.errors import StoreUnavailable
    store = arm.store
    if store.packed.denied:
        return None

    def run():
        outer = store.conn.info.transaction_status != TransactionStatus.IDLE
        with store.conn.transaction():
            if not outer:
                store.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            store.query("SET LOCAL work_mem = '64MB'")
            # psycopg prepares a statement met 5 times; a generic plan of `path LIKE $1` cannot
            # use the path index (measured: 230 ms instead of 12 at 100k chunks)
            store.query("SET LOCAL plan_cache_mode = force_custom_plan")
            return search(arm, unit, plan, lexemes, stats, filters, limit)
    try:
        got = store.read(run)
    except StoreUnavailable as exc:
        if "refused role" not in str(exc):
            raise
        log.warning("%s; keyword search goes on without the packed postings", exc)
        store.packed.denied = True
        got = None
    arm.answered = "packed" if got is not None else "sql"
    return got


def search(arm: ScoringArm, unit: str, plan: Plan, lexemes: list[str], stats: Stats,
           filters: NoteFilter, limit: int) -> list[tuple[list[int], float]] | None:
    """The top ``limit`` units from the packed postings (None: this query goes the SQL path),
    in the caller's transaction."""
    store, code = arm.store, UNIT_CODE[unit]
    reader: PackedReader = store.packed
    base = reader.base(code)
    if base is None:
        return None
    packed = reader.postings(base, code, lexemes)
    if not packed:
        return None
    rare = [x for x in lexemes if x not in packed]
    if sum(stats.df.get(x, 0) for x in rare) > RARE_LIMIT:
        return None
    # the units scored by SQL, exactly (their ids are left out of the packed ranking)
    exact: dict[int, tuple[list[int], float]] = {}

    def scored(match: str | None, extra: str | None = None, extra_args: tuple = (), depth: int = limit) -> None:
        where, args = arm._where(Plan(match, plan.excludes, plan.scored), filters)
        if extra:
            where.append(extra)
            args.extend(extra_args)
        for ids, score, uid in arm._scored_rows(unit, plan, lexemes, stats, where, args, depth):
            exact[uid] = (ids, score)

    if rare:
        scored(" | ".join(quote(x) for x in rare), depth=RARE_LIMIT)
    scored(plan.match, "c.id > %s", (base.max_id,))
    table = UNIT_TABLE[unit]
    shown = []
    if arm.agent:
        shown = [r[0] for r in store.query(f"SELECT id FROM {table} WHERE vault=%s AND agent_tsv IS NOT NULL "
                                           f"AND id <= %s", (store.vault_id, base.max_id))]
        if shown:
            scored(plan.match, "c.agent_tsv IS NOT NULL")
    # every other unit: BM25 over the packed lexemes it holds, in the SQL scorer's arithmetic
    # (its fields added in order); each field over the postings holding the lexeme there only
    # (the title and headings hold few of a word's postings)
    scores = np.zeros(len(base.ids))
    for x, (ords, tfs) in packed.items():
        if x in plan.flat:
            scores[ords] += plan.scored[x] * 1.0
            continue
        part = np.zeros(len(ords))
        for i, (f, w) in enumerate(zip(FIELDS, stats.idfs(x))):
            if w is None:
                continue
            at = np.flatnonzero(tfs[:, i])
            tf, lens = tfs[at, i].astype(np.float64), base.lens[ords[at], i]
            part[at] += FIELD_BOOST[f] * w * (tf * (K1 + 1)) / (tf + K1 * ((1 - B) + B * lens / stats.avg[f]))
        scores[ords] += plan.scored[x] * part
    out_of = [uid for uid in exact if uid <= base.max_id] + shown
    if out_of:
        at = np.searchsorted(base.ids, np.asarray(out_of, dtype=np.int64))
        at = at[(at < len(base.ids))]
        at = at[np.isin(base.ids[at], out_of)]
        scores[at] = 0.0
    live = np.flatnonzero(scores > 0)
    found = _checked(store, unit, base, scores, live, arm._where(Plan(None, plan.excludes, plan.scored), filters),
                     limit)
    if found is None:
        return None
    merged = [(uid, ids, s) for uid, ids, s in found[:limit]] + [(u, ids, s) for u, (ids, s) in exact.items()]
    merged.sort(key=lambda r: (-r[2], r[0]))
    return [(ids, s) for _, ids, s in merged[:limit]]


def _checked(store: Any, unit: str, base: Base, scores: np.ndarray, live: np.ndarray,
             where: tuple[list[str], list[Any]], limit: int) -> list[tuple[int, list[int], float]] | None:
    """The best ``limit`` of the ``live`` ordinals that pass ``where`` (the filters, the agent
    view, the excludes; a unit deleted since the build passes nothing), as (id, chunk ids,
    score), best first (None: the SQL path answers).

    The best are checked a batch at a time. When few of them pass, the units passing the
    filter are listed instead, up to twice the walk still needed at that rate: a narrow filter
    is answered from its list (its indexes make listing cheap), a broad one costs at most that
    much more before the walk goes on (measured at 100k chunks: a query whose best units sit
    outside a folder of 40 % listed all 40,000 in 190 ms, where the walk took 3)."""
    table, (cond, args) = UNIT_TABLE[unit], where
    ids_sql = "ARRAY[c.id]" if unit == "chunk" else "c.chunk_ids"
    found: list[tuple[int, list[int], float]] = []
    done, want, listed = 0, max(4 * limit, 64), False
    while True:
        order = _best(scores, live, want)  # a prefix of the same order as the last one
        batch = order[done:]
        uids = base.ids[batch].tolist()
        kept = dict(store.query(f"SELECT c.id, {ids_sql} FROM {table} c WHERE c.id = ANY(%s) AND "
                                f"{' AND '.join(cond)}", (uids, *args)).fetchall())
        found.extend((u, list(kept[u]), float(scores[o])) for u, o in zip(uids, batch.tolist()) if u in kept)
        done = len(order)
        if len(found) >= limit or done >= len(live):
            return found
        projected = limit * done / max(len(found), 1)  # the walk's depth at this pass rate
        if not listed and len(found) * PASS_SHARE < done:
            listed = True
            cap = int(min(PASS_LIMIT, 2 * projected))
            passing = [r[0] for r in store.query(f"SELECT c.id FROM {table} c WHERE {' AND '.join(cond)} "
                                                 f"AND c.id <= %s LIMIT %s", (*args, base.max_id, cap + 1))]
            if len(passing) <= cap:
                return _listed(store, unit, base, scores, passing, limit)
        if done >= WALK_LIMIT:
            return None
        want = max(done * 4, int(projected * 1.25))


def _listed(store: Any, unit: str, base: Base, scores: np.ndarray, passing: list[int],
            limit: int) -> list[tuple[int, list[int], float]]:
    """The best ``limit`` of the units ``passing`` (ids, every one that passes)."""
    wanted = np.asarray(passing, dtype=np.int64)
    at = np.searchsorted(base.ids, wanted)
    hit = at < len(base.ids)
    at, wanted = at[hit], wanted[hit]
    at = at[(base.ids[at] == wanted) & (scores[at] > 0)]
    best = _best(scores, at, limit)[:limit]
    uids = base.ids[best].tolist()
    ids_sql = "ARRAY[c.id]" if unit == "chunk" else "c.chunk_ids"
    kept = dict(store.query(f"SELECT c.id, {ids_sql} FROM {UNIT_TABLE[unit]} c WHERE c.id = ANY(%s)",
                            (uids,)).fetchall())
    return [(u, list(kept[u]), float(scores[o])) for u, o in zip(uids, best.tolist()) if u in kept]


def _best(scores: np.ndarray, live: np.ndarray, k: int) -> np.ndarray:
    """The ordinals of the ``k`` best scores among ``live`` (all those tied with the k-th too),
    best first, ties by ordinal (that is, by id)."""
    if k < len(live):
        vals = scores[live]
        kth = np.partition(vals, len(vals) - k)[len(vals) - k]
        live = live[vals >= kth]
    return live[np.lexsort((live, -scores[live]))]
