"""The HNSW graph's build parameters on PostgreSQL (`hnsw_m`, `hnsw_ef_construction`): the index
is built with them, rebuilt when they change (the old graph answers until the new one is
swapped in), and left alone when they do not; and a vault's index housekeeping never touches
another vault's indexes (their names share a prefix: vault 3's and vault 31's)."""
import json
import random

import pytest
from helpers import indexed_vault

import hybrid
from hybrid.store.pg.store import drop_vault, open_store

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def _notes(n: int = 400) -> dict[str, str]:
    rng = random.Random(3)
    words = [f"w{i}" for i in range(800)]
    return {f"n{i:03d}.md": " ".join(rng.choice(words) for _ in range(10)) + "\n" for i in range(n)}


def _hnsw_indexes(store) -> dict[str, str]:
    """The vault's HNSW indexes: name -> their storage options."""
    rows = store.query("SELECT c.relname, coalesce(array_to_string(c.reloptions, ','), '') FROM pg_class c "
                       "JOIN pg_index i ON i.indexrelid = c.oid WHERE c.relname LIKE %s",
                       (f"hybrid\\_vectors\\_hnsw\\_{int(store.vault_id)}\\_%",)).fetchall()
    return dict(rows)


def _looked_at(h, what):
    """``what(store)`` on a store opened on vault ``v`` of ``h``, closed after."""
    store = open_store(h.config.vault("v"))
    try:
        return what(store)
    finally:
        store.close()


def _reindexed(home, **settings):
    """(graph, index oid, meta) after `hybrid index` of ``home`` with ``settings``, and its handle."""
    h = hybrid.open(home, embedder="hash:384", ann_threshold=1, **settings)
    h.index()
    got = _looked_at(h, lambda store: (store.vector.graph(), _hnsw_indexes(store),
                                       json.loads(store.catalog.get_meta("hnsw"))))
    return h, got


def test_the_graph_follows_the_settings(tmp_path, pg_url):
    h = indexed_vault(tmp_path, _notes(), "v", store=pg_url, ann_threshold=1, embedder="hash:384")
    try:
        assert _looked_at(h, lambda store: store.vector.graph()) == (16, 64)
        (name, options), = _looked_at(h, _hnsw_indexes).items()
        assert options == "m=16,ef_construction=64"
        before = [hit.path for hit in h.search("w1 w2 w3", mode="vector", top_k=5)]
    finally:
        h.close()

    h, (graph, indexes, meta) = _reindexed(tmp_path / "home", hnsw_m=8, hnsw_ef_construction=40)
    try:
        assert graph == (8, 40)
        assert indexes == {name: "m=8,ef_construction=40"}  # swapped in, under its name
        assert meta["m"] == 8 and meta["ef_search"] >= 10 and 0 < meta["recall"] <= 1
        oid = _looked_at(h, lambda store: store.query("SELECT to_regclass(%s)::oid", (name,)).fetchone()[0])
        h.index()  # unchanged settings: the same index, not built again
        assert _looked_at(h, lambda store: store.query("SELECT to_regclass(%s)::oid", (name,)).fetchone()[0]) == oid
        # the same top hits through the new graph (an exact top 5 among 400 vectors)
        assert [hit.path for hit in h.search("w1 w2 w3", mode="vector", top_k=5)] == before
    finally:
        h.close()

    # ef_construction below twice m is raised to it (pgvector refuses less)
    h, (graph, _, _) = _reindexed(tmp_path / "home", hnsw_m=12, hnsw_ef_construction=4)
    h.close()
    assert graph == (12, 24)


def test_housekeeping_keeps_other_vaults_indexes(tmp_path, pg_url):
    h = indexed_vault(tmp_path, _notes(60), "v", store=pg_url, ann_threshold=1, embedder="hash:384")
    store = open_store(h.config.vault("v"))
    vid = int(store.vault_id)
    # what vault 10·id+1 would have: a name that `hybrid_vectors_hnsw_{vid}_%` matches unescaped
    other = f"hybrid_vectors_hnsw_{vid}1_384"
    try:
        store.query(f"CREATE INDEX {other} ON hybrid_vectors (id) WHERE vault = {vid * 10 + 1}")
        store.conn.commit()
        store.vector.drop_other_indexes()
        store.conn.commit()
        assert store.query("SELECT to_regclass(%s) IS NOT NULL", (other,)).fetchone()[0]
    finally:
        store.close()
        h.close()
    drop_vault(pg_url, "v")
    with __import__("psycopg").connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass(%s) IS NOT NULL", (other,)).fetchone()[0]
        conn.execute(f"DROP INDEX {other}")
