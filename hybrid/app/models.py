"""The models a handle keeps loaded: embedders by spec and the reranker, built once and shared
by every search, index run and related-notes call of the handle (:class:`hybrid.app.api.Hybrid`).

Models can be injected instead of built from the settings (tests, ``hybrid eval`` and
benchmarks share loaded models this way): ``embedders`` are instances used for every vault whose
embedder spec resolves to their ``id``; ``embedder_factory(spec)`` builds any other (default:
the registry in :mod:`hybrid.embedders`, after :mod:`hybrid.app.remote` confirmed where a served
model sends text); ``reranker`` is an instance (used whatever ``rerank_model`` says) or a
factory ``(spec) -> reranker``."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from hybrid.core.config import Config, Vault
from hybrid.embedders import Embedder, Options, make_embedder, make_reranker, options_from, spec_id
from hybrid.embedders.base import part_of
from hybrid.store.agent import view as agent_view
from hybrid.store.port import Searchable

EmbedderFactory = Callable[[str], Embedder]
RerankerFactory = Callable[[str], Any]


class Models:
    """Embedders and rerankers of one handle, built on first use under ``lock``."""

    def __init__(self, config: Config, lock: threading.RLock, *, embedders: Iterable[Embedder] = (),
                 embedder_factory: EmbedderFactory | None = None, reranker: Any = None):
        self.config = config
        self.lock = lock
        self._embedders: dict[str, Embedder] = {e.id: e for e in embedders}
        self._embedder_factory = embedder_factory
        self._rerankers: dict[str, Any] = {}
        self._reranker = reranker

    def options(self) -> Options:
        """The model factories' options: the settings, and the redactor for text a model server
        elsewhere is sent (:mod:`hybrid.embedders.remote`)."""
        return options_from(self.config.settings, redact=_redact)

    def embedder(self, spec: str) -> Embedder:
        """The embedder for ``spec``: an injected one with that id, else built once (by the
        injected factory or the registry) and kept."""
        with self.lock:
            key = spec_id(spec)
            if key not in self._embedders:
                if self._embedder_factory is not None:
                    self._embedders[key] = self._embedder_factory(spec)
                else:
                    from hybrid.app import remote
                    from hybrid.embedders.remote import destinations
                    remote.require(self.config, destinations(spec, self.options()))
                    self._embedders[key] = make_embedder(spec, options=self.options())
            return self._embedders[key]

    def for_targets(self, targets: Sequence[tuple[Vault, Searchable]]) -> dict[str, Embedder]:
        """The embedder of each distinct model the targets were indexed with; EmbedderMismatch
        when the configured one is another model."""
        embedders: dict[str, Embedder] = {}
        for vault, store in targets:
            eid = store.embedder_id
            if eid and eid not in embedders:
                emb = self.embedder(vault.embedder)
                # indexed by one part of the mix (before `hybrid index` upgrades it): that part
                # answers meanwhile
                emb = part_of(emb, eid) or emb
                if emb.id != eid:
                    from hybrid.core.errors import EmbedderMismatch
                    raise EmbedderMismatch(
                        f"vault {vault.name!r} was indexed with {eid}, but the configured "
                        f"embedder is {emb.id}; run `hybrid index --vault {vault.name} --reembed`")
                embedders[eid] = emb
        return embedders

    def reranker(self) -> Any:
        """The reranker: the injected one, else the configured ``rerank_model`` (loaded
        once); ModelUnavailable names the setting."""
        given = self._reranker
        if given is not None and hasattr(given, "scores") and not isinstance(given, type):
            return given  # an instance, not a factory
        spec = self.config.settings.rerank_model
        from hybrid.app import remote
        from hybrid.embedders.remote import destinations
        options = self.options()
        found = destinations(spec, options, rerank=True)  # from the settings alone: no I/O
        key = " ".join([spec, *(d.url for d in found)])  # another server, another reranker
        with self.lock:
            if key not in self._rerankers:
                if given is None:
                    remote.require(self.config, found)
                self._rerankers[key] = (given or (lambda s: make_reranker(s, options=options)))(spec)
            return self._rerankers[key]


def _redact(text: str) -> str:
    """``text`` as a model server elsewhere may be sent it, redacted by the agent redactor
    (loaded on first use: a search with a local model never needs it)."""
    return agent_view.agent_redactor().redact(text)
