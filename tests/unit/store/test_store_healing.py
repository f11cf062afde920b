"""Hardening of the on-disk index: damaged files heal, a re-embed never leaves a vault empty,
only hybrid's own files are ever deleted, a full disk is one clear error and converges once
space is back, the embedding cache and WAL stay bounded, and BM25 matches a clean build."""
import logging
import os
import shutil
import signal
import subprocess
import sys

import pytest
from helpers import SAMPLE_VAULT, consistent, fail_embedding_at, write

import hybrid
from hybrid.core import files as files_mod
from hybrid.core.errors import DiskFull, IndexCorrupt
from hybrid.store import base as store_base
from hybrid.store.lexicon import LexicalQuery
from hybrid.store.local import cache as cache_mod
from hybrid.store.local import catalog as catalog_mod
from hybrid.store.local.layout import purge_index_dir
from hybrid.store.local.store import VaultStore

QUERIES = ["tailscale subnet router", "orders-created", "sourdough hydration", "restic backup",
           "kafka consumer lag"]


def sample_copy(tmp_path):
    vault = tmp_path / "vault"
    shutil.copytree(SAMPLE_VAULT, vault)
    return vault


def indexed(tmp_path, vault, name="home", embedder="hash:64"):
    h = hybrid.open(tmp_path / name, embedder=embedder)
    h.add_vault(vault, "vault")
    h.index()
    return h


def indexed_and_closed(tmp_path):
    """A closed handle on an indexed copy of the sample vault, and what it answered."""
    h = indexed(tmp_path, sample_copy(tmp_path))
    before = answers(h)
    h.close()
    return h, before


def index_dir(h):
    return h.config.vault("vault").index_dir


def lexical_top(h, q, k=10):
    """Raw BM25 top-k as (path, first line, score rounded) — chunk ids differ between builds."""
    store = VaultStore(index_dir(h), create=False)
    try:
        hits = store.lexical.search(LexicalQuery(terms=q.split()), k)
        rows = store.catalog.chunks([i for i, _ in hits])
        return sorted((round(s, 4), rows[i].path, rows[i].start_line) for i, s in hits)
    finally:
        store.close()


def answers(h):
    """What a user sees: lexical and vector hits for every query, by path and line."""
    out = {}
    for q in QUERIES:
        for mode in ("lexical", "vector"):
            out[q, mode] = [(x.path, x.start_line) for x in h.search(q, mode=mode, top_k=5)]
    return out


def assert_heals_and_answers(h, before, caplog, what):
    with caplog.at_level(logging.WARNING, logger="hybrid"):
        report = h.index()[0]
    assert any(what in w for w in report.warnings), report.warnings
    assert consistent(h) > 0
    assert answers(h) == before


# --- 1. heal instead of asking the user to -------------------------------------------------

@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_truncated_faiss_heals_on_index(tmp_path, caplog):
    h, before = indexed_and_closed(tmp_path)
    faiss_file = index_dir(h) / "vectors.faiss"
    faiss_file.write_bytes(faiss_file.read_bytes()[:1000])
    reader = hybrid.open(tmp_path / "home", embedder="hash:64")
    with pytest.raises(IndexCorrupt, match=r"vector index .*run `hybrid index`"):
        reader.search("tailscale", mode="vector")  # the query path: one clear line
    assert_heals_and_answers(h, before, caplog, "vector index unreadable")
    assert reader.search("tailscale", mode="vector")  # the reader's handle works again


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("target", ["meta.json", "segments", "segment-middle"])
def test_garbage_in_tantivy_files_heals_on_index(tmp_path, caplog, target):
    h, before = indexed_and_closed(tmp_path)
    lex = index_dir(h) / "lexical"
    for p in lex.iterdir():
        if target == "meta.json" and p.name == "meta.json":
            p.write_bytes(b"{ not json at all")
        elif target == "segments" and p.suffix in (".idx", ".term", ".store", ".pos"):
            p.write_bytes(os.urandom(p.stat().st_size))
        elif target == "segment-middle" and p.suffix in (".term", ".fieldnorm"):
            data = bytearray(p.read_bytes())  # the footer stays intact: only its CRC tells
            a, b = len(data) // 10, len(data) // 2
            data[a:b] = os.urandom(b - a)
            p.write_bytes(bytes(data))
    if target != "segment-middle":  # (a garbled middle is found only by the indexer's CRC check)
        reader = hybrid.open(tmp_path / "home", embedder="hash:64")
        with pytest.raises(IndexCorrupt, match=r"lexical index .*run `hybrid index`") as err:
            reader.search("tailscale", mode="lexical")
        assert "\n" not in str(err.value)
    assert_heals_and_answers(h, before, caplog, "lexical index unreadable")


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("damage", ["zero-bytes", "garbage", "truncated"])
def test_unreadable_catalog_is_moved_aside_and_rebuilt(tmp_path, caplog, damage):
    h, before = indexed_and_closed(tmp_path)
    cat = index_dir(h) / "catalog.sqlite"
    for side in ("catalog.sqlite-wal", "catalog.sqlite-shm"):
        (index_dir(h) / side).unlink(missing_ok=True)
    data = cat.read_bytes()
    cat.write_bytes({"zero-bytes": b"", "garbage": os.urandom(len(data)),
                     "truncated": data[:len(data) // 3]}[damage])
    if damage != "zero-bytes":  # a zero-byte file reads as "not indexed yet"
        with pytest.raises(hybrid.HybridError) as err:
            hybrid.open(tmp_path / "home", embedder="hash:64").search("tailscale", mode="lexical")
        assert "\n" not in str(err.value) and "hybrid index" in str(err.value)
    with caplog.at_level(logging.WARNING, logger="hybrid"):
        report = h.index()[0]
    assert [w for w in report.warnings if "catalog is unreadable" in w], report.warnings
    assert len(list(index_dir(h).glob("catalog.sqlite.corrupt-*"))) == 1
    assert report.unchanged == 0 and report.added > 50  # rebuilt from the notes
    assert consistent(h) > 0
    assert answers(h) == before


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("damage", ["faiss", "tantivy", "catalog"])
def test_reembed_works_with_each_kind_of_damage(tmp_path, damage):
    h, before = indexed_and_closed(tmp_path)
    d = index_dir(h)
    if damage == "faiss":
        (d / "vectors.faiss").write_bytes(b"\x00" * 100)
    elif damage == "tantivy":
        (d / "lexical" / "meta.json").write_bytes(b"garbage")
    else:
        (d / "catalog.sqlite").write_bytes(os.urandom(8192))
    report = h.index(reembed=True)[0]
    assert report.chunks > 0 and report.chunks_embedded == report.chunks
    assert consistent(h) == report.chunks
    assert answers(h) == before
    assert not list(d.glob("catalog.sqlite.corrupt-*"))  # the damaged folder went with the swap


# --- 2. re-embed beside the old index -----------------------------------------------------

@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_failed_reembed_leaves_the_old_index_answering(tmp_path, monkeypatch):
    import hybrid.indexing.embed_queue as embed_queue
    vault = sample_copy(tmp_path)
    h = indexed(tmp_path, vault)
    before = answers(h)
    monkeypatch.setattr(embed_queue, "EMBED_GROUP", 16)
    emb = h.embedder("hash:64")
    calls = fail_embedding_at(monkeypatch, emb, 5)
    with pytest.raises(hybrid.HybridError, match="model went away"):
        h.index(reembed=True)
    assert calls["n"] == 5
    assert answers(h) == before
    assert consistent(h) > 0
    monkeypatch.setattr(emb, "embed_documents", calls["real"])
    # the next (plain) index finds the abandoned build and removes it
    h.index()
    assert not files_mod.sibling(index_dir(h), ".reembed-tmp").exists()
    assert answers(h) == before


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_reembed_swaps_to_the_new_embedder_and_readers_follow(tmp_path):
    vault = sample_copy(tmp_path)
    h = indexed(tmp_path, vault)
    reader = hybrid.open(tmp_path / "home", embedder="hash:64")  # another handle holding the old store open
    assert reader.search("tailscale", mode="lexical")
    h2 = hybrid.open(tmp_path / "home", embedder="hash:32")
    report = h2.index(reembed=True)[0]
    assert report.chunks_embedded == report.chunks > 0
    assert h2.status()[0].embedder == "hash:32" and h2.status()[0].dim == 32
    assert consistent(h2) == report.chunks
    lexical = [(x.path, x.start_line) for x in reader.search("tailscale", mode="lexical")]
    assert lexical == [(x.path, x.start_line) for x in h2.search("tailscale", mode="lexical")]
    with pytest.raises(hybrid.core.errors.EmbedderMismatch):  # the reader now sees the new index
        reader.search("tailscale", mode="vector")
    assert h2.search("tailscale", mode="vector")
    leftovers = [p.name for p in index_dir(h).parent.iterdir() if ".reembed" in p.name]
    assert leftovers == []


def run_cli(home, *args, fault=None):
    env = dict(os.environ, HYBRID_HOME=str(home))
    env.pop("HYBRID_FAULT", None)
    if fault:
        env["HYBRID_FAULT"] = fault
    p = subprocess.run([sys.executable, "-m", "hybrid", *args], env=env, capture_output=True,
                       text=True, timeout=300)
    return p.returncode, p.stderr


@pytest.mark.parametrize("fault", ["reembed-before-swap", "reembed-mid-swap"])
@pytest.mark.slow
def test_reembed_killed_keeps_an_answering_index(tmp_path, fault):
    vault = sample_copy(tmp_path)
    home = tmp_path / "home"
    write(home, "config.toml", '[settings]\nembedder = "hash:64"\n')  # for the subprocesses
    hybrid.open(home).add_vault(vault, "vault")
    assert run_cli(home, "index")[0] == 0
    h = hybrid.open(home)
    before = answers(h)
    h.close()
    code, _ = run_cli(home, "index", "--reembed", fault=fault)
    assert code == -signal.SIGKILL
    h = hybrid.open(home)
    assert answers(h) == before  # the old index, or mid-swap the complete new one
    h.close()
    code, err = run_cli(home, "index")  # the next run finishes or undoes the swap
    assert code == 0, err
    h = hybrid.open(home)
    assert answers(h) == before
    consistent(h)
    names = {p.name for p in index_dir(h).parent.iterdir()}
    assert not {n for n in names if ".reembed" in n}, names
    h.close()


# --- 3. only hybrid's own files are ever deleted -------------------------------------------

@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_purge_deletes_only_known_files(tmp_path, caplog):
    h = indexed(tmp_path, sample_copy(tmp_path))
    h.close()
    d = index_dir(h)
    (d / "notes-backup.md").write_text("mine")
    (d / "lexical" / "README.txt").write_text("mine too")
    with caplog.at_level(logging.WARNING, logger="hybrid"):
        left = purge_index_dir(d)
    assert (d / "notes-backup.md").read_text() == "mine"
    assert (d / "lexical" / "README.txt").read_text() == "mine too"
    assert "notes-backup.md" in caplog.text
    assert sorted(left) == ["vault/lexical/README.txt", "vault/notes-backup.md"]
    assert sorted(p.name for p in d.iterdir()) == ["lexical", "notes-backup.md"]
    assert [p.name for p in (d / "lexical").iterdir()] == ["README.txt"]
    (d / "notes-backup.md").unlink()
    (d / "lexical" / "README.txt").unlink()
    h = indexed(tmp_path, h.config.vault("vault").path)
    h.close()
    assert purge_index_dir(d) == []
    assert not d.exists() and not files_mod.sibling(d, ".lock").exists()


# --- 4. disk full --------------------------------------------------------------------------

def snapshot(h):
    chunks = set()
    store = VaultStore(index_dir(h), create=False)
    for batch in store.catalog.iter_chunks():
        chunks.update((c.path, c.heading, c.start_line, c.end_line, c.text) for c in batch)
    store.close()
    return chunks, answers(h), {q: lexical_top(h, q) for q in QUERIES}


def mutate(vault):
    write(vault, "home-lab/networking.md", "# Networking\n\nWe replaced tailscale with wireguard.\n")
    write(vault, "new/added.md", "# Added\n\n" + "A brand new note about restic backup pruning.\n\n" * 40)
    for p in sorted(p for p in vault.rglob("*.md") if "finance" in str(p))[:2]:
        p.unlink()


def limit_catalog_pages(monkeypatch, extra):
    """Every catalog connection may grow its file by at most ``extra`` pages: SQLite then fails
    with SQLITE_FULL exactly as on a full disk."""
    real = catalog_mod.Catalog.__init__

    def limited(self, path, readonly=False):
        real(self, path, readonly)
        pages = self.db.execute("PRAGMA page_count").fetchone()[0]
        self.db.execute(f"PRAGMA max_page_count={pages + extra}")

    monkeypatch.setattr(catalog_mod.Catalog, "__init__", limited)


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_disk_full_in_the_catalog_is_one_line_and_converges(tmp_path, monkeypatch):
    vault = sample_copy(tmp_path)
    h = indexed(tmp_path, vault)
    mutate(vault)
    for i in range(30):  # enough new text that the catalog must grow
        write(vault, f"bulk/n{i}.md", f"# Bulk {i}\n\n" + f"filler text {i} about kafka " * 400)
    limit_catalog_pages(monkeypatch, 0)
    with pytest.raises(DiskFull) as err:
        h.index()
    msg = str(err.value)
    assert msg.startswith("disk full") and str(index_dir(h)) in msg and "\n" not in msg
    assert "cannot rollback" not in msg
    assert answers(h)  # the old index still answers
    monkeypatch.undo()
    h.index()
    consistent(h)
    clean = indexed(tmp_path, vault, name="clean")
    assert snapshot(h) == snapshot(clean)


def test_transaction_error_is_not_masked_by_rollback(tmp_path):
    cat = catalog_mod.Catalog(tmp_path / "c.sqlite")
    cat.db.execute("PRAGMA max_page_count=" + str(cat.db.execute("PRAGMA page_count").fetchone()[0]))
    with pytest.raises(DiskFull, match="disk full"):
        cat.put_embeddings("m", [(f"h{i}", os.urandom(4096)) for i in range(50)])
    assert not cat.db.in_transaction
    cat.close()


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_disk_full_in_faiss_and_tantivy_converge_once_space_is_back(tmp_path, monkeypatch):
    vault = sample_copy(tmp_path)
    h = indexed(tmp_path, vault)
    mutate(vault)
    tmp = index_dir(h) / "vectors.tmp"
    os.symlink("/dev/full", tmp)  # FAISS writes its new file here: ENOSPC, for real
    with pytest.raises(DiskFull, match=r"^disk full: cannot write .*vectors\.faiss") as err:
        h.index()
    assert "\n" not in str(err.value)
    assert not tmp.exists() and os.path.exists("/dev/full")  # only our temp name was removed
    assert answers(h)
    # tantivy: a write inside its writer fails with the OS error text tantivy-py gives
    # (simulated at the document level; the writer, rollback and journal are real)
    import hybrid.store.local.lexical as lexical

    def no_space(self, chunk):
        raise ValueError("An IO error occurred: 'No space left on device (os error 28)'")

    write(vault, "more/extra.md", "# Extra\n\nkafka consumer lag dashboards\n")
    monkeypatch.setattr(lexical.TantivyIndex, "_doc", no_space)
    with pytest.raises(DiskFull, match=r"free space on the disk holding .*lexical"):
        h.index()
    monkeypatch.undo()
    h.index()
    consistent(h)
    clean = indexed(tmp_path, vault, name="clean")
    assert snapshot(h) == snapshot(clean)


# --- 5. unused embeddings and the WAL stay bounded ------------------------------------------

@pytest.mark.slow  # scale: 30 index runs
def test_unused_embeddings_are_bounded_and_vacuum_shrinks_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_mod, "EMBED_CACHE_MIN", 20)
    vault = tmp_path / "vault"
    write(vault, "a.md", "# A\n\nsteady note\n")
    h = indexed(tmp_path, vault)
    for i in range(30):
        write(vault, "hot.md", "\n\n".join(f"## Part {j}\n\nedit {i} paragraph {j} " + "words " * 200
                                           for j in range(12)))
        h.index()
    store = VaultStore(index_dir(h), create=False)
    rows = store.catalog.db.execute("SELECT count(*) FROM embeddings").fetchone()[0]
    live = store.catalog.chunk_count()
    store.close()
    assert live >= 12
    assert rows <= live + max(20, live), (rows, live)  # without reclaiming: 30 × 12 + 2
    assert not (index_dir(h) / "catalog.sqlite-wal").exists() or \
        (index_dir(h) / "catalog.sqlite-wal").stat().st_size == 0
    size = (index_dir(h) / "catalog.sqlite").stat().st_size
    report = h.vacuum()[0]
    assert report.embeddings_removed == rows - live
    assert report.reclaimed_bytes > 0
    assert (index_dir(h) / "catalog.sqlite").stat().st_size < size
    assert consistent(h) == live
    assert h.search("paragraph", mode="vector")


# --- 6. BM25 equals a clean build after many edits ------------------------------------------

def edit_rounds(vault, rounds):
    notes = sorted(p for p in vault.rglob("*.md"))
    for r in range(rounds):
        for k, p in enumerate(notes[r % 3::3]):
            text = p.read_text(encoding="utf-8")
            p.write_text(text + f"\n\nEdit {r}.{k}: restic backup kafka tailscale notes.\n",
                         encoding="utf-8")
        yield r


@pytest.mark.slow  # scale: 17 index runs and two full builds
def test_lexical_scores_equal_a_clean_build_after_many_edits(tmp_path):
    vault = sample_copy(tmp_path)
    h = indexed(tmp_path, vault)
    for _ in edit_rounds(vault, 6):
        h.index()
    one = next(p for p in sorted(vault.rglob("*.md")))
    for i in range(10):  # and one note edited again and again
        one.write_text(one.read_text(encoding="utf-8") + f"\nline {i} about sourdough\n", encoding="utf-8")
        h.index()
    clean = indexed(tmp_path, vault, name="clean")
    for q in QUERIES + ["sourdough", "line about"]:
        assert lexical_top(h, q) == lexical_top(clean, q), q
    assert deleted_and_live(h)[0] == 0


def deleted_and_live(h):
    store = VaultStore(index_dir(h), create=False)
    try:
        return store.lexical.deleted_docs(), store.catalog.chunk_count()
    finally:
        store.close()


@pytest.mark.slow  # scale: repeated index runs over the sample vault
def test_large_index_compacts_once_deletions_pass_the_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(store_base, "LEXICAL_EXACT_BELOW", 0)  # as for a vault of many chunks
    vault = sample_copy(tmp_path)
    h = indexed(tmp_path, vault)
    note = sorted(vault.rglob("*.md"))[0]
    note.write_text(note.read_text(encoding="utf-8") + "\nsmall edit\n", encoding="utf-8")
    h.index()
    deleted, live = deleted_and_live(h)
    assert 0 < deleted <= store_base.LEXICAL_DRIFT * live  # a small edit is not worth a rebuild
    for _ in edit_rounds(vault, 3):
        h.index()
        deleted, live = deleted_and_live(h)
        assert deleted <= store_base.LEXICAL_DRIFT * live
    consistent(h)


def test_deleted_documents_of_the_section_index_count_too(tmp_path, monkeypatch):
    """BM25 over sections drifts like BM25 over chunks: the compaction bound counts the deleted
    documents of both indexes (it looked at the chunk index alone)."""
    monkeypatch.setattr(store_base, "LEXICAL_EXACT_BELOW", 0)  # as for a vault of many chunks
    vault = tmp_path / "vault"
    for i in range(100):  # 200 chunks: one note's edit stays under the bound
        write(vault, f"n{i}.md", f"# Note {i}\n\nfirst part {i}\n\n## Part\n\nsecond part {i}\n")
    h = indexed(tmp_path, vault)
    write(vault, "n0.md", "# Note 0\n\nfirst part edited\n\n## Part\n\nsecond part edited\n")
    h.index()
    store = VaultStore(index_dir(h), create=False)
    try:
        chunks = len(store.catalog.chunk_ids_of([fid for fid, p in store.catalog.file_paths(True) if p == "n0.md"]))
        assert store.lexical.deleted_docs() == chunks + 2  # its chunks, and its two sections
    finally:
        store.close()


@pytest.mark.parametrize("found", [0, 1])
def test_a_file_gone_while_the_index_folder_is_measured_is_no_error(tmp_path, monkeypatch, found):
    """`hybrid status` sums the index folder while a writer may be merging tantivy segments: a
    file listed, then deleted before (``found`` 0) or after (1) it is first looked at, counts
    nothing or its size, never an error (it failed `status` beside the watcher's index run)."""
    import os

    from hybrid.store.local import layout
    (tmp_path / "lexical").mkdir()
    (tmp_path / "lexical" / "kept.idx").write_bytes(b"x" * 10)
    (tmp_path / "lexical" / "merged.idx").write_bytes(b"x" * 99)
    stat, calls = os.stat, []

    def racing(path, *args, **kwargs):
        if os.path.basename(path) == "merged.idx":
            calls.append(path)
            if len(calls) > found:
                raise FileNotFoundError(2, "No such file or directory", str(path))
        return stat(path, *args, **kwargs)
    monkeypatch.setattr(layout.os, "stat", racing)
    assert layout.folder_bytes(tmp_path) in ((10,) if found == 0 else (10, 109))
