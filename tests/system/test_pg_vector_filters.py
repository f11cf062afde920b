"""Issue #31 (part B): on PostgreSQL the note filters (folders, tags, date, kinds, excluded
folders) are conditions of the vector query itself, on filter columns copied into
``hybrid_vectors``. The answers are today's: the same top k as a search restricted to the full
list of passing chunk ids (the old way), on an exact scan and on HNSW; the agent view still
leaves its hidden notes out; the copied columns follow a note's changes."""
import dataclasses
import datetime as dt

import numpy as np
import psycopg
import pytest
from conftest import new_database
from helpers import indexed_vault, paths, write

import hybrid
from hybrid.core.errors import StoreUnavailable
from hybrid.store.base import NoteFilter
from hybrid.store.pg.store import open_store

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

FOLDERS = ["work/design", "work/ops", "home", "projects/alpha"]
TAGS = ["infra", "infra/net", "garden", "money"]
WORDS = ("deploy canary rollback tomato compost budget invoice router switch vlan design review "
         "kafka queue backup restore garden seed ledger tax").split()


def _notes() -> dict[str, str]:
    notes = {}
    for i in range(48):
        folder = FOLDERS[i % len(FOLDERS)]
        tag = TAGS[(i // 2) % len(TAGS)]
        year = 2021 + i % 5
        words = " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(12))
        body = "\n\n## More\n\n".join(f"{words} part {p} of note {i}." for p in range(1 + i % 3))
        notes[f"{folder}/n{i:02d}.md"] = (f"---\ntags: [{tag}]\ncreated: {year}-03-0{1 + i % 9}\n---\n"
                                          f"# Note {i}\n\n{body}\n")
    for i in range(3):
        notes[f"work/ops/plain{i}.txt"] = f"plain text file {i} about router vlan backup\n"
    notes["work/design/secret.md"] = "---\nprivate: true\ntags: [infra]\n---\n# S\n\ndeploy canary rollback\n"
    return notes


SINCE_2024 = dt.datetime(2024, 1, 1).timestamp()
CASES = {
    "folder": NoteFilter(folders=("work",)),
    "two folders": NoteFilter(folders=("home", "projects/alpha")),
    "excluded folder": NoteFilter(exclude_folders=("work",)),
    "tag": NoteFilter(tags=("infra",)),            # with the nested child infra/net
    "nested tag": NoteFilter(tags=("infra/net",)),
    "since": NoteFilter(since=SINCE_2024),
    "source": NoteFilter(sources=("text",)),
    "combined": NoteFilter(folders=("work",), tags=("infra",), since=SINCE_2024,
                           exclude_folders=("work/ops",)),
    "nothing": NoteFilter(folders=("work",), tags=("garden",), since=dt.datetime(2030, 1, 1).timestamp()),
}


def _old_way(store, q, k, f: NoteFilter) -> list[tuple[int, float]]:
    """Today's answer: the full list of passing chunk ids, searched with an exact scan."""
    banned = store.catalog.filter_ids(NoteFilter(folders=f.exclude_folders)) if f.exclude_folders else set()
    allowed = store.catalog.filter_ids(dataclasses.replace(f, exclude_folders=())) if f.narrows else None
    with store.conn.transaction():
        store.query("SET LOCAL enable_indexscan = off")
        store.query("SET LOCAL enable_bitmapscan = off")
        return store.vector.search(q, k, allowed if allowed is not None else None, banned) \
            if allowed is None or allowed - banned else []


@pytest.fixture(scope="module", params=["exact", "hnsw", "hnsw-iterative"])
def vault(request, tmp_path_factory, pg_server):
    """An exact scan; HNSW as it is (filters this small are scanned exactly); HNSW with every
    filtered search an iterative scan (``exact_below`` 0: as a broad filter in a big vault)."""
    root = tmp_path_factory.mktemp(f"vecfilter-{request.param}")
    url = new_database(pg_server)
    hnsw = request.param.startswith("hnsw")
    h = indexed_vault(root, _notes(), "team", store=url, **({"ann_threshold": 1} if hnsw else {}))
    store = open_store(h.config.vault("team"))
    assert store.vector.has_index() == hnsw
    if request.param == "hnsw-iterative":
        store.vector.exact_below = 0
    yield h, store
    store.close()
    h.close()


def _queries(store, n=6):
    rng = np.random.default_rng(5)
    return [rng.standard_normal(store.vector.dim).astype(np.float32) for _ in range(n)]


@pytest.mark.parametrize("case", list(CASES))
def test_a_filtered_vector_search_returns_todays_top_k(vault, case):
    h, store = vault
    f = CASES[case]
    for k in (5, 40):
        for q in _queries(store):
            new = store.vector.search(q, k, where=f)
            old = _old_way(store, q, k, f)
            assert [i for i, _ in new] == [i for i, _ in old], (case, k)
            assert np.allclose([s for _, s in new], [s for _, s in old], atol=1e-6)
    if case == "nothing":
        assert not store.vector.search(_queries(store)[0], 10, where=f)
    else:
        assert store.vector.search(_queries(store)[0], 10, where=f)


def test_a_narrow_filter_on_hnsw_is_scanned_exactly_and_a_broad_one_is_not(vault):
    """On HNSW, a filter the planner expects few vectors to pass goes straight to the exact
    scan (the iterative scan would visit thousands of tuples and come back short); one it
    expects many to pass is the iterative scan; unfiltered is HNSW."""
    h, store = vault
    q = _queries(store)[0]
    if not store.vector.has_index():  # nothing to choose: every search is an exact scan
        for where in (None, NoteFilter(folders=("work",))):
            store.vector.search(q, 5, where=where)
            assert store.vector.answered == "exact"
        return
    narrow = NoteFilter(folders=("work/design",), tags=("infra",))
    store.vector.search(q, 5, where=narrow)
    assert store.vector.answered == ("hnsw" if store.vector.exact_below == 0 else "exact")
    store.vector.search(q, 5)
    assert store.vector.answered == "hnsw"
    before = store.vector.exact_below
    try:
        store.vector.exact_below = 0
        store.vector.search(q, 5, where=NoteFilter(folders=("work",)))
        assert store.vector.answered == "hnsw"
        store.vector.exact_below = 10**9
        store.vector.search(q, 5, where=NoteFilter(folders=("work",)))
        assert store.vector.answered == "exact"
    finally:
        store.vector.exact_below = before


def test_filters_combine_with_phrase_ids_and_banned_ids(vault):
    h, store = vault
    q = _queries(store)[0]
    f = NoteFilter(folders=("work",))
    passing = store.catalog.filter_ids(NoteFilter(folders=("work",)))
    some = sorted(passing)[::2] + sorted(store.catalog.filter_ids(NoteFilter(folders=("home",))))[:3]
    banned = set(sorted(passing)[:4])
    got = store.vector.search(q, 50, allowed=some, banned=banned, where=f)
    assert {i for i, _ in got} == (set(some) & passing) - banned


def test_filters_through_the_pipeline_and_the_agent_view(vault):
    """Search by the handle (both modes that run the vector arm): the folder filter holds, and
    the agent view still leaves the private note out, filters or not."""
    h, _ = vault
    for mode in ("vector", "hybrid"):
        owner = paths(h.search("deploy canary rollback", mode=mode, folders=["work"], top_k=60))
        agent = paths(h.search("deploy canary rollback", mode=mode, folders=["work"], top_k=60, agent=True))
        assert owner and all(p.startswith("work/") for p in owner + agent)
        assert "work/design/secret.md" in owner and "work/design/secret.md" not in agent
        assert set(agent) == set(owner) - {"work/design/secret.md"}
        tagged = paths(h.search("deploy canary", mode=mode, tags=["infra"], top_k=60, agent=True))
        assert tagged and "work/design/secret.md" not in tagged


def test_a_note_change_moves_its_vectors_filter_columns(tmp_path, pg_url):
    """Retag, move to another folder, a new date: the vectors' copies follow in the change's
    own transaction (new chunks, new vectors), so no filter reads a stale copy."""
    h = indexed_vault(tmp_path, _notes(), "team", store="postgresql")
    vault = tmp_path / "vault"
    (vault / "work/ops/n01.md").unlink()
    write(vault, "home/moved.md", "---\ntags: [garden]\ncreated: 2025-06-01\n---\n# Moved\n\nzebra quokka\n")
    text = (vault / "home/n02.md").read_text()
    assert "tags: [infra/net]" in text and "created: 2023" in text
    text = text.replace("tags: [infra/net]", "tags: [money]").replace("created: 2023", "created: 2019")
    write(vault, "home/n02.md", text)
    h.index()
    with psycopg.connect(pg_url) as conn:
        stale = conn.execute("SELECT count(*) FROM hybrid_vectors v JOIN hybrid_chunks c ON c.id = v.id "
                             "WHERE (v.path, v.tag_set, v.modified) IS DISTINCT FROM "
                             "(c.path, c.tag_set, c.modified)").fetchone()[0]
        n2 = conn.execute("SELECT DISTINCT tag_set, modified FROM hybrid_vectors WHERE path='home/n02.md'").fetchall()
    assert stale == 0
    assert len(n2) == 1 and n2[0][0] == ["money"] and n2[0][1] < dt.datetime(2020, 1, 1).timestamp()
    assert "home/moved.md" in paths(h.search("zebra quokka", mode="vector", folders=["home"], tags=["garden"]))
    assert "home/n02.md" in paths(h.search("note 2", mode="vector", tags=["money"], top_k=50))
    assert "home/n02.md" not in paths(h.search("note 2", mode="vector", tags=["infra"], top_k=50))
    h.close()


def _back_to_schema(pg_url: str, version: int, indexes: tuple[str, ...], alter: str) -> None:
    """Make the database look as schema ``version`` wrote it: drop ``indexes``, run ``alter``."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for index in indexes:
            conn.execute(f"DROP INDEX {index}")
        conn.execute(alter)
        conn.execute("UPDATE hybrid_schema SET version=%s", (version,))


def test_schema_5_is_migrated_with_the_vectors_filter_columns(tmp_path, pg_url):
    """A database of schema 5 (vectors without filter columns) is migrated by the next index
    run: the columns are filled from the chunks in the migration's transaction, the HNSW index
    it dropped is built again at the end of that run, and filtered searches answer as before."""
    from hybrid.store.pg import connect
    h = indexed_vault(tmp_path, _notes(), "team", store="postgresql", ann_threshold=1)
    q = "deploy canary rollback"
    before = paths(h.search(q, mode="vector", folders=["work"], tags=["infra"], top_k=30))
    _back_to_schema(pg_url, 5, ("hybrid_vectors_path", "hybrid_vectors_modified", "hybrid_vectors_tags"),
                    "ALTER TABLE hybrid_vectors DROP COLUMN path, DROP COLUMN tag_set, DROP COLUMN modified")
    h.close()
    h = hybrid.open(tmp_path / "home", embedder="hash:64", ann_threshold=1)
    with pytest.raises(StoreUnavailable, match="run `hybrid index` once to migrate it"):
        h.search(q, mode="vector")
    h.index()
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version FROM hybrid_schema").fetchone()[0] == connect.SCHEMA_VERSION
        assert conn.execute("SELECT count(*) FROM hybrid_vectors v JOIN hybrid_chunks c ON c.id = v.id WHERE "
                            "(v.path, v.tag_set, v.modified) IS DISTINCT FROM "
                            "(c.path, c.tag_set, c.modified)").fetchone()[0] == 0
    store = open_store(h.config.vault("team"))
    assert store.vector.has_index()  # dropped by the migration, built again by the same run
    store.close()
    assert paths(h.search(q, mode="vector", folders=["work"], tags=["infra"], top_k=30)) == before
    h.close()


def test_schema_7_is_migrated_with_the_notes_tag_sets(tmp_path, pg_url):
    """A database of schema 7 (notes' tags as JSON only) is migrated by the next index run:
    each note's tag set is computed in SQL exactly as the indexer writes it (every tag and its
    ancestors, first seen first), and tag filters over notes answer as before."""
    from hybrid.store.base import tag_set
    from hybrid.store.pg import connect
    notes = _notes()
    notes["home/nested.md"] = "---\ntags: [a/b/c, a/d, infra, a/b/c]\n---\n# Nested\n\nnested tags here\n"
    notes["home/empty.md"] = "---\ntags: [garden]\n---\n"  # a tag and no chunk at all
    h = indexed_vault(tmp_path, notes, "team", store="postgresql")
    store = open_store(h.config.vault("team"))
    before = {t: sorted(store.catalog.note_ids(NoteFilter(tags=(t,)))) for t in ("infra", "a", "a/b", "garden", "zzz")}
    store.close()
    with psycopg.connect(pg_url) as conn:
        written = dict(conn.execute("SELECT path, tag_set FROM hybrid_files").fetchall())
    assert written["home/nested.md"] == ["a", "a/b", "a/b/c", "a/d", "infra"]
    _back_to_schema(pg_url, 7, ("hybrid_files_tags", "hybrid_files_path", "hybrid_files_modified"),
                    "ALTER TABLE hybrid_files DROP COLUMN tag_set")
    h.close()
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    with pytest.raises(StoreUnavailable, match="schema 7; run `hybrid index`"):
        h.search("nested tags", tags=["a"])
    h.index()
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version FROM hybrid_schema").fetchone()[0] == connect.SCHEMA_VERSION
        rows = conn.execute("SELECT path, tags, tag_set FROM hybrid_files").fetchall()
    import json
    assert {p: t for p, _, t in rows} == written
    assert all(t == tag_set(json.loads(tags)) for _, tags, t in rows)
    store = open_store(h.config.vault("team"))
    assert {t: sorted(store.catalog.note_ids(NoteFilter(tags=(t,)))) for t in before} == before
    assert before["a/b"] and before["garden"] and not before["zzz"]
    store.close()
    assert "home/nested.md" in paths(h.search("nested tags", tags=["a/b"]))
    h.close()
