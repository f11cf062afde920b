"""tantivy's BM25, written by hybrid into Milvus sparse vectors, and the documents that carry it.

Milvus's own BM25 function is not used: Milvus Lite keeps its statistics per segment, counting
deleted and superseded rows, so its ranking drifts with the history of writes (top-10 overlap
with tantivy 0.91 over three flushed segments: eval/archive/milvus/bm25_parity.py). Here the
score is split where BM25 splits: a unit's sparse vector holds the document side of every
(field, term) it has, ``tf·(k1+1) / (tf + k1·(1 − b + b·|d|/avgdl))`` with the field's length
``|d|`` rounded as tantivy stores it (:func:`fieldnorm`) and the field's mean length ``avgdl``
when it was written; a query's vector holds ``boost × idf`` of its terms, from document
frequencies a vocabulary keeps exact (:mod:`hybrid.store.milvus.vocab`). Their inner product is
tantivy's score, the sum over fields and terms, in one search; a word one edit away from a typo
adds :data:`~hybrid.store.lexicon.FUZZY_BOOST` flat through a presence dimension of each
identifier token (:func:`presence_dim`), as tantivy's fuzzy term query scores.

The mean lengths change as notes change, while the weights written keep the ones they were
written with: :class:`Stats` tracks both, and an index whose means drifted past
:data:`AVGDL_TOLERANCE` reports every document stale, so the sync rebuilds it
(:func:`hybrid.store.base.lexical_drifted`).

A (field, term) is a dimension by a 31-bit hash: two of them share one once in about 2³²/n²
vocabularies of n terms (n = 100,000: about two pairs), which merges their weights.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hybrid.store.lexicon import FIELD_BOOSTS, doc_fields

if TYPE_CHECKING:
    from hybrid.store.base import ChunkRow
    from hybrid.store.lexicon import StemAnalyzer

K1, B = 1.2, 0.75                # tantivy's
IDENT = "ident"
FIELDS = (*FIELD_BOOSTS, IDENT)  # title, headings, body (stems), ident (identifier tokens)
DIM_SPACE = 2**31 - 1            # term dimensions below, presence dimensions above
AVGDL_TOLERANCE = 0.01           # a mean length this far from the written one: rebuild
TEXT_BYTES = 65_535              # a Milvus server's longest VARCHAR
FILTER_TOKEN_BYTES = 6           # a folder's, tag's or identifier's token: 12 hex digits


def _fieldnorms() -> list[int]:
    """tantivy's FIELD_NORMS_TABLE (tantivy/src/fieldnorm/code.rs): the 256 lengths a field's
    length is stored as; exact up to 40, then on a log scale (Lucene's one-byte norm)."""
    out = []
    for code in range(256):
        if code < 24:
            out.append(code)
            continue
        bits, shift = (code - 24) & 7, (code - 24) >> 3
        out.append(24 + (bits if shift == 0 else (bits | 8) << (shift - 1)))
    return out


NORMS = _fieldnorms()


def fieldnorm(length: int) -> int:
    """The length tantivy scores a field of ``length`` tokens with."""
    return NORMS[bisect_right(NORMS, length) - 1]


def idf(n: int, df: int) -> float:
    """BM25's inverse document frequency, as tantivy's."""
    d = max(0, min(df, n))
    return math.log(1.0 + (n - d + 0.5) / (d + 0.5))


@functools.lru_cache(maxsize=1 << 18)
def term_dim(field_name: str, term: str) -> int:
    """The sparse dimension of ``term`` in ``field_name``."""
    digest = hashlib.blake2b(f"{field_name}\x00{term}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") % DIM_SPACE


def presence_dim(term: str) -> int:
    """The dimension of an identifier token's presence (1.0 in every unit holding it)."""
    return term_dim(IDENT, term) + DIM_SPACE


def filter_token(value: str) -> str:
    """``value`` (a folder, tag, kind term or identifier) as a token of a filter field: hex
    digits only, so no user text ever reaches an expression (no quote or LIKE wildcard)."""
    return hashlib.blake2b(value.encode(), digest_size=FILTER_TOKEN_BYTES).hexdigest()


def spaced(words: Iterable[str]) -> str:
    """``words`` as a filter field holds them: space-separated with a space at each end (so
    ``LIKE "% w %"`` finds a whole word), cut to :data:`TEXT_BYTES` at a word boundary."""
    out, size = [" "], 1
    for w in words:
        size += len(w.encode()) + 1
        if size > TEXT_BYTES:
            break
        out.append(w + " ")
    return "".join(out)


def saturation(tf: int, norm: int, avg: float) -> float:
    """BM25's document side of a term seen ``tf`` times in a field of length ``norm``."""
    return tf * (K1 + 1) / (tf + K1 * (1 - B + B * norm / avg))


@dataclass
class Unit:
    """One document of the index: a chunk, or a heading section (its chunks' ids, in order)."""
    ids: list[int]
    terms: dict[str, list[str]]   # per field of FIELDS: its tokens, in order
    folders: list[str]            # ancestor folders and the kind's term (lexicon.doc_fields)
    tags: list[str]               # tags with their ancestors
    modified: int

    @classmethod
    def of(cls, rows: Sequence[ChunkRow], stem: StemAnalyzer, section: bool) -> Unit:
        f = doc_fields(rows[0], rows if section else ())
        terms = {"title": stem.analyze(f.title), "headings": stem.analyze(f.headings),
                 "body": stem.analyze(f.body), IDENT: list(f.ident)}
        return cls([r.id for r in rows], terms, f.folders, f.tags, int(rows[0].modified))

    def lengths(self) -> dict[str, int]:
        return {f: len(t) for f, t in self.terms.items()}

    def keys(self) -> dict[int, tuple[str, str]]:
        """Its (field, term) pairs by dimension (what its document frequencies count)."""
        return {term_dim(f, t): (f, t) for f, ts in self.terms.items() for t in set(ts)}

    def vector(self, avg: dict[str, float]) -> dict[int, float]:
        """Its sparse vector under the mean lengths ``avg`` (see the module's docstring)."""
        out: dict[int, float] = {}
        for f, ts in self.terms.items():
            norm, mean = fieldnorm(len(ts)), avg.get(f) or 1.0
            for t, tf in Counter(ts).items():
                dim = term_dim(f, t)
                out[dim] = out.get(dim, 0.0) + saturation(tf, norm, mean)
        for t in set(self.terms[IDENT]):
            out[presence_dim(t)] = 1.0
        return out

    def row(self, avg: dict[str, float]) -> dict[str, Any]:
        """Its row in a unit collection (:func:`hybrid.store.milvus.lexical.unit_schema`)."""
        lens = self.lengths()
        return {"id": self.ids[0], "last": self.ids[-1], "ids": spaced(map(str, self.ids)),
                "bm25": self.vector(avg), "title": spaced(self.terms["title"]),
                "headings": spaced(self.terms["headings"]), "body": spaced(self.terms["body"]),
                "idents": spaced(filter_token(t) for t in dict.fromkeys(self.terms[IDENT])),
                "folders": spaced(filter_token(x) for x in self.folders),
                "tags": spaced(filter_token(x) for x in self.tags), "modified": self.modified,
                **{f"len_{f}": lens[f] for f in FIELDS}}


@dataclass
class Stats:
    """BM25's statistics of one unit collection, kept in a property of it: documents, tokens
    per field, the mean lengths its weights were written with (``fixed``: empty until the
    first), and whether a write began and never finished (``dirty``: its counts are unknown)."""
    n: int = 0
    total: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FIELDS, 0))
    fixed: dict[str, float] = field(default_factory=dict)
    dirty: bool = False

    KEY = "hybrid.stats"

    @classmethod
    def load(cls, props: dict[str, str] | None) -> Stats:
        raw = json.loads((props or {}).get(cls.KEY) or "{}")
        return cls(int(raw.get("n", 0)), {f: int(raw.get("total", {}).get(f, 0)) for f in FIELDS},
                   {f: float(v) for f, v in raw.get("fixed", {}).items()}, bool(raw.get("dirty", False)))

    def dump(self) -> dict[str, str]:
        return {self.KEY: json.dumps({"n": self.n, "total": self.total, "fixed": self.fixed,
                                      "dirty": self.dirty}, sort_keys=True)}

    def means(self) -> dict[str, float]:
        """Each field's mean length now."""
        return {f: (self.total[f] / self.n if self.n else 0.0) for f in FIELDS}

    def count(self, lengths: dict[str, int], sign: int) -> None:
        """Add (``sign`` 1) or take away (-1) a unit of field ``lengths``."""
        self.n += sign
        for f in FIELDS:
            self.total[f] += sign * lengths.get(f, 0)

    def stale(self) -> int:
        """Documents whose weights no longer fit the statistics: every one when a write was
        interrupted or a field's mean length moved past :data:`AVGDL_TOLERANCE` since the
        weights were written, else none."""
        if self.dirty:
            return self.n + 1
        if not self.n or not self.fixed:
            return 0
        now = self.means()
        moved = any(abs(now[f] - self.fixed.get(f, 0.0)) > AVGDL_TOLERANCE * self.fixed.get(f, 0.0) for f in FIELDS)
        return self.n if moved else 0
