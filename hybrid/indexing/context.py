"""Where notes show a picture: the words around each embed, given to the picture's chunks.

A picture (kind ``image``) that a markdown note embeds or links to (``![[receipt.png]]``,
``![the receipt](scans/receipt.png)``, ``[[receipt.png|the receipt]]``) is found by that note's
words around it too. Each note that shows it (the first :data:`MAX_SOURCES` by path) gives,
for each place it does, one line: its title, the heading path above the link and the words of
the link's paragraph (:func:`hybrid.sources.links.link_places`), as ``Home > Shed: The
receipt for the new hinges``. The lines are the picture's reserved property
:data:`~hybrid.sources.markdown.CONTEXT` (``[[note path, line], …]``); its chunks embed them in
their header (:func:`~hybrid.sources.markdown.context_header`) and index them with their
headings (:func:`hybrid.store.lexicon.doc_fields`). The picture is still cited by its own file
and lines, and a hit says which notes show it (``embedded_in``).

**When.** In a run that changed any file, :func:`changed` works out the pictures whose lines
may change: the pictures read in this run, those a note read in it links or linked to, and those
whose set of notes showing them changed (a note came or went, or a file that came makes a link
resolve to another picture: the links are resolved before and after the run, in memory). Only
their notes are read (a note read in the run is not read again), and a picture whose lines did
change is read again from the OCR cache (no picture is recognised twice). A run that changed
nothing costs nothing here; a changed agent view judges every picture again.

**Privacy.** A note hidden from agents (by the view the run indexes with: ``agent_exclude``, a
private tag, ``private: true``, an unreadable front block) gives no words, so owners and agents
are shown the same picture. A note that becomes hidden after the run hides the pictures it gives
words to from agents until the next run leaves its words out (:mod:`hybrid.store.agent.view`
and, for a note changed on disk, :mod:`hybrid.store.agent.store`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hybrid.sources import kind_of
from hybrid.sources.links import PLACE_WORDS, LinkPlace, link_places
from hybrid.sources.markdown import CONTEXT
from hybrid.store.base import NoteMeta
from hybrid.store.graph import Resolver, relative

if TYPE_CHECKING:
    from hybrid.core.config import Vault
    from hybrid.core.settings import Settings
    from hybrid.sources.sections import LeaveOut
    from hybrid.store.agent.view import AgentView
    from hybrid.store.base import NoteRecord
    from hybrid.store.port import Ledger

log = logging.getLogger("hybrid")
MAX_SOURCES = 5   # notes whose words a picture takes (the first by path)
MAX_LINES = 8     # lines a picture takes in all (a note may show it in several places)
VIEW_META = "context_view"  # catalog meta: the agent view the pictures' lines were judged under


def line_of(title: str, place: LinkPlace) -> str:
    """``Title > Heading > Sub: words of the paragraph`` (a heading that repeats the title
    left out, as the contextual header leaves it out)."""
    heads = [h for i, h in enumerate(place.headings) if not (i == 0 and h == title)]
    text = " > ".join([title, *heads])
    return f"{text}: {place.words}" if place.words else text


def changed(catalog: Ledger, vault: Vault, view: AgentView, settings: Settings, leave_out: LeaveOut,
            records: list[NoteRecord], removed: Collection[str],
            listed: Iterable[str] = ()) -> dict[str, list[list[str]]]:
    """``{picture path: its new lines}`` of the pictures whose lines differ from what they hold
    after this run (``records``: the notes read in it, the pictures among them read without
    lines; ``removed``: the paths gone). Empty when nothing changed, neither a file nor the
    agent view the lines were judged under (:data:`VIEW_META`, which the run then records), or
    the vault is not a folder (only a folder's notes embed pictures). ``listed``: the paths of
    the folder's files (a vault with no picture among them or ``records`` costs nothing here)."""
    if not vault.is_folder:
        return {}
    if not any(kind_of(p) == "image" for p in listed) and not any(kind_of(r.path) == "image" for r in records):
        return {}
    new_view = catalog.get_meta(VIEW_META) != view.fingerprint  # who is hidden may have changed
    if not (records or removed or new_view):
        return {}
    fresh = {r.path: r for r in records}
    old = {n.path: n for n in catalog.notes()}
    notes = [n for p, n in old.items() if p not in fresh and p not in removed]
    notes += [NoteMeta(0, r.path, r.title, r.tags, r.aliases, r.modified, r.links) for r in records]
    notes = [replace(n, id=i) for i, n in enumerate(notes)]
    pictures = {n.id: n.path for n in notes if kind_of(n.path) == "image"}
    held = {path: props.get(CONTEXT) for _, path, _, props in catalog.files_mentioning((CONTEXT,), ())
            if path not in removed and kind_of(path) == "image"}
    if not pictures:
        return {}
    resolve = Resolver(notes)
    shown_by = _shown_by(notes, pictures, resolve)
    if new_view:
        todo = set(pictures.values())
    else:
        # the pictures read now; those whose notes showing them changed (a note came, went or
        # now links elsewhere; a file that came may make a link resolve to another picture);
        # and those a note read now links or linked to (its words around them may have changed)
        before = list(old.values())
        was_shown = _shown_by(before, {n.id: n.path for n in before if kind_of(n.path) == "image"}, Resolver(before))
        todo = {p for p in fresh if kind_of(p) == "image"}
        todo |= {p for p in pictures.values()
                 if {n.path for n in shown_by.get(p, ())} != {n.path for n in was_shown.get(p, ())}}
        for path, record in fresh.items():
            was = old.get(path)
            for target in [*record.links, *(was.links if was is not None else ())]:
                to = resolve(relative(target, path))
                if to in pictures:
                    todo.add(pictures[to])
    out: dict[str, list[list[str]]] = {}
    places: dict[str, tuple[str, list[LinkPlace]] | None] = {}
    for picture in sorted(todo):
        lines: list[list[str]] = []
        for n in sorted(shown_by.get(picture, ()), key=lambda n: n.path):
            if len({src for src, _ in lines}) >= MAX_SOURCES or len(lines) >= MAX_LINES:
                break
            if n.path not in places:
                places[n.path] = _places(vault, view, settings, leave_out, n.path, fresh.get(n.path))
            got = places[n.path]
            if got is None:  # hidden from agents, or unreadable now
                continue
            title, where = got
            for place in where:
                to = resolve(relative(place.target, n.path))
                line = [n.path, line_of(title, place)[:PLACE_WORDS + 200]]
                if len(lines) < MAX_LINES and to is not None and pictures.get(to) == picture \
                        and line not in lines:
                    lines.append(line)
        stored = fresh[picture].properties.get(CONTEXT) if picture in fresh else held.get(picture)
        if lines != (stored or []):
            out[picture] = lines
    return out


def _shown_by(notes: list[NoteMeta], pictures: dict[int, str], resolve: Resolver) -> dict[str, list[NoteMeta]]:
    """{picture path: the markdown notes that link to it} among ``notes`` (``pictures``: their
    pictures by id), each note once."""
    out: dict[str, list[NoteMeta]] = {}
    for n in notes:
        if n.id in pictures or kind_of(n.path) != "note":
            continue
        for target in dict.fromkeys(n.links):
            to = resolve(relative(target, n.path))
            if to in pictures and n not in out.setdefault(pictures[to], []):
                out[pictures[to]].append(n)
    return out


def _places(vault: Vault, view: AgentView, settings: Settings, leave_out: LeaveOut, path: str,
            record: NoteRecord | None) -> tuple[str, list[LinkPlace]] | None:
    """(title, link places) of the note at ``path``: read in this run (``record``), else from
    its file as it is now, with what the vault leaves out left out. None when agents may not
    see it, or it cannot be read now (nothing of it is given to a picture)."""
    from hybrid.indexing.skipped import size_limit
    from hybrid.sources import sections
    from hybrid.sources.markdown import BinaryFile, decode, parse_note
    if record is not None:
        tags, props, title = record.tags, record.properties, record.title
        where = getattr(record, "places", None)
        if where is None:
            return None
    else:
        file = Path(vault.path) / path
        try:
            if file.stat().st_size > size_limit(settings, path)[0]:
                return None
            note = sections.leave_out(parse_note(path, decode(file.read_bytes(), path)[0]), leave_out)
        except (OSError, BinaryFile, RecursionError, ValueError) as exc:
            log.info("%s: not read for the pictures it shows (%s)", path, exc)
            return None
        tags, props, title, where = note.tags, note.properties, note.title, link_places(note)
    if view.hides(path, tags, props) is not None:
        return None
    return title, where


def sources_of(rows: Iterable[Any]) -> set[str]:
    """The note paths the lines of ``rows`` (chunk rows of pictures) come from."""
    from hybrid.sources.markdown import context_sources
    out: set[str] = set()
    for r in rows:
        if CONTEXT in r.props:
            out |= context_sources(r.properties)
    return out
