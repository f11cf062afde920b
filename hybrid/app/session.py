"""A handle's open state, which the app modules receive: the owner's stores of the vaults, the
agent stores made over them, the redactor, the link graphs, and the lock that lets one reader at a
time use the shared connections (:class:`hybrid.app.api.Hybrid` is the facade over it; related
notes, the tag desk, tests and benchmarks use it directly).

Stores open on first use and stay open; one whose index was rebuilt or re-embedded since is
opened again. The agent store of a vault is made per call over the owner's store, its view
brought in step with the agent settings first (:meth:`Session.agent_store`)."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from hybrid.core.config import Config, Vault
from hybrid.core.errors import IndexCorrupt, StoreUnavailable, VaultError
from hybrid.store import open_store
from hybrid.store.agent import view as agent_view
from hybrid.store.agent.store import AgentStore, HiddenCache, OnDisk
from hybrid.store.agent.view import AgentView, Hidden
from hybrid.store.graph import GraphCache, LinkGraph
from hybrid.store.port import Searchable, Store

if TYPE_CHECKING:
    from hybrid.app.models import Models
    from hybrid.indexing.report import IndexReport, Progress

AGENT_REBUILD_WAIT = 10.0  # seconds an agent's call waits for the writer lock to rebuild its view


log = logging.getLogger("hybrid")

class Session:
    """The open stores of one handle and what agents see of them. ``lock`` is held by whoever
    reads through the stores (a search, a related-notes call): SQLite connections and the
    tantivy searcher are shared, and a server calls in from several threads."""

    def __init__(self, config: Config, models: Models, lock: threading.RLock):
        self.config = config
        self.models = models
        self.lock = lock
        self._stores: dict[str, Store] = {}
        self._hidden = HiddenCache()
        # per vault: the fingerprint of this handle's own agent settings when it last indexed the
        # vault or first looked (agent_view: a change since is imposed, as for a local vault)
        self._own_views: dict[str, str] = {}
        self._graphs = GraphCache()  # link graphs of the open ledgers (related notes, backlinks)

    @property
    def settings(self):
        return self.config.settings

    # --- owner's stores ---------------------------------------------------------------------
    def store(self, vault: Vault) -> Store:
        """Vault ``vault``'s store, opened once (VaultError: not indexed yet)."""
        with self.lock:
            store = self._stores.get(vault.name)
            if store is not None and store.stale():  # re-embedded or rebuilt since it was opened
                self._stores.pop(vault.name).close()
                store = None
            if store is None:
                store = open_store(vault)
                self._stores[vault.name] = store
            return store

    def catalog_or_none(self, v: Vault):
        """The vault's catalog when it is indexed (titles resolve then), else None."""
        try:
            return self.store(v).catalog
        except (VaultError, IndexCorrupt):
            return None

    def link_graph(self, v: Vault) -> LinkGraph:
        """The owner's link graph of vault ``v`` (:mod:`hybrid.store.graph`), built again
        only when its ledger changed."""
        return self._graphs.get(self.store(v).catalog)

    def close_store(self, name: str) -> None:
        with self.lock:
            store = self._stores.pop(name, None)
            if store:
                store.close()

    def adopt(self, fresh: Config) -> None:
        """Take ``fresh``'s vaults (and file settings), closing stores whose vault changed."""
        for name in list(self._stores):
            old = self.config.vaults.get(name)
            if fresh.vaults.get(name) != old:
                self._stores.pop(name).close()
        self.config.vaults = fresh.vaults
        self.config.loaded_stat = fresh.loaded_stat
        self.config.settings = fresh.settings  # with this handle's overrides (see Hybrid.refresh)

    def close(self) -> None:
        with self.lock:
            for s in self._stores.values():
                s.close()
            self._stores.clear()

    # --- indexing -------------------------------------------------------------------------
    def index_one(self, vault: Vault, reembed: bool, wait: float, progress: Progress | None,
                  fetch: str | None = None) -> IndexReport:
        """One vault's index run; on success its agent settings are the vault's (a shared store
        keeps them)."""
        if reembed:  # the files behind an open store are about to be replaced wholesale
            self.close_store(vault.name)
        from hybrid.indexing.indexer import index_vault
        report = index_vault(vault, self.models.embedder(vault.embedder), self.settings,
                             reembed=reembed, wait=wait, progress=progress, fetch=fetch)
        if not report.error:
            self._own_views[vault.name] = AgentView.of(vault, self.settings).fingerprint
        return report

    # --- what agents see ------------------------------------------------------------------
    def redactor(self, view: AgentView):
        """The redactor of agent view ``view`` (None where it does not redact)."""
        return agent_view.agent_redactor() if view.redact else None

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
        return agent_view.in_force(v, self.settings, (store or self.store(v)).ledger)

    def agent_hidden_now(self, v: Vault) -> tuple[AgentView, Hidden]:
        """Vault ``v``'s agent view and the notes it hides as the ledger records them (cached
        per ledger state), without building an agent store."""
        store = self.store(v)
        view = self.agent_view(v, store)
        return view, self._hidden.get(v.name, store.catalog, view, store.embedder_id)

    def searchable(self, vaults: list[Vault], agent: bool,
                   named: bool) -> tuple[list[tuple[Vault, Searchable]], list[str]]:
        """The stores a search over ``vaults`` reads (an agent's views with ``agent``), and a
        notice for each left out: a store that cannot be reached (a database or Milvus server
        that is down) is skipped with one logged line when the search is over every vault, so
        the others still answer; one the request ``named`` raises its own error, as does the
        last one standing."""
        targets: list[tuple[Vault, Searchable]] = []
        down: list[tuple[Vault, StoreUnavailable]] = []
        for v in vaults:
            try:
                targets.append((v, self.agent_store(v) if agent else self.store(v)))
            except StoreUnavailable as exc:
                if named:
                    raise
                down.append((v, exc))
        if down and not targets:
            raise down[0][1]
        for v, problem in down:
            log.warning("vault %s skipped: %s", v.name, problem)
        return targets, [f"vault {v.name!r} was not searched: {problem}" for v, problem in down]

    def agent_store(self, vault: Vault) -> AgentStore:
        """Vault ``vault`` as agents see it: its agent view brought in step with the agent
        settings first (AgentViewStale when that cannot be done now and the store cannot
        serve meanwhile: nothing is served from an index built for other settings)."""
        store = self.store(vault)
        view = self.agent_view(vault, store)
        if not store.agent_view_current(view):
            self._refresh_agent_view(vault, store, view)
        hidden = self._hidden.get(vault.name, store.catalog, view, store.embedder_id)
        disk = OnDisk(vault.path, self.settings.max_file_bytes) \
            if vault.is_folder and vault.path.is_dir() else None
        return AgentStore(store, view, self.redactor(view), hidden, disk)

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
                    self.index_one(vault, False, AGENT_REBUILD_WAIT, None)
                    return
                except VaultError:
                    pass  # the documents are not here: the ledger holds all there is
            wait = 0 if store.serves_stale_agent_view else AGENT_REBUILD_WAIT
            store.refresh_agent_view(view, self.redactor(view), wait)
        except IndexLocked:
            if store.serves_stale_agent_view:
                return
            raise agent_view.AgentViewStale(
                f"vault {vault.name!r}: the agent view is out of step with the agent settings and "
                f"an indexer is at work; try again when it finishes") from None
