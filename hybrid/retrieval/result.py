"""What a search returns: :class:`SearchResult`, the ranked hits (a plain ``list[Hit]`` to every
caller that wants only those) plus how the engine read the query: the words it corrected and
the parsed query it searched for. Light on purpose (no index imports): ``hybrid query`` rebuilds
one from a running server's ``/api/search`` answer."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from hybrid.retrieval.context_blocks import Context
from hybrid.retrieval.hits import FAIR, Hit
from hybrid.retrieval.notes import NoteHits, group_by_note
from hybrid.retrieval.query import FILTER_RE, TOKEN_RE, ParsedQuery, is_exclusion

# A whole word of letters: `alpha17` or `snake_case` are identifiers, never "corrected".
WORD_RE = re.compile(r"(?<!\w)[^\W\d_]+(?!\w)")


class SearchResult(list[Hit]):
    """The hits in the order shown, and how the query was read: ``corrections`` ({wrong: right},
    the words typo repair replaced, lower case), ``suggestions`` (typos it only offers a spelling
    for, the query searched as typed), ``parsed`` (the query as searched, after repair)
    and ``query`` (the text as given). ``needles`` are the words snippets centre on (as typed
    and as the vaults stem them), when the engine reported them. ``grouped``: the answer is
    notes (:attr:`notes`; the list holds each note's passages together, its best first), not
    passages (:mod:`hybrid.retrieval.notes`). ``notices``: one-line reasons the answer is what
    it is, for every door to show (a query in a script no model here reads)."""

    def __init__(self, hits: Iterable[Hit] = (), *, query: str = "", parsed: ParsedQuery | None = None,
                 corrections: Mapping[str, str] | None = None, needles: Sequence[str] = (),
                 fusion: Mapping[str, float] | None = None, suggestions: Mapping[str, str] | None = None,
                 grouped: bool = False, notices: Sequence[str] = (), by_filters: int | None = None,
                 unsure: bool = False, below_min_score: int = 0):
        super().__init__(hits)
        self.query = query
        self.parsed = parsed if parsed is not None else ParsedQuery()
        self.corrections: dict[str, str] = dict(corrections or {})
        # {typed: a likelier spelling} for typos not rewritten: the query was searched as typed
        # (near spellings included), these are only offered ("maybe you meant")
        self.suggestions: dict[str, str] = dict(suggestions or {})
        self.needles: list[str] = list(needles)
        self.fusion: dict[str, float] = dict(fusion or {})  # RRF k and the arms' weights (hybrid mode)
        self.grouped = grouped
        # one-line reasons the answer is what it is (a query in a script no model here reads)
        self.notices: list[str] = list(notices)
        # how many notes the filters pass, when the answer shows every one of them (the filters
        # chose it: no "nothing relevant" over it, however weakly the words match)
        self.by_filters = by_filters
        # no hit is fair, but the first is too near the cut to say nothing is relevant
        # (hybrid.retrieval.confidence.cannot_tell)
        self.unsure = unsure
        # how many hits matched but were left out for a confidence under the request's min_score
        self.below_min_score = below_min_score
        # the text around the hits (hybrid.retrieval.context), when the request asked for it
        self.context: Context | None = None

    @property
    def notes(self) -> list[NoteHits]:
        """The hits by note, in the order of each note's first hit."""
        return group_by_note(self)

    @property
    def relevant(self) -> bool | None:
        """Whether any hit is at least fair (confidence >= 0.4); None when there are hits but
        no confidence (a listing), or none is fair but the filters chose the answer
        (:attr:`by_filters`) or the first is too near the cut to tell (:attr:`unsure`):
        unknown. No hits: False."""
        known = [h.confidence for h in self if h.confidence is not None]
        if self and not known:
            return None
        fair = any(c >= FAIR for c in known)
        return None if not fair and self and (self.by_filters or self.unsure) else fair

    def to_json(self, *, text: bool = True) -> dict[str, Any]:
        """The answer as every door's JSON gives it: ``notes`` (each with its ``passages``)
        when grouped, else ``hits``; then ``relevant`` and the :meth:`response_extras`."""
        body: dict[str, Any] = ({"notes": [n.to_dict(text=text) for n in self.notes]} if self.grouped
                                else {"hits": [h.to_dict(text=text) for h in self]})
        if self.context is not None:
            body["context"] = self.context.to_dict()
        return {**body, "relevant": self.relevant, **self.response_extras()}

    @property
    def corrected_query(self) -> str:
        """``query`` with each corrected free word replaced (phrases, exclusions and filters as
        written); ``query`` itself when nothing was corrected."""
        if not self.corrections:
            return self.query

        def fix(m: re.Match) -> str:
            word = m.group(3)
            if word is None or is_exclusion(word) or FILTER_RE.match(word):
                return m.group(0)
            return fix_words(word, self.corrections)
        return TOKEN_RE.sub(fix, self.query)

    @property
    def suggested_query(self) -> str:
        """``query`` with the words of :attr:`suggestions` (and :attr:`corrections`) replaced:
        what "maybe you meant" offers; "" when there is no suggestion."""
        if not self.suggestions:
            return ""
        return SearchResult(query=self.query, corrections={**self.corrections, **self.suggestions}).corrected_query

    def response_extras(self) -> dict[str, Any]:
        """What ``/api/search`` sends besides the hits (old clients ignore it)."""
        return {"corrections": self.corrections, "suggestions": self.suggestions, "needles": self.needles,
                "fusion": self.fusion, "props": [str(p) for p in self.parsed.props], "notices": self.notices,
                "by_filters": self.by_filters, "unsure": self.unsure, "below_min_score": self.below_min_score}

    @classmethod
    def from_response(cls, data: Mapping[str, Any], query: str, parsed: ParsedQuery) -> SearchResult:
        """Rebuild the result from an ``/api/search`` answer to ``query`` (``parsed`` as the
        client parsed it). A server from before corrections were reported sends only ``hits``."""
        corrections = data.get("corrections")
        corrections = {str(k): str(v) for k, v in corrections.items()} if isinstance(corrections, dict) else {}
        suggestions = data.get("suggestions")
        suggestions = {str(k): str(v) for k, v in suggestions.items()} if isinstance(suggestions, dict) else {}
        needles = data.get("needles")
        needles = [str(n) for n in needles] if isinstance(needles, list) else []
        fusion = data.get("fusion")
        fusion = {str(k): v for k, v in fusion.items()
                  if isinstance(v, (int, float))} if isinstance(fusion, dict) else {}
        grouped = isinstance(data.get("notes"), list)
        notices = data.get("notices")
        notices = [str(n) for n in notices] if isinstance(notices, list) else []
        by_filters = data.get("by_filters")
        by_filters = by_filters if isinstance(by_filters, int) and not isinstance(by_filters, bool) else None
        unsure = data.get("unsure") is True
        below = data.get("below_min_score")
        below = below if isinstance(below, int) and not isinstance(below, bool) and below > 0 else 0
        props = data.get("props")
        parsed = as_filters(parsed, {str(p) for p in props} if isinstance(props, list) else set())
        out = cls((Hit.from_dict(d) for d in answer_passages(data)), query=query,
                  parsed=apply_corrections(parsed, corrections), corrections=corrections,
                  needles=needles, fusion=fusion, suggestions=suggestions, grouped=grouped,
                  notices=notices, by_filters=by_filters, unsure=unsure, below_min_score=below)
        if "context" in data:
            out.context = Context.from_dict(data["context"])
        return out


def answer_passages(answer: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every passage of an answer's JSON (:meth:`SearchResult.to_json`), in the order shown:
    each note's passages, or the ``hits``."""
    if isinstance(answer.get("notes"), list):
        return [p for n in answer["notes"] for p in n["passages"]]
    return list(answer.get("hits", []))


def fix_words(text: str, fixes: Mapping[str, str]) -> str:
    """``text`` with every whole word of letters found in ``fixes`` (by its lower case) replaced."""
    return WORD_RE.sub(lambda m: fixes.get(m.group(0).lower(), m.group(0)), text)


def as_filters(parsed: ParsedQuery, props: set[str]) -> ParsedQuery:
    """``parsed`` with the words that read as the property filters ``props`` (as a server
    resolved them: :func:`hybrid.retrieval.filters.resolve_props`) made filters."""
    made = [(words, pf) for words, pf in parsed.maybe_props if str(pf) in props]
    if not made:
        return parsed
    terms = list(parsed.terms)
    for words, _ in made:
        for w in words:
            terms.remove(w)
    return replace(parsed, terms=terms, props=parsed.props + [pf for _, pf in made],
                   maybe_props=[m for m in parsed.maybe_props if m not in made])


def apply_corrections(parsed: ParsedQuery, fixes: Mapping[str, str]) -> ParsedQuery:
    """``parsed`` with its free words corrected (phrases and exclusions are taken as written)."""
    if not fixes:
        return parsed
    return replace(parsed, terms=[fix_words(t, fixes) for t in parsed.terms])
