"""The agent view's own lexical index: kept in step with the ledger as the owner's is, over the
rows an agent may see, redacted (:func:`hybrid.store.agent.view.agent_batches`), in whatever
lexical index the store keeps (tantivy's ``lexical-agent/`` folder, Milvus collections). The
PostgreSQL store keeps the same text in columns of its own
(:meth:`hybrid.store.pg.store.PgStore.refresh_agent_view`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from hybrid.store.agent.view import META_KEY, AgentView, agent_batches, visible_counts
from hybrid.store.base import Reread, lexical_drifted
from hybrid.store.ledger import Ledger
from hybrid.store.port import LexicalIndex

if TYPE_CHECKING:
    from hybrid.store.agent.redact import Redactor
    from hybrid.store.base import ChunkRow

log = logging.getLogger("hybrid")


class RedactingLedger(Ledger, Protocol):
    def set_redacted(self, entries: Iterable[tuple[int, str, str]], drop: Iterable[int] | None = None) -> None:
        """Record the redacted chunks (chunk id, embed hash, embed text) after dropping ``drop``'s."""
        ...


class AgentIndexed(Protocol):
    """What keeping the agent index needs of a store."""

    @property
    def name(self) -> str: ...
    @property
    def catalog(self) -> RedactingLedger: ...
    @property
    def agent_lexical(self) -> LexicalIndex: ...


def apply_journal(store: AgentIndexed, ids: Sequence[int], view: AgentView, redactor: Redactor | None,
                  batch: int) -> None:
    """The agent index's share of a journal replay: delete ``ids``, add those live and visible."""
    def rows():
        for part in store.catalog.iter_chunks(ids, batch):
            yield [r for r in part if not r.dead]
    batches, redacted = _redacting(store, rows, view, redactor)
    store.agent_lexical.apply(ids, batches)
    store.catalog.set_redacted(redacted, drop=ids)


def _redacting(store: AgentIndexed, rows: Callable[[], Iterable[list[ChunkRow]]], view: AgentView,
               redactor: Redactor | None) -> tuple[Reread, list]:
    """The visible, redacted batches of ``rows()`` as a Reread (an index may read them twice),
    and the list that holds the redaction entries of the last read."""
    redacted: list = []

    def read():
        redacted.clear()
        yield from agent_batches(store.catalog, rows(), view, redactor, redacted)
    return Reread(read), redacted


def current(store: AgentIndexed, view: AgentView) -> bool:
    """Whether the agent index was built with ``view``'s settings (else :func:`check` rebuilds
    it whole, and a journal replay into it would be wasted work)."""
    return store.catalog.get_meta(META_KEY) == view.fingerprint


def check(store: AgentIndexed, view: AgentView, redactor: Redactor | None, batch: int) -> bool:
    """Rebuild the agent index from the ledger when it was built with other settings, holds
    another number of documents than the visible chunks, or carries deleted documents in its
    statistics (as the owner's index, :func:`hybrid.store.base.lexical_drifted`). Whether it was rebuilt."""
    lex = store.agent_lexical
    want = visible_counts(store.catalog, view)[1]
    deleted = lex.deleted_docs()
    if not current(store, view):
        log.info("%s: building the agent view (agent settings changed)", store.name)
    elif lex.count() != want or (want and not lex.section_count()):
        log.warning("%s: agent index out of step (%d docs, %d visible chunks); rebuilding",
                    store.name, lex.count(), want)
    elif lexical_drifted(deleted, want):
        log.info("%s: compacting the agent index", store.name)
    else:
        return False
    rebuild(store, view, redactor, batch)
    return True


def rebuild(store: AgentIndexed, view: AgentView, redactor: Redactor | None, batch: int = 5000) -> None:
    store.catalog.set_meta(META_KEY, "")  # a crash mid-build leaves it marked stale
    batches, redacted = _redacting(store, lambda: store.catalog.iter_chunks(batch=batch), view, redactor)
    store.agent_lexical.rebuild(batches)
    store.catalog.set_redacted(redacted)
    store.catalog.set_meta(META_KEY, view.fingerprint)
