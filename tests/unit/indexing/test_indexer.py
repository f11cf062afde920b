"""Incremental indexing, consistency and bad input, with the hash embedder (logic only)."""
import logging
import os
import shutil

import pytest
from helpers import ALL_STORES, consistent, fail_embedding_at, open_store, paths, write

import hybrid
from hybrid.core.errors import EmbedderMismatch, IndexLocked, PathRefused, VaultError
from hybrid.indexing import reading
from hybrid.indexing.embed_queue import EmbedQueue
from hybrid.retrieval.filters import NoMatchingNotes

STORES = ALL_STORES  # tests that use `fake` run against both stores


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_index_then_noop_then_edit_delete_rename(fake, vault):
    fake.add_vault(vault, "vault")
    r = fake.index()[0]
    assert (r.added, r.updated, r.removed, r.unchanged) == (4, 0, 0, 0)
    assert r.chunks_embedded == r.chunks > 0
    consistent(fake)

    r = fake.index()[0]
    assert (r.added, r.updated, r.removed, r.unchanged, r.chunks_embedded) == (0, 0, 0, 4, 0)

    # edit: the old words vanish, the new ones are found, only new chunk texts are embedded
    write(vault, "home/garden.md", "# Garden\n\nPeppers want full sun and warm nights.\n")
    r = fake.index()[0]
    assert (r.updated, r.unchanged) == (1, 3)
    assert r.chunks_embedded == 1
    assert paths(fake.search("peppers", mode="lexical")) == ["home/garden.md"]
    assert fake.search("tomatoes", mode="lexical") == []
    consistent(fake)

    # delete
    (vault / "journal.md").unlink()
    r = fake.index()[0]
    assert r.removed == 1
    assert fake.search("sourdough", mode="lexical") == []
    assert all(h.path != "journal.md" for h in fake.search("sourdough starters", mode="vector", top_k=50))

    # rename: same content under a new path costs no embedding and leaves no stale path
    os.rename(vault / "work/orders.md", vault / "work/order-events.md")
    r = fake.index()[0]
    assert (r.added, r.removed, r.chunks_embedded) == (1, 1, 0) and r.cache_hits > 0
    for mode in ("lexical", "vector", "hybrid"):
        found = paths(fake.search("orders-created partitions", mode=mode, top_k=50))
        assert "work/orders.md" not in found
        assert "work/order-events.md" in found
    consistent(fake)


def test_touch_without_change_is_unchanged(fake, vault):
    fake.add_vault(vault, "vault")
    fake.index()
    p = vault / "home/garden.md"
    os.utime(p, (p.stat().st_atime + 100, p.stat().st_mtime + 100))
    r = fake.index()[0]
    assert (r.updated, r.unchanged, r.chunks_embedded) == (0, 4, 0)


def test_filters_are_applied_before_top_k(fake, vault):
    # Many notes that match "sun" better than the one inside the folder filter.
    for i in range(40):
        write(vault, f"bulk/n{i}.md", "# Sun\n\nsun sun sun sun in the sun\n")
    fake.add_vault(vault, "vault")
    fake.index()
    for mode in ("lexical", "vector", "hybrid"):
        hits = fake.search("sun", mode=mode, top_k=3, folders=["home"])
        assert paths(hits)[0] == "home/garden.md", mode
        assert all(p.startswith("home/") for p in paths(hits)), mode
    assert set(paths(fake.search("partitions", tags=["work"], mode="vector"))) == {"work/orders.md"}
    assert fake.search("partitions", tags=["home-lab"], mode="lexical") == []
    assert paths(fake.search("tailscale", tags=["home-lab"], mode="lexical")) == ["home/network.md"]
    with pytest.raises(NoMatchingNotes, match="no note was modified since 2999-01-01"):
        fake.search("tailscale", since="2999-01-01")  # says so, rather than "no hits"


def test_phrases_and_exclusions_hold_in_every_arm(fake, vault):
    fake.add_vault(vault, "vault")
    fake.index()
    for mode in ("lexical", "vector", "hybrid"):
        assert set(paths(fake.search('"advertise routes"', mode=mode))) == {"home/network.md"}
        assert "home/network.md" not in paths(fake.search("sun OR tailscale -tailscale", mode=mode, top_k=50))


def test_embedder_change_refuses_then_reembed(vault, open_h):
    h = open_h(embedder="hash:64")
    h.add_vault(vault, "vault")
    h.index()
    h2 = open_h(embedder="hash:32")
    with pytest.raises(EmbedderMismatch, match="--reembed"):
        h2.index()
    with pytest.raises(EmbedderMismatch, match="--reembed"):
        h2.search("tailscale", mode="vector")
    assert h2.search("tailscale", mode="lexical")  # the lexical arm does not care
    r = h2.index(reembed=True)[0]
    assert r.added == 4 and r.chunks_embedded == r.chunks
    assert h2.search("tailscale", mode="vector")


def test_second_indexer_gets_a_clear_message(fake, vault):
    fake.add_vault(vault, "vault")
    fake.index()
    store = open_store(fake.config.vault("vault"))
    lock = store.lock()
    try:
        with pytest.raises(IndexLocked, match="another `hybrid index`"):
            fake.index()
        assert fake.search("tailscale", mode="lexical")  # queries keep working meanwhile
    finally:
        lock.release()
        store.close()
    fake.index()


def test_bad_files_are_skipped_with_warnings_and_nothing_is_lost(fake, vault, caplog, monkeypatch):
    fake.add_vault(vault, "vault")
    fake.index()
    before = consistent(fake)
    (vault / "bin.md").write_bytes(b"\x00\x01\x02binary")
    (vault / "latin1.md").write_bytes(b"# Caf\xe9\n\nna\xefve text about espresso\n")
    (vault / "empty.md").write_text("")
    (vault / "huge.md").write_text("x " * 3_000_000)
    # An unreadable note keeps its previous chunks (root can read anything, so simulate EACCES).
    real_open = open

    def guarded(path, *a, **k):
        if str(path).endswith("network.md"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *a, **k)

    write(vault, "home/network.md", "# Network\n\nchanged but unreadable\n")
    monkeypatch.setattr("builtins.open", guarded)
    with caplog.at_level(logging.WARNING, logger="hybrid"):
        r = fake.index()[0]
    monkeypatch.undo()
    text = caplog.text
    assert "bin.md: binary content" in text
    assert "latin1.md: invalid UTF-8" in text
    assert "huge.md" in text and "max_file_bytes" in text
    assert "network.md: cannot read" in text and "kept its previous chunks" in text
    assert r.skipped == 3 and r.added == 2  # latin1 + empty
    assert paths(fake.search("tailscale", mode="lexical")) == ["home/network.md"]
    assert paths(fake.search("espresso", mode="lexical")) == ["latin1.md"]
    assert consistent(fake) >= before


def test_file_vanishing_mid_run_is_treated_as_deleted(fake, vault, monkeypatch):
    fake.add_vault(vault, "vault")
    fake.index()
    write(vault, "journal.md", "changed text about rye bread\n")

    real = reading.read_bytes

    def vanish(entry):
        if entry.path == "journal.md":
            os.unlink(entry.abspath)
        return real(entry)

    monkeypatch.setattr(reading, "read_bytes", vanish)
    r = fake.index()[0]
    assert r.removed == 1
    assert fake.search("sourdough", mode="lexical") == []
    consistent(fake)


def test_missing_vault_folder_keeps_the_index(fake, vault, tmp_path):
    fake.add_vault(vault, "vault")
    fake.index()
    moved = tmp_path / "moved"
    shutil.move(vault, moved)
    with pytest.raises(VaultError, match="is missing; nothing was changed"):
        fake.index()
    assert paths(fake.search("tailscale", mode="lexical")) == ["home/network.md"]


def test_unknown_vault_and_unindexed_vault(fake, vault):
    with pytest.raises(VaultError, match="no vaults registered"):
        fake.search("x")
    fake.add_vault(vault, "vault")
    with pytest.raises(VaultError, match="not indexed yet"):
        fake.search("x")
    with pytest.raises(VaultError, match=r"unknown vault 'nope' \(known: vault\)"):
        fake.search("x", vaults=["nope"])


def test_get_reads_lines_and_refuses_escapes(fake, vault, tmp_path):
    fake.add_vault(vault, "vault")
    note = fake.get("work/orders.md:4-6")
    assert note.text.split("\n") == ["# Orders pipeline", "", "The `orders-created` topic has 12 partitions."]
    assert (note.start_line, note.end_line) == (4, 6)
    (tmp_path / "secret.md").write_text("secret")
    os.symlink(tmp_path / "secret.md", vault / "link.md")
    for bad in ["../../etc/passwd", "/etc/passwd", "../secret.md", "link.md", "work/../../secret.md",
                "nope.md"]:
        with pytest.raises(PathRefused):
            fake.get(bad)


def test_multiple_vaults_are_merged(fake, vault, tmp_path):
    other = tmp_path / "other"
    write(other, "notes/tailscale.md", "# Tailscale at work\n\ntailscale tailscale acl policy\n")
    fake.add_vault(vault, "vault")
    fake.add_vault(other, "other")
    fake.index()
    hits = fake.search("tailscale", mode="hybrid")
    assert {h.vault for h in hits} == {"vault", "other"}
    assert {h.vault for h in fake.search("tailscale", vaults=["other"])} == {"other"}
    assert hits[0].uri.startswith("obsidian://open?vault=")


def test_recency_prior_demotes_stale_notes(vault, open_h):
    write(vault, "old.md", "---\nupdated: 2019-01-01\n---\n# Old\n\ncompost compost bins\n")
    write(vault, "new.md", "# New\n\ncompost bins\n")
    h = open_h(embedder="hash:64")
    h.add_vault(vault, "vault")
    h.index()
    assert [x.path for x in h.search("compost", mode="lexical")][0] == "old.md"
    h2 = open_h(embedder="hash:64", recency_months=12, recency_penalty=0.5)
    assert [x.path for x in h2.search("compost", mode="lexical")][0] == "new.md"
    assert h2.search("compost", mode="lexical", top_k=1)[0].modified.startswith("20")


def test_exclude_folders_in_every_arm(fake, vault):
    fake.add_vault(vault, "vault")
    fake.index()
    for mode in ("lexical", "vector", "hybrid"):
        found = {h.path for h in fake.search("tailscale tomatoes orders", mode=mode, top_k=50,
                                             exclude_folders=["home/"])}
        assert found and not any(p.startswith("home/") for p in found), mode


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_reading_overlaps_embedding_and_errors_on_either_side_stop_cleanly(fake, vault, monkeypatch):
    """Files are parsed on a background thread while embedding runs. A failure in the reader
    reaches the caller; a failure in the embedder stops the reader; either way the previous
    index is untouched and no thread is left behind."""
    import threading


    fake.add_vault(vault, "v")
    fake.index()
    before = {h.path for h in fake.search("garden tomatoes sun", mode="lexical")}
    for i in range(40):
        write(vault, f"bulk/n{i}.md", f"# Bulk {i}\n\nfiller words number {i} " * 30)
    monkeypatch.setattr(EmbedQueue, "WINDOW", 8)  # several embed windows while reading

    real_read = reading.read_document

    def broken_read(entry, *args):  # a bug in the reader itself, outside the per-file net
        if entry.path == "bulk/n30.md":
            raise RuntimeError("reader bug on n30")
        return real_read(entry, *args)

    monkeypatch.setattr(reading, "read_document", broken_read)
    with pytest.raises(RuntimeError, match="reader bug on n30"):
        fake.index()
    assert not [t for t in threading.enumerate() if t.name == "hybrid-read"]
    assert fake.status()[0].notes == 4

    monkeypatch.setattr(reading, "read_document", real_read)
    emb = fake.embedder("hash:64")
    calls = fail_embedding_at(monkeypatch, emb, 2)
    with pytest.raises(hybrid.HybridError, match="model went away"):
        fake.index()
    assert not [t for t in threading.enumerate() if t.name == "hybrid-read"]
    assert {h.path for h in fake.search("garden tomatoes sun", mode="lexical")} == before

    monkeypatch.setattr(emb, "embed_documents", calls["real"])
    rep = fake.index()[0]
    assert rep.added == 40 and fake.status()[0].notes == 44
    assert rep.cache_hits > 0  # the windows embedded before the failure were kept
    assert rep.stage_seconds["embed"] > 0 and rep.stage_seconds["read_parse"] > 0
