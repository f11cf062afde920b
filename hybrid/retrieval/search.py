"""A search, assembled once for every door (the Python API, the CLI, MCP, the HTTP page):

properties → filter check → listing (filters alone) or ranked search → context.

Words that read as property filters (``status:done``) become filters where some note has the
property (:func:`~hybrid.retrieval.filters.resolve_props`); a folder, tag, date or property
filter that no note passes says so (NoMatchingNotes) rather than an empty list that reads as
"nothing relevant"; a request of filters alone lists the notes passing them, newest first
(:mod:`hybrid.retrieval.listing`); any other runs the pipeline
(:func:`~hybrid.retrieval.pipeline.run_search`); either gets the context its request asks for.

The caller supplies the vaults' stores (the owner's, or as an agent sees them), where the models
come from, and the lock its stores' shared connections are read under."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

from hybrid.retrieval.arms import Targets
from hybrid.retrieval.context import with_context
from hybrid.retrieval.filters import check_filters, resolve_props
from hybrid.retrieval.pipeline import run_search
from hybrid.retrieval.request import SearchRequest
from hybrid.retrieval.result import SearchResult

if TYPE_CHECKING:
    from hybrid.core.settings import Settings
    from hybrid.embedders.base import Embedder, Reranker


def search(targets: Targets, request: SearchRequest, settings: Settings, *,
           embedders: Callable[[Targets], Mapping[str, Embedder]],
           reranker: Callable[[], Reranker] | None = None,
           guard: AbstractContextManager | None = None) -> SearchResult:
    """Answer ``request`` over ``targets``. ``embedders(targets)`` gives the embedder of each
    model id the targets were indexed with (asked only when the vector arm runs, before
    ``guard`` is entered: the query is embedded on a worker thread, which must never wait for
    it); ``reranker()`` the reranker (asked only with ``request.rerank``); ``guard`` is held
    while the stores are read."""
    guard = guard or nullcontext()
    stores = [s for _, s in targets]
    request = resolve_props(request, stores)
    check_filters(stores, request.filters)
    if request.parsed.listing:
        from hybrid.retrieval.listing import list_notes
        with guard:
            return with_context(list_notes(targets, request, settings), targets, request)
    found = embedders(targets) if request.mode != "lexical" else {}

    def query_vector(embedder_id: str, text: str, reach: bool = False):
        emb = found[embedder_id]
        # reach: the vaults hold notes in other languages, which a mix reaches for
        return emb.embed_query(text, reach=True) if reach else emb.embed_query(text)

    rescore = reranker().scores if request.rerank and reranker is not None else None
    with guard:
        return with_context(run_search(targets, request, settings, query_vector, rescore), targets, request)
