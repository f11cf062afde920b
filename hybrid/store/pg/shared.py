"""The PostgreSQL ledger's queries about chunks that share their text (deduplication), as
:mod:`hybrid.store.local.shared` asks them of SQLite."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


def shared_texts(q: Callable[..., Any], vault: int, model: str, body_hashes: Iterable[str]) -> dict[str, str]:
    """``{body hash: embed hash}`` of the vault's chunks with a vector cached under ``model``
    (the oldest such chunk's, when copies were embedded apart before)."""
    rows = q("SELECT DISTINCT ON (c.body_hash) c.body_hash, c.embed_hash FROM hybrid_chunks c "
             "JOIN hybrid_embeddings e ON e.vault=c.vault AND e.model=%s AND e.text_hash=c.embed_hash "
             "WHERE c.vault=%s AND c.body_hash = ANY(%s) ORDER BY c.body_hash, c.id",
             (model, vault, list(set(body_hashes))))
    return dict(rows.fetchall())


def sharing(q: Callable[..., Any], vault: int) -> tuple[int, int]:
    """(chunks whose embed hash another chunk of the vault has, the distinct hashes they have)."""
    row = q("SELECT coalesce(sum(n), 0), count(*) FROM (SELECT count(*) AS n FROM hybrid_chunks "
            "WHERE vault=%s GROUP BY embed_hash HAVING count(*) > 1) g", (vault,)).fetchone()
    return int(row[0]), int(row[1])
