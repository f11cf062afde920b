"""The store as an agent sees it: what :func:`hybrid.retrieval.pipeline.run_search` reads (``lexical``,
``vector``, ``catalog``, ``embedder_id``) of a vault, each part filtered through the vault's
:class:`~hybrid.store.agent.view.AgentView` (which notes are hidden, the text redacted), and the
caches that keep that cheap: the hidden set per catalog state, redacted rows, and the verdicts
on files that changed on disk since they were indexed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hybrid.store.agent.view import AgentView, Hidden, RowCache, hidden_chunk_ids, hidden_files, redact_rows, visible
from hybrid.store.base import EVERY_NOTE, NoteFilter

if TYPE_CHECKING:
    from hybrid.store.agent.vectors import Redacted
    from hybrid.store.base import ChunkRow
    from hybrid.store.port import Ledger, LexicalArm, Store, VectorArm

log = logging.getLogger("hybrid")


class AgentStore:
    """A :class:`~hybrid.store.port.Store` seen through an :class:`AgentView`: what
    :func:`hybrid.retrieval.pipeline.run_search` reads (``lexical``, ``vector``, ``catalog``,
    ``embedder_id``), each filtered."""

    def __init__(self, store: Store, view: AgentView, redactor, hidden: Hidden,
                 disk: OnDisk | None = None):
        self.store, self.view, self.hidden = store, view, hidden
        self.embedder_id = store.embedder_id
        self.ledger: Ledger = store.catalog
        self.hidden_files: Collection[int] = hidden.files
        lexical, vector = store.agent_arms(hidden.files, view)
        self.catalog = _AgentCatalog(store.catalog, view, hidden, redactor if view.redact else None,
                                     hidden.rows, disk)
        self.lexical = _AgentLexical(lexical, hidden, self.catalog)
        self.vector = _AgentVector(vector, hidden, self.catalog)


@dataclass(frozen=True)
class OnDisk:
    """Where a folder vault's files are (on this machine), to judge a note again as it is now
    when its file changed since it was indexed; ``max_bytes``: a larger file is not read (and
    hidden: its privacy cannot be known)."""
    root: Path
    max_bytes: int


def stale_verdicts(catalog: Ledger, file_ids: Collection[int], view: AgentView, disk: OnDisk,
                   cache: dict[int, tuple[int, int, bool]]) -> set[int]:
    """The ids of ``file_ids`` whose file changed on disk since it was indexed and that the
    agent may not see as they are now: made private, hidden by a new tag, a front block that
    no longer parses, or gone (fail closed). Judged by the reader of each file's kind (a
    drawing's tags may be in its compressed drawing), as bounded as the indexer's. An
    unchanged file costs one stat; a changed one is read and judged once per (size, mtime)
    (``cache``: file id -> (size, mtime, hidden))."""
    import os

    from hybrid.sources.convert import judged_fields
    out: set[int] = set()
    rows = catalog.file_rows(list(file_ids))
    root = str(disk.root)
    for fid, row in rows.items():
        try:
            st = os.stat(os.path.join(root, row.path))
        except OSError:
            out.add(fid)  # deleted or unreadable since it was indexed: nothing to judge it by
            continue
        if (st.st_size, st.st_mtime_ns) == (row.size, row.mtime_ns):
            continue
        got = cache.get(fid)
        if got is not None and got[:2] == (st.st_size, st.st_mtime_ns):
            if got[2]:
                out.add(fid)
            continue
        hidden_now = True
        if st.st_size <= disk.max_bytes:
            try:
                from hybrid.sources.markdown import decode
                with open(disk.root / row.path, "rb") as fh:
                    text = decode(fh.read(disk.max_bytes + 1), row.path)[0]
                tags, props = judged_fields(row.path, text, disk.max_bytes)  # by its own reader
                hidden_now = view.hides(row.path, tags, props) is not None
            except Exception:  # noqa: BLE001 - unreadable now (binary, vanished, …): fail closed
                hidden_now = True
        if hidden_now:
            log.info("%s: changed since it was indexed and now hidden from agents", row.path)
            out.add(fid)
        if len(cache) > 10_000:
            cache.clear()
        cache[fid] = (st.st_size, st.st_mtime_ns, hidden_now)
    return out


class _AgentLexical:
    """The agent index, its results also checked against the current hidden set (empty unless
    the settings changed since it was built: then nothing hidden gets out meanwhile)."""

    def __init__(self, lex: LexicalArm, hidden: Hidden, catalog: _AgentCatalog):
        self._lex, self._hidden, self._catalog = lex, hidden.chunks, catalog
        self.stem, self.store_kind = lex.stem, lex.store_kind

    def _out(self, where: NoteFilter) -> Collection[int]:
        """Hidden chunks, and those of notes passing a property filter only by a value agents
        are not shown (a secret)."""
        return self._hidden | self._catalog.unshown_chunks(where.props) if where.props else self._hidden

    def known(self, words):
        return self._lex.known(words)

    def corrections(self, words):
        return self._lex.corrections(words)

    def search(self, q, limit, *, where: NoteFilter = EVERY_NOTE, **opts):
        out = self._out(where)
        return [(i, s) for i, s in self._lex.search(q, limit, where=where, **opts) if i not in out]

    def search_units(self, q, limit, unit="chunk", *, where: NoteFilter = EVERY_NOTE, **opts):
        out = self._out(where)
        return [(ids, s) for ids, s in self._lex.search_units(q, limit, unit=unit, where=where, **opts)
                if not any(i in out for i in ids)]

    def matching_ids(self, q, limit=1_000_000, *, where: NoteFilter = EVERY_NOTE, **opts):
        return self._lex.matching_ids(q, limit, where=where, **opts) - set(self._out(where))


class _AgentVector:
    hidden_files: Collection[int] = frozenset()  # hidden notes are banned by id here

    """The vector arm for agents: hidden notes banned, and the chunks an agent is shown
    redacted scored by the vector of their redacted text (:mod:`hybrid.store.agent.vectors`), never
    by the one made with the secret in it."""

    def __init__(self, vector: VectorArm, hidden: Hidden, catalog: _AgentCatalog):
        self._vector, self._hidden, self._redacted = vector, hidden.chunks, hidden.redacted
        self._catalog = catalog

    @property
    def exact(self) -> bool:
        return self._vector.exact

    @property
    def filters_in_query(self) -> bool:
        return self._vector.filters_in_query

    def count(self) -> int:
        return self._vector.count()

    def search(self, query, k, allowed=None, banned=(), where=None):
        red = self._redacted
        if red is None:  # no model known (nothing embedded yet): redacted chunks get no score
            return []
        if where is not None and not all(self._catalog.shows(t) for t in where.tags):
            return []  # a tag that is a secret is never shown, so no note carries it for agents
        out = set(banned) | self._hidden | red.ids
        if where is not None and where.props:
            out |= self._catalog.unshown_chunks(where.props)
        got = self._vector.search(query, k, allowed, out, where=where)
        if red.ids:  # a PostgreSQL arm leaves out whole notes too (hidden ones, stale ones)
            got += red.scores(query, self._passing(red.ids, allowed, where), set(banned) | self._hidden,
                              self._vector.hidden_files)
            got.sort(key=lambda x: (-x[1], x[0]))
        return got[:k]

    def _passing(self, ids: set[int], allowed, where) -> Collection[int] | None:
        """Of the redacted chunks ``ids``, those ``allowed`` and passing ``where`` (None: all)."""
        if where is None:
            return allowed
        keep = self._catalog.filter_ids(where, sorted(ids))
        return keep if allowed is None else keep & set(allowed)


class _AgentCatalog:
    def __init__(self, catalog: Ledger, view: AgentView, hidden: Hidden, redactor, cache: RowCache,
                 disk: OnDisk | None = None):
        self._catalog, self._view, self._hidden, self._redactor = catalog, view, hidden, redactor
        self._cache, self._disk = cache, disk
        self._unshown: dict[tuple, frozenset[int]] = {}

    def shows(self, text: str) -> bool:
        """Whether ``text`` (a tag, a name) is shown to agents as it is: no secret in it."""
        return self._redactor is None or self._redactor.redact(text) == text

    def filter_ids(self, where: NoteFilter = EVERY_NOTE, among: Sequence[int] | None = None) -> set[int]:
        if not all(self.shows(t) for t in where.tags):
            return set()  # a tag that is a secret is never shown, so no note carries it for agents
        out = self._catalog.filter_ids(where, among) - self._hidden.chunks
        return out - self.unshown_chunks(where.props) if where.props else out

    def note_ids(self, where: NoteFilter = EVERY_NOTE) -> Iterator[int]:
        if not all(self.shows(t) for t in where.tags):
            return iter(())
        out = self.unshown_files(where.props) if where.props else frozenset()
        return (fid for fid in self._catalog.note_ids(where)
                if fid not in self._hidden.files and fid not in out)

    def hints_lone_values(self) -> bool:
        """An agent is never told a value one note alone holds (:meth:`hybrid.store.port.Reading.hints_lone_values`)."""
        return False

    def shows_value(self, key: str, value: str) -> bool:
        """Whether property ``key``'s ``value`` is shown to agents as it is: judged with its key
        (:func:`hybrid.store.agent.values.hides_value`), so ``wifi_password: CorrectHorse42`` is not."""
        if self._redactor is None:
            return True
        from hybrid.store.agent.values import hides_value
        return not hides_value(self._redactor, key, value)

    def shown_rows(self, properties: dict) -> list:
        """The rows of a note's frontmatter agents are shown as they are: not of a key that is a
        secret, nor a value the note's judgement hides (:func:`hybrid.store.agent.values.hidden_in_note`)."""
        from hybrid.store.props import raw_values
        rows = raw_values(properties)
        if self._redactor is None:
            return [(r, raw) for r, _, raw in rows]
        from hybrid.store.agent.values import hidden_in_note
        hidden = hidden_in_note(self._redactor, properties)
        return [(r, raw) for r, k, raw in rows if (k, raw) not in hidden and self.shows(k)]

    def unshown_files(self, props) -> frozenset[int]:
        """The visible notes that pass ``props`` in the ledger but not on the values agents are
        shown: a property value shown redacted never matches, so no filter, comparison
        included, can confirm a guess of it."""
        if self._redactor is None or not props:
            return frozenset()
        key = (tuple(props), self._catalog.data_version())
        got = self._unshown.get(key)
        if got is None:
            from hybrid.store.props import HAS, prop_rows
            ids = [f for f in self._catalog.note_ids(NoteFilter(props=props)) if f not in self._hidden.files]

            def passes(fm: dict, pf) -> bool:
                if pf.op == HAS:  # that the key exists is shown (`key: [redacted secret]`), unless
                    # the key itself is a secret (an access key id as a key): as written, not folded
                    return any(str(k).strip().lower() == pf.key and self.shows(str(k)) for k in fm) \
                        and pf.matches(prop_rows(fm))
                return pf.matches([r for r, _ in self.shown_rows(fm)])
            got = frozenset(fid for fid, fm in self._catalog.note_properties(ids).items()
                            if not all(passes(fm, pf) for pf in props))
            if len(self._unshown) > 32:
                self._unshown.clear()
            self._unshown[key] = got
        return got

    def unshown_chunks(self, props) -> set[int]:
        files = self.unshown_files(props)
        return self._catalog.chunk_ids_of(files) if files else set()

    def data_version(self) -> int:
        return self._catalog.data_version()

    @property
    def keeps_text(self) -> bool:
        return self._catalog.keeps_text

    def note_text(self, path: str) -> str | None:
        """The ledger's text of ``path`` as an agent is shown it: None for a note it may not see
        (as indexed, or as it is now), else redacted whole (no secret cut in two)."""
        fields = self._catalog.file_fields(path)
        if fields is None or self._view.hides(path, *fields) is not None:
            return None
        text = self._catalog.note_text(path)
        if text is None:
            return None
        from hybrid.sources.convert import judged_fields
        if self._view.hides(path, *judged_fields(path, text)) is not None:
            return None
        return self._redactor.redact(text) if self._redactor is not None else text

    def _without_hidden_context(self, rows: list[ChunkRow]) -> list[ChunkRow]:
        """``rows`` less those of pictures holding words of a note that changed on disk since
        it was indexed and is hidden now (:mod:`hybrid.indexing.context`): not served until the
        next index run leaves its words out."""
        from hybrid.sources.markdown import LENT, context_sources
        shown = [r for r in rows if any(k in r.props for k in LENT)]
        if not shown or self._disk is None:
            return rows
        sources = {r.id: context_sources(r.properties) for r in shown}
        ids = self._catalog.file_ids(set().union(*sources.values()))
        with self._hidden.lock:
            gone = stale_verdicts(self._catalog, set(ids.values()), self._view, self._disk, self._hidden.on_disk)
        hidden = {p for p, fid in ids.items() if fid in gone or fid in self._hidden.files}
        hidden |= {p for s in sources.values() for p in s if p not in ids}  # gone from the ledger: unjudged
        return [r for r in rows if not (sources.get(r.id, set()) & hidden)]

    def chunks(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        # judged again on each row's own note: a note made private while this search ran (its
        # chunks newer than the hidden set) is caught here, before any text is looked at
        rows = visible((r for r in self._catalog.chunks(ids).values()
                        if r.id not in self._hidden.chunks), self._view)
        if self._disk is not None and rows:
            # judged again as the files are now where they changed since they were indexed: a
            # note made private with no index run since (no watcher) is not served meanwhile
            with self._hidden.lock:
                gone = stale_verdicts(self._catalog, {r.file_id for r in rows}, self._view,
                                      self._disk, self._hidden.on_disk)
            rows = [r for r in rows if r.file_id not in gone]
            rows = self._without_hidden_context(rows)
        if self._redactor is None:
            return {r.id: r for r in rows}
        done = {r.id: got for r in rows if (got := self._cache.get(r)) is not None}
        todo = [r for r in rows if r.id not in done]
        for r in redact_rows(self._catalog, todo, self._redactor) if todo else ():
            self._cache.put(r)
            done[r.id] = r
        return {r.id: done[r.id] for r in rows}


class HiddenCache:
    """The hidden set per vault, recomputed only when the catalog or the view changed."""

    def __init__(self):
        self._lock = threading.Lock()
        self._by_vault: dict[str, Hidden] = {}

    def get(self, name: str, catalog: Ledger, view: AgentView, model: str | None = None) -> Hidden:
        version = (catalog.data_version(), view.fingerprint, id(catalog), model)
        with self._lock:
            got = self._by_vault.get(name)
            if got is None or got.version != version:
                files = hidden_files(catalog, view)
                # redacted rows stay good while the catalog file and the rules are the same
                same = got is not None and got.version[1:] == version[1:]
                rows = got.rows if same and got is not None else RowCache()
                got = Hidden(files, hidden_chunk_ids(catalog, files), version, rows,
                             redacted=_redacted(catalog, model) if model else None)
                self._by_vault[name] = got
            return got


def _redacted(catalog: Ledger, model: str) -> Redacted:
    """The redacted chunks of ``catalog`` (their vectors under ``model`` loaded when needed)."""
    from hybrid.store.agent.vectors import Redacted
    return Redacted(catalog.redacted_ids(), lambda: catalog.redacted_vectors(model))
