"""A note's own fields (title, tags, aliases, properties) are read once per note of a batch of
chunk rows and shared by its chunks, on every backend: one note of n nested tags has about n/40
chunks, and a decoded copy of its tag list per chunk made indexing it (and replaying a journal
that holds it) cost n² in time and memory (issue #47: 200,000 tags, OOM-killed at 22 GB)."""

from __future__ import annotations

import pytest
from conftest import store_param
from helpers import ALL_STORES, index_on_backend

from hybrid.store import open_store

TAGS = 300  # 900 tags and parent tags: within MAX_NOTE_TAGS
NOTE = ("---\naliases: [Tag wall, Wall of tags]\nkind: wall\n---\n# Tags\n\n"
        + " ".join(f"#t{i}/a/b" for i in range(TAGS)) + "\n")


@pytest.fixture(scope="module", params=[store_param(k) for k in ALL_STORES])
def indexed(request, tmp_path_factory):
    h = index_on_backend(request, tmp_path_factory, {"wall.md": NOTE, "other.md": "# Other\n\n#solo text\n"})
    report = h.index()[0]
    assert report.added == 2 and not report.error
    yield h, h.config.vault("v")
    h.close()


def _shared(rows) -> None:
    wall = [r for r in rows if r.path == "wall.md"]
    assert len(wall) > 5  # many chunks, or the test shows nothing
    first = wall[0]
    assert len(first.tags) == TAGS and first.aliases == ["Tag wall", "Wall of tags"]
    for r in wall[1:]:
        # the very same objects: decoded once for the note, not once for each of its chunks
        assert r.tags is first.tags and r.aliases is first.aliases and r.props is first.props
        assert r.title is first.title


def test_a_notes_chunk_rows_share_its_fields(indexed):
    h, vault = indexed
    store = open_store(vault)
    try:
        rows = [r for batch in store.catalog.iter_chunks() for r in batch]
        _shared(rows)
        _shared(list(store.catalog.chunks([r.id for r in rows]).values()))
        _shared([r for batch in store.catalog.iter_chunks([r.id for r in rows], batch=1000) for r in batch])
        solo = [r for r in rows if r.path == "other.md"]
        assert solo and all(r.tags == ["solo"] for r in solo)  # each note its own
    finally:
        store.close()
