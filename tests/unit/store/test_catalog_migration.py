"""A local index of schema 2 (before each note's links were recorded, issue #30) is read as it
is, then migrated by the next index run, which reads every note again for its links. The
PostgreSQL store's migrations: tests/system/test_team_mode.py."""

from __future__ import annotations

import json
import sqlite3

from helpers import consistent, write
from helpers import link_graph as graph

import hybrid
from hybrid.store.local.schema import SCHEMA_VERSION


def test_a_local_index_without_links_is_read_then_migrated(tmp_path):
    vault = tmp_path / "vault"
    write(vault, "a.md", "# A\n\nSee [[b]].\n")
    write(vault, "b.md", "# B\n\nBack to nothing.\n")
    h = hybrid.open(tmp_path / "home", embedder="hash:32")
    h.add_vault(vault, "v")
    h.index()
    h.close()
    db = next((tmp_path / "home").rglob("catalog.sqlite"))
    with sqlite3.connect(db) as conn:  # the catalog as schema 2 wrote it
        conn.execute("ALTER TABLE files DROP COLUMN links")
        conn.execute("DROP INDEX chunks_body")  # schema 4's (duplicates): not there yet either
        conn.execute("ALTER TABLE chunks DROP COLUMN body_hash")
        conn.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
        chunking = json.loads(conn.execute("SELECT value FROM meta WHERE key='chunking'").fetchone()[0])
        conn.execute("UPDATE meta SET value=? WHERE key='chunking'", (json.dumps({**chunking, "version": 6}),))
    h = hybrid.open(tmp_path / "home", embedder="hash:32")
    assert [x.path for x in h.search("back to nothing", mode="lexical")][:1] == ["b.md"]  # a reader reads it
    g, _ = graph(h)
    assert not g.out  # no links recorded yet
    report = h.index()[0]
    assert report.error is None and report.updated == 2  # every note read again, for its links
    g, ids = graph(h)
    assert g.outlinks(ids["a.md"]) == [ids["b.md"]]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    h.close()


def test_a_local_index_without_tag_sets_is_read_then_migrated(tmp_path):
    """Schema 4 (tags as JSON only): a reader filters by tag from the JSON as before; the next
    index run fills ``file_tags`` in SQL exactly as the indexer writes it (every tag and each
    ancestor), reading no note again, and tag filters answer the same."""
    vault = tmp_path / "vault"
    write(vault, "a.md", "---\ntags: [proj/alpha/x, home]\n---\n# A\n\nalpha notes here\n")
    write(vault, "b.md", "---\ntags: [proj/beta, proj/alpha/x]\n---\n# B\n\nbeta notes here\n")
    write(vault, "c.md", "# C\n\nno tags in these notes\n")
    h = hybrid.open(tmp_path / "home", embedder="hash:32")
    h.add_vault(vault, "v")
    h.index()
    asked = {t: sorted(x.path for x in h.search("notes", tags=[t], top_k=10)) for t in ("proj", "proj/alpha", "home")}
    assert asked == {"proj": ["a.md", "b.md"], "proj/alpha": ["a.md", "b.md"], "home": ["a.md"]}
    h.close()
    db = next((tmp_path / "home").rglob("catalog.sqlite"))
    with sqlite3.connect(db) as conn:
        written = sorted(conn.execute("SELECT tag, file_id FROM file_tags").fetchall())
        conn.execute("DROP TABLE file_tags")
        conn.execute("UPDATE meta SET value='4' WHERE key='schema_version'")
    h = hybrid.open(tmp_path / "home", embedder="hash:32")
    store = h.session.store(h.vaults[0])
    assert not store.catalog.has_tag_sets  # a reader reads the JSON tags
    assert {t: sorted(x.path for x in h.search("notes", tags=[t], top_k=10)) for t in asked} == asked
    report = h.index()[0]
    assert report.error is None and report.updated == 0
    with sqlite3.connect(db) as conn:
        assert sorted(conn.execute("SELECT tag, file_id FROM file_tags").fetchall()) == written
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    assert {t: sorted(x.path for x in h.search("notes", tags=[t], top_k=10)) for t in asked} == asked
    consistent(h, "v")
    h.close()
