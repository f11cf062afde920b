"""A vault's derived indexes in Milvus (issue #52): the ledger stays the local SQLite catalog,
and the lexical arm (:mod:`hybrid.store.milvus.lexical`, BM25 written by hybrid itself so it
ranks as the local tantivy index does), the vector arm (:mod:`hybrid.store.milvus.vector`) and
the agent view's lexical index live in Milvus collections, in Milvus Lite (a folder, in this
process) or on a server (:mod:`hybrid.store.milvus.client`). ``pymilvus`` (and ``milvus-lite``)
are imported only when a vault uses it."""
