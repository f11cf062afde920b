"""Team mode: a vault's index in PostgreSQL + pgvector instead of the local SQLite, tantivy
and FAISS files (``store = "postgresql://…"`` on the vault, or ``"postgresql"`` for the URL
in ``HYBRID_DATABASE_URL``).

One database holds any number of vaults. The ledger (files, chunks, cached embeddings) and
both arms live in it: BM25 over a weighted ``tsvector`` written by hybrid's own analyzer
(:mod:`hybrid.store.pg.lexical`), cosine search over an HNSW index (:mod:`hybrid.store.pg.vector`). Every
change to a note is one transaction, so readers on any machine see a note before or after an
update, never half of one. ``psycopg`` and ``pgvector`` are imported only when a vault uses it
(``pip install 'hybrid[postgres]'``).
"""

from __future__ import annotations
