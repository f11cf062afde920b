"""The link graph of a vault: which notes link to which, resolved as Obsidian resolves links.

Each note's link targets are recorded as written when it is indexed
(:func:`hybrid.sources.markdown.note_links`: wikilinks, embeds, markdown links to a file of the
vault, wikilinks in the front block) and read back from the ledger by
:meth:`~hybrid.store.port.Reading.notes`. A target names a note by

1. its path, with or without ``.md`` (``Projects/Roadmap``), or the end of its path
   (``Roadmap/Q3``: Obsidian's shortest-path links);
2. its file name (``Roadmap``): when several notes share it, the one nearest the vault's root
   (fewest folders, then by path), as Obsidian picks;
3. else its title or an alias, when exactly one note has it.

Case and runs of spaces do not matter. A target that names no note (an attachment, a note not
written yet) is kept as unresolved. A note's links to itself are left out.

The graph is built from one pass over the notes (milliseconds for a few thousand); callers
that ask often keep it while the ledger's :meth:`~hybrid.store.port.Reading.data_version`
stays the same (:class:`GraphCache`). It is built from the owner's ledger, so a link resolves
to the note Obsidian would open; :meth:`LinkGraph.without` then takes out the notes an agent
may not see, so that neither direction of a link reveals a hidden note.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hybrid.store.base import NoteMeta
    from hybrid.store.port import Ledger


def link_key(text: str) -> str:
    """How a target or a name is compared: lowercased, ``.md`` dropped, spaces collapsed."""
    t = " ".join(str(text).replace("\\", "/").strip().lower().split())
    return t[:-3].rstrip() if t.endswith(".md") else t


@dataclass
class LinkGraph:
    notes: dict[int, NoteMeta] = field(default_factory=dict)   # file id → the note
    out: dict[int, list[int]] = field(default_factory=dict)    # file id → ids it links to, in order
    back: dict[int, list[int]] = field(default_factory=dict)   # file id → ids linking to it, by path
    unresolved: dict[int, list[str]] = field(default_factory=dict)  # file id → targets naming no note

    @classmethod
    def build(cls, notes: Iterable[NoteMeta]) -> LinkGraph:
        g = cls(notes={n.id: n for n in notes})
        resolve = Resolver(g.notes.values())
        for fid, note in g.notes.items():
            outs: list[int] = []
            for target in note.links:
                to = resolve(relative(target, note.path))
                if to is None:
                    g.unresolved.setdefault(fid, []).append(target)
                elif to != fid and to not in outs:
                    outs.append(to)
            if outs:
                g.out[fid] = outs
                for to in outs:
                    g.back.setdefault(to, []).append(fid)
        for ids in g.back.values():
            ids.sort(key=lambda i: g.notes[i].path)
        return g

    def outlinks(self, fid: int) -> list[int]:
        return self.out.get(fid, [])

    def backlinks(self, fid: int) -> list[int]:
        return self.back.get(fid, [])

    def neighbours(self, fid: int) -> set[int]:
        """The notes linked with ``fid`` in either direction."""
        return set(self.out.get(fid, ())) | set(self.back.get(fid, ()))

    def without(self, hidden: Iterable[int]) -> LinkGraph:
        """This graph with the notes ``hidden`` taken out, and every link to or from them."""
        gone = set(hidden)
        if not gone:
            return self
        keep = {fid: n for fid, n in self.notes.items() if fid not in gone}
        out = {f: kept for f, ids in self.out.items() if f in keep and (kept := [i for i in ids if i not in gone])}
        back = {f: kept for f, ids in self.back.items() if f in keep and (kept := [i for i in ids if i not in gone])}
        unresolved = {f: t for f, t in self.unresolved.items() if f in keep}
        return LinkGraph(keep, out, back, unresolved)

    def by_path(self, path: str) -> int | None:
        """The file id of the note at ``path`` (as the ledger records it)."""
        for fid, note in self.notes.items():
            if note.path == path:
                return fid
        return None

    def resolve(self, target: str, source: str = "") -> int | None:
        """The file id of the note link ``target`` (as written in the note at path ``source``)
        names in this graph, or None. Resolve with the owner's graph, then check the id against
        an agent's: a target must not resolve differently because the note it names is hidden."""
        return self._resolver(relative(target, source))

    @cached_property
    def _resolver(self) -> Resolver:
        return Resolver(self.notes.values())


def relative(target: str, source: str) -> str:
    """``target`` as a path from the vault's root when it is written relative to the folder of
    the note at ``source`` (``../garden.md``, ``./parts/a.md``: markdown links); else as is."""
    t = target.replace("\\", "/")
    if not t.startswith(("./", "../")):
        return target
    import posixpath
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(source), t))
    return "" if joined.startswith("../") or joined == ".." else joined


class Resolver:
    """Target text → file id, by the rules of the module docstring."""

    def __init__(self, notes: Iterable[NoteMeta]):
        self.paths: dict[str, int] = {}
        self.stems: dict[str, list[tuple[int, str, int]]] = {}
        self.names: dict[str, set[int]] = {}
        for n in notes:
            key = link_key(n.path)
            self.paths[key] = n.id
            self.stems.setdefault(key.rsplit("/", 1)[-1], []).append((n.path.count("/"), n.path, n.id))
            if not n.path.lower().endswith(".md"):
                self.paths.setdefault(n.path.lower(), n.id)  # `paper.pdf`: its name is its path
                self.stems.setdefault(n.path.lower().rsplit("/", 1)[-1], []).append(
                    (n.path.count("/"), n.path, n.id))
            for name in (n.title, *n.aliases):
                if str(name).strip():
                    self.names.setdefault(link_key(str(name)), set()).add(n.id)
        for found in self.stems.values():
            found.sort()
        self._suffix: dict[str, int | None] = {}

    def __call__(self, target: str) -> int | None:
        key = link_key(target).lstrip("/")
        if not key:
            return None
        if key in self.paths:
            return self.paths[key]
        if "/" in key:
            return self._by_suffix(key)
        found = self.stems.get(key)
        if found:
            return found[0][2]
        named = self.names.get(key)
        return next(iter(named)) if named and len(named) == 1 else None

    def _by_suffix(self, key: str) -> int | None:
        if key not in self._suffix:
            ends = sorted((p.count("/"), p) for p in self.paths if p.endswith("/" + key))
            self._suffix[key] = self.paths[ends[0][1]] if ends else None
        return self._suffix[key]


class GraphCache:
    """One graph per ledger, rebuilt when the ledger changed (its data version) — for a
    long-lived handle that answers many questions."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._graphs: dict[int, tuple[int, LinkGraph]] = {}

    def get(self, catalog: Ledger) -> LinkGraph:
        """The graph of the owner's ``catalog``, as of its last committed change."""
        version = catalog.data_version()
        with self._lock:
            held = self._graphs.get(id(catalog))
            if held is not None and held[0] == version:
                return held[1]
        graph = LinkGraph.build(catalog.notes())
        with self._lock:
            self._graphs[id(catalog)] = (version, graph)
        return graph
