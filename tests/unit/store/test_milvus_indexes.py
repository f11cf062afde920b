"""The Milvus indexes (hybrid.store.milvus) on a real Milvus Lite: the lexical index ranks as the
local tantivy index does over the same rows (ids and scores), its write side keeps counts and
statistics through edits and replays, every note filter and query part holds, and the vector
index searches as FAISS's does. One Milvus Lite folder serves the module; each test writes
collections of its own prefix."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import socket
import time

import numpy as np
import pytest

from hybrid.core.errors import IndexCorrupt, StoreUnavailable
from hybrid.store.base import ChunkRow, NoteFilter, VectorSpec
from hybrid.store.lexicon import LexicalQuery
from hybrid.store.local.lexical import TantivyIndex
from hybrid.store.milvus.bm25 import Stats
from hybrid.store.milvus.client import SCHEMA_KEY, collection_name, connect, explain
from hybrid.store.milvus.lexical import MilvusLexical
from hybrid.store.milvus.vector import MilvusVector
from hybrid.store.props import PropFilter

pytestmark = [pytest.mark.slow, pytest.mark.milvus]

NASTY = ['q"uote', "back\\slash", "per%cent_under", "it's", "new\nline", "ü/ß", "a]b[c", '"; drop']
SENTENCES = [
    "The backup job runs nightly and restores snapshots from the NAS when a disk fails.",
    "Docker compose brings up the kubernetes dashboard behind the reverse proxy.",
    "Running the migration against a live database needs a lock timeout of 5s.",
    "Set --advertise-routes=10.0.0.0/24 on the subnet router and approve it in the admin console.",
    "Sourdough bread slumps when the dough is over-proofed; shape it tighter next time.",
    "The orders-created topic lags when consumers rebalance too often.",
    "Kafka consumer lag grows during a rebalance storm; raise max.poll.interval.ms.",
    "We budget three months of living costs in cash as an emergency fund.",
    "Lisbon museums are closed on Mondays, so plan the trip around them.",
    "pg_try_advisory_lock(42001) guards the nightly job against running twice.",
    "保管庫のバックアップは毎晩実行されます。",
    "A backup that was never restored is not a backup at all, runs the old saying.",
]


def make_rows(seed: int = 7, notes: int = 36) -> list[ChunkRow]:
    """Notes of one to three heading sections of one to three chunks, consecutive ids, in
    folders, tagged (nested tags), some with aliases, properties and other kinds; chunk texts
    from short to well past 40 tokens (where tantivy's field norms round lengths)."""
    rng = random.Random(seed)
    rows, cid = [], 1
    kinds = [".md"] * 6 + [".pdf", ".txt", ".canvas"]
    for n in range(notes):
        folder = ["work", "work/runbooks", "home-lab", "journal", NASTY[n % len(NASTY)]][n % 5]
        path = f"{folder}/note {n}{kinds[n % len(kinds)]}"
        tags = [["ops/backup"], ["ops/kafka", "work"], [], [NASTY[n % len(NASTY)]]][n % 4]
        props = json.dumps({"status": ["done", "todo"][n % 2], "rating": n % 5})
        for s in range(rng.randint(1, 3)):
            heading = f"Note {n} > Section {s} {rng.choice(['backup', 'setup', 'notes', 'kafka'])}"
            for _ in range(rng.randint(1, 3)):
                text = " ".join(rng.choice(SENTENCES) for _ in range(rng.choice([1, 2, 4, 9])))
                rows.append(ChunkRow(cid, path, f"Note {n}", heading, 1, 9, text, tags,
                                     [f"alias {n}"] if n % 3 == 0 else [], 1.7e9 + 86400 * n, "",
                                     file_id=n + 1, props=props))
                cid += 1
    return rows


ROWS = make_rows()

# a dozen-odd queries of every kind the pipeline sends: words, stopwords, identifiers, CJK,
# phrases (one word, several, an identifier), exclusions, typos (judged by the arm or given)
QUERIES = [
    LexicalQuery(["backup", "restore"]),
    LexicalQuery(["how", "do", "we", "restore", "a", "backup"]),
    LexicalQuery(["the", "who"]),
    LexicalQuery(["--advertise-routes=10.0.0.0/24"]),
    LexicalQuery(["orders-created"]),
    LexicalQuery(["max.poll.interval.ms", "kafka"]),
    LexicalQuery(["保管庫"]),
    LexicalQuery(["note", "alias"]),
    LexicalQuery(["backup"], phrases=["nightly job"]),
    LexicalQuery(phrases=["orders-created"]),
    LexicalQuery(phrases=["rebalance"], excludes=["storm"]),
    LexicalQuery(["backup"], excludes=["never restored"]),
    LexicalQuery(["kafka", "rebalnce"]),
    LexicalQuery(["dokcer", "compose"], typos=["dokcer"]),
    LexicalQuery(excludes=["backup"]),
]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    started = time.perf_counter()
    handle = connect(f"milvus://{tmp_path_factory.mktemp('milvus')}/index.db", "test")
    assert time.perf_counter() - started < 10
    return handle


@pytest.fixture(scope="module")
def tantivy(tmp_path_factory):
    index = TantivyIndex(tmp_path_factory.mktemp("tantivy"))
    index.rebuild([ROWS])
    return index


@pytest.fixture(scope="module")
def built(client):
    lex = MilvusLexical(client, "built")
    lex.rebuild([ROWS[:50], ROWS[50:]])
    return lex


def prop_ids(rows):
    """A store's prop_ids over ``rows``: the chunk ids of the notes passing every filter."""
    def ids(filters):
        return {r.id for r in rows if all(_passes(r.properties, f) for f in filters)}
    return ids


def _passes(props, f: PropFilter) -> bool:
    got = props.get(f.key)
    return str(got) == f.value if f.op == ":" else float(got) >= float(f.value)


def same_ranking(want, got, tolerance=1e-5):
    """``got`` ranks as ``want``: the same score at every rank (within ``tolerance``), the same
    units above the last score (units of equal score may come in any order, and a cut may keep
    any of those tied at it)."""
    assert len(got) == len(want), (want, got)
    assert all(math.isclose(w, g, rel_tol=tolerance) for (_, w), (_, g) in zip(want, got)), (want, got)
    if want:
        last = want[-1][1]
        above = [{key(x) for x, s in r if not math.isclose(s, last, rel_tol=tolerance)} for r in (want, got)]
        assert above[0] == above[1], (want, got)


def close_ranking(want, got, tolerance=0.02):
    """``got`` ranks nearly as ``want`` (an index whose statistics moved a little since its
    weights were written): most of the same top units, each scored within ``tolerance``."""
    ids = [{key(x) for x, _ in r} for r in (want, got)]
    assert len(ids[0] & ids[1]) >= 0.8 * len(ids[0]), (want, got)
    scores = {key(x): s for x, s in got}
    assert all(math.isclose(scores[key(x)], s, rel_tol=tolerance) for x, s in want if key(x) in scores)


def key(unit):
    """A ranked unit as a set member: a chunk id, or a section's ids."""
    return tuple(unit) if isinstance(unit, list) else unit


# --- lexical: building, counting, ranking ----------------------------------------------------

def test_rebuild_counts_as_tantivy_and_destroy_empties(client, built, tantivy):
    assert (built.count(), built.section_count()) == (tantivy.count(), tantivy.section_count())
    assert built.deleted_docs() == 0
    lex = MilvusLexical(client, "doomed")
    lex.rebuild([ROWS[:10]])
    assert lex.count() == 10
    lex.destroy()
    assert (lex.count(), lex.section_count(), lex.deleted_docs()) == (0, 0, 0)
    assert lex.search(LexicalQuery(["backup"]), 5) == [] and lex.known(["backup"]) == set()
    assert not [c for c in client.list_collections() if c.startswith("doomed")]


@pytest.mark.parametrize("unit", ["chunk", "section"])
@pytest.mark.parametrize("q", QUERIES, ids=lambda q: " ".join(q.terms + q.phrases + ["-" + e for e in q.excludes]))
def test_ranks_as_tantivy(built, tantivy, q, unit):
    want = tantivy.search_units(q, 10, unit)
    got = built.search_units(q, 10, unit)
    same_ranking(want, got)


def test_scores_are_positive_and_deep_rankings_agree(built, tantivy):
    q = LexicalQuery(["backup", "kafka", "restore", "museums"])
    want, got = tantivy.search(q, 200), built.search(q, 200)
    assert len(got) == len(want) > 50
    assert all(s > 0 for _, s in got)
    same_ranking(want, got)


def test_known_and_corrections_as_tantivy(built, tantivy):
    words = ["backup", "backups", "restoring", "dokcer", "kubernets", "rebalnce", "zzzzzz", "保管", "orders-created"]
    assert built.known(words) == tantivy.known(words)
    assert built.corrections(words) == tantivy.corrections(words)
    assert built.corrections(["dokcer"]) == {"dokcer": "docker"}


def test_fuzzy_matches_one_edit_away_only_when_asked(built, tantivy):
    q = LexicalQuery(["rebalnce"])
    assert built.search(q, 10) and {i for i, _ in built.search(q, 10)} == {i for i, _ in tantivy.search(q, 10)}
    assert built.search(q, 10, fuzzy=False) == []
    assert built.search(LexicalQuery(["rebalnce"], typos=[]), 10) == []  # the caller judged: no typo


def test_phrases_match_whole_and_in_order(built, tantivy):
    for phrase in ["nightly job", "job nightly", "restores snapshots from", "never restored", "保管庫"]:
        q = LexicalQuery(phrases=[phrase])
        assert built.matching_ids(q) == tantivy.matching_ids(q), phrase
    assert built.matching_ids(LexicalQuery(phrases=["job nightly"])) == set()


class CappedServer:
    """A client that refuses a query or search past ``cap`` rows, as a Milvus server refuses
    one past 16,384 (Milvus Lite takes any)."""

    def __init__(self, client, cap):
        self.client, self.cap = client, cap

    def __getattr__(self, name):
        call = getattr(self.client, name)
        if name not in ("query", "search"):
            return call

        def capped(*args, **kwargs):
            if kwargs.get("limit", 0) > self.cap:
                raise RuntimeError("invalid max query result window, (offset+limit) should be in "
                                   f"range [1, {self.cap}], but got {kwargs['limit']}")
            return call(*args, **kwargs)
        return capped


def test_a_phrase_matching_more_units_than_a_server_returns_at_once_matches_them_all(client, built, tantivy,
                                                                                       monkeypatch):
    """The vector arm is restricted to every chunk a phrase matches: past the cap (8 here,
    16,384 on a server) they come from a query iterator, never cut at the cap or refused."""
    from hybrid.store.milvus import client as milvus_client
    monkeypatch.setattr(milvus_client, "MAX_TOPK", 8)
    capped = MilvusLexical(CappedServer(client, 8), "built")
    sizes = []
    for phrase in ["backup", "nightly job", "保管庫", "job nightly"]:
        q = LexicalQuery(phrases=[phrase])
        want = tantivy.matching_ids(q)
        assert capped.matching_ids(q) == want == built.matching_ids(q), phrase
        assert len(capped.matching_ids(q, 5)) == min(5, len(want))
        sizes.append(len(want))
    assert max(sizes) > 2 * 8 and min(sizes) == 0


def test_excludes_leave_out_every_unit_holding_them(built, tantivy):
    q = LexicalQuery(["backup"], excludes=["kafka", "nightly job"])
    got = {i for i, _ in built.search(q, 500)}
    assert got == {i for i, _ in tantivy.search(q, 500)}
    text = {r.id: r.text.lower() for r in ROWS}
    assert got and not any("kafka" in text[i] or "nightly job" in text[i] for i in got)


def test_unscored_search_is_constant_and_matches_the_same_units(built):
    q = LexicalQuery(["backup", "kafka"])
    scored, flat = built.search(q, 1000), built.search(q, 1000, scored=False)
    assert {i for i, _ in flat} == {i for i, _ in scored} and {s for _, s in flat} == {1.0}
    assert built.matching_ids(q) == {i for i, _ in scored}
    assert len(built.matching_ids(q, 3)) == 3


def test_stopwords_are_dropped_unless_asked_for(built, tantivy):
    q = LexicalQuery(["the", "backup"])
    same_ranking(tantivy.search(q, 10, stopwords=False), built.search(q, 10, stopwords=False))
    assert [i for i, _ in built.search(q, 10)] == [i for i, _ in built.search(LexicalQuery(["backup"]), 10)]


# --- lexical: filters ------------------------------------------------------------------------

FILTERS = [
    NoteFilter(folders=("work",)),
    NoteFilter(folders=("home-lab", "journal")),
    NoteFilter(exclude_folders=("work/runbooks",)),
    NoteFilter(tags=("ops",)),                   # a tag matches its nested children
    NoteFilter(tags=("ops/kafka", "work")),
    NoteFilter(since=1.7e9 + 86400 * 20),
    NoteFilter(sources=("pdf", "canvas")),
    NoteFilter(props=(PropFilter("status", ":", "done"),)),
    NoteFilter(folders=("work",), tags=("ops/backup",), since=1.7e9 + 86400 * 5,
               props=(PropFilter("rating", ">=", "2"),), exclude_folders=("work/runbooks",)),
    *(NoteFilter(folders=(n,)) for n in NASTY),
    *(NoteFilter(tags=(n,)) for n in NASTY),
    *(NoteFilter(exclude_folders=(n,)) for n in NASTY),
]


@pytest.mark.parametrize("where", FILTERS, ids=repr)
def test_filters_pass_what_tantivy_passes(built, tantivy, where):
    built.prop_ids = tantivy.prop_ids = prop_ids(ROWS)
    try:
        for q in (LexicalQuery(["backup", "kafka", "note"]), LexicalQuery(excludes=["zzz"]),
                  LexicalQuery(phrases=["nightly job"])):
            for unit in ("chunk", "section"):
                want = {tuple(x) for x, _ in tantivy.search_units(q, 1000, unit, where=where)}
                got = {tuple(x) for x, _ in built.search_units(q, 1000, unit, where=where)}
                assert got == want, (q, unit)
    finally:
        built.prop_ids = tantivy.prop_ids = None


def test_nasty_names_reach_no_expression(built, tantivy):
    """Folder and tag names with quotes, backslashes, LIKE wildcards and line breaks filter
    exactly (they are hashed), and a typo of any characters is quoted."""
    for name in NASTY:
        got = built.matching_ids(LexicalQuery(excludes=["zzz"]), where=NoteFilter(folders=(name,)))
        assert got == {r.id for r in ROWS if r.path.startswith(name + "/")}
    for typo in ['a"b\\c', "x'y%_z", "back\\", '"']:
        q = LexicalQuery([typo, "kafka"], typos=[typo])
        same_ranking(tantivy.search(q, 10), built.search(q, 10))


def test_property_filters_need_the_store(built):
    with pytest.raises(RuntimeError, match="prop_ids"):
        built.search(LexicalQuery(["backup"]), 5, where=NoteFilter(props=(PropFilter("status", ":", "x"),)))
    built.prop_ids = lambda filters: set()
    try:
        where = NoteFilter(props=(PropFilter("status", ":", "x"),))
        assert built.search(LexicalQuery(["backup"]), 5, where=where) == []
    finally:
        built.prop_ids = None


# --- lexical: the write side -----------------------------------------------------------------

def edited(rows):
    """``rows`` after an index run: note 3's chunks rewritten, note 5 deleted, a note added."""
    changed = [dataclasses.replace(r, text=r.text + " zebra migration runbook") for r in rows if r.file_id == 4]
    gone = [r.id for r in rows if r.file_id == 6]
    added = [ChunkRow(max(r.id for r in rows) + i + 1, "new/fresh note.md", "Fresh", "Fresh > Setup", 1, 2,
                      "Zebra crossing setup for the kafka cluster", ["fresh"], [], 1.8e9, "") for i in range(3)]
    final = [next((c for c in changed if c.id == r.id), r) for r in rows if r.id not in gone] + added
    return [r.id for r in changed] + gone + [r.id for r in added], changed + added, final


def test_apply_counts_edits_once_even_when_replayed(client, tmp_path):
    lex = MilvusLexical(client, "applied")
    lex.apply([r.id for r in ROWS], [ROWS[:40], ROWS[40:]])  # a first index run: into nothing
    journal, batch, final = edited(ROWS)
    for _ in range(2):  # a replayed journal changes nothing more
        lex.apply(journal, [batch])
    clean = TantivyIndex(tmp_path / "clean")
    clean.rebuild([final])
    assert (lex.count(), lex.section_count()) == (clean.count(), clean.section_count())
    for q in (LexicalQuery(["zebra", "migration"]), LexicalQuery(["backup"]), LexicalQuery(["fresh", "kafka"])):
        for unit in ("chunk", "section"):
            close_ranking(clean.search_units(q, 10, unit), lex.search_units(q, 10, unit))
    assert lex.known(["zebra"]) == {"zebra"}
    gone = [r.id for r in final if r.path == "new/fresh note.md"]
    lex.apply(gone, [])
    assert lex.known(["fresh", "crossing"]) == set()  # its words' counts went back to zero


def test_stale_statistics_ask_for_a_rebuild_that_makes_them_exact(client, tmp_path):
    lex = MilvusLexical(client, "drifting")
    lex.rebuild([ROWS])
    long = [dataclasses.replace(r, id=10_000 + r.id, text=r.text * 8, path="long/" + r.path) for r in ROWS[:30]]
    lex.apply([r.id for r in long], [long])
    assert lex.deleted_docs() > 0  # the bodies' mean length moved: every weight is off
    lex.rebuild([ROWS + long])
    assert lex.deleted_docs() == 0
    clean = TantivyIndex(tmp_path / "clean")
    clean.rebuild([ROWS + long])
    q = LexicalQuery(["backup", "restore"])
    same_ranking(clean.search(q, 20), lex.search(q, 20))


@pytest.mark.parametrize("source", ["reread", "one pass"])
def test_a_first_index_past_the_estimate_is_written_once_when_it_can_be_read_twice(client, tmp_path, monkeypatch,
                                                                                  source):
    """A new index of more units than the estimate takes (5 here) whose later notes are longer:
    read twice (what the sync gives), its weights are written with the exact means, so nothing
    is stale and no second write follows; read once, the estimate is off and a rebuild is asked."""
    from hybrid.store.base import Reread
    from hybrid.store.milvus import lexical as milvus_lexical
    monkeypatch.setattr(milvus_lexical, "ESTIMATE", 5)
    rows = [dataclasses.replace(r, text=r.text * 6) if r.file_id > 12 else r for r in ROWS]
    batches = [rows[:40], rows[40:]]
    lex = MilvusLexical(client, f"first_{source.replace(' ', '_')}")
    lex.apply([r.id for r in rows], Reread(lambda: iter(batches)) if source == "reread" else iter(batches))
    if source == "one pass":
        assert lex.deleted_docs() > 0
        return
    assert lex.deleted_docs() == 0
    clean = TantivyIndex(tmp_path / "clean")
    clean.rebuild([rows])
    for unit in ("chunk", "section"):
        same_ranking(clean.search_units(LexicalQuery(["backup", "restore"]), 20, unit),
                     lex.search_units(LexicalQuery(["backup", "restore"]), 20, unit))


def test_an_interrupted_write_asks_for_a_rebuild(client):
    lex = MilvusLexical(client, "interrupted")
    lex.rebuild([ROWS[:20]])
    name = lex.parts["chunks"].current()
    stats = Stats.load(client.describe_collection(name)["properties"])
    stats.dirty = True
    client.alter_collection_properties(name, properties=stats.dump())
    assert lex.deleted_docs() > lex.count()


def test_another_layout_is_refused_for_reading_and_rebuilt(client):
    lex = MilvusLexical(client, "old")
    lex.rebuild([ROWS[:20]])
    client.alter_collection_properties(lex.parts["chunks"].current(), properties={SCHEMA_KEY: "0"})
    with pytest.raises(IndexCorrupt, match="hybrid index"):
        lex.search(LexicalQuery(["backup"]), 5)
    with pytest.raises(IndexCorrupt):
        lex.verify()
    assert lex.count() == 0  # the sync's count check then rebuilds it
    lex.apply([1], [ROWS[:1]])  # left alone
    lex.rebuild([ROWS[:20]])
    assert lex.count() == 20 and lex.search(LexicalQuery(["backup"]), 5)


# --- vector ----------------------------------------------------------------------------------

def unit_vectors(n, dim=32, seed=3):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((20, dim))
    v = (centers[rng.integers(0, 20, n)] + 0.4 * rng.standard_normal((n, dim))).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def exact(vecs, ids, q, k, keep=None):
    scores = vecs @ q
    order = [i for i in np.argsort(-scores) if keep is None or int(ids[i]) in keep]
    return [(int(ids[i]), float(scores[i])) for i in order[:k]]


def test_vector_search_is_cosine_within_allowed_ids(client):
    vecs, ids = unit_vectors(500), np.arange(1, 501)
    vec = MilvusVector(client, "vectors")
    assert (vec.count(), vec.dim, vec.search(vecs[0], 5)) == (0, None, [])
    info = vec.rebuild(ids, vecs, 32, VectorSpec())
    assert info["kind"] == "flat" and vec.exact and vec.count() == 500 and vec.dim == 32
    q = vecs[7]
    got = vec.search(q, 10)
    assert [i for i, _ in got] == [i for i, _ in exact(vecs, ids, q, 10)]
    assert all(math.isclose(s, t, abs_tol=1e-5) for (_, s), (_, t) in zip(got, exact(vecs, ids, q, 10)))
    allowed = set(range(200, 260))
    assert [i for i, _ in vec.search(q, 5, allowed=allowed, banned={8})] == \
        [i for i, _ in exact(vecs, ids, q, 5, allowed - {8})]
    assert 8 not in {i for i, _ in vec.search(q, 5, banned={8})}
    assert vec.search(q, 5, allowed=set()) == [] and vec.search(q, 5, allowed={3}, banned={3}) == []
    with pytest.raises(IndexCorrupt, match="--reembed"):
        vec.search(np.ones(16, dtype=np.float32), 5)
    with pytest.raises(ValueError):
        vec.search(q, 5, where=NoteFilter())


def test_vector_apply_is_an_idempotent_upsert(client):
    vecs, ids = unit_vectors(100), np.arange(1, 101)
    vec = MilvusVector(client, "patched")
    vec.apply([], ids.tolist(), vecs, 32, VectorSpec())  # into nothing: a flat index of them
    for _ in range(2):
        vec.apply([1, 2, 3], [3, 101], vecs[[50, 51]], 32, VectorSpec())
    assert vec.count() == 99
    assert vec.search(vecs[50], 2)[0][0] in (3, 51) and {1, 2} & {i for i, _ in vec.search(vecs[0], 99)} == set()
    vec.destroy()
    assert vec.count() == 0 and vec.dim is None


def test_vector_ivf_above_the_threshold(client):
    vecs, ids = unit_vectors(3000), np.arange(1, 3001)
    vec = MilvusVector(client, "ivf")
    spec = VectorSpec(ann_threshold=1000, ann_recall=0.95)
    info = vec.rebuild(ids, vecs, 32, spec)
    assert info["kind"] == "ivf" and not vec.exact and info["calibrated_recall"] >= 0.95
    hits = sum(len({i for i, _ in vec.search(vecs[j], 10)} & {i for i, _ in exact(vecs, ids, vecs[j], 10)})
               for j in range(0, 3000, 100))
    assert hits / 300 >= 0.9
    allowed = set(range(1, 3001, 7))
    assert {i for i, _ in vec.search(vecs[5], 10, allowed=allowed)} <= allowed
    assert not vec.needs_rebuild(3000, spec, 3000) and vec.needs_rebuild(300, spec, 3000)
    assert vec.needs_rebuild(3000, VectorSpec(storage="sq8", ann_threshold=1000), 3000)
    flat = MilvusVector(client, "small")
    flat.rebuild(ids[:500], vecs[:500], 32, spec)
    assert flat.needs_rebuild(3000, spec, 500) and not flat.needs_rebuild(500, spec, 500)


# --- connecting ------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_server_that_is_down_is_named_quickly_without_its_password(monkeypatch):
    port = free_port()
    for url, token in ((f"milvus://dana:s3cret@127.0.0.1:{port}/notes", ""),
                       (f"milvus://127.0.0.1:{port}/notes", "dana:t0ken")):
        monkeypatch.setenv("HYBRID_MILVUS_TOKEN", token)
        started = time.perf_counter()
        with pytest.raises(StoreUnavailable) as exc:
            connect(url, "notes", timeout=2)
        assert time.perf_counter() - started < 5
        message = str(exc.value)
        assert "is Milvus running" in message and f"127.0.0.1:{port}" in message
        assert "s3cret" not in message and "t0ken" not in message and "\n" not in message


def test_a_lite_folder_open_elsewhere_is_named(tmp_path):
    import fcntl
    folder = tmp_path / "busy.db"
    folder.mkdir()
    with open(folder / "LOCK", "w") as held:  # as the process serving it holds it
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(StoreUnavailable, match="open in another process"):
            connect(f"milvus://{folder}", "notes")


def test_errors_escaping_an_index_name_the_fix():
    from pymilvus.exceptions import MilvusException
    down = explain(MilvusException(message="Fail connecting to server on 10.0.0.9:19530"), "milvus://u:pw@h/db")
    assert isinstance(down, StoreUnavailable) and "is it running" in str(down) and "pw" not in str(down)
    gone = explain(MilvusException(code=100, message="collection 'x' does not exist"), "milvus:///i.db")
    assert isinstance(gone, IndexCorrupt) and "hybrid index" in str(gone)
    assert explain(ValueError("x"), "milvus:///i.db") is None


@pytest.mark.parametrize("url", ["milvus:relative/index.db", "milvus:///tmp/no-suffix", "postgresql://x/y",
                                 "milvus://host:notaport/db"])
def test_urls_that_name_no_milvus_are_refused(url):
    with pytest.raises(StoreUnavailable):
        connect(url, "notes", timeout=1)


def test_collection_names_are_milvus_names_and_never_shared():
    names = {collection_name(p, "chunks") for p in ("my-notes", "my_notes", "my notes", "9lives", "ü")}
    assert len(names) == 5
    assert all(n.replace("_", "a").isalnum() and n.isascii() and not n[0].isdigit() for n in names)
    assert collection_name("plain_prefix", "chunks") == "plain_prefix_chunks"
