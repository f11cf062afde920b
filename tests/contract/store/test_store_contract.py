"""The store contract (:mod:`hybrid.store.port`): one suite, run against every backend and the
agent view of each. A new backend starts by passing it; a test here that needs to know which
backend it runs on is a hole in the port.

The vault is small and indexed once per backend with the hash embedder (this is about the
contract, not ranking quality)."""

from __future__ import annotations

import os

import pytest
from conftest import store_param
from helpers import ALL_STORES, index_on_backend, write

from hybrid.core.errors import VaultError
from hybrid.sources import FetchedPage
from hybrid.store import backend, open_store
from hybrid.store.base import NoteFilter
from hybrid.store.lexicon import LexicalQuery

NOTES = {
    "work/orders.md": "---\ntags: [work, Kafka]\n---\n# Orders pipeline\n\nThe `orders-created` topic has "
                      "12 partitions.\n\n## Consumers\n\nbilling reads it.\n",
    "work/deep/retention.md": "---\ntags: [work/retention]\naliases: [Keep policy]\n---\n# Retention\n\n"
                              "Orders are kept for ninety days.\n",
    "home/garden.md": "# Garden\n\nTomatoes need six hours of sun.\n",
    "home/diary.md": "---\ntags: [Private]\n---\n# Diary\n\nTomatoes again, and a secret plan.\n",
    "home/plain.txt": "Plain text about sourdough starters.\n",
}


@pytest.fixture(scope="module", params=[store_param(k) for k in ALL_STORES])
def indexed(request, tmp_path_factory):
    """(handle, vault) of the small vault, indexed once on the backend the test runs for."""
    h = index_on_backend(request, tmp_path_factory, NOTES)
    vault = h.config.vault("v")
    os.utime(vault.path / "home/garden.md", (1_600_000_000, 1_600_000_000))
    report = h.index()[0]
    assert report.added == len(NOTES) and not report.error
    yield h, h.config.vault("v")
    h.close()


@pytest.fixture(params=["owner", "agent"])
def searchable(request, indexed):
    """What a search reads: the owner's store, or the agent view of it (a :class:`Searchable`)."""
    h, vault = indexed
    return request.param, (h.session.agent_store(vault) if request.param == "agent" else h.session.store(vault))


def _ids_by_path(store) -> dict[str, int]:
    return {n.path: n.id for n in store.ledger.notes()}


# --- the ledger's named queries ----------------------------------------------------------------
@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_notes_lists_every_live_note_with_its_fields(indexed):
    h, vault = indexed
    store = open_store(vault)
    try:
        notes = {n.path: n for n in store.catalog.notes()}
        assert set(notes) == set(NOTES)
        assert notes["work/orders.md"].tags == ["work", "kafka"]  # tags are normalised lower-case
        assert notes["work/deep/retention.md"].aliases == ["Keep policy"]
        assert notes["home/garden.md"].modified == pytest.approx(1_600_000_000)
        some = [notes["home/garden.md"].id, notes["home/plain.txt"].id]
        assert {n.path for n in store.catalog.notes(some)} == {"home/garden.md", "home/plain.txt"}
        assert list(store.catalog.notes([])) == []
    finally:
        store.close()


def test_file_fields_and_paths(indexed):
    h, vault = indexed
    store = open_store(vault)
    try:
        tags, props = store.catalog.file_fields("work/orders.md")
        assert tags == ["work", "kafka"] and props == {"tags": ["work", "Kafka"]}
        assert store.catalog.file_fields("nope.md") is None
        assert {p for _, p in store.catalog.file_paths()} == set(NOTES)
    finally:
        store.close()


def test_files_mentioning_finds_every_candidate_whatever_the_case(indexed):
    """The agent view's prefilter: a superset of the notes carrying a key or a tag, in any case
    (a tag `#Private` is the private tag `private`)."""
    h, vault = indexed
    store = open_store(vault)
    try:
        found = {path for _, path, _, _ in store.catalog.files_mentioning(("private",), ("private",))}
        assert "home/diary.md" in found and "home/garden.md" not in found
        by_key = {path for _, path, _, _ in store.catalog.files_mentioning(("tags",), ())}
        assert {"work/orders.md", "work/deep/retention.md", "home/diary.md"} <= by_key
        assert list(store.catalog.files_mentioning((), ())) == []
    finally:
        store.close()


def test_counts_chunks_and_spans(indexed):
    h, vault = indexed
    store = open_store(vault)
    try:
        ids = _ids_by_path(store)
        orders = ids["work/orders.md"]
        chunk_ids = store.catalog.chunk_ids_of([orders])
        assert chunk_ids and store.catalog.live_counts([orders]) == (1, len(chunk_ids))
        assert store.catalog.live_counts([]) == (0, 0)
        first, start, end = store.catalog.note_spans([orders])[orders]
        assert first in chunk_ids and 1 <= start <= end
        rows = store.catalog.chunks(sorted(chunk_ids))
        assert {r.path for r in rows.values()} == {"work/orders.md"}
        assert start == min(r.start_line for r in rows.values()) and end == max(r.end_line for r in rows.values())
        assert store.catalog.file_count() == len(NOTES)
        assert store.catalog.chunk_count() == sum(store.catalog.live_counts(ids.values())[1:])
    finally:
        store.close()


def test_filters_by_folder_tag_date_and_kind(searchable):
    who, store = searchable
    ids = {p: i for p, i in _ids_by_path(store).items()}
    notes = lambda **kw: {p for p, i in ids.items() if i in set(store.catalog.note_ids(NoteFilter(**kw)))}  # noqa: E731
    assert notes(folders=["work"]) == {"work/orders.md", "work/deep/retention.md"}
    assert notes(tags=["work"]) == {"work/orders.md", "work/deep/retention.md"}  # work/retention is a child
    assert notes(tags=["work/retention"]) == {"work/deep/retention.md"}
    assert notes(sources=["text"]) == {"home/plain.txt"}
    assert "home/garden.md" not in notes(since=1_700_000_000)
    private = notes(folders=["home"])
    assert ("home/diary.md" in private) == (who == "owner")  # hidden from agents, in the ledger's query
    chunk_ids = store.catalog.filter_ids(NoteFilter(folders=("home",)))
    assert chunk_ids and all(r.path.startswith("home/") for r in store.catalog.chunks(sorted(chunk_ids)).values())


def test_meta(indexed):
    h, vault = indexed
    store = open_store(vault)
    try:
        assert store.catalog.get_meta("embedder") == "hash:64" and store.embedder_id == "hash:64"
        assert store.catalog.get_meta("no such key") is None
    finally:
        store.close()


def test_fetched_pages_keep_a_success_over_a_later_failure(indexed):
    h, vault = indexed

    def job(store):
        cat = store.catalog
        cat.put_fetched([FetchedPage("https://a.example/x", True, "X", "text of x", "", 200, 1.0),
                         FetchedPage("https://a.example/y", False, "", "", "HTTP 404", 404, 1.0)])
        cat.put_fetched([FetchedPage("https://a.example/x", False, "", "", "timed out", None, 2.0)])
        got = cat.fetched()
        assert got["https://a.example/x"].ok and got["https://a.example/x"].text == "text of x"
        assert got["https://a.example/y"].error == "HTTP 404"
        assert list(cat.fetched("https://a.example/y")) == ["https://a.example/y"]
        assert cat.drop_fetched(["https://a.example/x"]) == 1
        assert list(cat.fetched()) == ["https://a.example/x"]
        return cat.drop_fetched([])

    assert backend(vault).write(vault, job, reembed=False, wait=5, view=_view(h, vault), redactor=None) == 1


# --- the arms ------------------------------------------------------------------------------------
def test_lexical_arm_ranks_chunks_and_sections_and_repairs_spelling(searchable):
    who, store = searchable
    hits = store.lexical.search(LexicalQuery(terms=["partitions"]), 5)
    rows = store.catalog.chunks([i for i, _ in hits])
    assert hits and rows[hits[0][0]].path == "work/orders.md"
    units = store.lexical.search_units(LexicalQuery(terms=["orders"]), 5, unit="section")
    assert units and all(isinstance(ids, list) and ids for ids, _ in units)
    assert store.lexical.matching_ids(LexicalQuery(terms=["tomatoes"])) == set(store.catalog.filter_ids(
        among=sorted(store.lexical.matching_ids(LexicalQuery(terms=["tomatoes"])))))
    tomatoes = {r.path for r in store.catalog.chunks(sorted(store.lexical.matching_ids(
        LexicalQuery(terms=["tomatoes"])))).values()}
    assert "home/garden.md" in tomatoes and ("home/diary.md" in tomatoes) == (who == "owner")
    # a word held by its stem (`tomatos` → tomato) is no typo; a word only a private note
    # holds is unknown to an agent, and never offered to it as a repair
    owner = who == "owner"
    assert store.lexical.known(["Tomatos", "starter", "secret", "drawing"]) == (
        {"tomatos", "starter", "secret"} if owner else {"tomatos", "starter"})
    assert store.lexical.corrections(["tomatoez", "tomatos", "secrte"]) == (
        {"tomatoez": "tomatoes", "secrte": "secret"} if owner else {"tomatoez": "tomatoes"})
    typo = store.lexical.matching_ids(LexicalQuery(terms=["gardne"], typos=["gardne"]))
    assert {r.path for r in store.catalog.chunks(sorted(typo)).values()} == {"home/garden.md"}
    assert not store.lexical.matching_ids(LexicalQuery(terms=["gardne"], typos=[]))


def test_vector_arm_searches_inside_allowed_and_never_banned(searchable, indexed):
    who, store = searchable
    h, vault = indexed
    qvec = h.embedder("hash:64").embed_query("tomatoes sun")
    assert store.vector.count() >= len(NOTES) - (who == "agent")
    hits = store.vector.search(qvec, 5)
    assert hits and hits == sorted(hits, key=lambda x: -x[1])
    best = hits[0][0]
    assert best not in {i for i, _ in store.vector.search(qvec, 5, banned={best})}
    allowed = {i for i, _ in hits[1:3]}
    assert {i for i, _ in store.vector.search(qvec, 5, allowed=allowed)} <= allowed
    paths = {r.path for r in store.catalog.chunks([i for i, _ in store.vector.search(qvec, 50)]).values()}
    assert ("home/diary.md" in paths) == (who == "owner")


def test_what_a_reader_may_not_see_is_said_by_the_store(searchable):
    who, store = searchable
    ids = _ids_by_path(store)
    assert (ids["home/diary.md"] in store.hidden_files) == (who == "agent")
    assert store.catalog.shows("Private") is True  # no secret in it
    assert store.embedder_id == "hash:64"


def test_a_ledger_that_keeps_texts_gives_each_document_as_it_was_read(searchable):
    """Where the ledger keeps texts (a machine without the folder reads them: hybrid.app.reader),
    each is the document as the indexer read it, and an agent's leaves out what it may not see;
    a ledger that keeps none says so and gives none."""
    who, store = searchable
    texts = {p: store.catalog.note_text(p) for p in [*NOTES, "nope.md"]}
    if not store.catalog.keeps_text:
        assert set(texts.values()) == {None}
        return
    shown = {p: t for p, t in NOTES.items() if who == "owner" or p != "home/diary.md"}
    assert texts == {**{p: None for p in [*NOTES, "nope.md"]}, **shown}


# --- the backend ---------------------------------------------------------------------------------
def test_facts_and_a_vault_not_indexed_yet(indexed, tmp_path):
    h, vault = indexed
    facts = backend(vault).facts(vault, sizes=True)
    assert facts is not None and (facts.notes, facts.embedder) == (len(NOTES), "hash:64")
    assert facts.chunks > 0 and sorted(facts.documents) == sorted(NOTES)
    assert facts.vector_index.startswith("exact")
    write(tmp_path / "other", "a.md", "# A\n")
    h.add_vault(tmp_path / "other", "other")
    other = h.config.vault("other")
    try:
        assert backend(other).facts(other, sizes=False) is None
        with pytest.raises(VaultError, match="not indexed yet"):
            open_store(other)
    finally:
        h.remove_vault("other")


def test_write_runs_one_job_as_the_only_writer(indexed):
    h, vault = indexed
    seen = []
    got = backend(vault).write(vault, lambda store: seen.append(store.writable) or "done", reembed=False,
                               wait=0, view=_view(h, vault), redactor=None)
    assert got == "done" and seen == [True]


def test_vacuum_reports_and_keeps_every_note(indexed):
    h, vault = indexed
    h.session.close_store(vault.name)
    report = backend(vault).vacuum(vault, wait=5)
    assert report.vault == "v" and report.embeddings_removed >= 0
    assert h.search("partitions", mode="lexical")[0].path == "work/orders.md"


def _view(h, vault):
    from hybrid.store.agent.view import AgentView
    return AgentView.of(vault, h.settings)


def test_data_version_changes_when_notes_change(indexed):
    """(Last: it changes the vault, then puts it back.) A long-lived reader learns of a change
    by the ledger's data version, without reading the ledger."""
    h, vault = indexed
    reader = open_store(vault)
    try:
        before = reader.catalog.data_version()
        added = write(vault.path, "tmp/new.md", "# New\n\nA note that comes and goes.\n")
        h.index()
        assert reader.catalog.data_version() != before
        added.unlink()
        assert h.index()[0].removed == 1
    finally:
        reader.close()
