"""The agent view's own lexical index: kept in step with the ledger as the owner's is, over the
rows an agent may see, redacted (:func:`hybrid.store.agent.view.agent_batches`), in whatever
lexical index the store keeps (tantivy's ``lexical-agent/`` folder, Milvus collections). The
PostgreSQL store keeps the same text in columns of its own
(:meth:`hybrid.store.pg.store.PgStore.refresh_agent_view`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from hybrid.store.agent.view import META_KEY, AgentView, agent_batches, visible_counts
from hybrid.store.base import Reread, lexical_drifted
from hybrid.store.ledger import Ledger
from hybrid.store.port import LexicalIndex

if TYPE_CHECKING:
    from hybrid.store.agent.redact import Redactor

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
    redacted: list = []

    def read():  # read again from the start if the index asks (Reread): the entries of the last read
        redacted.clear()
        yield from agent_batches(store.catalog, rows(), view, redactor, redacted)
    store.agent_lexical.apply(ids, Reread(read))
    store.catalog.set_redacted(redacted, drop=ids)


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
    redacted: list = []

    def read():  # as in apply_journal
        redacted.clear()
        yield from agent_batches(store.catalog, store.catalog.iter_chunks(batch=batch), view, redactor, redacted)
    store.agent_lexical.rebuild(Reread(read))
    store.catalog.set_redacted(redacted)
    store.catalog.set_meta(META_KEY, view.fingerprint)
