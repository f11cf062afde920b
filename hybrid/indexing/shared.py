"""Identical sections, embedded once and stored once.

A chunk's vector is keyed by the hash of the text embedded for it (``embed_hash``: the note's
title and heading path, then the chunk), so the same section pasted into two notes used to be
embedded twice and cached twice. Here "identical" means the chunk's own text, whitespace
normalised (runs of spaces, tabs and newlines count as one space): its ``body_hash``. A chunk
whose body is already held by a live chunk with a cached vector, or by a chunk met earlier in
this run, takes that chunk's ``embed_hash`` and so its vector: no embedding, and one row in the
embedding cache for every copy.

What stays per copy: the chunk row (its own text, note, heading and lines, so every copy is
cited and opened as itself), its lexical document (BM25 needs its note's title, path and tags)
and its entry in the vector index (filters and deletes work by chunk id). A copy's vector was
embedded with the first copy's title and heading path; the lexical arm still reads its own.
Deleting or editing one copy leaves the others their vector: a cached vector is reclaimed only
once no live chunk uses it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hybrid.indexing.reading import text_hash

if TYPE_CHECKING:
    from hybrid.store.base import NoteRecord
    from hybrid.store.port import Ledger


def body_hash(text: str) -> str:
    """The hash of ``text`` with its whitespace normalised; "" for a text of none but spaces."""
    words = text.split()
    return text_hash(" ".join(words)) if words else ""


class SharedTexts:
    """Gives the chunks of the records of one index run their ``body_hash``, and each copy of a
    text already met the ``embed_hash`` of the first (see the module docstring)."""

    def __init__(self, catalog: Ledger, model: str):
        self.catalog, self.model = catalog, model
        self.first: dict[str, str] = {}  # body hash → the embed hash its copies take
        self.met: set[str] = set()       # body hashes of the chunks of this run
        self.shared = 0                  # chunks that are a copy of another: no embedding of their own

    def assign(self, records: Sequence[NoteRecord]) -> None:
        for record in records:
            for c in record.chunks:
                c.body_hash = body_hash(c.text)
        new = {c.body_hash for r in records for c in r.chunks if c.body_hash and c.body_hash not in self.first}
        if new:
            self.first.update(self.catalog.shared_texts(self.model, new))
        for record in records:
            for c in record.chunks:
                if not c.body_hash:
                    continue
                first = self.first.setdefault(c.body_hash, c.embed_hash)
                if first != c.embed_hash or c.body_hash in self.met:
                    c.embed_hash = first
                    self.shared += 1
                self.met.add(c.body_hash)
