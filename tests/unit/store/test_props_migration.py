"""An index made before property filters (local schema 5, PostgreSQL schema 9) gets each note's
property rows from the frontmatter its catalog keeps, on the next writer's open (no note read
again), and property filters then answer as on a fresh index; a local reader of the old catalog
answers them already, from a temporary copy."""
from __future__ import annotations

import sqlite3

import pytest
from helpers import indexed_vault

import hybrid
from hybrid.store.local.schema import SCHEMA_VERSION

NOTES = {
    "a.md": "---\nstatus: done\ntype: [meeting, review]\nrating: 5\ndue: 2025-12-01\n---\n# A\n\nalpha notes\n",
    "b.md": "---\nstatus: open\nrating: 2\n---\n# B\n\nbeta notes\n",
    "c.md": "# C\n\nno properties in these notes\n",
}
QUERIES = ["status:done", "type:review", "rating>=2", "due<2026-01-01", "rating<3"]


def answers(h) -> dict[str, list[str]]:
    return {q: sorted(x.path for x in h.search(q, top_k=10)) for q in QUERIES}


EXPECTED = {"status:done": ["a.md"], "type:review": ["a.md"], "rating>=2": ["a.md", "b.md"],
            "due<2026-01-01": ["a.md"], "rating<3": ["b.md"]}


def test_a_local_index_without_property_rows_is_read_then_migrated(tmp_path):
    h = indexed_vault(tmp_path, NOTES)
    assert answers(h) == EXPECTED
    h.close()
    db = next((tmp_path / "home").rglob("catalog.sqlite"))
    with sqlite3.connect(db) as conn:  # the catalog as schema 5 wrote it
        conn.execute("DROP TABLE file_props")
        conn.execute("UPDATE meta SET value='5' WHERE key='schema_version'")
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    assert answers(h) == EXPECTED  # a reader: from a temporary copy of the rows
    report = h.index()[0]
    assert report.error is None and report.updated == 0  # no note read again
    assert answers(h) == EXPECTED
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
        assert conn.execute("SELECT count(*) FROM file_props").fetchone()[0] == 7
    h.close()


@pytest.mark.slow
def test_a_postgresql_database_of_schema_9_is_migrated(tmp_path, pg_url):
    import psycopg

    from hybrid.core.errors import StoreUnavailable
    from hybrid.store.pg import connect
    h = indexed_vault(tmp_path, NOTES, store="postgresql")
    assert answers(h) == EXPECTED
    h.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TABLE hybrid_props")
        conn.execute("UPDATE hybrid_schema SET version=9")
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    with pytest.raises(StoreUnavailable, match="run `hybrid index` once to migrate it"):
        h.search("status:done")
    report = h.index()[0]
    assert report.error is None and report.updated == 0
    assert answers(h) == EXPECTED
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version FROM hybrid_schema").fetchone()[0] == connect.SCHEMA_VERSION
        assert conn.execute("SELECT count(*) FROM hybrid_props").fetchone()[0] == 7
    h.close()
