"""The local catalog's cached embeddings (by model and text hash) and the agent view's redacted
chunks with what is embedded for them: the vectors every derived index is rebuilt from without
embedding again. A part of :class:`hybrid.store.local.catalog.Catalog`, on its connection."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hybrid.store.base import EMBED_CACHE_MIN
from hybrid.store.local import shared

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("hybrid")


class EmbeddingCache:
    """The embeddings and agent_redacted tables (the catalog's ``db``, ``transaction``, meta
    and chunk count are the catalog's own)."""
    db: Any
    path: Path

    def transaction(self) -> Any:
        raise NotImplementedError

    def chunk_count(self) -> int:
        raise NotImplementedError

    def get_meta(self, key: str) -> str | None:
        raise NotImplementedError

    def set_meta(self, key: str, value: str) -> None:
        raise NotImplementedError

    def cached_hashes(self, model: str, hashes: Iterable[str]) -> set[str]:
        hashes = list(set(hashes))
        found: set[str] = set()
        for i in range(0, len(hashes), 500):
            part = hashes[i:i + 500]
            q = f"SELECT text_hash FROM embeddings WHERE model=? AND text_hash IN ({','.join('?' * len(part))})"
            found.update(r[0] for r in self.db.execute(q, [model, *part]))
        return found

    def cached_vectors(self, model: str, hashes: Iterable[str]) -> dict[str, bytes]:
        hashes = list(set(hashes))
        found: dict[str, bytes] = {}
        for i in range(0, len(hashes), 500):
            part = hashes[i:i + 500]
            q = f"SELECT text_hash, vector FROM embeddings WHERE model=? AND text_hash IN ({','.join('?' * len(part))})"
            found.update((h, bytes(v)) for h, v in self.db.execute(q, [model, *part]))
        return found

    def put_embeddings(self, model: str, items: Iterable[tuple[str, bytes]]) -> None:
        with self.transaction():
            self.db.executemany("INSERT OR REPLACE INTO embeddings(model, text_hash, vector) VALUES (?,?,?)",
                                [(model, h, v) for h, v in items])

    def shared_texts(self, model: str, body_hashes: Iterable[str]) -> dict[str, str]:
        return shared.shared_texts(self.db, model, body_hashes)

    def sharing(self) -> tuple[int, int]:
        return shared.sharing(self.db)

    def vectors(self, model: str, chunk_ids: Sequence[int]) -> list[tuple[int, bytes]]:
        out = []
        ids = list(chunk_ids)
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            q = (f"SELECT c.id, e.vector FROM chunks c JOIN embeddings e ON e.text_hash=c.embed_hash "
                 f"AND e.model=? WHERE c.id IN ({','.join('?' * len(part))})")
            out.extend(self.db.execute(q, [model, *part]).fetchall())
        return out

    def vector_matrix(self, model: str, dim: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, float32 matrix) of every live chunk's cached vector, read in one pass into a
        preallocated array (a million vectors cost their 1.5 GB once, not three times over)."""
        import numpy as np
        n = self.chunk_count()
        ids = np.empty(n, dtype=np.int64)
        mat = np.empty((n, dim), dtype=np.float32)
        q = ("SELECT c.id, e.vector FROM chunks c JOIN embeddings e ON e.text_hash=c.embed_hash "
             "AND e.model=? WHERE c.dead=0 ORDER BY c.id")
        row = 0
        for cid, blob in self.db.execute(q, [model]):
            if row == n or len(blob) != dim * 4:
                continue  # a vector of another size cannot be indexed; the count check reports it
            ids[row] = cid
            mat[row] = np.frombuffer(blob, dtype=np.float32)
            row += 1
        return ids[:row], mat[:row]

    # --- the agent view's redacted chunks (hybrid.store.agent.vectors) ---------------------------
    def redacted_ids(self) -> set[int]:
        try:
            return {r[0] for r in self.db.execute("SELECT chunk_id FROM agent_redacted")}
        except sqlite3.OperationalError as exc:  # a read-only open of a catalog made before it
            if "no such table" in str(exc):
                return set()
            raise

    def set_redacted(self, entries: Iterable[tuple[int, str, str]], drop: Iterable[int] | None = None) -> None:
        """Record ``entries`` (chunk id, embed hash, embed text) after removing those of the
        chunk ids ``drop`` (None: all)."""
        with self.transaction():
            if drop is None:
                self.db.execute("DELETE FROM agent_redacted")
            else:
                self.db.executemany("DELETE FROM agent_redacted WHERE chunk_id=?", [(i,) for i in drop])
            self.db.executemany("INSERT OR REPLACE INTO agent_redacted(chunk_id, embed_hash, embed_text) "
                                "VALUES (?,?,?)", list(entries))

    def redacted_missing(self, model: str) -> list[tuple[str, str]]:
        """(hash, text) of the redacted texts with no cached vector under ``model``."""
        return self.db.execute(
            "SELECT DISTINCT a.embed_hash, a.embed_text FROM agent_redacted a WHERE NOT EXISTS "
            "(SELECT 1 FROM embeddings e WHERE e.model=? AND e.text_hash=a.embed_hash)", (model,)).fetchall()

    def redacted_vectors(self, model: str) -> list[tuple[int, int, bytes]]:
        """(chunk id, its file id, vector of its redacted text) of the redacted chunks that
        have one."""
        try:
            return self.db.execute("SELECT a.chunk_id, c.file_id, e.vector FROM agent_redacted a "
                                   "JOIN chunks c ON c.id=a.chunk_id JOIN embeddings e ON e.model=? "
                                   "AND e.text_hash=a.embed_hash", (model,)).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []
            raise

    def reclaim_embeddings(self, model: str, force: bool = False) -> int:
        """Delete cached vectors no live chunk uses under ``model`` (edited-away texts, other
        models) once they may exceed max(EMBED_CACHE_MIN, live chunks), or always with ``force``.
        Without this every edit leaves its old vectors behind for ever. The trigger is an upper
        bound read in O(1) (rows at the last reclaim plus rowids issued since), so runs under
        it never scan the table. Returns the rows deleted."""
        live = self.chunk_count()
        top = self.db.execute("SELECT max(id) FROM embeddings").fetchone()[0] or 0
        base = json.loads(self.get_meta("embeddings_reclaimed") or '{"rows": 0, "top": 0}')
        bound = base["rows"] + max(0, top - base["top"])
        if not force and bound - live <= max(EMBED_CACHE_MIN, live):
            return 0
        with self.transaction():
            cur = self.db.execute(
                "DELETE FROM embeddings WHERE model != ? OR (text_hash NOT IN "
                "(SELECT embed_hash FROM chunks WHERE dead=0) AND text_hash NOT IN "
                "(SELECT embed_hash FROM agent_redacted))", (model,))
            deleted = max(0, cur.rowcount)
            rows = self.db.execute("SELECT count(*) FROM embeddings").fetchone()[0]
            self.set_meta("embeddings_reclaimed", json.dumps({"rows": rows, "top": top}))
        if deleted:
            log.info("%s: reclaimed %d unused cached embeddings", self.path.parent.name, deleted)
        return deleted
