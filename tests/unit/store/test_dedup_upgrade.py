"""An index made before deduplication (schema 3: no ``chunks.body_hash``; chunking version 7) gains it on
the next run: the column is added, every note is read once more, and copies drop their own
vectors for the first copy's, with nothing embedded (hybrid.indexing.shared)."""

from __future__ import annotations

import sqlite3

from helpers import CountingEmbedder, set_chunking_version, write

import hybrid

SECTION = "## Shared\n\nThe same words pasted into two notes about different things.\n"


def test_an_older_local_index_is_upgraded_without_embedding(tmp_path):
    vault = tmp_path / "vault"
    write(vault, "a.md", "# A\n\nApples.\n\n" + SECTION)
    write(vault, "b.md", "# B\n\nBoats.\n\n" + SECTION)
    emb = CountingEmbedder("hash:64")
    h = hybrid.open(tmp_path / "home", embedders=[emb], embedder="hash:64")
    h.add_vault(vault, "v")
    h.index()
    catalog = h.config.vault("v").index_dir / "catalog.sqlite"
    h.close()
    db = sqlite3.connect(str(catalog))  # as an older hybrid left it: each copy its own vector
    db.execute("DROP INDEX chunks_body")
    db.execute("ALTER TABLE chunks DROP COLUMN body_hash")
    db.execute("UPDATE meta SET value='3' WHERE key='schema_version'")
    first, second = (r[0] for r in db.execute("SELECT id FROM chunks WHERE text LIKE '## Shared%' ORDER BY id"))
    db.execute("INSERT INTO embeddings(model, text_hash, vector) SELECT model, 'own-copy', vector FROM "
               "embeddings e JOIN chunks c ON c.embed_hash = e.text_hash WHERE c.id = ?", (second,))
    db.execute("UPDATE chunks SET embed_hash = 'own-copy' WHERE id = ?", (second,))
    db.commit()
    db.close()
    h = hybrid.open(tmp_path / "home", embedders=[emb], embedder="hash:64")
    assert h.status()[0].shared_chunks == 0  # a reader of the old catalog: nothing shared yet
    set_chunking_version(h.config.vault("v"), 7)
    before = emb.texts
    report = h.index()[0]
    assert report.updated == 2 and emb.texts == before  # read again, nothing embedded
    st = h.status()[0]
    assert (st.shared_chunks, st.shared_texts, st.embeddings_saved) == (2, 1, 1)
    h.vacuum()
    db = sqlite3.connect(str(catalog))
    assert db.execute("SELECT count(*) FROM embeddings WHERE text_hash='own-copy'").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM chunks WHERE body_hash IS NULL").fetchone()[0] == 0
    db.close()
    h.close()
