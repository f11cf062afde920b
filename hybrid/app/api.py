"""The public Python API: ``hybrid.open()`` → :class:`Hybrid`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hybrid.app.models import EmbedderFactory, Models, RerankerFactory
from hybrid.app.registry import Registry
from hybrid.app.session import Session
from hybrid.core.config import Config, Vault, load_config, override
from hybrid.core.errors import HybridError, PathRefused, VaultError
from hybrid.embedders import Embedder
from hybrid.retrieval.hits import Hit
from hybrid.retrieval.request import SearchRequest, as_request
from hybrid.retrieval.result import SearchResult
from hybrid.retrieval.search import search as assembled_search
from hybrid.store import backend
from hybrid.store import explain as explain_store_error
from hybrid.store.agent import view as agent_view
from hybrid.store.agent.view import AgentView, Hidden
from hybrid.store.base import VacuumReport
from hybrid.store.graph import LinkGraph
from hybrid.store.port import Store

# What only indexing, reading a note, `status` or a remote model need is imported where it is
# used: a search (a cold `hybrid query`, above all a lexical one) does not pay for it.
if TYPE_CHECKING:
    from hybrid.app.coverage import FileCoverage
    from hybrid.app.reader import NoteText
    from hybrid.app.refs import Ref
    from hybrid.app.status import VaultStatus
    from hybrid.indexing.report import IndexReport, Progress

__all__ = ["EmbedderFactory", "Hybrid", "RerankerFactory", "open"]
log = logging.getLogger("hybrid")


class Hybrid(Registry):
    """A handle on the configured vaults. Keeps embedders and open indexes warm between calls,
    so a long-lived process pays model loading once: its :class:`~hybrid.app.session.Session`
    (``session``: the open stores, what agents see of them, the lock) and its
    :class:`~hybrid.app.models.Models` (``models``), which the app modules receive.

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
        lock = threading.RLock()
        self.models = Models(config, lock, embedders=embedders, embedder_factory=embedder_factory,
                             reranker=reranker)
        self.session = Session(config, self.models, lock)

    @property
    def settings(self):
        """This handle's settings (frozen; change them with :meth:`override`)."""
        return self.config.settings

    def override(self, **settings: Any) -> None:
        """Change settings for this handle only (checked; ConfigError for a bad one). They
        outlive a reload of the config file, as ``hybrid.open(**settings)`` ones do."""
        with self.session.lock:
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
        with self.session.lock:
            if file_stat(self.config.path) == self.config.loaded_stat:
                return False
            try:
                fresh = load_config(self.config.path.parent, data=self.config.data)
                override(fresh, **self._overrides)
            except ConfigError as exc:
                log.warning("config changed but cannot be used (%s); keeping the previous one", exc)
                self.config.loaded_stat = file_stat(self.config.path)
                return False
            self.session.adopt(fresh)
            return True

    def embedder(self, spec: str) -> Embedder:
        """The embedder for ``spec`` (:meth:`hybrid.app.models.Models.embedder`)."""
        return self.models.embedder(spec)

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
                reports.append(self.session.index_one(vault, reembed, wait, progress, fetch))
            except HybridError as exc:
                first = first or exc
                reports.append(IndexReport(vault.name, error=str(exc)))
        if first is not None and not keep_going:
            raise first
        return reports

    def vacuum(self, vaults: Sequence[str] | None = None, *, wait: float = 0) -> list[VacuumReport]:
        """Reclaim disk space in the named vaults' indexes (default: all): unused cached
        embeddings, tantivy's deleted documents, SQLite's free pages and WAL, OCR results no
        picture of the vault uses now. Returns one
        report per vault (rows removed, bytes before and after). Takes the writer lock, waiting
        up to ``wait`` seconds for a running `hybrid index`."""
        self.refresh()
        out = []
        for vault in self.config.select(vaults):
            self.session.close_store(vault.name)  # this handle's own connection must not pin old pages
            out.append(backend(vault).vacuum(vault, wait))
        return out

    # --- querying -------------------------------------------------------------------------
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
        ``agent`` the search sees the vaults as an agent does (:mod:`hybrid.store.agent.view`).
        The search itself is :func:`hybrid.retrieval.search.search`."""
        request = as_request(query, options)
        request.parsed  # noqa: B018 - a query syntax error is reported before any index opens
        self.refresh()  # a long-lived server sees vaults registered since it started
        session = self.session
        targets, skipped = session.searchable(self.config.select(request.vaults), agent, bool(request.vaults))
        # One search at a time per handle (the lock): SQLite connections and the tantivy
        # searcher are shared, and a server calls this from several threads.
        try:
            result = assembled_search(targets, request, self.settings, embedders=self.models.for_targets,
                                      reranker=self.reranker, guard=session.lock)
        except Exception as exc:  # a store's driver failing mid-search (its server went away)
            problem = explain_store_error(exc)
            if problem is None:
                raise
            raise problem from None
        result.notices += skipped
        self._embedded_in(result, agent)
        return result

    def _embedded_in(self, hits: Sequence[Hit], agent: bool) -> None:
        """Give each image hit the notes that embed it (:func:`hybrid.app.reader.embedded_in`;
        an agent's: only notes it may see)."""
        from hybrid.sources import KIND
        wanted: dict[str, list[Hit]] = {}
        for hit in hits:
            if hit.source in KIND and KIND[hit.source].boxed:
                wanted.setdefault(hit.vault, []).append(hit)
        if not wanted:
            return
        from hybrid.app.reader import embedded_in
        for name, group in wanted.items():
            v = self.config.vault(name)
            catalog = self.catalog_or_none(v)
            if catalog is None or not v.is_folder:
                continue
            seen = None
            if agent:
                view, hidden = self.agent_hidden_now(v)
                seen = (view, hidden, None)
            found = embedded_in(v, sorted({h.path for h in group}), self.link_graph(v), catalog,
                                self.config.settings.max_file_bytes, seen)
            for hit in group:
                hit.embedded_in = found.get(hit.path, [])

    def agent_view(self, v: Vault, store: Store | None = None) -> AgentView:
        """What agents may see of vault ``v`` (:meth:`hybrid.app.session.Session.agent_view`)."""
        return self.session.agent_view(v, store)

    def agent_hidden_now(self, v: Vault) -> tuple[AgentView, Hidden]:
        """Vault ``v``'s agent view and the notes it hides as the ledger records them (cached
        per ledger state), without building an agent store."""
        return self.session.agent_hidden_now(v)

    def reranker(self):
        """The reranker: the injected one, else the configured ``rerank_model`` (loaded
        once); ModelUnavailable names the setting."""
        return self.models.reranker()

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
        if v.is_folder:  # an image's or a scan's text as its index read it (its OCR kept, hybrid.sources.ocr)
            from hybrid.core.lang import LANGUAGES_META
            from hybrid.sources.ocr import PLAN_META, vault_plan, with_plan
            catalog = self.catalog_or_none(v)
            held, kept = (catalog.get_meta(LANGUAGES_META), catalog.get_meta(PLAN_META)) if catalog is not None \
                else (None, None)
            bounds = with_plan(bounds, vault_plan(v, held, kept))
        if not agent:
            note = reader.read_note(v, parsed, start, end, max_chars, limit, convert=bounds,
                                    catalog=self.catalog_or_none(v), max_pdf_bytes=pdf_limit)
        else:
            view = self.agent_view(v)
            note = reader.read_note(v, parsed, start, end, max_chars, limit, max_pdf_bytes=pdf_limit,
                                    convert=bounds,
                                    agent=reader.AgentCheck(view, self.session.store(v).catalog,
                                                            self.session.redactor(view)))
        catalog = self.catalog_or_none(v) if links and v.is_folder else None
        if catalog is not None:  # who links here, and what it links to (hybrid.app.links)
            seen = None
            if agent:
                view, hidden = self.agent_hidden_now(v)
                seen = (view, hidden, self.session.redactor(view))
            note.attach(reader.links_of(v, note.path, self.link_graph(v), catalog, limit, pdf_limit, seen))
        return note

    def link_graph(self, v: Vault) -> LinkGraph:
        """The owner's link graph of vault ``v`` (:mod:`hybrid.store.graph`), built again
        only when its ledger changed."""
        return self.session.link_graph(v)

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
        from hybrid.app.related import check_top_k, find_related
        check_top_k(top_k)  # before the reference is looked at
        parsed, v = self.resolve_ref(ref, vault, vault_hint)
        return find_related(self.session, parsed, v, top_k=top_k, agent=agent)

    @property
    def tags(self):
        """Tag suggestions approved by a person (:class:`hybrid.app.tags.TagDesk`): suggest,
        review queue, accept (the one write into a note's front block), reject."""
        from hybrid.app.tags import TagDesk
        return TagDesk(self)

    def catalog_or_none(self, v: Vault):
        """The vault's catalog when it is indexed (titles resolve then), else None."""
        return self.session.catalog_or_none(v)

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
        return agent_view.hidden_report(self.session.store(v).catalog, self.agent_view(v))

    def agent_counts(self, name: str) -> tuple[int, int]:
        """(notes, chunks) of vault ``name`` that agents may see."""
        v = self.config.vault(name)
        return agent_view.visible_counts(self.session.store(v).catalog, self.agent_view(v))

    def close(self) -> None:
        """Close the open indexes and stop the converter worker (started again when needed)."""
        from hybrid.sources.sandbox import shutdown
        self.session.close()
        shutdown()


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
