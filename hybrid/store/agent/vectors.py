"""Vectors of the redacted text, for the chunks an agent is shown redacted.

A chunk that held a secret is shown to agents with the secret replaced by ``[redacted
secret]``, and its words are indexed for them that way. Its vector in FAISS (or pgvector) was
made from the text *with* the secret, though: an agent searching ``password: <guess>`` would see
near-guesses score higher than other guesses, a cosine that confirms the secret one character at
a time, and ``confidence`` (made from the scores) would say the same.

So an agent's vector arm never scores such a chunk by that vector. The chunks are left out of
the shared index's answer and scored exactly against the vector of their redacted text (few:
only chunks that held a secret), which the index run makes with the vault's model and keeps in
the embedding cache. A redacted chunk whose vector is not made yet (the agent view rebuilt with
no model at hand) has no vector score for agents at all, and is still found by its redacted
words.

The store keeps, per redacted chunk, the hash and text of what is embedded for it
(:func:`entries`); the catalog methods ``redacted_ids``, ``set_redacted``,
``redacted_missing`` and ``redacted_vectors`` are the store's side.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from hybrid.store.base import ChunkRow

Entry = tuple[int, str, str]  # (chunk id, hash of the text embedded for it, that text)


def embed_text(row: ChunkRow, header: bool) -> str:
    """What the indexer embeds for ``row`` (its contextual header and its text)."""
    from hybrid.sources.markdown import CONTEXT, context_header, context_words
    path = row.heading.split(" > ") if row.heading else []
    shown_in = context_words(row.properties) if CONTEXT in row.props else []
    return (context_header(row.title, row.aliases, path, shown_in) if header else "") + row.text


def text_hash(text: str) -> str:
    """The embedding cache's key of a text (as :func:`hybrid.indexing.reading.text_hash`)."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def changed(row: ChunkRow, shown: ChunkRow) -> bool:
    """Whether redaction changed what is embedded for the row (its text, heading, title or
    aliases)."""
    return (row.text, row.heading, row.title, row.aliases) != \
        (shown.text, shown.heading, shown.title, shown.aliases)


def entries(rows: Sequence[ChunkRow], shown: Sequence[ChunkRow], header: bool) -> list[Entry]:
    """The entries of the rows whose redacted form (``shown``, in the same order) differs."""
    out = []
    for r, a in zip(rows, shown):
        if changed(r, a):
            text = embed_text(a, header)
            out.append((r.id, text_hash(text), text))
    return out


def header_setting(chunking_meta: str | None) -> bool:
    """Whether chunks were embedded with their contextual header (the catalog's ``chunking``)."""
    try:
        return bool(json.loads(chunking_meta or "{}").get("header", True))
    except (ValueError, AttributeError):
        return True


def embed_missing(catalog: Any, embedder: Any, batch: int = 64) -> int:
    """Embed the redacted texts that have no cached vector under ``embedder``; how many."""
    todo = catalog.redacted_missing(embedder.id)
    for i in range(0, len(todo), batch):
        part = todo[i:i + batch]
        vecs = embedder.embed_documents([t for _, t in part])
        catalog.put_embeddings(embedder.id, [(h, v.tobytes()) for (h, _), v in zip(part, vecs)])
    return len(todo)


class Redacted:
    """The redacted chunks of one vault at one catalog state: their ids (always) and their
    redacted vectors with their notes' file ids (loaded on the first vector search)."""

    def __init__(self, ids: set[int], load: Callable[[], list[tuple[int, int, bytes]]]):
        self.ids = ids
        self._load = load
        self._vectors: tuple[list[int], list[int], np.ndarray] | None = None
        self._lock = threading.Lock()

    def vectors(self) -> tuple[list[int], list[int], np.ndarray]:
        """(chunk ids, their file ids, their redacted vectors as rows)."""
        import numpy as np
        with self._lock:
            if self._vectors is None:
                got = [g for g in self._load() if g[0] in self.ids]
                dim = len(got[0][2]) // 4 if got else 0
                mat = np.frombuffer(b"".join(v for _, _, v in got), dtype=np.float32).reshape(len(got), dim) \
                    if got else np.zeros((0, 0), dtype=np.float32)
                self._vectors = ([i for i, _, _ in got], [f for _, f, _ in got], mat)
            return self._vectors

    def scores(self, query: np.ndarray, allowed: Collection[int] | None, banned: Collection[int],
               banned_files: Collection[int] = ()) -> list[tuple[int, float]]:
        """(chunk id, cosine of the query with the redacted text) of the redacted chunks
        among ``allowed`` (default: all), not ``banned`` and not of ``banned_files``."""
        ids, files, mat = self.vectors()
        if not ids or mat.shape[1] != query.shape[-1]:
            return []
        sims = mat @ query.reshape(-1).astype(mat.dtype)
        return [(i, float(s)) for i, f, s in zip(ids, files, sims)
                if i not in banned and f not in banned_files and (allowed is None or i in allowed)]
