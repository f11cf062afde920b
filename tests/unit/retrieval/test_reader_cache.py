"""A long-lived handle keeps what a search reads of the ledger and derives from its rows alone
while the ledger is unchanged (issue #48): a change committed by an index run is seen by the
very next search, and a second search over unchanged data reads no row again."""

import dataclasses

from hybrid.store.base import ChunkRow
from tests.helpers import indexed_vault, write


def test_an_index_run_is_seen_by_the_next_search_of_the_same_handle(tmp_path):
    h = indexed_vault(tmp_path, {"a.md": "# Alpha\n\nThe kettle boils at dawn.\n",
                                 "b.md": "# Beta\n\nPorridge with honey.\n"})
    before = h.search("kettle", mode="lexical")
    assert before[0].path == "a.md" and "kettle boils at dawn" in before[0].snippet
    write(tmp_path / "vault", "a.md", "# Alpha\n\nThe kettle sings at noon.\n")
    write(tmp_path / "vault", "c.md", "---\ntags: [kitchen]\n---\n# Gamma\n\nA kettle of fish.\n")
    h.index()
    after = h.search("kettle", mode="lexical")
    assert {x.path for x in after} == {"a.md", "c.md"}
    assert "kettle sings at noon" in next(x for x in after if x.path == "a.md").snippet
    assert next(x for x in after if x.path == "c.md").tags == ["kitchen"]
    # the front block alone changes: the chunks keep their ids, their note's fields change
    write(tmp_path / "vault", "c.md", "---\ntags: [kitchen, fish]\n---\n# Gamma\n\nA kettle of fish.\n")
    h.index()
    assert next(x for x in h.search("kettle", mode="lexical") if x.path == "c.md").tags == ["kitchen", "fish"]
    (tmp_path / "vault" / "a.md").unlink()
    h.index()
    assert [x.path for x in h.search("kettle", mode="lexical")] == ["c.md"]
    h.close()


def test_a_row_the_reader_kept_is_read_again_after_a_commit(tmp_path):
    """A replaced chunk's row is marked dead (then purged): the reader's kept row must follow."""
    h = indexed_vault(tmp_path, {"a.md": "# Alpha\n\nThe kettle boils at dawn.\n"})
    hit = h.search("kettle", mode="lexical")[0]
    catalog = h.session.store(h.vaults[0]).catalog
    kept = catalog.chunks([hit.chunk_id])[hit.chunk_id]
    assert not kept.dead and catalog.get_meta("chunks_purged") is None
    write(tmp_path / "vault", "a.md", "# Alpha\n\nThe kettle sings at noon.\n")
    h.index()
    now = catalog.chunks([hit.chunk_id]).get(hit.chunk_id)
    assert now is None or now.dead
    h.close()


def test_unchanged_data_is_read_once(tmp_path, monkeypatch):
    h = indexed_vault(tmp_path, {"a.md": "# Alpha\n\nThe kettle boils at dawn.\n"})
    first = h.search("kettle", mode="lexical")
    catalog = h.session.store(h.vaults[0]).catalog
    reads = []
    real = catalog._read_chunks
    monkeypatch.setattr(catalog, "_read_chunks", lambda ids: reads.append(list(ids)) or real(ids))
    meta = []
    real_meta = catalog._read_meta
    monkeypatch.setattr(catalog, "_read_meta", lambda key: meta.append(key) or real_meta(key))
    again = h.search("kettle", mode="lexical")
    assert reads == [] and meta == []
    assert [x.to_dict() for x in again] == [x.to_dict() for x in first]
    h.close()


def test_a_row_derives_once_and_a_copy_derives_its_own():
    row = ChunkRow(1, "a.md", "A", "", 1, 2, "text", [], [], 0.0, "h")
    made = []
    assert row.derived("k", lambda r: made.append(r.text) or r.text.upper()) == "TEXT"
    assert row.derived("k", lambda r: made.append(r.text) or "other") == "TEXT"
    copy = dataclasses.replace(row, text="redacted")
    assert copy.derived("k", lambda r: made.append(r.text) or r.text.upper()) == "REDACTED"
    assert made == ["text", "redacted"]
    assert row == dataclasses.replace(row) and "_derived" not in dataclasses.asdict(row)
