"""The vector arm of a vault in PostgreSQL: pgvector, cosine, a per-vault HNSW index from
``ann_threshold`` vectors on (see :mod:`hybrid.store.pg.store`), and the note filters as
conditions of its own query, on the filter columns each vector row carries (a copy of its
chunk's path, tags and date): a filtered HNSW search is pgvector's iterative scan, and an exact
scan where that comes back short.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from hybrid.core.errors import EmbedderMismatch
from hybrid.store.base import NoteFilter
from hybrid.store.pg.catalog import note_filter
from hybrid.store.sql import like_escape

log = logging.getLogger("hybrid")
EF_SEARCH = 100  # HNSW candidates per search until calibrated (pgvector's default is 40)
EF_LADDER = (40, 100, 200, 400, 700, 1000)  # tried in order by the calibration (1000: pgvector's most)
# a filtered HNSW search scans on past ef_search candidates until LIMIT rows pass the filter
# (pgvector's iterative scan), visiting at most MAX_SCAN_TUPLES; see PgVector.search
ITERATIVE_SCAN = "relaxed_order"
MAX_SCAN_TUPLES = 20_000
# a filter the planner expects fewer vectors to pass than this is answered by an exact scan of
# those vectors straight away (the filter columns' indexes find them): the iterative scan visits
# tuples by the thousand to find the few that pass. Measured at 100k chunks (top 100, median of
# 20 queries, ef_search 40 / 1000): 1.5k-10k passing vectors 3-9 ms exact against 34-91 ms
# iterative; 11k, 14-17 against 27; 20k, 17-19 against 14-23; 29k, 43-46 against 11-28
# (eval/reports/postgres/issue31-vecfilter.md)
EXACT_BELOW = 15_000

HNSW_M = 16                 # pgvector's default neighbours per layer (`hnsw_m`)
HNSW_EF_CONSTRUCTION = 64   # and its default candidates while building (`hnsw_ef_construction`)
BUILD_MEMORY_MAX_MB = 8192  # at most this for one build (1M vectors of 384 dimensions need ~2.2 GB)


def index_name(vault_id: int, dim: int) -> str:
    """The name of a vault's HNSW index over its vectors of ``dim`` dimensions."""
    return f"hybrid_vectors_hnsw_{int(vault_id)}_{int(dim)}"


def vault_indexes(execute: Any, vault_id: int) -> list[str]:
    """Names of every HNSW index of vault ``vault_id``, any dimension, a rebuild's ``_new``
    too; ``execute(sql, params)`` runs a statement (a connection's or a store's). The prefix is
    LIKE-escaped: ``_`` matches any character, and vault 3's pattern took vault 31's index."""
    prefix = like_escape(f"hybrid_vectors_hnsw_{int(vault_id)}_")
    rows = execute("SELECT indexname FROM pg_indexes WHERE tablename='hybrid_vectors' AND indexname LIKE %s",
                   (prefix + "%",)).fetchall()
    return [name for (name,) in rows]


def build_memory_mb(vectors: int, dim: int, m: int = HNSW_M) -> int:
    """maintenance_work_mem (MB) an HNSW build of ``vectors`` needs to keep its graph in memory:
    each element holds its vector (4 bytes a dimension) and its neighbour lists (2·m on the
    ground layer plus ~m above, 6-byte item pointers) and ~100 bytes of overhead; a quarter
    more for the build's own bookkeeping."""
    per = dim * 4 + (3 * m) * 6 + 100
    return min(BUILD_MEMORY_MAX_MB, max(64, int(vectors * per * 1.25 / 2**20) + 1))


def megabytes(setting: str) -> int:
    """A memory setting as PostgreSQL shows it ('64MB', '1GB', '8192kB') in MB."""
    units = {"kB": 1 / 1024, "MB": 1, "GB": 1024, "TB": 1024 * 1024}
    for unit, scale in units.items():
        if setting.endswith(unit):
            return int(float(setting[:-len(unit)]) * scale)
    return int(setting) // 1024  # a bare number is in kB


class PgVector:
    def __init__(self, store: Any):
        self.store = store  # its PgStore (hybrid.store.pg.store, which imports this module)
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
        return index_name(self.store.vault_id, dim)

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

    def graph(self) -> tuple[int, int] | None:
        """(m, ef_construction) of the vault's HNSW index, None without one (an index built
        before they were recorded has pgvector's defaults, which it was built with)."""
        if not self.has_index():
            return None
        got = json.loads(self.store.catalog.get_meta("hnsw") or "{}")
        return int(got.get("m", HNSW_M)), int(got.get("ef_construction", HNSW_EF_CONSTRUCTION))

    def ensure_index(self) -> bool:
        """Build the vault's HNSW index once it holds ``ann_threshold`` vectors (below that an
        exact scan is fast, and exact: the same rule as the local store's flat/IVF switch), or
        again when ``hnsw_m`` / ``hnsw_ef_construction`` changed; whether it was built. A
        rebuild makes the new graph beside the old one, which answers searches meanwhile, and
        swaps them in one transaction."""
        dim = self.dim
        if not dim:
            return False
        want = self.store.spec.graph
        have = self.graph()
        if have == want:
            return False
        n = self.count()
        if have is None and not self.store.spec.wants_ivf(n):
            return False
        m, efc = want
        name = self._index_name(dim)
        building = f"{name}_new" if have else name
        t = time.perf_counter()
        with self.store.conn.transaction():
            # pgvector builds the graph in memory while it fits in maintenance_work_mem (64 MB by
            # default: ~30k vectors of 384 dimensions) and inserts the rest on disk one by one,
            # several times slower; ask for what this graph needs, never less than the server's own
            mem = build_memory_mb(n, dim, m)
            if mem > megabytes(self.store.query("SHOW maintenance_work_mem").fetchone()[0]):
                self.store.query(f"SET LOCAL maintenance_work_mem = '{mem}MB'")
            self.store.query(f"DROP INDEX IF EXISTS {name}_new")  # left by a build cut short
            self.store.query(f"CREATE INDEX {building} ON hybrid_vectors USING hnsw "
                             f"((embedding::vector({dim})) vector_cosine_ops) "
                             f"WITH (m = {int(m)}, ef_construction = {int(efc)}) WHERE {self._predicate(dim)}")
        if have:
            with self.store.conn.transaction():
                self.store.query(f"DROP INDEX {name}")
                self.store.query(f"ALTER INDEX {building} RENAME TO {name}")
        ef, recall = self.calibrate(dim, self.store.spec.ann_recall)
        self.store.catalog.set_meta("hnsw", json.dumps({"ef_search": ef, "recall": recall, "m": m,
                                                        "ef_construction": efc}))
        log.info("%s: HNSW index %s in %.1f s (m %d, ef_construction %d; ef_search %d, calibrated "
                 "recall@10 %.3f)", self.store.name, "rebuilt" if have else "built",
                 time.perf_counter() - t, m, efc, ef, recall)
        return True

    def calibrate(self, dim: int, target: float, k: int = 10) -> tuple[int, float]:
        """The smallest ``ef_search`` on the ladder whose recall@k against an exact scan reaches
        ``target`` both for stored vectors as queries and for queries near them (the local
        IVF's calibration: :func:`hybrid.store.base.calibration_queries`); the noisy ones alone
        overstated it (1.0 at ef_search 40 where stored vectors found 0.73 at 100k chunks).
        Returns (ef_search, the lower of the two recalls)."""
        import numpy as np

        from hybrid.store.base import CALIBRATION_QUERIES, calibration_queries
        from hybrid.store.pg.cache import as_array
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
                # planned anew each time: psycopg prepares a statement run 5 times, and the
                # cached plan of the exact scans above (index scans off) answered the HNSW
                # queries too, so the index "reached" recall 1.0 at ef_search 40
                self.store.query("SET LOCAL plan_cache_mode = force_custom_plan")
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
        for name in vault_indexes(self.store.query, self.store.vault_id):
            if name != keep:
                self.store.query(f"DROP INDEX IF EXISTS {name}")

    filters_in_query = True  # search() takes the note filters as conditions of its own query
    answered = ""            # how the last search went: "hnsw", "exact" or "hnsw, then exact"
    exact_below = EXACT_BELOW

    def search(self, query: Any, k: int, allowed: Any = None, banned: Any = (),
               where: NoteFilter | None = None) -> list[tuple[int, float]]:
        """Top ``k`` (chunk id, cosine) pairs among ``allowed`` ids (default: all) minus
        ``banned``, of the notes passing ``where`` (folders, tags, date, kinds and excluded
        folders: conditions on the vectors' own filter columns, inside the same scan). On HNSW a
        filtered search is pgvector's iterative scan, unless the planner expects fewer than
        ``EXACT_BELOW`` vectors to pass: those are scanned exactly, found by the filter
        columns' indexes. When the iterative scan comes back short (the estimate was high) the
        same query runs as an exact scan."""
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
        hnsw = indexed and not (filtered and self._expected(conds[1:], args) < self.exact_below)
        rows = self._nearest(q, k, dim, conds, args, indexed, hnsw=hnsw)
        self.answered = "hnsw" if hnsw else "exact"
        if hnsw and filtered and len(rows) < k:  # the iterative scan gave up: an exact scan
            rows = self._nearest(q, k, dim, conds, args, indexed, hnsw=False)
            self.answered = "hnsw, then exact"
        out = [(int(i), float(s)) for i, s in rows]
        out.sort(key=lambda x: (-x[1], x[0]))
        return out

    def _expected(self, conds: list[str], args: list[Any]) -> float:
        """How many of the vault's vectors the planner expects to pass ``conds`` (its
        statistics: no rows read). The index's dimension test is left out: the planner gives a
        function's result a fixed 0.5 % selectivity, which made 40,000 passing vectors 183."""
        sql = (f"EXPLAIN (FORMAT JSON) SELECT 1 FROM hybrid_vectors v WHERE v.vault = "
               f"{int(self.store.vault_id)}{''.join(' AND ' + c for c in conds)}")
        plan = self.store.query(sql, tuple(args)).fetchone()[0]
        return float(plan[0]["Plan"]["Plan Rows"])

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

        def run() -> list:
            with self.store.conn.transaction():
                # planned with this transaction's settings, never from a plan psycopg cached
                # for the same statement under others (an exact scan's, with index scans off)
                self.store.query("SET LOCAL plan_cache_mode = force_custom_plan")
                if hnsw:
                    self.store.query(f"SET LOCAL hnsw.ef_search = {self.ef_search(k)}")
                    if len(conds) > 1:
                        self.store.query(f"SET LOCAL hnsw.iterative_scan = {ITERATIVE_SCAN}")
                        self.store.query(f"SET LOCAL hnsw.max_scan_tuples = {MAX_SCAN_TUPLES}")
                elif indexed:
                    self.store.query("SET LOCAL enable_indexscan = off")  # bitmap scans of the filter columns stay
                return self.store.query(sql, (q, *args, q, k)).fetchall()
        return self.store.read(run)  # once more if a standby cancelled it (hybrid.store.pg.standby)


def vector_filter(where: NoteFilter) -> tuple[list[str], list[Any]]:
    """WHERE terms over ``hybrid_vectors v`` for the notes ``where`` lets through: the
    catalog's note filter on the vectors' copy of the filter fields."""
    return note_filter(where, "v")


def _recall(found: list[set[int]], truth: list[set[int]]) -> float:
    return sum(len(f & t) for f, t in zip(found, truth)) / max(1, sum(len(t) for t in truth))
