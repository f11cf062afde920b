"""The public Python API: ``hybrid.open()`` → :class:`Hybrid`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hybrid.app.registry import Registry
from hybrid.core.config import Config, Vault, load_config, override
from hybrid.core.errors import HybridError, IndexCorrupt, PathRefused, VaultError
from hybrid.embedders import Embedder, Options, make_embedder, make_reranker, options_from, spec_id
from hybrid.retrieval.context import with_context
from hybrid.retrieval.filters import check_filters, resolve_props
from hybrid.retrieval.graph import GraphCache, LinkGraph
from hybrid.retrieval.pipeline import run_search
from hybrid.retrieval.request import SearchRequest, as_request
from hybrid.retrieval.result import SearchResult
from hybrid.store import backend, open_store
from hybrid.store.agent import view as agent_view
from hybrid.store.agent.store import AgentStore, HiddenCache, OnDisk
from hybrid.store.agent.view import AgentView, Hidden
from hybrid.store.base import VacuumReport
from hybrid.store.port import Searchable, Store

# What only indexing, reading a note, `status` or a remote model need is imported where it is
# used: a search (a cold `hybrid query`, above all a lexical one) does not pay for it.
if TYPE_CHECKING:
    from hybrid.app.coverage import FileCoverage
    from hybrid.app.reader import NoteText
    from hybrid.app.refs import Ref
    from hybrid.app.status import VaultStatus
    from hybrid.indexing.report import IndexReport, Progress

log = logging.getLogger("hybrid")
AGENT_REBUILD_WAIT = 10.0  # seconds an agent's call waits for the writer lock to rebuild its view


EmbedderFactory = Callable[[str], Embedder]
RerankerFactory = Callable[[str], Any]


class Hybrid(Registry):
    """A handle on the configured vaults. Keeps embedders and open indexes warm between calls,
    so a long-lived process pays model loading once.

    Models can be injected instead of built from the settings: ``embedders`` are instances used
    for every vault whose embedder spec resolves to their ``id``; ``embedder_factory(spec)``
    builds any other (default: the registry in :mod:`hybrid.embedders`); ``reranker`` is a
    cross-encoder instance (used whatever ``rerank_model`` says) or a factory ``(spec) ->
    reranker``. Tests, ``hybrid eval`` and benchmarks share loaded models this way."""

    def __init__(self, config: Config, overrides: dict | None = None, *,
                 embedders: Iterable[Embedder] = (), embedder_factory: EmbedderFactory | None = None,
                 reranker: Any = None):
        self.config = config
        self._overrides = dict(overrides or {})
        self._embedders: dict[str, Embedder] = {e.id: e for e in embedders}
        self._embedder_factory = embedder_factory
        self._stores: dict[str, Store] = {}
        self._rerankers: dict[str, Any] = {}
        self._reranker = reranker
        self._hidden = HiddenCache()
        # per vault: the fingerprint of this handle's own agent settings when it last indexed the
        # vault or first looked (agent_view: a change since is imposed, as for a local vault)
        self._own_views: dict[str, str] = {}
        self._graphs = GraphCache()  # link graphs of the open ledgers (related notes, backlinks)
        self._lock = threading.RLock()

    @property
    def settings(self):
        """This handle's settings (frozen; change them with :meth:`override`)."""
        return self.config.settings

    def override(self, **settings: Any) -> None:
        """Change settings for this handle only (checked; ConfigError for a bad one). They
        outlive a reload of the config file, as ``hybrid.open(**settings)`` ones do."""
        with self._lock:
            override(self.config, **settings)
            self._overrides.update(settings)

    # --- vaults ---------------------------------------------------------------------------
    @property
    def vaults(self) -> list[Vault]:
        self.refresh()
        return self.config.all_vaults()

    def refresh(self) -> bool:
        """Re-read the registry when another process changed the config file (a long-lived
        server must see vaults added, removed, renamed or moved since it started). Stores of
        vaults that are gone or point elsewhere are closed. Returns whether anything changed.
        A config that became invalid keeps the last good one, with a warning."""
        from hybrid.core.config import ConfigError, file_stat
        if file_stat(self.config.path) == self.config.loaded_stat:
            return False
        with self._lock:
            if file_stat(self.config.path) == self.config.loaded_stat:
                return False
            try:
                fresh = load_config(self.config.path.parent, data=self.config.data)
                override(fresh, **self._overrides)
            except ConfigError as exc:
                log.warning("config changed but cannot be used (%s); keeping the previous one", exc)
                self.config.loaded_stat = file_stat(self.config.path)
                return False
            self._adopt(fresh)
            return True

    def _adopt(self, fresh: Config) -> None:
        """Take ``fresh``'s vaults (and file settings), closing stores whose vault changed."""
        for name in list(self._stores):
            old = self.config.vaults.get(name)
            if fresh.vaults.get(name) != old:
                self._stores.pop(name).close()
        self.config.vaults = fresh.vaults
        self.config.loaded_stat = fresh.loaded_stat
        self.config.settings = fresh.settings  # with this handle's overrides (see refresh)

    def _close_store(self, name: str) -> None:
        with self._lock:
            store = self._stores.pop(name, None)
            if store:
                store.close()

    def embedder(self, spec: str) -> Embedder:
        """The embedder for ``spec``: an injected one with that id, else built once (by the
        injected factory or the registry) and kept."""
        with self._lock:
            key = spec_id(spec)
            if key not in self._embedders:
                if self._embedder_factory is not None:
                    self._embedders[key] = self._embedder_factory(spec)
                else:
                    from hybrid.app import remote
                    from hybrid.embedders.remote import destinations
                    remote.require(self.config, destinations(spec, self._options()))
                    self._embedders[key] = make_embedder(spec, options=self._options())
            return self._embedders[key]

    def _options(self) -> Options:
        """The model factories' options: the settings, and the redactor for text a model server
        elsewhere is sent (:mod:`hybrid.embedders.remote`)."""
        return options_from(self.config.settings, redact=_redact)

    # --- indexing -------------------------------------------------------------------------
    def index(self, vaults: Sequence[str] | None = None, *, reembed: bool = False, wait: float = 0,
              progress: Progress | None = None, keep_going: bool = False,
              fetch: str | None = None) -> list[IndexReport]:
        """Index the named vaults (default: all). One vault that fails (its folder missing,
        another indexer at work) never stops the others: every vault is tried, then the first
        failure is raised; with ``keep_going`` nothing is raised and a failed vault's report
        carries its ``error`` instead. ``fetch`` (bookmarks sources only; it goes online):
        ``"new"`` fetches the pages not fetched yet (and those that failed before), ``"all"``
        fetches every page again."""
        self.refresh()
        from hybrid.indexing.report import IndexReport
        reports: list[IndexReport] = []
        first: HybridError | None = None
        for vault in self.config.select(vaults):
            try:
                reports.append(self._index_one(vault, reembed, wait, progress, fetch))
            except HybridError as exc:
                first = first or exc
                reports.append(IndexReport(vault.name, error=str(exc)))
        if first is not None and not keep_going:
            raise first
        return reports

    def _index_one(self, vault: Vault, reembed: bool, wait: float,
                   progress: Progress | None, fetch: str | None = None) -> IndexReport:
        if reembed:  # the files behind an open store are about to be replaced wholesale
            self._close_store(vault.name)
        from hybrid.indexing.indexer import index_vault
        report = index_vault(vault, self.embedder(vault.embedder), self.config.settings,
                             reembed=reembed, wait=wait, progress=progress, fetch=fetch)
        if not report.error:  # its agent settings are the vault's now (a shared store keeps them)
            self._own_views[vault.name] = AgentView.of(vault, self.config.settings).fingerprint
        return report

    def vacuum(self, vaults: Sequence[str] | None = None, *, wait: float = 0) -> list[VacuumReport]:
        """Reclaim disk space in the named vaults' indexes (default: all): unused cached
        embeddings, tantivy's deleted documents, SQLite's free pages and WAL. Returns one
        report per vault (rows removed, bytes before and after). Takes the writer lock, waiting
        up to ``wait`` seconds for a running `hybrid index`."""
        self.refresh()
        out = []
        for vault in self.config.select(vaults):
            self._close_store(vault.name)  # this handle's own connection must not pin old pages
            out.append(backend(vault).vacuum(vault, wait))
        return out

    # --- querying -------------------------------------------------------------------------
    def _store(self, vault: Vault) -> Store:
        with self._lock:
            store = self._stores.get(vault.name)
            if store is not None and store.stale():  # re-embedded or rebuilt since it was opened
                self._stores.pop(vault.name).close()
                store = None
            if store is None:
                store = open_store(vault)
                self._stores[vault.name] = store
            return store

    def search(self, query: str | SearchRequest, *, agent: bool = False, **options: Any) -> SearchResult:
        """Search and return the answer: up to ``top_k`` notes, best first, each with its best
        passage and up to 3 more of its passages (``passages=True``: up to ``top_k`` passages) —
        a list of hits, by note, with ``.notes`` grouping them; its ``corrections`` and ``parsed``
        say how the query was read, ``relevant`` whether any hit is at least fair (see
        :class:`~hybrid.retrieval.result.SearchResult` and :mod:`hybrid.retrieval.notes`).
        ``query`` is the query text with the options as keywords (``top_k=8``,
        ``mode="hybrid"``, ``vaults=None`` for all, ``folders``, ``tags``, ``since``, ``rerank``,
        ``exclude_folders``), or a ready :class:`~hybrid.retrieval.request.SearchRequest`. Arguments are checked against
        :mod:`hybrid.retrieval.limits` when the request is made (BadSearchArgs: wrong type, ``top_k``
        outside 1..MAX_TOP_K, query over MAX_QUERY_CHARS), so every entry point is. With
        ``agent`` the search sees the vaults as an agent does (:mod:`hybrid.store.agent.view`)."""
        request = as_request(query, options)
        request.parsed  # noqa: B018 - a query syntax error is reported before any index opens
        self.refresh()  # a long-lived server sees vaults registered since it started
        targets: list[tuple[Vault, Searchable]] = [(v, self._agent_store(v) if agent else self._store(v))
                                                   for v in self.config.select(request.vaults)]
        # words that read as property filters (status:done) are filters where some note has
        # the property; a folder, tag, date or property filter that no note passes says so
        # (NoMatchingNotes), rather than an empty list that reads as "nothing relevant"
        request = resolve_props(request, [s for _, s in targets])
        check_filters([s for _, s in targets], request.filters)
        if request.parsed.listing:  # filters alone (`tag:x`): the notes passing them, newest first
            from hybrid.retrieval.listing import list_notes
            with self._lock:
                return with_context(list_notes(targets, request, self.config.settings), targets, request)
        # Resolved here, on the caller's thread: run_search embeds the query on a worker
        # thread, which must not need this handle's lock (held around run_search).
        embedders = self._query_embedders(targets) if request.mode != "lexical" else {}

        def query_vector(embedder_id: str, text: str, reach: bool = False):
            emb = embedders[embedder_id]
            if reach and hasattr(emb, "reach_query"):  # a mix: English questions reach other languages
                return emb.reach_query(text)
            return emb.embed_query(text)

        rescore = self.reranker().scores if request.rerank else None
        # One search at a time per handle: SQLite connections and the tantivy searcher are
        # shared, and a server calls this from several threads.
        with self._lock:
            return with_context(run_search(targets, request, self.config.settings, query_vector, rescore),
                                targets, request)

    def _agent_store(self, vault: Vault) -> AgentStore:
        """Vault ``vault`` as agents see it: its agent view brought in step with the agent
        settings first (AgentViewStale when that cannot be done now and the store cannot
        serve meanwhile: nothing is served from an index built for other settings)."""
        store = self._store(vault)
        view = self.agent_view(vault, store)
        if not store.agent_view_current(view):
            self._refresh_agent_view(vault, store, view)
        hidden = self._hidden.get(vault.name, store.catalog, view, store.embedder_id)
        disk = OnDisk(vault.path, self.settings.max_file_bytes) \
            if vault.is_folder and vault.path.is_dir() else None
        return AgentStore(store, view, self._redactor(view), hidden, disk)

    def _refresh_agent_view(self, vault: Vault, store: Store, view: AgentView) -> None:
        """Bring the agent view in step with changed agent settings (or an index made before the
        agent view existed, or notes written under other redaction rules). Where the vault's
        documents are, that is an incremental index run, whose discovery also drops links into
        newly excluded folders; whatever is left (the documents not here), the store redoes
        from its ledger as a writer. While an indexer holds the vault, a store that can leave
        the stale notes out meanwhile serves (they stay hidden); another says so."""
        from hybrid.core.errors import IndexLocked
        try:
            if store.ledger.get_meta(agent_view.META_KEY) != view.fingerprint and vault.path.exists():
                try:
                    self._index_one(vault, False, AGENT_REBUILD_WAIT, None)
                    return
                except VaultError:
                    pass  # the documents are not here: the ledger holds all there is
            wait = 0 if store.serves_stale_agent_view else AGENT_REBUILD_WAIT
            store.refresh_agent_view(view, self._redactor(view), wait)
        except IndexLocked:
            if store.serves_stale_agent_view:
                return
            raise agent_view.AgentViewStale(
                f"vault {vault.name!r}: the agent view is out of step with the agent settings and "
                f"an indexer is at work; try again when it finishes") from None

    def agent_view(self, v: Vault, store: Store | None = None) -> AgentView:
        """What agents may see of vault ``v``: the settings its indexer wrote into a shared
        store, which every server follows (:func:`agent_view.in_force`; a local vault: this
        machine's). Where the vault's documents are and this handle's own settings changed
        since it last indexed the vault or first looked (a config reload, ``override``), its
        own apply at once, as for a local vault: the agent view is then redone by an index run,
        which makes them the vault's. Settings that merely differ never trigger one, so two
        servers with different configs do not re-index in turn."""
        from hybrid.app import reader
        own = AgentView.of(v, self.settings)
        if self._own_views.setdefault(v.name, own.fingerprint) != own.fingerprint and reader.documents_here(v):
            return own
        return agent_view.in_force(v, self.settings, (store or self._store(v)).ledger)

    def agent_hidden_now(self, v: Vault) -> tuple[AgentView, Hidden]:
        """Vault ``v``'s agent view and the notes it hides as the ledger records them (cached
        per ledger state), without building an agent store."""
        store = self._store(v)
        view = self.agent_view(v, store)
        return view, self._hidden.get(v.name, store.catalog, view, store.embedder_id)

    def _redactor(self, view: AgentView):
        return agent_view.agent_redactor() if view.redact else None

    def _query_embedders(self, targets) -> dict[str, Embedder]:
        """The embedder of each distinct model the targets were indexed with; EmbedderMismatch
        when the configured one is another model."""
        embedders: dict[str, Embedder] = {}
        for vault, store in targets:
            eid = store.embedder_id
            if eid and eid not in embedders:
                emb = self.embedder(vault.embedder)
                part = getattr(emb, "part", None)
                if emb.id != eid and part is not None and part(eid) is not None:
                    # indexed by one part of the mix (before `hybrid index` upgrades it): that
                    # part answers meanwhile
                    emb = part(eid)
                if emb.id != eid:
                    from hybrid.core.errors import EmbedderMismatch
                    raise EmbedderMismatch(
                        f"vault {vault.name!r} was indexed with {eid}, but the configured "
                        f"embedder is {emb.id}; run `hybrid index --vault {vault.name} --reembed`")
                embedders[eid] = emb
        return embedders

    def reranker(self):
        """The reranker: the injected one, else the configured ``rerank_model`` (loaded
        once); ModelUnavailable names the setting."""
        given = self._reranker
        if given is not None and hasattr(given, "scores") and not isinstance(given, type):
            return given  # an instance, not a factory
        spec = self.config.settings.rerank_model
        from hybrid.app import remote
        from hybrid.embedders.remote import destinations
        options = self._options()
        found = destinations(spec, options, rerank=True)  # from the settings alone: no I/O
        key = " ".join([spec, *(d.url for d in found)])  # another server, another reranker
        with self._lock:
            if key not in self._rerankers:
                if given is None:
                    remote.require(self.config, found)
                self._rerankers[key] = (given or (lambda s: make_reranker(s, options=options)))(spec)
            return self._rerankers[key]

    def get(self, ref: str | Ref, vault: str | None = None, start: int | None = None,
            end: int | None = None, max_chars: int | None = None, *, agent: bool = False,
            vault_hint: str = "--vault", links: bool = True) -> NoteText:
        """Read lines of a note: from its file, or where the vault's folder is not on this machine
        and its store keeps the texts (team mode), from the database. ``ref`` is any form
        :mod:`hybrid.app.refs` accepts: a path (``.md`` optional), ``path:START-END``, a search hit's citation
        ``vault:path:START-END`` or ``uri``, a note title, file name or alias, or a wikilink
        ``[[Note#Heading]]`` / ``Note#^block``. Anything that resolves outside the vault
        (``..``, absolute paths, symlinks out) is refused. With ``agent``: only an indexed note
        an agent may see, its secrets redacted; a refusal says the same whether or not the note
        exists (see :mod:`hybrid.app.reader`). ``vault_hint`` names the vault argument in errors.
        A :class:`~hybrid.app.refs.Ref` is taken as it is (a file with ``#`` in its name, by path).
        With ``links`` (the default) the note's ``backlinks`` and resolved ``links`` come with it
        (None when it is not indexed; an agent's only name notes it may see: :mod:`hybrid.app.links`)."""
        from hybrid.app import reader
        parsed, v = self.resolve_ref(ref, vault, vault_hint)
        from hybrid.sources.sandbox import convert_limits
        limit, pdf_limit = self.config.settings.max_file_bytes, self.config.settings.max_pdf_bytes
        bounds = convert_limits(self.settings)
        if not agent:
            note = reader.read_note(v, parsed, start, end, max_chars, limit, convert=bounds,
                                    catalog=self.catalog_or_none(v), max_pdf_bytes=pdf_limit)
        else:
            view = self.agent_view(v)
            note = reader.read_note(v, parsed, start, end, max_chars, limit, max_pdf_bytes=pdf_limit,
                                    convert=bounds,
                                    agent=reader.AgentCheck(view, self._store(v).catalog, self._redactor(view)))
        catalog = self.catalog_or_none(v) if links and v.is_folder else None
        if catalog is not None:  # who links here, and what it links to (hybrid.app.links)
            seen = None
            if agent:
                view, hidden = self.agent_hidden_now(v)
                seen = (view, hidden, self._redactor(view))
            note.attach(reader.links_of(v, note.path, self.link_graph(v), catalog, limit, pdf_limit, seen))
        return note

    def link_graph(self, v: Vault) -> LinkGraph:
        """The owner's link graph of vault ``v`` (:mod:`hybrid.retrieval.graph`), built again
        only when its ledger changed."""
        return self._graphs.get(self._store(v).catalog)

    def resolve_ref(self, ref: str | Ref, vault: str | None = None,
                    vault_hint: str = "--vault") -> tuple[Ref, Vault]:
        """The parts of note reference ``ref`` and the vault it is in (its ``vault:`` prefix or
        obsidian:// folder, else ``vault``, else the only one registered)."""
        from hybrid.app.refs import parse_ref
        from hybrid.retrieval.limits import check_texts
        check_texts(ref if isinstance(ref, str) else ref.path, "the note reference")  # a lone surrogate
        self.refresh()
        parsed = parse_ref(ref, self.config.vaults) if isinstance(ref, str) else ref
        if parsed.vault_folder is not None and parsed.vault is None:
            parsed.vault = next((v.name for v in self.config.all_vaults()
                                 if v.path.name == parsed.vault_folder), None)
        if parsed.vault and vault and parsed.vault != vault:
            raise PathRefused(f"{ref!r} names vault {parsed.vault!r}, but {vault_hint} says {vault!r}")
        return parsed, self.vault_for(vault or parsed.vault, hint=vault_hint)

    def related(self, ref: str | Ref, vault: str | None = None, *, top_k: int = 10, agent: bool = False,
                vault_hint: str = "--vault"):
        """The notes most related to the note ``ref`` (any reference :meth:`get` accepts), best
        first, each with why: shared meaning (from the vectors already indexed: nothing is
        embedded), links in either direction, shared tags, notes linking to both
        (:mod:`hybrid.retrieval.related`). Returns a
        :class:`~hybrid.retrieval.related.RelatedResult`. With ``agent``: only notes an agent
        may see, titles and snippets redacted; a note it may not see is refused as
        :meth:`get` refuses it."""
        from hybrid.app.related import find_related
        return find_related(self, ref, vault, top_k=top_k, agent=agent, vault_hint=vault_hint)

    @property
    def tags(self):
        """Tag suggestions approved by a person (:class:`hybrid.app.tags.TagDesk`): suggest,
        review queue, accept (the one write into a note's front block), reject."""
        from hybrid.app.tags import TagDesk
        return TagDesk(self)

    def catalog_or_none(self, v: Vault):
        """The vault's catalog when it is indexed (titles resolve then), else None."""
        try:
            return self._store(v).catalog
        except (VaultError, IndexCorrupt):
            return None

    def vault_for(self, name: str | None, hint: str = "--vault") -> Vault:
        """Vault ``name``, or the only one registered (VaultError names them when several are,
        and ``hint``: how the caller passes a vault)."""
        self.refresh()
        if name is not None:
            return self.config.vault(name)
        vaults = self.config.select(None)
        if len(vaults) > 1:
            names = ", ".join(v.name for v in vaults)
            raise VaultError(f"several vaults are registered ({names}): name one with {hint}")
        return vaults[0]

    def status(self, *, agent: bool = False) -> list[VaultStatus]:
        """One row per vault. With ``agent``: as an agent sees it (counts of the notes it may
        see; nothing about the others, nor the size on disk)."""
        from hybrid.app import remote
        from hybrid.app.status import vault_status
        counts = (lambda v: self.agent_counts(v.name)) if agent else None
        vaults = self.vaults
        rows = [vault_status(v, self.settings, agent_counts=counts) for v in vaults]
        if not agent:
            for row, v in zip(rows, vaults):
                found = remote.vault_destinations(self.config, v)
                pending = set(remote.unconfirmed(self.config, found))
                row.sends_to = [remote.describe(d, d in pending) for d in found]
        return rows

    def files(self, name: str) -> Iterator[FileCoverage]:
        """Every file of vault ``name`` and what became of it, streamed (the owner's view:
        :func:`hybrid.app.coverage.file_coverage`)."""
        from hybrid.app.coverage import file_coverage
        return file_coverage(self.config.vault(name), self.settings)

    def agent_hidden(self, name: str) -> dict[str, list[str]]:
        """The notes of vault ``name`` hidden from agents, by why (see
        :func:`hybrid.store.agent.view.hidden_report`)."""
        v = self.config.vault(name)
        return agent_view.hidden_report(self._store(v).catalog, self.agent_view(v))

    def agent_counts(self, name: str) -> tuple[int, int]:
        """(notes, chunks) of vault ``name`` that agents may see."""
        v = self.config.vault(name)
        return agent_view.visible_counts(self._store(v).catalog, self.agent_view(v))

    def close(self) -> None:
        """Close the open indexes and stop the converter worker (started again when needed)."""
        from hybrid.sources.sandbox import shutdown
        with self._lock:
            for s in self._stores.values():
                s.close()
            self._stores.clear()
        shutdown()


def _redact(text: str) -> str:
    """``text`` as a model server elsewhere may be sent it, redacted by the agent redactor
    (loaded on first use: a search with a local model never needs it)."""
    return agent_view.agent_redactor().redact(text)


def open(home: str | Path | None = None, *, embedders: Iterable[Embedder] = (),  # noqa: A001
         embedder_factory: EmbedderFactory | None = None, reranker: Any = None,
         **settings: Any) -> Hybrid:
    """Open hybrid with the config under ``home`` (default: ``HYBRID_HOME`` or the platform
    config dir). Keyword arguments override settings for this handle only; ``embedders``,
    ``embedder_factory`` and ``reranker`` inject models (see :class:`Hybrid`)."""
    config = load_config(Path(home) if home is not None else None)
    override(config, **settings)
    return Hybrid(config, settings, embedders=embedders, embedder_factory=embedder_factory,
                  reranker=reranker)
