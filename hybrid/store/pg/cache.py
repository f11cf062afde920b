"""The PostgreSQL catalog's cached embeddings (by model and text hash) and the agent view's
redacted chunks with what is embedded for them: what every vector is written from without
embedding again. A part of :class:`hybrid.store.pg.catalog.PgCatalog`, on its connection (as
:mod:`hybrid.store.local.cache` is of the local catalog)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from hybrid.store.base import EMBED_CACHE_MIN
from hybrid.store.pg import shared

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("hybrid")


class PgEmbeddingCache:
    """hybrid_embeddings and the agent columns of hybrid_chunks (the catalog's ``q``, ``conn``,
    ``store``, ``vault_id`` and chunk count are the catalog's own)."""
    store: Any
    conn: Any
    vault_id: int

    def q(self, sql: str, params: Sequence[Any] = ()) -> Any:
        raise NotImplementedError

    def chunk_count(self) -> int:
        raise NotImplementedError

    # --- embeddings -----------------------------------------------------------------------
    def cached_hashes(self, model: str, hashes: Iterable[str]) -> set[str]:
        return {r[0] for r in self.q("SELECT text_hash FROM hybrid_embeddings WHERE vault=%s AND model=%s "
                                     "AND text_hash = ANY(%s)", (self.vault_id, model, list(set(hashes))))}

    def cached_vectors(self, model: str, hashes: Iterable[str]) -> dict[str, bytes]:
        return {h: as_array(v).tobytes() for h, v in self.q(
            "SELECT text_hash, vec FROM hybrid_embeddings WHERE vault=%s AND model=%s AND text_hash = ANY(%s)",
            (self.vault_id, model, list(set(hashes))))}

    def put_embeddings(self, model: str, items: Iterable[tuple[str, bytes]]) -> None:
        import numpy as np
        rows = [(self.vault_id, model, h, np.frombuffer(v, dtype=np.float32)) for h, v in items]
        with self.store.guarded(), self.conn.transaction(), self.conn.cursor() as cur:
            cur.executemany("INSERT INTO hybrid_embeddings(vault, model, text_hash, vec) VALUES "
                            "(%s,%s,%s,%s) ON CONFLICT (vault, model, text_hash) DO UPDATE "
                            "SET vec = EXCLUDED.vec", rows)

    def shared_texts(self, model: str, body_hashes: Iterable[str]) -> dict[str, str]:
        return shared.shared_texts(self.q, self.vault_id, model, body_hashes)

    def sharing(self) -> tuple[int, int]:
        return shared.sharing(self.q, self.vault_id)

    # --- the agent view's redacted chunks (hybrid.store.agent.vectors) ---------------------------
    def redacted_ids(self) -> set[int]:
        return {r[0] for r in self.q("SELECT id FROM hybrid_chunks WHERE vault=%s AND (agent_tsv IS NOT "
                                     "NULL OR agent_embed_hash IS NOT NULL)", (self.vault_id,))}

    def redacted_missing(self, model: str) -> list[tuple[str, str]]:
        return self.q("SELECT DISTINCT c.agent_embed_hash, c.agent_embed_text FROM hybrid_chunks c "
                      "WHERE c.vault=%s AND c.agent_embed_hash IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "
                      "hybrid_embeddings e WHERE e.vault=c.vault AND e.model=%s AND e.text_hash="
                      "c.agent_embed_hash)", (self.vault_id, model)).fetchall()

    def redacted_vectors(self, model: str) -> list[tuple[int, int, bytes]]:
        rows = self.q("SELECT c.id, c.file_id, e.vec FROM hybrid_chunks c JOIN hybrid_embeddings e ON "
                      "e.vault=c.vault AND e.model=%s AND e.text_hash=c.agent_embed_hash WHERE c.vault=%s",
                      (model, self.vault_id))
        return [(i, f, as_array(v).tobytes()) for i, f, v in rows]

    def vectors(self, model: str, chunk_ids: Sequence[int]) -> list[tuple[int, bytes]]:
        rows = self.q("SELECT id, embedding FROM hybrid_vectors WHERE id = ANY(%s)", (list(chunk_ids),))
        return [(i, as_array(v).tobytes()) for i, v in rows]

    def reclaim_embeddings(self, model: str, force: bool = False) -> int:
        """Delete this vault's cached vectors no chunk uses under ``model`` once they may exceed
        max(EMBED_CACHE_MIN, live chunks), or always with ``force``."""
        v = self.vault_id
        live = self.chunk_count()
        rows = self.q("SELECT count(*) FROM hybrid_embeddings WHERE vault=%s", (v,)).fetchone()[0]
        if not force and rows - live <= max(EMBED_CACHE_MIN, live):
            return 0
        cur = self.q("DELETE FROM hybrid_embeddings e WHERE e.vault=%s AND (e.model != %s OR NOT EXISTS "
                     "(SELECT 1 FROM hybrid_chunks c WHERE c.vault=%s AND (c.embed_hash = e.text_hash "
                     "OR c.agent_embed_hash = e.text_hash)))", (v, model, v))
        deleted = max(0, cur.rowcount)
        if deleted:
            log.info("%s: reclaimed %d unused cached embeddings", self.store.name, deleted)
        return deleted


def as_array(value: Any) -> np.ndarray:
    """A vector read back from PostgreSQL as float32 (pgvector's adapter gives a ``Vector``)."""
    import numpy as np
    got = value.to_numpy() if hasattr(value, "to_numpy") else value
    return np.asarray(got, dtype=np.float32)
