"""Exact-first: a query that names something (an identifier, a literal, words with punctuation
inside) gets the lexical hits that contain it, verbatim, above everything fusion ranked. A stage
of :mod:`hybrid.retrieval.pipeline`, after fusion and the priors."""

from __future__ import annotations

import re
from collections.abc import Sequence

from hybrid.core.tokens import WORD_RE, literals
from hybrid.retrieval import fuse
from hybrid.store.base import ChunkRow

NAMED_LIFT = 0.5  # added to the lift of a note named for the literals (fused scores stay below it)


def exact_first(fused, lex_keys, rows, lits: Sequence[str], lookup: bool = False,
                verbatim: str = ""):
    """Verbatim identifiers survive fusion: lexical hits whose text contains every literal of the
    query move above all others, their scores lifted by 1. Plain RRF would otherwise let
    semantically close notes outrank the one that names the thing. They keep their fused order,
    or BM25 order when the query is nothing but literals (a lookup, where term statistics and
    title/heading matches say more than similarity), except that the notes *named* for the
    literals (:func:`named_for`: the release note ``v1.9.1`` for ``1.9.1``) go before those
    that only mention them, lifted :data:`NAMED_LIFT` more; a note more of whose names (title,
    file name, aliases) are for them goes first among those (``v1.5.11.md`` titled 1.5.11
    before ``v1.5.md`` titled 1.5.11).

    A literal is found where it stands whole: ``1.9.1`` is not in ``1.9.10`` nor ``11.9.1``
    (a version in ``v1.9.1`` is).

    ``verbatim`` (see :func:`verbatim_text`): lexical hits containing the whole query as
    written (``publish: false``, ``Obsidian Desktop v1.1.10``) go above those, lifted by 2."""
    tiers = []
    needles = [x.lower() for x in lits]
    if verbatim:
        tiers.append((2.0, [k for k in lex_keys if k in rows and holds(_haystack(rows[k]), verbatim)]))
    if lits:
        tiers.append((1.0, [k for k in lex_keys if k in rows and holds_all(rows[k], needles)]))
    score, out = dict(fused), []
    placed: set = set()
    for lift, keys in tiers:
        chosen = set(keys) - placed
        if not chosen:
            continue
        order = [k for k in keys if k in chosen] if lookup else [k for k, _ in fused if k in chosen]
        named = {k: n for k in order if needles and (n := named_for(rows[k], needles))}
        order.sort(key=lambda k: -named.get(k, 0))  # stable: the notes named for the literals first
        out += [(k, lift + NAMED_LIFT * (k in named) + score.get(k, 0.0)) for k in order]
        placed |= chosen
    if not placed:
        return fused
    return out + [kv for kv in fused if kv[0] not in placed]


def holds_all(row: ChunkRow, needles: Sequence[str]) -> bool:
    """Whether ``row`` (its names, heading and text) holds every literal of ``needles`` (lower
    case) whole (:func:`holds`)."""
    return all(holds(_haystack(row), n) for n in needles)


def holds(haystack: str, needle: str) -> bool:
    """Whether ``needle`` occurs in ``haystack`` whole: where it starts or ends with a digit,
    not inside a longer number (no digit, nor a point and a digit, right before or after)."""
    start = haystack.find(needle)
    if start < 0 or not (needle[:1].isdigit() or needle[-1:].isdigit()):
        return start >= 0
    while start >= 0:
        end = start + len(needle)
        before, after = haystack[max(0, start - 2):start], haystack[end:end + 2]
        if not (needle[:1].isdigit() and (before[-1:].isdigit() or (before[-1:] == "." and before[:1].isdigit()))) \
                and not (needle[-1:].isdigit() and (after[:1].isdigit() or (after[:1] == "." and after[1:].isdigit()))):
            return True
        start = haystack.find(needle, start + 1)
    return False


def _haystack(row: ChunkRow) -> str:
    """Where a literal is looked for: the row's names (:func:`_names`), heading and text."""
    return row.derived(("exact-haystack",), lambda r: _squash("\n".join([*_names(r), r.heading, r.text])))


def named_for(row: ChunkRow, needles: Sequence[str]) -> int:
    """How many of ``row``'s note's names are for the literals ``needles`` (lower case), 0 when
    none is: a name is for them when it holds every one of them, whole, and at most
    :data:`NAMED_WORDS` words besides (``v1.9.1``; ``FORGE-1533 post-mortem``; ``HTML
    content``). A title that mentions a literal among many words is about more than it: a paper
    titled "Foxp3(+) T cells regulate immunoglobulin A selection…" is one of many on Foxp3."""
    count = 0
    for name in dict.fromkeys(_names(row)):
        if all(holds(name, n) for n in needles):
            rest = name
            for n in needles:
                rest = rest.replace(n, " ")
            count += len(WORD_RE.findall(rest)) <= NAMED_WORDS
    return count


NAMED_WORDS = 2


def _names(row: ChunkRow) -> tuple[str, ...]:
    """What names the row's note, as the lexical arm's title field has it: its title, file
    name and aliases (each in lower case, white space squashed)."""
    return row.derived(("exact-names",), lambda r: tuple(
        _squash(x) for x in [r.title, r.path.rsplit("/", 1)[-1].removesuffix(".md"), *r.aliases] if x))


def _squash(text: str) -> str:
    return " ".join(text.lower().split())


WEAK_LITERAL_RE = re.compile(r"[a-z]+(?:-[a-z]+)+")
VERBATIM_RE = re.compile(r"\w[^\w\s]+\w|\w[:=]")  # inner punctuation or a trailing `key:`


def strong_literals(terms: Sequence[str], coverage: float = 1.0) -> list[str]:
    """The query's literals (:func:`hybrid.core.tokens.literals`) that exact-first should honour. In
    a sentence of five words or more, a lowercase hyphenated word (``self-hosted``,
    ``full-screen``) is prose, not an identifier; in a short query (``pi-hole allowlist``,
    ``task-todo``) it still names something. And a long question whose words the best BM25
    hits mostly lack (``coverage`` below ``fuse.COVERAGE_FULL``: "keep the actions I use most
    at the top of the Ctrl+P list") mentions its literal in passing: it asks for something
    else, so no literal is honoured."""
    lits = literals(terms)
    if len(terms) < 5:
        return lits
    if len(terms) > LONG_QUERY and coverage < fuse.COVERAGE_FULL:
        return []
    return [t for t in lits if not WEAK_LITERAL_RE.fullmatch(t)]


LONG_QUERY = 6  # words: above this a query is a sentence, not a lookup


def verbatim_text(terms: Sequence[str], lits: Sequence[str]) -> str:
    """The query text to look for verbatim, or "": only for queries of two words or more that
    hold a literal or punctuation inside (``publish: false``, ``Obsidian Desktop v1.1.10``),
    whose exact wording is itself evidence."""
    text = _squash(" ".join(terms))
    if len(text.split()) < 2 or not (lits or VERBATIM_RE.search(text)):
        return ""
    return text
