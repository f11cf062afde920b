"""The tsvector hybrid writes for each chunk and heading section, and the BM25 it is scored with.

One analyzer for both stores (:class:`hybrid.store.lexicon.StemAnalyzer`,
:func:`hybrid.store.lexicon.doc_fields`): stems of the title (weight A), headings and tags (B)
and body (D) with their positions, identifier tokens (C) under a ``=`` prefix. The SQL scorer
(:mod:`hybrid.store.pg.lexical`) and the packed postings (:mod:`hybrid.store.pg.packed`) both
read this format, so it sits below them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hybrid.store.lexicon import FIELD_BOOSTS, IDENT_BOOST, doc_fields

K1, B = 1.2, 0.75           # BM25, as tantivy's
MAX_POS = 16383             # PostgreSQL's largest tsvector position
MAX_POSITIONS = 256         # positions kept per lexeme (PostgreSQL keeps no more)
MAX_LEXEME = 400            # characters; longer identifiers (data blobs) are not indexed
FIELD_GAP = 8               # positions between fields: a phrase never spans two
IDENT = "="                 # prefix of identifier lexemes
UNIT_TABLE = {"chunk": "hybrid_chunks", "section": "hybrid_sections"}
UNIT_CODE = {"chunk": 0, "section": 1}
# The weighted term frequency of a lexeme (the local index's field boosts, FIELD_BOOSTS and
# IDENT_BOOST): the cover density of a one-lexeme query is the sum of its positions' weights,
# found by binary search in the tsvector (unnesting whole tsvectors cost ~20x more). Weights
# must be <= 1, so they are halved here and the sum doubled.
TF_WEIGHTS = "'{" + ",".join(str(w / 2) for w in (FIELD_BOOSTS["body"], IDENT_BOOST, FIELD_BOOSTS["headings"],
                                                   FIELD_BOOSTS["title"])) + "}'"  # D, C, B, A


def quote(lexeme: str) -> str:
    """``lexeme`` as a quoted tsvector/tsquery lexeme."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def tsvector_of(row: Any, stem, section: Sequence[Any] = ()) -> tuple[str, int]:
    """(tsvector literal, BM25 length) of chunk ``row``, or (``section`` given: its rows,
    ``row`` the first) of the section: the local index's fields (:func:`doc_fields`)."""
    f = doc_fields(row, section)
    pos: dict[str, list[str]] = {}
    at = 1
    length = 0

    def put(tokens, weight: str) -> None:
        nonlocal at, length
        for tok in tokens:
            if tok and len(tok) <= MAX_LEXEME:
                got = pos.setdefault(tok, [])
                if len(got) < MAX_POSITIONS:
                    got.append(f"{min(at, MAX_POS)}{weight}")
            at += 1
        at += FIELD_GAP

    for text, weight in ((f.title, "A"), (f.headings, "B")):
        toks = stem.analyze(text)
        length += len(toks)
        put(toks, weight)
    put([IDENT + t for t in dict.fromkeys(f.ident)], "C")
    body = stem.analyze(f.body)
    length += len(body)
    put(body, "D")
    return " ".join(f"{quote(k)}:{','.join(v)}" for k, v in pos.items()), max(length, 1)


@dataclass
class Plan:
    """A query in lexemes: what a unit must match, and the lexemes scored with their boosts."""
    match: str | None = None                 # tsquery text; None: every unit (filters only)
    excludes: list[str] = field(default_factory=list)
    scored: dict[str, float] = field(default_factory=dict)
