"""The PostgreSQL backend (:class:`hybrid.store.port.Backend`): a vault's store is its rows in a
database that a team shares (team mode), written by one indexer at a time under an advisory
lock; each change is one transaction."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from hybrid.core.errors import HybridError, VaultError
from hybrid.core.store_url import redact, resolve
from hybrid.store.base import StoreFacts, VacuumReport
from hybrid.store.pg.store import PgStore, agent_fingerprint, drop_vault, open_store

if TYPE_CHECKING:
    from hybrid.core.config import Vault
    from hybrid.store.agent.redact import Redactor
    from hybrid.store.agent.view import AgentView
    from hybrid.store.port import Store

T = TypeVar("T")


class PgBackend:
    name = "postgresql"

    def open(self, vault: Vault, *, writer: bool = False, wait: float = 0) -> PgStore:
        return open_store(vault, writer=writer, wait=wait)

    def write(self, vault: Vault, run: Callable[[Store], T], *, reembed: bool, wait: float,
              view: AgentView, redactor: Redactor | None) -> T:
        """Under the vault's advisory lock. A run killed at any point leaves the database as one
        of its committed states, and the next run redoes only what is missing; a re-embed
        replaces every note in one transaction at its end."""
        store = open_store(vault, writer=True, wait=wait)
        try:
            store.set_agent(agent_fingerprint(view), redactor)
            if reembed:
                store.begin_reembed()
            return run(store)
        finally:
            store.close()

    def explain(self, exc: BaseException) -> HybridError | None:
        """A refusal for want of a privilege that escaped every store method, as one line."""
        from hybrid.store.pg.connect import explain
        return explain(exc)

    def where(self, vault: Vault) -> str | None:
        return redact(resolve(vault.store or "", vault.name))

    def facts(self, vault: Vault, *, sizes: bool) -> StoreFacts | None:
        from hybrid.embedders.base import canonical_id
        try:
            store = open_store(vault)
        except VaultError:
            return None  # not indexed yet
        try:
            cat, facts = store.catalog, StoreFacts()
            facts.notes, facts.chunks = cat.file_count(), cat.chunk_count()
            facts.embedder = canonical_id(cat.get_meta("embedder"))
            facts.dim = store.vector.dim
            ts = cat.get_meta("last_indexed")
            facts.last_indexed = dt.datetime.fromtimestamp(float(ts)).isoformat(timespec="seconds") if ts else None
            hnsw = json.loads(cat.get_meta("hnsw") or "{}")
            graph = store.vector.graph()
            facts.vector_index = ((f"approximate (pgvector HNSW, m {graph[0]}, ef_construction {graph[1]}, "
                                   f"ef_search {hnsw.get('ef_search')}, calibrated recall@10 {hnsw.get('recall')})")
                                  if graph else "exact (pgvector scan)") if facts.chunks else ""
            facts.documents = list(cat.files())
            facts.server = server_state(store)
            facts.shared_chunks, facts.shared_texts = cat.sharing()
            return facts
        finally:
            store.close()

    def vacuum(self, vault: Vault, wait: float) -> VacuumReport:
        store = open_store(vault, writer=True, wait=wait)
        try:
            report = VacuumReport(vault.name)
            report.embeddings_removed = store.reclaim(store.embedder_id, force=True)
            from hybrid.sources.ocr import prune_cache  # this machine's OCR cache of the vault
            report.ocr_removed = prune_cache(vault, store.catalog)
            store.catalog.vacuum()
            return report
        finally:
            store.close()

    def purge(self, vault: Vault) -> list[str]:
        return []  # nothing of it is kept on this machine; the team's rows stay (see drop)

    def drop(self, vault: Vault) -> None:
        drop_vault(vault.store or "postgresql", vault.name)

    def rename(self, vault: Vault, new_name: str, new_index_dir: Path) -> None:
        raise VaultError(f"vault {vault.name!r} is kept in PostgreSQL under that name, which other "
                         f"machines share; it cannot be renamed here (register it again with "
                         f"--name {new_name} and `hybrid index` to copy it under the new name)")


def server_state(store: PgStore) -> str:
    """What `hybrid status` says of a server that may not be written ("" for a primary)."""
    if store.standby:
        from hybrid.store.pg.standby import replay_lag
        lag = replay_lag(store.conn)
        behind = ("no change replayed yet" if lag is None else
                  "replay caught up with what it received" if lag == 0 else f"replay {lag:.1f} s behind")
        return f"read-only standby ({behind}); queries only, index on the primary"
    if store.read_only:
        return "read-only role or session; queries only"
    return ""


BACKEND = PgBackend()
