"""Property filters against the vaults searched: which query words are filters
(:func:`hybrid.retrieval.filters.resolve_props`), and what to say when one matches no note.

A word shaped like a property filter (``status:done``, ``rating>=4``:
:func:`hybrid.retrieval.query.property_shaped`) is a filter when some note the caller may see
has that property; when none has it but one has a property of a near name (``stauts``), the
search stops and says so (:class:`NoMatchingNotes`, with the names near it); otherwise it stays
a word (``re:invent``, ``TODO:fix``, ``Vec<String>``). What is looked at and suggested comes
from the notes the caller may see: an agent is never told of a property or value that only
hidden notes have, nor of a value it is shown redacted (judged with its key:
:func:`hybrid.store.agent.values.hides_value`).
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from hybrid.store.base import NoteFilter
from hybrid.store.props import PropFilter, Row, has_key, raw_values

if TYPE_CHECKING:
    from hybrid.store.port import Searchable

NEAR_KEY = 0.8  # difflib ratio from which an unknown key counts as a misspelling of a known one


def known(stores: Sequence[Searchable], key: str) -> bool:
    """Whether some note the stores' reader may see has property ``key``."""
    return any(next(iter(s.catalog.note_ids(NoteFilter(props=(has_key(key),)))), None) is not None for s in stores)


def near_keys(stores: Sequence[Searchable], key: str, cutoff: float = 0.6) -> list[str]:
    """The property names of visible notes nearest ``key`` (spelling neighbours, or names that
    hold it as a part), at most four."""
    names = sorted({k for s in stores for k in s.ledger.property_keys()})
    picks = [k for k in names if len(key) >= 3 and key in k.replace("_", "-").split("-")]
    picks += difflib.get_close_matches(key, names, n=4, cutoff=cutoff)
    return [k for k in dict.fromkeys(picks)
            if k != key and known(stores, k) and all(s.catalog.shows(k) for s in stores)][:4]


def visible_rows(stores: Sequence[Searchable], key: str, shown: bool = True) -> list[tuple[Row, str]]:
    """The rows of property ``key`` (with each value as written) of the notes the stores' reader
    may see, values that reader is not shown left out (unless not ``shown``)."""
    return [(r, raw) for rows in _rows_by_note(stores, key, shown) for r, raw in rows]


def _rows_by_note(stores: Sequence[Searchable], key: str, shown: bool) -> list[list[tuple[Row, str]]]:
    out: list[list[tuple[Row, str]]] = []
    for store in stores:
        ids = list(store.catalog.note_ids(NoteFilter(props=(has_key(key),))))
        for fm in store.ledger.note_properties(ids).values():
            rows = store.catalog.shown_rows(fm) if shown else [(r, raw) for r, _, raw in raw_values(fm)]
            out.append([(r, raw) for r, raw in rows if r[0] == key])
    return out


def _hintable(stores: Sequence[Searchable], by_note: list[list[tuple[Row, str]]]) -> list[tuple[Row, str]]:
    """The rows of ``by_note`` (a key's shown rows, a list a note) whose values may be suggested
    or ranged to the reader: for an agent, only values two notes or more hold
    (:meth:`hybrid.store.port.Reading.hints_lone_values`)."""
    rows = [(r, raw) for note in by_note for r, raw in note]
    if all(s.catalog.hints_lone_values() for s in stores):
        return rows
    held = Counter(v for note in by_note for v in {r[1] for r, _ in note})
    return [(r, raw) for r, raw in rows if held[r[1]] >= 2]


def problem(stores: Sequence[Searchable], pf: PropFilter) -> str:
    """Why no note passes ``pf`` alone, in one line, with what is near."""
    if not known(stores, pf.key):
        near = near_keys(stores, pf.key)
        if near:
            return f"no note has property {pf.key!r}; properties near it: {', '.join(near)}"
        anything = any(s.ledger.property_keys() for s in stores)
        return f"no note has property {pf.key!r}" + ("" if anything else " (no note has properties at all)")
    from hybrid.store.agent.redact import REDACTED
    shown = not echo_hidden(stores, pf)
    said = str(pf) if shown else f"{pf.key}{pf.op}{REDACTED}"
    by_note = _rows_by_note(stores, pf.key, shown=True)
    shared = [(r, raw) for note in by_note for r, raw in note]
    if not shared and visible_rows(stores, pf.key, shown=False):  # an agent, shown none of its values
        return f"no note has {said} among the values shown (the values of {pf.key!r} are redacted secrets)"
    rows = _hintable(stores, by_note)
    if pf.op == ":":
        values = {r[1]: raw for r, raw in rows if r[1]}
        picks = [v for v in values if pf.text and pf.text in v and len(pf.text) >= 3]
        picks = list(dict.fromkeys(picks + difflib.get_close_matches(pf.text, sorted(values), n=4, cutoff=0.6)))[:4]
        hint = f"; values near it: {', '.join(values[p] for p in picks)}" if picks else \
            f"; its values include: {', '.join(_some(values.values()))}" if values else ""
        return f"no note has {pf.key} {pf.value.strip() if shown else REDACTED!r}{hint}"
    what = pf.compares()
    have = [x for r, _ in rows if (x := (r[2] if what == "numbers" else r[3])) is not None]
    if not have and shared != rows:  # values one note holds each
        if any((r[2] if what == "numbers" else r[3]) is not None for r, _ in shared):
            return f"no note has {said} (no {what} it may be told)"
    if not have:
        holds = "numbers" if any(r[2] is not None for r, _ in rows) else \
            "dates" if any(r[3] is not None for r, _ in rows) else "text"
        example = {"numbers": "a number (rating>=4)", "dates": "a date (due<2026-01-01)"}.get(holds)
        fix = f"compare it with {example}" if example else f"match a value with {pf.key}:VALUE"
        return f"property {pf.key!r} holds {holds}, not {what}: {fix}"
    low, high = min(have), max(have)
    ends = [_num(x) if isinstance(x, float) else x for x in (low, high)]
    return f"no note has {said} (its {what} run from {ends[0]} to {ends[1]})"


def echo_hidden(stores: Sequence[Searchable], pf: PropFilter) -> bool:
    """Whether the value of ``pf`` is not said back to its reader (nor kept in clear by the audit
    log): when the reader would be shown it redacted, or when some note the reader may see holds
    a value of that key it is shown redacted, right guess or wrong (a value said back for a wrong
    guess alone would tell a right one)."""
    if not all(s.catalog.shows_value(pf.key, pf.value.strip()) for s in stores):
        return True
    return len(visible_rows(stores, pf.key)) != len(visible_rows(stores, pf.key, shown=False))


def _num(x: float) -> str:
    return str(int(x)) if x.is_integer() else str(x)


def _some(values: Iterable[str], n: int = 4) -> list[str]:
    return sorted(set(values))[:n]
