"""The tsvector hybrid writes for each chunk and heading section, and the BM25 it is scored with.

One analyzer for both stores (:class:`hybrid.store.lexicon.StemAnalyzer`,
:func:`hybrid.store.lexicon.doc_fields`): stems of the title (weight A), headings and tags (B)
and body (D) with their positions, identifier tokens (C) under a ``=`` prefix; each weight is a
field, scored with a BM25 of its own as tantivy scores the local index's fields. The SQL scorer
(:mod:`hybrid.store.pg.lexical`) and the packed postings (:mod:`hybrid.store.pg.packed`) both
read this format, so it sits below them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hybrid.store.lexicon import FIELD_BOOSTS, doc_fields

K1, B = 1.2, 0.75           # BM25, as tantivy's
MAX_POS = 16383             # PostgreSQL's largest tsvector position
MAX_POSITIONS = 256         # positions kept per lexeme (PostgreSQL keeps no more)
MAX_LEXEME = 400            # characters; longer identifiers (data blobs) are not indexed
FIELD_GAP = 8               # positions between fields: a phrase never spans two
IDENT = "="                 # prefix of identifier lexemes
UNIT_TABLE = {"chunk": "hybrid_chunks", "section": "hybrid_sections"}
UNIT_CODE = {"chunk": 0, "section": 1}
# The fields of a tsvector, by position weight, in tsvector_of's order: each is scored by a BM25
# of its own (its term frequency, its length against the vault's mean, its document frequency),
# summed with the local index's field boosts, as tantivy scores its fields. An identifier
# lexeme's own boost (IDENT_BOOST) is its weight in the query plan, as in the local query.
FIELDS = ("A", "B", "C", "D")                  # title, headings and tags, identifiers, body
FIELD_BOOST = {"A": FIELD_BOOSTS["title"], "B": FIELD_BOOSTS["headings"], "C": 1.0, "D": FIELD_BOOSTS["body"]}
STEM_FIELDS = ("A", "B", "D")                  # a stem is found in these; an identifier lexeme only in C
DF_COLUMN = {"A": "df_title", "B": "df_headings", "D": "df_body"}  # hybrid_terms; C: df (identifiers)


def field_of(lexeme: str) -> tuple[str, ...]:
    """The fields ``lexeme`` can be found in."""
    return ("C",) if lexeme.startswith(IDENT) else STEM_FIELDS


def tf_weights(field: str) -> str:
    """``ts_rank_cd``'s weights (D, C, B, A) that count the positions of one field: the cover
    density of a one-lexeme query is the sum of its positions' weights."""
    return "'{" + ",".join("1" if f == field else "0" for f in "DCBA") + "}'"


def quote(lexeme: str) -> str:
    """``lexeme`` as a quoted tsvector/tsquery lexeme."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def tsvector_of(row: Any, stem, section: Sequence[Any] = ()) -> tuple[str, list[int]]:
    """(tsvector literal, each field's length) of chunk ``row``, or (``section`` given: its
    rows, ``row`` the first) of the section: the local index's fields (:func:`doc_fields`),
    weighted as :data:`FIELDS`. A field's length is the number of positions the tsvector holds
    of it (what :func:`field_lengths` counts in SQL: the same figure, migrated or written)."""
    f = doc_fields(row, section)
    pos: dict[str, list[tuple[int, str]]] = {}
    lengths = dict.fromkeys(FIELDS, 0)
    at = 1

    def put(tokens, weight: str) -> None:
        nonlocal at
        for tok in tokens:
            if tok and len(tok) <= MAX_LEXEME:
                got = pos.setdefault(tok, [])
                p = min(at, MAX_POS)
                # PostgreSQL keeps MAX_POSITIONS of a lexeme, once each (past MAX_POS they are one)
                if len(got) < MAX_POSITIONS and (not got or got[-1][0] != p):
                    got.append((p, weight))
                    lengths[weight] += 1
            at += 1
        at += FIELD_GAP

    put(stem.analyze(f.title), "A")
    put(stem.analyze(f.headings), "B")
    put([IDENT + t for t in f.ident], "C")  # every occurrence, as tantivy counts them
    put(stem.analyze(f.body), "D")
    text = " ".join(f"{quote(k)}:{','.join(f'{p}{w}' for p, w in v)}" for k, v in pos.items())
    return text, [lengths[x] for x in FIELDS]


def field_lengths(tsv: str) -> str:
    """SQL: each field's length in the tsvector ``tsv`` (an expression), as :func:`tsvector_of`
    counts it: its positions of that weight."""
    counts = ", ".join(f"count(*) FILTER (WHERE w = '{x}')" for x in FIELDS)
    return f"(SELECT ARRAY[{counts}]::integer[] FROM unnest({tsv}) u, unnest(u.weights) w)"


def summed_lengths(table: str, vault: str) -> str:
    """SQL: the total length of each field over the units of ``table`` in ``vault`` (an
    expression)."""
    sums = ", ".join(f"coalesce(sum(lens[{i + 1}]), 0)" for i in range(len(FIELDS)))
    return f"(SELECT ARRAY[{sums}]::bigint[] FROM {table} WHERE vault = {vault})"


def field_df_counts(weights: str = "u.weights") -> str:
    """SQL aggregates over ``unnest(tsv) u`` rows: how many hold the lexeme in each stemmed
    field, named as :data:`DF_COLUMN`'s columns."""
    return ", ".join(f"count(*) FILTER (WHERE '{x}' = ANY({weights})) AS {col}" for x, col in DF_COLUMN.items())


@dataclass
class Stats:
    """BM25's statistics of a query's lexemes over the units a search sees: each (lexeme,
    field)'s idf where the field holds the lexeme somewhere, each field's mean length, and each
    lexeme's document frequency (in any field)."""
    idf: dict[tuple[str, str], float]
    avg: dict[str, float]
    df: dict[str, int]

    def idfs(self, lexeme: str) -> list[float | None]:
        """The lexeme's idf per field of :data:`FIELDS` (None: no unit holds it there)."""
        return [self.idf.get((lexeme, x)) for x in FIELDS]

    def bound(self, lexeme: str, weight: float, flat: bool = False) -> float:
        """The most the lexeme can add to a unit's score (``flat``: its weight alone)."""
        if flat:
            return weight
        return weight * (K1 + 1) * sum(FIELD_BOOST[x] * self.idf.get((lexeme, x), 0.0) for x in FIELDS)


def idf(n: int, df: int) -> float:
    """BM25's inverse document frequency, as tantivy's."""
    d = max(0, min(df, n))
    return math.log(1.0 + (n - d + 0.5) / (d + 0.5))


@dataclass
class Plan:
    """A query in lexemes: what a unit must match, and the lexemes scored with their boosts."""
    match: str | None = None                 # tsquery text; None: every unit (filters only)
    excludes: list[str] = field(default_factory=list)
    scored: dict[str, float] = field(default_factory=dict)
    # lexemes that add their weight, whatever their frequencies (a word one edit away from a
    # typed one: tantivy scores a fuzzy term query so)
    flat: set[str] = field(default_factory=set)
