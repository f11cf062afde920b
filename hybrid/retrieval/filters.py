"""Filters that match no note say so, with what is near, instead of an empty result.

A ``--folder`` with a typo, a tag nobody uses, a ``since`` in the future or a property no note
has (:mod:`hybrid.retrieval.properties`) would otherwise end in "no hits", which reads as
"nothing relevant". :func:`check_filters` runs only when a search has a filter, and costs one
indexed query per vault when the filter matches something (the usual case). The names it
suggests come from the notes the caller may see: an agent is never told a private folder, tag
or property exists.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from hybrid.core.errors import HybridError
from hybrid.store.base import NoteFilter

if TYPE_CHECKING:
    from hybrid.retrieval.request import Filters, SearchRequest
    from hybrid.store.port import Searchable


class NoMatchingNotes(HybridError):
    """A search filter (folder, tag, date, kind, property) that no note passes. ``secret_values``:
    the filter values it does not say back, which an audit record of the call must not hold."""

    secret_values: tuple[str, ...] = ()


def all_shown(stores: Sequence[Searchable], filters: Filters, notes_shown: int) -> int | None:
    """How many notes pass ``filters`` when an answer of ``notes_shown`` notes (each passing
    them) shows every one of them, else None: the filters, not the words, chose that answer
    (``recipe rating>=4`` over the four recipes rated 4 or more). Counts lazily, stopping
    past ``notes_shown``."""
    if not filters.narrows or not notes_shown:
        return None
    passing = 0
    for store in stores:
        passing += notes_passing(store, filters, notes_shown + 1 - passing)
        if passing > notes_shown:
            return None
    return passing if passing == notes_shown else None


def notes_passing(store: Searchable, filters: Filters, at_most: int) -> int:
    """How many of ``store``'s notes pass ``filters``, counted lazily up to ``at_most``."""
    from itertools import islice
    return sum(1 for _ in islice(store.catalog.note_ids(filters), at_most))


def all_shown_notice(count: int) -> str:
    if count == 1:
        return "the filters pass 1 note: it is shown"
    return f"the filters pass {count} notes: all {count} are shown"


def check_filters(stores: Sequence[Searchable], filters: Filters) -> None:
    """NoMatchingNotes when no note of ``stores`` (VaultStores or AgentStores: their catalogs
    and hidden sets) passes ``filters``; the message names the part that matches nothing."""
    if not filters.narrows:
        return
    f = filters
    if _exists(stores, dataclasses.replace(f, exclude_folders=())):  # which part matches nothing, exclusions aside
        return
    if f.sources and not _exists(stores, NoteFilter(sources=f.sources)):
        raise NoMatchingNotes(f"no {' or '.join(f.sources)} document is indexed"
                              f"{_kinds_hint(stores)}")
    folders_ok = not f.folders or _exists(stores, NoteFilter(folders=f.folders))
    if not folders_ok:
        shown = ", ".join(repr(x) for x in f.folders)
        raise NoMatchingNotes(f"no note is in folder {shown}{_near(f.folders, _folders(stores), 'folders')}")
    for tag in f.tags:
        if not _exists(stores, NoteFilter(tags=(tag,))):
            raise NoMatchingNotes(f"no note carries tag {tag!r}{_near([tag], _tags(stores), 'tags')}")
    if f.since is not None and not _exists(stores, NoteFilter(since=f.since)):
        newest = max((m for s in stores for m in _modified(s)), default=None)
        when = _day(f.since)
        last = f" (the newest was modified {_day(newest)})" if newest else ""
        raise NoMatchingNotes(f"no note was modified since {when}{last}")
    for pf in f.props:
        if not _exists(stores, NoteFilter(props=(pf,))):
            from hybrid.retrieval.properties import echo_hidden, problem
            exc = NoMatchingNotes(problem(stores, pf))
            if echo_hidden(stores, pf):  # the audit log keeps it redacted too
                exc.secret_values = (pf.value.strip(),)
            raise exc
    parts = [f"folder {', '.join(f.folders)}" if f.folders else "",
             f"tag{'s' if len(f.tags) > 1 else ''} {', '.join(f.tags)}" if f.tags else "",
             f"modified since {_day(f.since)}" if f.since is not None else "",
             f"source {', '.join(f.sources)}" if f.sources else "",
             f"propert{'ies' if len(f.props) > 1 else 'y'} {', '.join(map(str, f.props))}" if f.props else ""]
    raise NoMatchingNotes(f"no note matches all of: {'; '.join(p for p in parts if p)} "
                          f"(each alone matches notes; drop one)")


def resolve_props(request: SearchRequest, stores: Sequence[Searchable]) -> SearchRequest:
    """``request`` with the query's property-shaped words that name a property of a visible
    note made filters (QuerySyntaxError for such a word that cannot be tested: ``rating>=abc``).
    NoMatchingNotes for one whose property no note has while a near name exists."""
    from hybrid.retrieval.properties import NEAR_KEY, known, near_keys
    parsed = request.parsed
    if not parsed.maybe_props:
        return request
    terms, props = list(parsed.terms), list(parsed.props)
    for words, pf in parsed.maybe_props:
        if known(stores, pf.key):
            props.append(pf.check())
            for w in words:
                terms.remove(w)
            continue
        near = near_keys(stores, pf.key, NEAR_KEY)
        if near:
            shown = " ".join(words)
            raise NoMatchingNotes(f"no note has property {pf.key!r}; properties near it: {', '.join(near)} "
                                  f'(to search for the words, quote them: "{shown}")')
    if not terms and not parsed.phrases and parsed.excludes:
        from hybrid.core.errors import QuerySyntaxError
        raise QuerySyntaxError("query has only exclusions: add a word or phrase to search for")
    return request.with_parsed(dataclasses.replace(parsed, terms=terms, props=props, maybe_props=[]))


def _day(epoch: float) -> str:
    """The local date of ``epoch``; in UTC where local time has no such date (year 1 west of
    Greenwich)."""
    try:
        return dt.date.fromtimestamp(epoch).isoformat()
    except (ValueError, OverflowError, OSError):
        return dt.datetime.fromtimestamp(epoch, dt.UTC).date().isoformat()


def _exists(stores: Sequence[Searchable], where: Filters) -> bool:
    """Whether any note the stores' reader may see passes ``where`` (an agent's catalog leaves
    out hidden notes itself); stops at the first."""
    return any(next(iter(store.catalog.note_ids(where)), None) is not None for store in stores)


def _kinds_hint(stores: Sequence[Searchable]) -> str:
    """" (indexed: note, pdf)": the kinds the searched vaults do hold."""
    from hybrid.sources import KINDS
    held = [k for k in KINDS if _exists(stores, NoteFilter(sources=(k,)))]
    return f" in the vaults searched (they hold: {', '.join(held)})" if held else ""


def _visible_rows(store: Searchable) -> Iterable[tuple[str, list[str], float]]:
    hidden = store.hidden_files
    for note in store.ledger.notes():
        if note.id not in hidden:
            yield note.path, note.tags, note.modified


def _folders(stores: Sequence[Searchable]) -> set[str]:
    out: set[str] = set()
    for store in stores:
        for path, _, _ in _visible_rows(store):
            parts = path.split("/")[:-1]
            out.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return out


def _tags(stores: Sequence[Searchable]) -> set[str]:
    out: set[str] = set()
    for store in stores:
        shows = store.catalog.shows  # an agent's: no tag that is a secret
        for _, tags, _ in _visible_rows(store):
            out.update(t for t in tags if shows(t))
    return out


def _modified(store: Searchable) -> Iterable[float]:
    return (m for _, _, m in _visible_rows(store))


def _near(wanted: Sequence[str], known: set[str], what: str) -> str:
    """"; folders near it: a, b" — the known names closest to what was asked (same name in
    another case, a name that contains it as a part, then spelling neighbours)."""
    picks: list[str] = []
    for w in wanted:
        low = w.lower()
        picks += sorted(k for k in known if k.lower() == low)
        picks += sorted(k for k in known if low in (p.lower() for p in k.split("/"))
                        or (len(low) >= 3 and low in k.lower()))[:3]
        picks += difflib.get_close_matches(w, sorted(known), n=3, cutoff=0.6)
    picks = list(dict.fromkeys(p for p in picks if p not in wanted))[:4]
    if picks:
        return f"; {what} near it: {', '.join(picks)}"
    return f" (there are no {what} at all)" if not known else ""
