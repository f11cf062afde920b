"""The PostgreSQL keyword arm's packed postings (issue #31, hybrid.store.pg.packed): on a vault
whose common words sit in most chunks, with rare words, identifiers, typos, excludes, filters,
hidden and redacted notes, chunks and sections, small and large limits, the packed path returns
exactly the units and scores of the SQL scorer; it stays exact while notes come, change and go
after its build, rebuilds once enough changed, and is built by the indexer after a migration
from schema 6. Real PostgreSQL."""

from __future__ import annotations

import random

import numpy as np
import psycopg
import pytest
from conftest import new_database
from helpers import packed_consistent, pg_consistent, write
from secrets_fixtures import fake_secrets

import hybrid
from hybrid.core.errors import StoreUnavailable
from hybrid.store.base import NoteFilter
from hybrid.store.lexicon import LexicalQuery
from hybrid.store.pg import packed
from hybrid.store.pg.lexical import PgLexical
from hybrid.store.pg.store import open_store

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

COMMON = ["harbor", "lantern", "copper", "meadow", "signal", "weekly", "ledger", "orchard"]
RARE = ["zeppelin", "quasar", "marmalade", "obelisk", "tundra", "walrus", "fjord", "saffron"]
FOLDERS = ["work/ops", "work/design", "home", "journal"]
SECRET = next(c for c in fake_secrets() if c["name"] == "github-pat")


def vault_notes(seed: int = 7, n: int = 60) -> dict[str, str]:
    """Words from a steep distribution (the first common words in most chunks), with titles,
    headings, tags, identifiers and a few secrets (redacted for agents)."""
    rng = random.Random(seed)
    words = COMMON + RARE
    weights = [40.0 / (i + 1) for i in range(len(COMMON))] + [0.2] * len(RARE)
    notes = {}
    for i in range(n):
        tags = rng.sample(["ops", "home/garden", "finance"], rng.randint(0, 2))
        parts = [f"---\ntags: [{', '.join(tags)}]\n---\n# {' '.join(rng.sample(words, 2)).title()} {i}\n"]
        for _ in range(rng.randint(1, 4)):
            parts.append(f"\n## {' '.join(rng.choices(words, weights, k=2))}\n")
            for _ in range(rng.randint(1, 4)):
                sent = rng.choices(words, weights, k=rng.randint(5, 40))
                if rng.random() < 0.2:
                    sent.insert(rng.randrange(len(sent)), rng.choice(["orders-created", "user_id"]))
                parts.append(" ".join(sent).capitalize() + ".\n")
        if i % 9 == 4:
            parts.append(f"\nharbor lantern key:\n{SECRET['line']}\n")
        notes[f"{rng.choice(FOLDERS)}/note {i}.md"] = "".join(parts)
    return notes


QUERIES = [
    ["harbor", "lantern"], ["harbor", "lantern", "copper"], ["weekly"], ["meadow", "signal", "ledger", "orchard"],
    ["zeppelin"], ["quasar", "harbor"], ["marmalade", "walrus", "lantern"], ["orders-created"],
    ["user_id", "copper"], ["harbr", "lanternn"], ["the", "harbor", "and", "meadow"],
    ["github", "harbor"], ["token", "lantern", "key"],
]
FILTERS = [NoteFilter(), NoteFilter(folders=("work",)), NoteFilter(tags=("home/garden",)),
           NoteFilter(exclude_folders=("journal",)), NoteFilter(since=0.0),
           NoteFilter(folders=("home",), tags=("ops",))]


@pytest.fixture(scope="module")
def small_base():
    """Bases built for a small vault: every kind, every lexeme held by 3+ units."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(packed, "MIN_UNITS", 1)
        mp.setattr(packed, "MIN_DF", 3)
        yield mp


@pytest.fixture(scope="module")
def team(tmp_path_factory, pg_server, small_base):
    url = new_database(pg_server)
    root = tmp_path_factory.mktemp("vault")
    for rel, text in vault_notes().items():
        write(root, rel, text)
    h = hybrid.open(tmp_path_factory.mktemp("home"), embedder="hash:64", store=url,
                    agent_exclude=["journal/**"])
    h.add_vault(root, "v")
    h.index()
    yield h, root, url
    h.close()


def arms(h):
    store = open_store(h.config.vault("v"))
    hidden = [r[0] for r in store.query("SELECT id FROM hybrid_files WHERE vault=%s AND path LIKE 'journal/%%'",
                                        (store.vault_id,))]
    assert hidden and store.query("SELECT count(*) FROM hybrid_chunks WHERE agent_tsv IS NOT NULL").fetchone()[0]
    return store, {"people": store.lexical, "agent": PgLexical(store, agent=True, hidden_files=hidden)}


def both(arm: PgLexical, q: LexicalQuery, limit: int, **opts):
    arm.use_packed = False
    sql = arm.search_units(q, limit, **opts)
    arm.use_packed = True
    got = arm.search_units(q, limit, **opts)
    return sql, got, arm.answered


def same(sql, got) -> None:
    """The same units in the same order with the same scores, where units whose scores agree
    to the last bits float arithmetic leaves (numpy's sums and SQL's differ there) count as
    one place: their order is a tie's, and at the limit either side may cut a tie elsewhere."""
    assert [s for _, s in got] == pytest.approx([s for _, s in sql], rel=1e-9, abs=1e-12)
    assert ties(got) == ties(sql)


def ties(ranked) -> list[frozenset]:
    """The ranking as groups of units whose scores are equal but for float noise, best first;
    the last group is left out when it may continue past the cut."""
    groups: list[tuple[float, set]] = []
    for ids, score in ranked:
        if groups and score == pytest.approx(groups[-1][0], rel=1e-9, abs=1e-12):
            groups[-1][1].add(tuple(ids))
        else:
            groups.append((score, {tuple(ids)}))
    return [frozenset(g) for _, g in groups[:-1]]


def compare_all(h, limits=(1, 3, 10, 100)) -> dict[str, int]:
    store, views = arms(h)
    seen = {"packed": 0, "sql": 0, "found": 0}
    try:
        for arm in views.values():
            for words in QUERIES:
                for f in FILTERS:
                    for unit in ("chunk", "section"):
                        for limit in limits:
                            for q in (LexicalQuery(words), LexicalQuery(words[:2], excludes=["copper"])):
                                sql, got, how = both(arm, q, limit, unit=unit, where=f)
                                same(sql, got)
                                seen[how] += 1
                                seen["found"] += bool(sql)
    finally:
        store.close()
    return seen


def test_the_packed_postings_give_the_sql_scorers_ranking(team, monkeypatch):
    """Every query x filter x view x unit x limit: the same units in the same order, the same
    scores; most queries are answered from the packed rows, narrow filters from the list of
    the units passing them."""
    h, _, _ = team
    listed = []
    real = packed._listed
    monkeypatch.setattr(packed, "_listed", lambda *a: listed.append(1) or real(*a))
    seen = compare_all(h)
    assert seen["found"] > 800
    assert seen["packed"] > 0.7 * (seen["packed"] + seen["sql"]), seen
    assert len(listed) > 20


def test_the_packed_rows_equal_a_recount(team):
    """Each packed posting is its unit's term frequency per field as the SQL scorer computes
    it, the base's ids and field lengths are its units', every common lexeme is packed."""
    h, _, _ = team
    store = open_store(h.config.vault("v"))
    try:
        checked = packed_recount(store)
        assert checked > 1000
    finally:
        store.close()


def packed_recount(store) -> int:
    """The base's ids and lengths are its units', every lexeme held by MIN_DF units is packed,
    and each posting equals a recount (helpers.packed_consistent)."""
    from hybrid.store.pg.tsv import FIELDS, UNIT_CODE, UNIT_TABLE
    for unit, table in UNIT_TABLE.items():
        code = UNIT_CODE[unit]
        max_id, n, ids, lens = store.query(
            "SELECT max_id, n, ids, lens FROM hybrid_packed_base WHERE vault=%s AND unit=%s",
            (store.vault_id, code)).fetchone()
        want = store.query(f"SELECT id, lens FROM {table} WHERE vault=%s AND id <= %s ORDER BY id",
                           (store.vault_id, max_id)).fetchall()
        assert np.frombuffer(ids, ">i8").tolist() == [r[0] for r in want] and n == len(want)
        assert np.frombuffer(lens, ">i4").reshape(-1, len(FIELDS)).tolist() == [r[1] for r in want]
        rows = {r[0] for r in store.query("SELECT lexeme FROM hybrid_packed WHERE vault=%s AND unit=%s",
                                          (store.vault_id, code))}
        common = {r[0] for r in store.query("SELECT lexeme FROM hybrid_terms WHERE vault=%s AND unit=%s AND "
                                            "df >= %s", (store.vault_id, code, packed.MIN_DF))}
        assert rows == common
    return packed_consistent(store)


def indexed(tmp_path, pg_server, seed: int, n: int, **settings):
    """A vault of :func:`vault_notes` in a new database, indexed: (handle, folder, notes)."""
    url = new_database(pg_server)
    notes = vault_notes(seed=seed, n=n)
    root = tmp_path / "vault"
    for rel, text in notes.items():
        write(root, rel, text)
    h = hybrid.open(tmp_path / "home", embedder="hash:64", store=url, **settings)
    h.add_vault(root, "v")
    h.index()
    return h, root, notes


def test_exact_while_notes_change_after_the_build_then_rebuilt(tmp_path, pg_server, small_base):
    """Notes added, edited and deleted after the build are answered exactly (new units scored
    in SQL, deleted ones dropped) without a rebuild; once enough changed, the indexer builds
    anew."""
    h, root, notes = indexed(tmp_path, pg_server, 3, 50, agent_exclude=["journal/**"])

    def builds():
        store = open_store(h.config.vault("v"))
        try:
            return dict(store.query("SELECT unit, build FROM hybrid_packed_base WHERE vault=%s",
                                    (store.vault_id,)).fetchall())
        finally:
            store.close()
    first = builds()
    assert set(first) == {0, 1}
    small_base.setattr(packed, "REBUILD_MIN", 10_000)
    paths = sorted(notes)
    (root / paths[0]).unlink()
    write(root, paths[1], notes[paths[1]] + "\nharbor harbor harbor lantern quasar extra words here.\n")
    write(root, "home/new.md", "# Harbor lantern\n\nharbor lantern copper zeppelin harbor.\n")
    h.index()
    assert builds() == first   # not rebuilt: the changes are answered around the base
    seen = compare_all(h, limits=(3, 100))
    assert seen["packed"] > seen["sql"]
    pg_consistent(h.config.vault("v"))
    small_base.setattr(packed, "REBUILD_MIN", 1)
    small_base.setattr(packed, "REBUILD_SHARE", 0.0)
    write(root, "home/newer.md", "# Copper\n\ncopper meadow.\n")
    h.index()
    after = builds()
    assert after[0] != first[0] and after[1] != first[1]
    compare_all(h, limits=(10,))
    store = open_store(h.config.vault("v"))
    try:
        assert packed_recount(store) > 500
    finally:
        store.close()
    h.close()


def test_a_schema_6_database_is_migrated_and_built_by_the_indexer(tmp_path, pg_server, small_base):
    """Today's format (schema 6: no packed tables): a query server is told to run the
    indexer; the index run migrates, builds the bases, and answers as before."""
    h, _, _ = indexed(tmp_path, pg_server, 5, 30)
    url = h.config.vault("v").store
    before = h.search("harbor lantern copper", mode="lexical", top_k=10)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE hybrid_packed, hybrid_packed_base")
        conn.execute("DROP INDEX hybrid_sections_tags, hybrid_sections_modified")
        conn.execute("UPDATE hybrid_schema SET version = 6")
    with pytest.raises(StoreUnavailable, match="schema 6; run `hybrid index`"):
        open_store(h.config.vault("v"))
    h.index()
    store = open_store(h.config.vault("v"))
    try:
        assert store.query("SELECT count(*) FROM hybrid_packed_base").fetchone()[0] == 2
        assert {r[0] for r in store.query("SELECT indexname FROM pg_indexes WHERE tablename = "
                                          "'hybrid_sections'")} >= {"hybrid_sections_tags", "hybrid_sections_modified"}
        store.lexical.search_units(LexicalQuery(["harbor", "lantern", "copper"]), 10)
        assert store.lexical.answered == "packed"
    finally:
        store.close()
    after = h.search("harbor lantern copper", mode="lexical", top_k=10)
    assert [(p.path, p.start_line) for p in after] == [(p.path, p.start_line) for p in before]
    h.close()


def test_a_small_vault_keeps_no_base(tmp_path, pg_server, monkeypatch):
    """Below MIN_UNITS (the default's 2,000) nothing is packed; searches go the SQL path."""
    monkeypatch.setattr(packed, "MIN_UNITS", 2000)
    h, _, _ = indexed(tmp_path, pg_server, 2, 10)
    store = open_store(h.config.vault("v"))
    try:
        assert store.query("SELECT count(*) FROM hybrid_packed_base").fetchone()[0] == 0
        assert store.lexical.search_units(LexicalQuery(["harbor", "lantern"]), 5)
        assert store.lexical.answered == "sql"
    finally:
        store.close()
    h.close()


def test_a_reader_role_without_select_on_the_packed_tables_goes_on_without_them(team, caplog):
    """A query role granted SELECT before schema 7 made the tables: one warning naming the
    grant, and keyword search keeps answering (from SQL)."""
    h, _, url = team
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS packed_reader")
        conn.execute("CREATE ROLE packed_reader LOGIN")
        conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO packed_reader")
        conn.execute("REVOKE SELECT ON hybrid_packed, hybrid_packed_base FROM packed_reader")
    from hybrid.store.pg.store import PgStore
    reader = PgStore("v", url.replace("postgres:@", "packed_reader:@"))
    try:
        with caplog.at_level("WARNING", logger="hybrid"):
            got = reader.lexical.search_units(LexicalQuery(["harbor", "lantern"]), 5)
        assert got and reader.lexical.answered == "sql"
        assert any("GRANT SELECT" in r.getMessage() for r in caplog.records)
        reader.lexical.search_units(LexicalQuery(["harbor", "lantern"]), 5)
        assert reader.lexical.answered == ""   # not asked again
    finally:
        reader.close()
