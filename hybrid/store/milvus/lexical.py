"""The lexical arm in Milvus: BM25 over chunks and over heading sections, as the local tantivy
index ranks them (:mod:`hybrid.store.local.lexical`).

Three collections, each under an alias (:class:`hybrid.store.milvus.client.Generations`):
``chunks`` and ``sections`` hold one row per unit (as tantivy's two indexes, so BM25's
statistics stay per unit), ``vocab`` the document frequencies of their terms
(:mod:`hybrid.store.milvus.vocab`). A unit's row carries its BM25 weights as a sparse vector
(:mod:`hybrid.store.milvus.bm25`: hybrid's own tokens, never re-tokenised by Milvus), the
stems of its title, headings and body in order, hashed tokens of its identifiers, folders and
tags, and its date. A search is one sparse inner-product search (:mod:`hybrid.store.milvus.query`)
whose filter expression carries the query's phrases and exclusions (``LIKE "% stem stem %"``
over the stems) and the note filters (``LIKE`` over the hashed tokens, which no user text
reaches, ``modified >=``, and the property filter's chunk ids). Milvus Lite evaluates ``LIKE``
and comparisons column-wise but ``array_contains`` and ``text_match`` row by row, 50 to 100
times slower (3.5 s a search at 100k rows: eval/archive/milvus/scale.py), so neither is used.

Scores are tantivy's to float precision, phrases and typos included (a phrase by its own
frequency, :meth:`hybrid.store.milvus.query.Plan.exact`; a typo once however many tokens one edit
away a unit holds, :meth:`MilvusLexical._recounted`). What differs: a phrase the filter finds
in more than :data:`~hybrid.store.milvus.query.PHRASE_EXACT` units is scored as its words; a
phrase is matched within each field's first 64 KB (a Milvus string's limit); a word of 40+
letters left out between two words does not break a phrase; the mean field lengths weights
were written with may lag the vault's by up to 1 % until a rebuild (Stats.stale); two terms in
about 2³² / n² vocabularies of n share a dimension. A write is not one transaction: a reader
may see a note's new units before its old ones are gone (upserted first, then the rest deleted).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any

from hybrid.core.errors import IndexCorrupt
from hybrid.core.tokens import within_one_edit
from hybrid.store.base import EVERY_NOTE, NoteFilter, rereadable
from hybrid.store.lexicon import FIELD_BOOSTS, LexicalQuery, spellable, stem_analyzer, units
from hybrid.store.milvus import vocab
from hybrid.store.milvus.bm25 import DIM_SPACE, FIELDS, IDENT, TEXT_BYTES, Stats, Unit, term_dim
from hybrid.store.milvus.client import (
    MAX_TOPK,
    Generations,
    collection_name,
    create,
    id_list,
    query_upto,
)
from hybrid.store.milvus.query import PHRASE_EXACT, Plan, Planner, filters

if TYPE_CHECKING:
    from pymilvus import MilvusClient

    from hybrid.store.base import ChunkRow
    from hybrid.store.props import PropFilter

PARTS = {"chunk": "chunks", "section": "sections"}
VOCAB = "vocab"
ESTIMATE = 20_000        # units whose mean lengths stand for a new index's (see _fixing)
WRITE_ROWS = 500         # rows per insert
WRITE_BYTES = 16 << 20   # ... or fewer, past this much text
RUN_GAP = 64             # removed chunk ids this close are looked up as one range of sections
LENGTHS = [f"len_{f}" for f in FIELDS]


def unit_schema(client: MilvusClient, name: str) -> None:
    """An empty unit collection ``name`` (a row: :meth:`hybrid.store.milvus.bm25.Unit.row`)."""
    from pymilvus import DataType
    s = client.create_schema(auto_id=False, enable_dynamic_field=False)
    s.add_field("id", DataType.INT64, is_primary=True)   # the unit's first chunk id
    s.add_field("last", DataType.INT64)                  # ... its last
    s.add_field("ids", DataType.VARCHAR, max_length=TEXT_BYTES)
    s.add_field("bm25", DataType.SPARSE_FLOAT_VECTOR)
    for text in ("title", "headings", "body", "idents", "folders", "tags"):
        s.add_field(text, DataType.VARCHAR, max_length=TEXT_BYTES)
    s.add_field("modified", DataType.INT64)
    for name_ in LENGTHS:
        s.add_field(name_, DataType.INT64)
    index = client.prepare_index_params()
    index.add_index("bm25", index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
    create(client, name, s, index)


class MilvusLexical:
    """A vault's lexical index (or its agent view's) in the collections ``prefix`` names."""

    # whose fitted fusion and confidence parameters its rankings take (hybrid.retrieval.fitted):
    # tantivy's, since it scores as tantivy does (to 3e-7 on the labelled sets)
    store_kind = "local"

    # the chunk ids of the notes passing property filters (the catalog's filter_ids, set by the
    # store): property filters are tested on the catalog, then given to Milvus as those ids
    prop_ids: Callable[[tuple[PropFilter, ...]], set[int]] | None = None

    def __init__(self, client: MilvusClient, prefix: str):
        self.client = client
        self.stem = stem_analyzer()
        self.parts = {p: Generations(client, collection_name(prefix, p)) for p in (*PARTS.values(), VOCAB)}

    # --- reading the collections ------------------------------------------------------------
    def verify(self) -> None:
        """IndexCorrupt when a collection was written by another layout (a writer then
        destroys the index: the sync rebuilds it from the ledger)."""
        for g in self.parts.values():
            g.read()

    def _open(self, unit: str) -> Opened | None:
        """The current generation's collection of ``unit`` s, its statistics and the
        vocabulary written with it (None: no index yet); IndexCorrupt for another layout."""
        got = self.parts[PARTS[unit]].read()
        if got is None:
            return None
        name, props = got
        words = self.parts[VOCAB].name(Generations.number(name))
        self.parts[VOCAB].load(words)
        return Opened(name, Stats.load(props), words)

    def _usable(self, unit: str) -> Opened | None:
        """:meth:`_open` for the write side: an index of another layout counts as none."""
        try:
            return self._open(unit)
        except IndexCorrupt:
            return None

    def count(self) -> int:
        """Chunk documents held (an index of another layout holds none: it is rebuilt)."""
        return self._count("chunk")

    def section_count(self) -> int:
        return self._count("section")

    def _count(self, unit: str) -> int:
        opened = self._usable(unit)
        if opened is None:
            return 0
        return int(self.client.query(opened.name, filter="", output_fields=["count(*)"])[0]["count(*)"])

    def deleted_docs(self) -> int:
        """Documents whose stored weights no longer fit BM25's statistics (Stats.stale): none
        while the fields' mean lengths stay within 1 % of those they were written with, every
        one after a write that did not finish. Deletes themselves are exact here: document
        frequencies are counted down, never left to a merge."""
        return sum(o.stats.stale() for o in map(self._usable, PARTS) if o is not None)

    # --- writing ----------------------------------------------------------------------------
    def destroy(self) -> None:
        """Drop every collection of the index (it is rebuilt from the ledger)."""
        for g in self.parts.values():
            g.drop()

    def rebuild(self, batches: Iterable[list[ChunkRow]]) -> None:
        """Write every unit of ``batches`` into a new generation, then move the aliases to it:
        readers see the old index until then. Its weights are written with its own mean
        lengths (those of a large index: the old index's, if any; :meth:`_fixing`)."""
        old = {u: self._usable(u) for u in PARTS}
        number = max(g.next_number() for g in self.parts.values())
        names = {p: g.name(number) for p, g in self.parts.items()}
        for part in PARTS.values():
            unit_schema(self.client, names[part])
        vocab.create(self.client, names[VOCAB])
        stats = {u: Stats() for u in PARTS}
        known = {u: o.stats.means() for u, o in old.items() if o and o.stats.n and not o.stats.dirty}
        self._measure(batches, stats)
        deltas = vocab.Deltas()
        writers = {u: _Writer(names[PARTS[u]], self.client.insert) for u in PARTS}
        for unit, doc in self._fixing(self._units(batches), stats, known):
            stats[unit].count(doc.lengths(), 1)
            keys = doc.keys()
            deltas.add(unit, keys, 1, keys)
            writers[unit].put(doc.row(stats[unit].fixed))
        for w in writers.values():
            w.flush()
        vocab.write(self.client, names[VOCAB], deltas, fresh=True)
        for unit, part in PARTS.items():
            self.client.alter_collection_properties(names[part], properties=stats[unit].dump())
        for part, g in self.parts.items():
            self.client.flush(names[part])
            g.loaded.add(names[part])
            g.point(names[part])
        for g in self.parts.values():  # only once every alias moved: a reader keeps its generation whole
            g.prune()

    def apply(self, removed: Iterable[int], added: Iterable[list[ChunkRow]]) -> None:
        """Delete the units holding ``removed`` chunk ids, add those of ``added``, and count
        the vocabulary and statistics up and down. Idempotent: a replay finds the units it
        added and counts them out before counting them in again. An index of another layout is
        left alone (the sync's count check rebuilds it)."""
        removed = sorted(set(removed))
        found = {u: self._usable(u) for u in PARTS}
        if any(o is None for o in found.values()):
            if any(g.current() for g in self.parts.values()):
                return  # another layout: rebuilt whole by the count check
            self.rebuild([])
            found = {u: self._usable(u) for u in PARTS}
        opened = {u: o for u, o in found.items() if o is not None}
        for o in opened.values():
            o.stats.dirty = True
            self.client.alter_collection_properties(o.name, properties=o.stats.dump())
        deltas = vocab.Deltas()
        gone = {u: self._held(o.name, u, removed) for u, o in opened.items()}
        for unit, rows in gone.items():
            for r in rows:
                opened[unit].stats.count({f: int(r[f"len_{f}"]) for f in FIELDS}, -1)
                deltas.add(unit, (d for d in r["bm25"] if d < DIM_SPACE), -1)
        stats = {u: o.stats for u, o in opened.items()}
        for s in stats.values():
            if not s.n:  # nothing left was written with its means
                s.fixed = {}
        self._measure(added, stats)
        writers = {u: _Writer(o.name, self.client.upsert) for u, o in opened.items()}
        for unit, doc in self._fixing(self._units(added), stats):
            stats[unit].count(doc.lengths(), 1)
            keys = doc.keys()
            deltas.add(unit, keys, 1, keys)
            writers[unit].put(doc.row(stats[unit].fixed))
        for unit, w in writers.items():
            w.flush()
            stale = sorted({int(r["id"]) for r in gone[unit]} - w.written)
            if stale:
                self.client.delete(opened[unit].name, ids=stale)
        vocab.write(self.client, opened["chunk"].words, deltas)
        for o in opened.values():
            o.stats.dirty = False
            self.client.alter_collection_properties(o.name, properties=o.stats.dump())

    def _units(self, batches: Iterable[list[ChunkRow]]) -> Iterator[tuple[str, Unit]]:
        for kind, rows in units(batches):
            yield kind, Unit.of(rows, self.stem, kind == "section")

    def _measure(self, batches: Iterable[list[ChunkRow]], stats: dict[str, Stats]) -> None:
        """Where ``stats`` have no mean lengths yet and ``batches`` can be read twice, a first
        pass over them counts the exact ones, so every weight is written with the final means
        (a new index of more than :data:`ESTIMATE` units is then written once, not estimated,
        found stale and written again). A one-pass source is left to :meth:`_fixing`."""
        empty = [unit for unit, s in stats.items() if not s.fixed]
        if not empty or not rereadable(batches):
            return
        counted = {unit: Stats() for unit in empty}
        for unit, doc in self._units(batches):
            if unit in counted:
                counted[unit].count(doc.lengths(), 1)
        for unit, c in counted.items():
            stats[unit].fixed = c.means()

    @staticmethod
    def _fixing(stream: Iterator[tuple[str, Unit]], stats: dict[str, Stats],
                known: dict[str, dict[str, float]] | None = None) -> Iterator[tuple[str, Unit]]:
        """``stream``, with the mean lengths its weights are written with set first where there
        are none: those of its units when they number at most :data:`ESTIMATE` (exact), else
        the ``known`` ones (an old index's, counted as it was written), else those of its first
        :data:`ESTIMATE` units. Either of the last two is measured against the real means as
        the units are written, and a rebuild follows when they differ (Stats.stale)."""
        empty = [unit for unit, s in stats.items() if not s.fixed]
        if not empty:
            yield from stream
            return
        known = known or {}
        head = list(islice(stream, ESTIMATE))
        for unit in empty:
            mine = [u.lengths() for k, u in head if k == unit]
            measured = {f: sum(x[f] for x in mine) / len(mine) if mine else 0.0 for f in FIELDS}
            stats[unit].fixed = known[unit] if len(head) == ESTIMATE and unit in known else measured
        yield from head
        yield from stream

    def _held(self, collection: str, unit: str, removed: Sequence[int]) -> list[dict[str, Any]]:
        """The rows (pk, weights, lengths) of the units in ``collection`` holding any of ``removed``."""
        if not removed:
            return []
        fields = ["id", "bm25", *LENGTHS]
        if unit == "chunk":
            pks = list(removed)
        else:  # a section holds a run of ids: found by range, then by its own list of ids
            wanted, found = set(removed), set()
            for part in _chunks(_runs(removed), 100):
                expr = " or ".join(f"(id <= {hi} and last >= {lo})" for lo, hi in part)
                for r in self.client.query(collection, filter=expr, output_fields=["id", "ids"]):
                    if wanted.intersection(map(int, r["ids"].split())):
                        found.add(int(r["id"]))
            pks = sorted(found)
        out: list[dict[str, Any]] = []
        for part in _chunks(pks, vocab.BATCH):
            out += self.client.query(collection, filter=f"id in {id_list(part)}", output_fields=fields)
        return out

    # --- vocabulary -------------------------------------------------------------------------
    def known(self, words: Sequence[str]) -> set[str]:
        """The ``words`` (lower case) some chunk holds, as typed or by their stem."""
        opened = self._open("chunk")
        return set() if opened is None else self._known(words, opened.words)

    def _known(self, words: Sequence[str], table: str) -> set[str]:
        forms = {w: [(IDENT, w), *((f, st) for st in self.stem.analyze(w) for f in FIELD_BOOSTS)]
                 for w in dict.fromkeys(x.lower() for x in words)}
        rows = vocab.lookup(self.client, table, [term_dim(*k) for ks in forms.values() for k in ks])
        held = {(FIELDS[int(r["field"])], str(r["term"])) for r in rows.values() if int(r["df_chunk"])}
        return {w for w, ks in forms.items() if any((f, vocab.cut(t)) in held for f, t in ks)}

    def corrections(self, words: Sequence[str]) -> dict[str, str]:
        """Typo repair, as the local index's: each word of 5+ letters that no chunk holds (as
        typed or by its stem), mapped to the most frequent indexed identifier token within one
        edit that starts with the same letter (the first in order among equals)."""
        opened = self._open("chunk")
        wanted = [w for w in dict.fromkeys(x.lower() for x in words) if spellable(w)]
        if opened is None or not wanted:
            return {}
        known = self._known(wanted, opened.words)
        out: dict[str, str] = {}
        for word in wanted:
            if word in known:
                continue
            near = [(-df, t) for t, df in vocab.near(self.client, opened.words, word, "chunk")
                    if t[:1] == word[:1] and within_one_edit(t, word)]
            if near:
                out[word] = min(near)[1]
        return out

    # --- querying ---------------------------------------------------------------------------
    def _planner(self, unit: str, opened: Opened) -> Planner:
        table, column = opened.words, vocab.DF[unit]
        return Planner(
            self.stem, opened.stats.n,
            df=lambda dims: {d: int(r[column]) for d, r in vocab.lookup(self.client, table, dims).items()},
            near=lambda word: [t for t, _ in vocab.near(self.client, table, word, unit)],
            known=lambda words: self._known(words, table))

    def search(self, q: LexicalQuery, limit: int, **opts) -> list[tuple[int, float]]:
        """Top ``limit`` (chunk id, BM25 score) pairs."""
        return [(ids[0], score) for ids, score in self.search_units(q, limit, **opts)]

    def search_units(self, q: LexicalQuery, limit: int, unit: str = "chunk", *,
                     where: NoteFilter = EVERY_NOTE, fuzzy: bool = True, scored: bool = True,
                     stopwords: bool = True) -> list[tuple[list[int], float]]:
        """Top ``limit`` units of kind ``unit`` as (chunk ids, BM25 score): one id for a chunk,
        every chunk id of a section in order."""
        return self._run(q, limit, unit, where, fuzzy, stopwords, scored)

    def matching_ids(self, q: LexicalQuery, limit: int = 1_000_000, *, where: NoteFilter = EVERY_NOTE,
                     fuzzy: bool = True, scored: bool = True, stopwords: bool = True) -> set[int]:
        """Every chunk id the query matches (unranked), for restricting the vector arm."""
        return {ids[0] for ids, _ in self._run(q, limit, "chunk", where, fuzzy, stopwords, False)}

    def _run(self, q: LexicalQuery, limit: int, unit: str, where: NoteFilter, fuzzy: bool,
             stopwords: bool, scored: bool) -> list[tuple[list[int], float]]:
        """The best ``limit`` units for ``q`` (``scored`` False: any ``limit`` matching ones,
        scored 1.0). Which units match is tantivy's: those passing the phrase, exclusion and
        note filters that hold a free word or typo (or, with phrases, any: the phrases decide)."""
        opened = self._open(unit)
        conds = filters(where, self.prop_ids)
        if opened is None or conds is None or limit <= 0:
            return []
        plan = self._planner(unit, opened).plan(q, fuzzy=fuzzy, stopwords=stopwords)
        expr = " and ".join(plan.musts + conds)
        name, stats = opened.name, opened.stats
        if plan.phrases and scored:
            rows = self.client.query(name, filter=expr, limit=PHRASE_EXACT + 1,
                                     output_fields=["id", "ids", "bm25", *FIELD_BOOSTS, *LENGTHS])
            if len(rows) <= PHRASE_EXACT:
                ranked = sorted(((plan.exact(r, stats.fixed), int(r["id"]), r["ids"]) for r in rows),
                                key=lambda x: (-x[0], x[1]))
                return [(_ids(ids), score) for score, _, ids in ranked[:limit]]
            return self._search(name, plan.loosened(), expr, limit, scored)
        if plan.weights and not plan.phrases:
            if plan.overcounts and scored:
                return self._recounted(name, plan, expr, limit)
            return self._search(name, plan.weights, expr, limit, scored)
        if plan.clauses and not plan.phrases:
            return []  # no unit holds a word asked for
        # no words asked for (every unit passing the filters, as tantivy's all-query), or
        # phrases unscored (the filter is the match)
        rows = query_upto(self.client, name, expr, ["ids"], limit)
        return [(_ids(r["ids"]), 1.0) for r in rows]

    def _recounted(self, collection: str, plan: Plan, expr: str, limit: int) -> list[tuple[list[int], float]]:
        """The best ``limit`` units by their exact score when the inner product may count a
        typo more than once (Plan.exact): fetched by inner product, rescored, and fetched
        deeper until the least inner product fetched is below the ``limit``-th exact score
        (a unit not fetched scores at most its inner product)."""
        depth = min(max(2 * limit, limit + 20), MAX_TOPK)
        while True:
            hits = self.client.search(collection, data=[plan.weights], anns_field="bm25", limit=depth, filter=expr,
                                      output_fields=["ids", "bm25"], search_params={"metric_type": "IP"})[0]
            ranked = sorted(((plan.exact(h["entity"], {}), int(h["id"]), h["entity"]["ids"]) for h in hits),
                            key=lambda x: (-x[0], x[1]))
            floor = min((abs(float(h["distance"])) for h in hits), default=0.0)
            if len(hits) < depth or depth == MAX_TOPK or floor <= ranked[limit - 1][0]:
                return [(_ids(ids), score) for score, _, ids in ranked[:limit]]
            depth = min(4 * depth, MAX_TOPK)

    def _search(self, collection: str, weights: dict[int, float], expr: str, limit: int,
                scored: bool) -> list[tuple[list[int], float]]:
        """One sparse inner-product search. Scores are positive (an inner product of positive
        weights), whatever sign Milvus hands them back with."""
        hits = self.client.search(collection, data=[weights], anns_field="bm25", limit=min(limit, MAX_TOPK),
                                  filter=expr, output_fields=["ids"], search_params={"metric_type": "IP"})
        return [(_ids(h["entity"]["ids"]), abs(float(h["distance"])) if scored else 1.0) for h in hits[0]]


@dataclass
class Opened:
    """A unit collection of the current generation, as a search or a write opens it."""
    name: str
    stats: Stats
    words: str  # the vocabulary collection of the same generation


class _Writer:
    """Rows written in batches of :data:`WRITE_ROWS` (fewer past :data:`WRITE_BYTES` of text)."""

    def __init__(self, collection: str, send: Callable[..., Any]):
        self.collection, self.send = collection, send
        self.rows: list[dict[str, Any]] = []
        self.size = 0
        self.written: set[int] = set()

    def put(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        self.size += len(row["body"]) + len(row["headings"]) + len(row["idents"])
        if len(self.rows) >= WRITE_ROWS or self.size >= WRITE_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            self.send(self.collection, self.rows)
            self.written.update(int(r["id"]) for r in self.rows)
        self.rows, self.size = [], 0


def _ids(spaced_ids: str) -> list[int]:
    return sorted(int(x) for x in spaced_ids.split())


def _runs(ids: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted ``ids`` as (first, last) runs whose neighbours are at most :data:`RUN_GAP` apart."""
    out: list[tuple[int, int]] = []
    for i in ids:
        if out and i - out[-1][1] <= RUN_GAP:
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
    return out


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]
