"""Typo repair, the pipeline's first stage: which words of a query are misspelled, and what to
do about each.

A word is **not a typo** when any searched vault holds it, as typed or by its stem (``drawing``
when a vault says ``drawings``; ``--advertise-routes`` when it says ``route``), or when a shipped
word list has it (:mod:`hybrid.core.wordlist`: ``bread`` in a vault that never mentions
bread), the configured lists or the list of a language a searched vault's notes are written in
(:func:`hybrid.retrieval.languages.spell_languages`: ``Reise`` in a vault with German notes is
never a typo of ``raise``). Only a word of 5+ letters that passes neither test is a typo; a CJK word never is (the
lexical arm reads it as bigrams: one edit away is another word).

For a typo, each vault proposes its most frequent word one edit away (same first letter). The
proposal is **rewritten** into the query (both arms and the query embedding read it) only when it
clearly finds more than the original, which finds nothing: no other word of the query is held
by a searched vault, or the proposal occurs in a chunk together with one of them, in its own
vault. A proposal that
meets none of the query's other words, or two vaults proposing different words equally well,
is only a **suggestion**: the query is searched as typed, the lexical arm also matching the
word's near spellings (``fuzzy``), so nothing the original finds is lost, and the result says
"maybe you meant" rather than claiming a rewrite.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hybrid.core import wordlist
from hybrid.core.tokens import STOPWORDS
from hybrid.retrieval.languages import spell_languages
from hybrid.retrieval.result import WORD_RE
from hybrid.store.lexicon import LexicalQuery, spellable

if TYPE_CHECKING:
    from hybrid.retrieval.query import ParsedQuery
    from hybrid.store.port import Searchable


@dataclass
class Spelling:
    """What typo repair decided for one query (every key a word in lower case)."""
    rewrites: dict[str, str] = field(default_factory=dict)     # replaced in the query
    suggestions: dict[str, str] = field(default_factory=dict)  # "maybe you meant", not applied
    typos: list[str] = field(default_factory=list)  # every misspelled word, as typed (fuzzy matching)


def words_of(parsed: ParsedQuery) -> list[str]:
    """The free words of the query, lower case, once each (phrases and exclusions are taken as
    written; identifiers with digits or underscores are no words)."""
    return list(dict.fromkeys(w.lower() for t in parsed.terms for w in WORD_RE.findall(t)))


def repair(stores: Sequence[Searchable], parsed: ParsedQuery, languages: Sequence[str] = ("en",)) -> Spelling:
    """Decide, over the searched vaults' ``stores``, which words of ``parsed`` are typos and
    which of those to rewrite (see the module's docstring). ``languages``: the word lists whose
    words are real words, besides those of the languages the vaults hold."""
    content = [w for w in words_of(parsed) if w not in STOPWORDS and len(w) > 1]
    held: set[str] = set()
    for store in stores:
        rest = [w for w in content if w not in held]
        if not rest:
            break
        held |= store.lexical.known(rest)
    unknown = [w for w in content if w not in held and spellable(w)]
    if unknown:  # the vaults' languages are read only for a word none of them holds
        languages = spell_languages(stores, languages)
    typos = [w for w in unknown if not wordlist.is_word(w, languages)]
    out = Spelling(typos=typos)
    if not typos:
        return out
    # the words a repair must meet: those some searched vault holds (a word none holds can
    # meet nothing, anywhere)
    others = [w for w in content if w in held]
    proposals: dict[str, list[tuple[int, Searchable, str]]] = {}
    for store in stores:
        for wrong, right in store.lexical.corrections(typos).items():
            proposals.setdefault(wrong, []).append((_meets(store, right, others), store, right))
    for wrong, props in proposals.items():
        best = max(score for score, _, _ in props)
        chosen = list(dict.fromkeys(right for score, _, right in props if score == best))
        if len(chosen) == 1 and (best > 0 or not others):
            out.rewrites[wrong] = chosen[0]
        else:
            out.suggestions[wrong] = chosen[0]
    return out


def _meets(store: Searchable, word: str, others: Sequence[str]) -> int:
    """How many of ``others`` occur in some chunk of ``store`` together with ``word``."""
    return sum(1 for o in others
               if store.lexical.matching_ids(LexicalQuery(phrases=[word, o]), 1, fuzzy=False))
