"""Both keyword arms score alike (issue #31: the same ranking on both stores): the PostgreSQL
arm computes tantivy's scoring (a BM25 per field, summed with the field boosts), so on the
bundled sample vault, for every labelled query's words, each unit the two arms rank in their
top 10 scores the same in both up to tantivy's length norms (kept in one byte: exact to 40
tokens, in buckets above), and the two top-10 lists hold the same units. Real tantivy, real
PostgreSQL; a hashed embedder (the vectors play no part)."""

from __future__ import annotations

import json

import pytest
from conftest import new_database
from helpers import SAMPLE_VAULT

import hybrid
from hybrid.store import open_store
from hybrid.store.lexicon import LexicalQuery

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

DATA = hybrid.__file__.rsplit("/", 1)[0] + "/data"


@pytest.fixture(scope="module")
def both_stores(tmp_path_factory, pg_server):
    url = new_database(pg_server)
    out = {}
    for kind, store in (("local", None), ("postgresql", url)):
        h = hybrid.open(tmp_path_factory.mktemp(f"parity-{kind}"), embedder="hash:64",
                        **({"store": store} if store else {}))
        h.add_vault(SAMPLE_VAULT, "sample")
        h.index()
        out[kind] = h
    yield out
    for h in out.values():
        h.close()


def ranked(store, words: list[str], unit: str) -> list[tuple[tuple[str, int], float]]:
    """The arm's top 10 units as ((path, first line), score)."""
    got = store.lexical.search_units(LexicalQuery(words), 10, unit=unit)
    rows = {r.id: r for batch in store.catalog.iter_chunks([ids[0] for ids, _ in got], 500) for r in batch}
    return [((rows[ids[0]].path, rows[ids[0]].start_line), score) for ids, score in got]


@pytest.mark.parametrize("unit", ["chunk", "section"])
def test_the_postgresql_keyword_arm_scores_as_tantivy_does(both_stores, unit):
    queries = [json.loads(line)["text"] for line in open(f"{DATA}/sample.queries.jsonl") if line.strip()]
    stores = {k: open_store(h.config.vault("sample")) for k, h in both_stores.items()}
    try:
        compared = same_sets = 0
        worst = 0.0
        for text in queries:
            words = text.split()
            local = ranked(stores["local"], words, unit)
            pg = ranked(stores["postgresql"], words, unit)
            assert bool(local) == bool(pg), text
            if not local:
                continue
            pg_scores = dict(pg)
            # the last places may tie or swap within the length norms' rounding: compare the top 8
            for key, score in local[:8]:
                if key in pg_scores:
                    compared += 1
                    worst = max(worst, abs(pg_scores[key] - score) / score)
            same_sets += {k for k, _ in local[:3]} == {k for k, _ in pg[:3]}
        assert compared > 300
        assert worst < 0.05, worst            # tantivy's one-byte length norms, nothing else
        assert same_sets >= 0.9 * len(queries), same_sets
    finally:
        for s in stores.values():
            s.close()


DOWNGRADE_TO_8 = """
ALTER TABLE hybrid_chunks ADD COLUMN len integer, ADD COLUMN agent_len integer;
UPDATE hybrid_chunks SET len = lens[1] + lens[2] + lens[4], agent_len = agent_lens[1] + agent_lens[2] + agent_lens[4];
ALTER TABLE hybrid_chunks DROP COLUMN lens, DROP COLUMN agent_lens;
ALTER TABLE hybrid_sections ADD COLUMN len integer, ADD COLUMN agent_len integer;
UPDATE hybrid_sections SET len = lens[1] + lens[2] + lens[4], agent_len = agent_lens[1] + agent_lens[2] + agent_lens[4];
ALTER TABLE hybrid_sections DROP COLUMN lens, DROP COLUMN agent_lens;
ALTER TABLE hybrid_vaults ADD COLUMN chunk_len bigint NOT NULL DEFAULT 0,
    ADD COLUMN section_len bigint NOT NULL DEFAULT 0;
ALTER TABLE hybrid_vaults DROP COLUMN chunk_lens, DROP COLUMN section_lens;
ALTER TABLE hybrid_terms DROP COLUMN df_title, DROP COLUMN df_headings, DROP COLUMN df_body;
UPDATE hybrid_schema SET version = 8;
"""


def test_a_schema_8_database_is_migrated_by_the_indexer(tmp_path, pg_server):
    """Schema 8 (one BM25 over all fields: a total length per unit, one document frequency
    per lexeme): a query server is told to run the indexer; the index run migrates (field
    lengths and frequencies counted from the tsvectors), reads every note again, and the
    keyword arm ranks as a database written by today's indexer does."""
    import psycopg
    from helpers import pg_consistent

    from hybrid.core.errors import StoreUnavailable
    from hybrid.store.pg import connect
    url = new_database(pg_server)
    h = hybrid.open(tmp_path / "home", embedder="hash:64", store=url, agent_exclude=["journal/**"])
    h.add_vault(SAMPLE_VAULT, "sample")
    h.index()
    queries = ["restic backup schedule", "kafka consumer lag", "pi-hole allowlist", "mortgage refinanse"]
    before = {q: [(p.path, p.start_line, round(p.score, 9)) for p in h.search(q, mode="lexical", top_k=10)]
              for q in queries}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(DOWNGRADE_TO_8)
    with pytest.raises(StoreUnavailable, match="schema 8; run `hybrid index`"):
        open_store(h.config.vault("sample"))
    report = h.index()[0]
    # every note read again (identifiers counted at each occurrence)
    assert report.updated > 50 and report.unchanged == 0
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT version FROM hybrid_schema").fetchone()[0] == connect.SCHEMA_VERSION
    assert pg_consistent(h.config.vault("sample")) > 100
    after = {q: [(p.path, p.start_line, round(p.score, 9)) for p in h.search(q, mode="lexical", top_k=10)]
             for q in queries}
    assert after == before and all(before.values())
    h.close()
