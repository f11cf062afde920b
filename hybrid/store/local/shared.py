"""The local ledger's queries about chunks that share their text (deduplication): which
vector an identical section met again takes, and how much is shared, for `hybrid status`."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any


def shared_texts(db: Any, model: str, body_hashes: Iterable[str]) -> dict[str, str]:
    """``{body hash: embed hash}`` of live chunks with a vector cached under ``model`` (the
    oldest such chunk's, when copies were embedded apart before)."""
    wanted = list(set(body_hashes))
    out: dict[str, str] = {}
    for i in range(0, len(wanted), 500):
        part = wanted[i:i + 500]
        q = (f"SELECT c.body_hash, c.embed_hash FROM chunks c JOIN embeddings e ON e.model=? AND "
             f"e.text_hash=c.embed_hash WHERE c.dead=0 AND c.body_hash IN ({','.join('?' * len(part))}) "
             f"ORDER BY c.id DESC")
        out.update(db.execute(q, [model, *part]).fetchall())  # the last row written wins: the oldest
    return out


def sharing(db: Any) -> tuple[int, int]:
    """(live chunks whose embed hash another live chunk has, the distinct hashes they have):
    each such hash is one embedding and one cached vector for all its chunks."""
    try:
        row = db.execute("SELECT coalesce(sum(n), 0), count(*) FROM (SELECT count(*) AS n FROM chunks "
                         "WHERE dead=0 GROUP BY embed_hash HAVING count(*) > 1)").fetchone()
    except sqlite3.OperationalError as exc:  # a read-only open of a catalog with no tables yet
        if "no such table" in str(exc):
            return 0, 0
        raise
    return int(row[0]), int(row[1])
