"""A :class:`~hybrid.store.lexicon.LexicalQuery` as the Milvus lexical index runs it, read as
tantivy's ``build_query`` reads it (:mod:`hybrid.store.local.lexical`).

A query becomes a :class:`Plan`: the sparse vector its free words and typos are scored by
(``boost × idf`` per field and term, :mod:`hybrid.store.milvus.bm25`), the filter conditions of
its phrases and exclusions (``LIKE "% stem stem %"`` over a unit's stored stems, a hashed
identifier token over its ``idents``), and each phrase's clauses. tantivy scores a phrase by
its frequency in each field (BM25 with the sum of its words' idf): :meth:`Plan.exact` does so
for the units the filter lets through when they are few (:data:`PHRASE_EXACT`), from their
stored stems; past that, a phrase's words join the sparse vector instead (:meth:`Plan.loosened`,
as the PostgreSQL store scores phrases).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hybrid.core.tokens import identifiers, query_idents, within_one_edit
from hybrid.sources import kind_term
from hybrid.store.lexicon import (
    FIELD_BOOSTS,
    FUZZY_BOOST,
    IDENT_BOOST,
    LexicalQuery,
    only_stopwords,
    typo_candidates,
    without_stopwords,
)
from hybrid.store.milvus.bm25 import IDENT, fieldnorm, filter_token, idf, presence_dim, saturation, term_dim
from hybrid.store.milvus.client import id_list, literal

if TYPE_CHECKING:
    from hybrid.store.base import NoteFilter
    from hybrid.store.lexicon import StemAnalyzer
    from hybrid.store.props import PropFilter

PHRASE_EXACT = 1000  # units a phrase filter lets through that are scored one by one, exactly

Term = tuple[str, str, float]              # (field, term, boost): a term clause
Run = tuple[str, tuple[str, ...], float]   # (field, stems, boost): a phrase clause


def like(words: str) -> str:
    """``words`` (stems: letters and digits) inside a LIKE pattern: ``%`` and ``_`` escaped."""
    return words.replace("%", "\\%").replace("_", "\\_")


def holds(column: str, words: str) -> str:
    """The condition that ``column`` (a spaced field, bm25.spaced) holds ``words`` whole."""
    return f"{column} like {literal(f'% {words} %')}"


def occurrences(tokens: list[str], stems: tuple[str, ...]) -> int:
    """How often ``stems`` occur in a row in ``tokens`` (overlapping ones too, as tantivy counts)."""
    k = len(stems)
    return sum(1 for i in range(len(tokens) - k + 1) if tuple(tokens[i:i + k]) == stems)


@dataclass
class Clause:
    """What a text asks for, as tantivy's ``_text_clause`` builds it: term clauses and (a
    phrase of several stems) one phrase clause per stemmed field. A unit matches it when it
    matches one of them."""
    terms: list[Term] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)

    def conditions(self) -> str | None:
        """The filter condition of a unit matching it (None: it asks for nothing)."""
        alts = [holds(f, like(" ".join(st))) for f, st, _ in self.runs]
        alts += [holds("idents", filter_token(t)) if f == IDENT else holds(f, like(t)) for f, t, _ in self.terms]
        return "(" + " or ".join(alts) + ")" if alts else None

    def loose(self) -> list[Term]:
        """Its term clauses and its phrase's words as term clauses."""
        return self.terms + [(f, st, b) for f, stems, b in self.runs for st in dict.fromkeys(stems)]


@dataclass
class Phrase:
    """One phrase's clauses, weighted: ``runs`` (field, stems, boost × Σ idf) scored by the
    phrase's frequency in the field, ``terms`` (dimension, boost × idf) by the unit's weight."""
    runs: list[Run] = field(default_factory=list)
    terms: dict[int, float] = field(default_factory=dict)

    def score(self, row: dict[str, Any], fixed: dict[str, float]) -> float:
        vec = row["bm25"]
        out = sum(w * vec.get(dim, 0.0) for dim, w in self.terms.items())
        for f, stems, coef in self.runs:
            found = occurrences(row[f].split(), stems)
            if found:
                out += coef * saturation(found, fieldnorm(int(row[f"len_{f}"])), fixed.get(f) or 1.0)
        return out


@dataclass
class Plan:
    """A query as Milvus runs it: ``weights`` (its free words and typos), ``musts`` (filter
    conditions: its phrases and exclusions), its ``phrases``, and their words as free words
    (``loose``). ``clauses``: whether it asked for any word at all (one that asked for none
    matches every unit, as tantivy's). ``typos``: per typo, the presence dimensions of the
    tokens one edit away from it; a unit holding several of one typo's counts it once."""
    weights: dict[int, float] = field(default_factory=dict)
    musts: list[str] = field(default_factory=list)
    phrases: list[Phrase] = field(default_factory=list)
    loose: dict[int, float] = field(default_factory=dict)
    clauses: bool = False
    typos: list[list[int]] = field(default_factory=list)

    @property
    def overcounts(self) -> bool:
        """Whether the inner product may count a typo more than once (tantivy's fuzzy term
        query adds its boost once, however many tokens one edit away a unit holds)."""
        return any(len(dims) > 1 for dims in self.typos)

    def exact(self, row: dict[str, Any], fixed: dict[str, float]) -> float:
        """A unit's score as tantivy's: its free words' and typos' weights, each typo once,
        and its phrases'."""
        vec = row["bm25"]
        score = sum(w * vec.get(dim, 0.0) for dim, w in self.weights.items())
        for dims in self.typos:
            held = sum(1 for d in dims if d in vec)
            score -= FUZZY_BOOST * max(0, held - 1)
        return score + sum(p.score(row, fixed) for p in self.phrases)

    def loosened(self) -> dict[int, float]:
        """:attr:`weights` with every phrase's words scored as free words."""
        out = dict(self.weights)
        for dim, w in self.loose.items():
            out[dim] = out.get(dim, 0.0) + w
        return out


def add(weights: dict[int, float], dim: int, w: float) -> None:
    weights[dim] = weights.get(dim, 0.0) + w


class Planner:
    """Builds the plans of one unit kind (``n`` units): ``df`` gives document frequencies by
    dimension, ``near`` the identifier tokens that may be one edit from a word, ``known`` the
    words some chunk holds."""

    def __init__(self, stem: StemAnalyzer, n: int, df: Callable[[Iterable[int]], dict[int, int]],
                 near: Callable[[str], list[str]], known: Callable[[list[str]], set[str]]):
        self.stem, self.n, self.df, self.near, self.known = stem, n, df, near, known

    def clause(self, text: str, *, phrase: bool, stopwords: bool = False) -> Clause:
        """``text``'s clauses, as tantivy's ``_text_clause``."""
        if stopwords and not phrase:
            text = without_stopwords(text)
        stems = list(self.stem.analyze(text))
        idents = query_idents(text)
        out = Clause()
        if phrase and len(stems) > 1:
            out.runs = [(f, tuple(stems), b) for f, b in FIELD_BOOSTS.items()]
            whole = identifiers(text.lower())
            if len(whole) == 1:
                out.terms.append((IDENT, whole[0], IDENT_BOOST))
        else:
            out.terms += [(f, st, b) for st in dict.fromkeys(stems) for f, b in FIELD_BOOSTS.items()]
        if phrase and stems:
            # a phrase is matched whole: its parts are no alternative to it (tantivy's reason)
            idents = [t for t in idents if t == " ".join(text.lower().split())]
        out.terms += [(IDENT, t, IDENT_BOOST) for t in dict.fromkeys(idents)]
        return out

    def plan(self, q: LexicalQuery, *, fuzzy: bool = True, stopwords: bool = True) -> Plan:
        """``q`` as Milvus runs it, as tantivy's build_query reads it."""
        plan = Plan()
        if stopwords and only_stopwords(q.terms):
            stopwords = False  # a query of nothing but stopwords ("the who") keeps them
        free = self.clause(" ".join(q.terms), phrase=False, stopwords=stopwords) if q.terms else Clause()
        plan.clauses = bool(free.terms)
        phrases = [c for c in (self.clause(ph, phrase=True) for ph in q.phrases) if c.conditions()]
        plan.musts = [str(c.conditions()) for c in phrases]
        plan.musts += [f"not {c.conditions()}" for c in (self.clause(ex, phrase=True) for ex in q.excludes)
                       if c.conditions()]
        plan.clauses |= bool(phrases)
        wanted = [(f, t) for c in (free, *phrases) for f, t, _ in c.loose()]
        df = self.df({term_dim(f, t) for f, t in wanted})
        plan.weights = self._weights(free.terms, df)
        for c in phrases:
            plan.phrases.append(Phrase(self._runs(c.runs, df), self._weights(c.terms, df)))
            for dim, w in self._weights(c.loose(), df).items():
                add(plan.loose, dim, w)
        if fuzzy and q.terms:
            for word in self._fuzzed(q):
                plan.clauses = True
                dims = [presence_dim(t) for t in self.near(word) if within_one_edit(t, word)]
                for dim in dims:
                    add(plan.weights, dim, FUZZY_BOOST)
                plan.typos.append(dims)
        return plan

    def _weights(self, terms: list[Term], df: dict[int, int]) -> dict[int, float]:
        """The sparse vector of term clauses (a term no unit holds adds nothing)."""
        out: dict[int, float] = {}
        for f, t, boost in terms:
            dim = term_dim(f, t)
            if df.get(dim):
                add(out, dim, boost * idf(self.n, df[dim]))
        return out

    def _runs(self, runs: list[Run], df: dict[int, int]) -> list[Run]:
        """Phrase clauses weighted by the sum of their stems' idf (tantivy's Bm25Weight::for_terms),
        those with a stem no unit holds in that field left out (they match nothing)."""
        out = []
        for f, stems, boost in runs:
            dfs = [df.get(term_dim(f, st), 0) for st in stems]
            if all(dfs):
                out.append((f, stems, boost * sum(idf(self.n, d) for d in dfs)))
        return out

    def _fuzzed(self, q: LexicalQuery) -> list[str]:
        """The words of ``q`` also matched one edit away: the caller's ``q.typos``, else each
        word of 5+ letters no chunk holds."""
        if q.typos is not None:
            return [w.lower() for w in q.typos if w]
        candidates = typo_candidates(q.terms)
        known = self.known(candidates)
        return [w for w in candidates if w not in known]


def filters(where: NoteFilter, prop_ids: Callable[[tuple[PropFilter, ...]], set[int]] | None) -> list[str] | None:
    """The filter conditions of ``where`` (None: no unit can pass). Folders, kinds and tags are
    looked up as hashed tokens (bm25.filter_token): no user text reaches the expression."""
    out = []
    if where.props:
        if prop_ids is None:
            raise RuntimeError("a property filter needs MilvusLexical.prop_ids (set by the store)")
        ids = prop_ids(where.props)
        if not ids:
            return None
        out.append(f"id in {id_list(sorted(ids))}")
    for column, values in (("folders", where.folders), ("folders", [kind_term(k) for k in where.sources])):
        if values:
            out.append("(" + " or ".join(holds(column, filter_token(v)) for v in values) + ")")
    out += [holds("tags", filter_token(t)) for t in where.tags]
    if where.since is not None:
        out.append(f"modified >= {int(where.since)}")
    out += [f"not ({holds('folders', filter_token(f))})" for f in where.exclude_folders]
    return out
