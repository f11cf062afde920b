"""SIGKILL a real `hybrid index` subprocess at named points and at random instants; the index
must still open and answer, and the next `hybrid index` must finish the job exactly."""
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from helpers import SAMPLE_VAULT, consistent, open_store, write

import hybrid

pytestmark = pytest.mark.slow

QUERIES = ["tailscale subnet router", "orders-created", "sourdough hydration", "restic backup"]


def run_index(home, fault=None, wait=True):
    env = dict(os.environ, HYBRID_HOME=str(home))
    env.pop("HYBRID_FAULT", None)
    if fault:
        env["HYBRID_FAULT"] = fault
    cmd = [sys.executable, "-m", "hybrid", "index"]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not wait:
        return p
    out, err = p.communicate(timeout=300)
    return p.returncode, out, err


# Where each store can be killed: the local store's steps, and the PostgreSQL store's (inside
# the one transaction that swaps the notes, and before its first HNSW build).
LOCAL_FAULTS = ["after-embed-batch", "before-catalog", "after-catalog", "after-lexical", "after-vector"]
PG_FAULTS = ["after-embed-batch", "before-catalog", "pg-mid-apply", "after-catalog", "pg-before-hnsw"]


@pytest.fixture
def stores(request):
    """``stores(kind)``: the ``store`` setting of a new home: None for local files, else a
    fresh database of the session's PostgreSQL server."""
    def make(kind):
        if kind == "local":
            return None
        from conftest import new_database
        return new_database(request.getfixturevalue("pg_server"))
    return make


def setup_home(tmp_path, name, vault, store=None):
    home = tmp_path / name
    extra = f'store = "{store}"\n' if store else ""
    write(home, "config.toml", f'[settings]\nembedder = "hash:64"\n{extra}')  # for the subprocesses
    hybrid.open(home).add_vault(vault, "vault")
    return home


def snapshot(home):
    """What must not depend on the index's history: the chunk set, and the vector arm's top
    hits (exact search over the same vectors; ties at the cut aside, :func:`decided`). BM25
    scores may legitimately differ a little: tantivy counts deleted documents in its term
    statistics until segments merge."""
    h = hybrid.open(home)
    chunks = set()
    store = open_store(h.config.vault("vault"))
    for batch in store.catalog.iter_chunks():
        chunks.update((c.path, c.heading, c.start_line, c.end_line, c.text) for c in batch)
    store.close()
    results = {q: decided(h.search(q, top_k=10, mode="vector", passages=True)) for q in QUERIES}
    assert all(results.values()), results  # something to compare for every query
    h.close()
    return chunks, results


def decided(hits) -> set[tuple[str, int, float]]:
    """The passages the vector arm ranked, with their scores, but for those tied with the last
    one: the hash embedder gives many passages the same score (0 for no shared token), and which
    of a tie the cut keeps follows the chunk ids, which an index's history decides."""
    scored = {(x.path, x.start_line, round(x.vector_score, 6)) for x in hits}
    last = min((s for _, _, s in scored), default=0.0)
    return {x for x in scored if x[2] > last}


def answers_consistently(home):
    """The index opens; every hit resolves to a chunk the catalog has, with its text."""
    h = hybrid.open(home)
    try:
        for q in QUERIES:
            for mode in ("lexical", "vector", "hybrid"):
                for x in h.search(q, mode=mode, top_k=10):
                    assert x.text and x.path and x.start_line <= x.end_line
    finally:
        h.close()


def finish_and_compare(tmp_path, home, vault, store=None):
    """The next `hybrid index` completes, leaves the projections in step with the catalog, and
    the result equals a clean index of the same folder (in ``store``: a database of its own)."""
    code, _, err = run_index(home)
    assert code == 0, err
    h = hybrid.open(home)
    consistent(h)
    h.close()
    clean = setup_home(tmp_path, "clean", vault, store)
    assert run_index(clean)[0] == 0
    assert snapshot(home) == snapshot(clean)


def mutate(vault):
    write(vault, "home-lab/networking.md", "# Networking\n\nWe replaced tailscale with wireguard.\n")
    write(vault, "new/added.md", "# Added\n\nA brand new note about restic backup pruning.\n")
    victims = sorted(p for p in vault.rglob("*.md") if "finance" in str(p))[:2]
    for v in victims:
        v.unlink()


@pytest.mark.parametrize("kind,fault", [("local", f) for f in LOCAL_FAULTS] +
                         [("postgresql", f) for f in PG_FAULTS])
def test_kill_at_named_points(tmp_path, kind, fault, stores):
    vault = tmp_path / "vault"
    shutil.copytree(SAMPLE_VAULT, vault)
    home = setup_home(tmp_path, "home", vault, stores(kind))
    # first a killed initial index, then finish it
    code, _, _ = run_index(home, fault)
    assert code == -signal.SIGKILL
    if kind != "local" or (home / "data/vaults/vault/catalog.sqlite").exists():
        h = hybrid.open(home)
        try:
            h.search("tailscale", mode="lexical")
        except hybrid.HybridError:
            pass  # "not indexed yet" is a clear answer too
        h.close()
    code, out, err = run_index(home)
    assert code == 0, err
    # then a killed incremental run over edits, deletes and additions
    mutate(vault)
    code, _, _ = run_index(home, fault)
    assert code == -signal.SIGKILL
    answers_consistently(home)
    finish_and_compare(tmp_path, home, vault, stores(kind))


def copies_of_sample(tmp_path, n, store=None):
    """A vault of n copies of the sample vault (large enough for an index run to take a while)."""
    vault = tmp_path / "vault"
    for i in range(n):
        shutil.copytree(SAMPLE_VAULT, vault / f"copy{i}")
    return vault, setup_home(tmp_path, "home", vault, store)


@pytest.mark.parametrize("kind", ["local", "postgresql"])
def test_kill_at_random_instants(tmp_path, kind, stores):
    vault, home = copies_of_sample(tmp_path, 4, stores(kind))
    for delay in (0.6, 0.9, 1.2, 1.6, 2.2):
        p = run_index(home, wait=False)
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.communicate()
        if kind != "local" or (home / "data/vaults/vault/catalog.sqlite").exists():
            try:
                answers_consistently(home)
            except hybrid.HybridError as exc:
                assert "not indexed yet" in str(exc)
    finish_and_compare(tmp_path, home, vault, stores(kind))


@pytest.mark.parametrize("kind", ["local", "postgresql"])
def test_queries_keep_working_while_an_index_runs(tmp_path, kind, stores):
    vault, home = copies_of_sample(tmp_path, 3, stores(kind))
    assert run_index(home)[0] == 0
    for p in vault.rglob("*.md"):  # force a full re-chunk of every note
        p.write_text(p.read_text(encoding="utf-8") + "\nappended line\n", encoding="utf-8")
    proc = run_index(home, wait=False)
    h = hybrid.open(home)
    answered = 0
    try:
        while proc.poll() is None:
            hits = h.search("tailscale subnet router", top_k=5)
            assert hits and hits[0].path.endswith("networking.md"), hits[:1]
            answered += 1
    finally:
        h.close()
    assert proc.returncode == 0 and answered > 0
