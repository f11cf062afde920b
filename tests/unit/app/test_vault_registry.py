"""Hardening of the vault registry and of reading notes back (issue #9): names that are paths,
concurrent registrations, re-pointing, renames, removal during indexing, one missing folder,
a long-lived handle that must see registry changes, and `get` reading only indexed files."""
import os
import shutil
import subprocess
import sys
import threading

import pytest
from helpers import hybrid_cmd as cli
from helpers import write

import hybrid
from hybrid.core.config import load_config
from hybrid.core.errors import ConfigError, IndexLocked, PathRefused, VaultError
from hybrid.store.local.store import VaultStore


def tree(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


# --- a vault name is never a path ------------------------------------------------------------
@pytest.mark.parametrize("name", ["/tmp/v", "../../x", "..", ".hidden", "a/b", "a..b", "", "x" * 65])
@pytest.mark.slow
def test_config_vault_names_that_are_paths_are_refused(hybrid_home, tmp_path, name):
    notes = tmp_path / "notes"
    write(notes, "keep.md", "# Keep\n\nprecious words\n")
    before = tree(notes)
    write(hybrid_home, "config.toml", f'[settings]\nembedder = "hash:64"\n\n[vaults."{name}"]\n'
                                      f'path = "{notes}"\n')
    with pytest.raises(ConfigError, match="not allowed"):
        load_config()
    for args in (["index"], ["index", "--reembed"], ["vault", "remove", name]):
        r = cli(hybrid_home, *args)
        assert r.returncode == 1 and r.stderr.startswith("error: ") and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    assert tree(notes) == before  # nothing written into, nothing deleted from the notes


@pytest.mark.parametrize("name", ["/tmp/v", "../../x", "..", "a/b", ".x", "b.lock", "b.reembed-tmp"])
@pytest.mark.slow
def test_cli_vault_add_refuses_path_names(hybrid_home, vault, name):
    r = cli(hybrid_home, "vault", "add", str(vault), "--name", name)
    assert r.returncode == 1 and "not allowed" in r.stderr
    assert not (hybrid_home / "config.toml").exists()


def test_index_dir_always_lies_under_the_data_dir(fake):
    base = (fake.config.data / "vaults").resolve()
    assert fake.config.index_dir("notes") == base / "notes"
    for bad in ("..", "../x", "/tmp/v", "a/../../b"):
        with pytest.raises(VaultError):
            fake.config.index_dir(bad)


def test_vault_inside_the_data_dir_is_refused(fake):
    inside = fake.config.data / "vaults" / "x"
    inside.mkdir(parents=True)
    with pytest.raises(VaultError, match="data folder"):
        fake.add_vault(inside, "x")


def test_old_attack_reembed_and_remove_leave_notes_alone(fake, tmp_path):
    """The reproduction: a vault whose index folder was its notes folder. With names checked
    that cannot happen; and remove/reembed only ever delete the index's own files."""
    notes = tmp_path / "v"
    write(notes, "a.md", "# A\n\nalpha words\n")
    write(notes, "sub/b.md", "# B\n\nbeta words\n")
    fake.add_vault(notes, "v")
    fake.index(["v"])
    fake.index(["v"], reembed=True)
    idx = fake.config.vault("v").index_dir
    write(idx, "stranger.txt", "not ours")  # a file hybrid did not create
    before = tree(notes)
    fake.remove_vault("v")
    assert tree(notes) == before
    assert (idx / "stranger.txt").read_text() == "not ours"
    assert not (idx / "catalog.sqlite").exists()


# --- registry writes -------------------------------------------------------------------------
@pytest.mark.slow
def test_concurrent_vault_adds_all_register(hybrid_home, tmp_path):
    folders = []
    for i in range(8):
        folders.append(tmp_path / f"v{i}")
        write(folders[-1], "n.md", f"# N{i}\n")
    env = dict(os.environ, HYBRID_HOME=str(hybrid_home))
    procs = [subprocess.Popen([sys.executable, "-m", "hybrid", "vault", "add", str(f), "--name", f"v{i}"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i, f in enumerate(folders)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert sorted(load_config().vaults) == [f"v{i}" for i in range(8)]


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_concurrent_adds_in_threads(hybrid_home, tmp_path):
    handles = [hybrid.open() for _ in range(6)]
    folders = [tmp_path / f"t{i}" for i in range(6)]
    for f in folders:
        f.mkdir()
    threads = [threading.Thread(target=h.add_vault, args=(f, f.name)) for h, f in zip(handles, folders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(load_config().vaults) == [f"t{i}" for i in range(6)]


def test_overrides_are_not_written_to_the_config(hybrid_home, vault):
    h = hybrid.open(chunk_tokens=64)
    h.add_vault(vault, "vault")
    assert load_config().settings.chunk_tokens == 128
    assert h.config.settings.chunk_tokens == 64


def test_add_existing_name_with_another_folder_is_refused(fake, vault, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    fake.add_vault(vault, "notes")
    with pytest.raises(VaultError, match="vault move notes") as err:
        fake.add_vault(other, "notes")
    assert "vault remove notes" in str(err.value)
    assert load_config().vault("notes").path == vault.resolve()
    fake.add_vault(vault, "notes", exclude=["home/**"])  # same folder: updates its options
    assert load_config().vault("notes").exclude == ["home/**"]


@pytest.mark.slow
def test_index_path_with_existing_name_is_refused(hybrid_home, vault, tmp_path):
    write(hybrid_home, "config.toml", '[settings]\nembedder = "hash:64"\n')
    other = tmp_path / "other"
    write(other, "o.md", "# O\n")
    assert cli(hybrid_home, "index", str(vault), "--name", "notes").returncode == 0
    r = cli(hybrid_home, "index", str(other), "--name", "notes")
    assert r.returncode == 1 and "vault move" in r.stderr


def test_rename_keeps_the_index(fake, vault):
    fake.add_vault(vault, "old")
    fake.index(["old"])
    hits = [h.path for h in fake.search("tomatoes", vaults=["old"])]
    fake.rename_vault("old", "new")
    assert [v.name for v in fake.vaults] == ["new"]
    assert [h.path for h in fake.search("tomatoes", vaults=["new"])] == hits
    assert fake.index(["new"])[0].chunks_embedded == 0  # nothing re-embedded
    with pytest.raises(VaultError, match="unknown vault 'old'"):
        fake.search("tomatoes", vaults=["old"])
    with pytest.raises(VaultError, match="not allowed"):
        fake.rename_vault("new", "../evil")


def test_move_repoints_and_keeps_the_index(fake, vault, tmp_path):
    fake.add_vault(vault, "notes")
    first = fake.index(["notes"])[0]
    moved = tmp_path / "moved"
    shutil.move(str(vault), str(moved))
    assert fake.index(["notes"], keep_going=True)[0].error  # folder gone: reported, index intact
    assert fake.search("tomatoes")  # still answers from the index
    fake.move_vault("notes", moved)
    r = fake.index(["notes"])[0]
    assert r.chunks == first.chunks and r.chunks_embedded == 0 and r.removed == 0


def test_remove_during_an_index_run_is_refused(fake, vault):
    fake.add_vault(vault, "vault")
    fake.index(["vault"])
    store = VaultStore(fake.config.vault("vault").index_dir)
    lock = store.lock()
    try:
        with pytest.raises(IndexLocked, match="being indexed"):
            fake.remove_vault("vault")
    finally:
        lock.release()
        store.close()
    assert "vault" in load_config().vaults
    fake.remove_vault("vault")
    assert "vault" not in load_config().vaults


# --- one vault never stops the others --------------------------------------------------------
def test_missing_folder_does_not_stop_other_vaults(fake, vault, tmp_path):
    gone = tmp_path / "gone"
    write(gone, "g.md", "# G\n")
    fake.add_vault(gone, "a-gone")
    fake.add_vault(vault, "b-here")
    shutil.rmtree(gone)
    with pytest.raises(VaultError, match="a-gone"):
        fake.index()
    assert fake.status()[1].indexed and fake.status()[1].notes == 4  # b was indexed anyway
    reports = fake.index(keep_going=True)
    assert reports[0].error and "vault move a-gone" in reports[0].error and reports[1].error is None


@pytest.mark.slow
def test_cli_index_reports_each_failure_and_exits_1(hybrid_home, vault, tmp_path):
    write(hybrid_home, "config.toml", '[settings]\nembedder = "hash:64"\n')
    gone = tmp_path / "gone"
    gone.mkdir()
    assert cli(hybrid_home, "vault", "add", str(gone), "--name", "a-gone").returncode == 0
    assert cli(hybrid_home, "vault", "add", str(vault), "--name", "b-here").returncode == 0
    gone.rmdir()
    r = cli(hybrid_home, "index")
    assert r.returncode == 1
    assert r.stderr.count("error: ") == 1 and "a-gone" in r.stderr and "Traceback" not in r.stderr
    assert "b-here: 4 added" in r.stdout


# --- a long-lived handle sees registry changes ----------------------------------------------
def test_running_handle_sees_vaults_added_and_removed_elsewhere(hybrid_home, vault, tmp_path):
    server = hybrid.open(embedder="hash:64")
    assert server.vaults == []
    other = hybrid.open(embedder="hash:64")
    other.add_vault(vault, "late")
    other.index(["late"])
    assert [h.path for h in server.search("tomatoes", vaults=["late"], mode="lexical")] == ["home/garden.md"]
    other.rename_vault("late", "later")
    assert [h.path for h in server.search("tomatoes", vaults=["later"], mode="lexical")] == ["home/garden.md"]
    other.remove_vault("later")
    with pytest.raises(VaultError, match="unknown vault"):
        server.search("tomatoes", vaults=["later"])
    assert server.vaults == []


def test_broken_config_edit_keeps_the_last_good_registry(hybrid_home, vault):
    h = hybrid.open(embedder="hash:64")
    h.add_vault(vault, "vault")
    h.index()
    (hybrid_home / "config.toml").write_text("[vaults\n")
    assert [v.name for v in h.vaults] == ["vault"]
    assert h.search("tomatoes")


# --- get reads only what indexing would pick up ----------------------------------------------
@pytest.fixture
def secrets_vault(fake, vault):
    write(vault, ".env", "API_KEY=sk-secret\n")
    write(vault, ".git/config", "[remote]\nurl = https://token@host/x\n")
    write(vault, ".obsidian/plugins/copilot/data.json", '{"openai": "sk-secret"}\n')
    write(vault, "archive/old.md", "# Old\n\nexcluded words\n")
    write(vault, "notes.csv", "plain text, not included\n")
    (vault / "bin.md").write_bytes(b"# x\n\x00\x01\x02binary")
    (vault / "link.md").symlink_to(vault / ".env")
    fake.add_vault(vault, "vault", exclude=["archive/**"])
    return vault


@pytest.mark.parametrize("ref", [".env", ".git/config", ".obsidian/plugins/copilot/data.json",
                                 "archive/old.md", "notes.csv", "link.md", "bin.md", "home",
                                 "./.env", "home/../.env", "home/../../etc/passwd", "/etc/passwd",
                                 ".", ""])
def test_get_refuses_what_is_not_indexed(fake, secrets_vault, ref):
    with pytest.raises(PathRefused) as err:
        fake.get(ref, "vault")
    assert "sk-secret" not in str(err.value) and str(err.value)


def test_get_still_reads_notes(fake, secrets_vault):
    assert fake.get("home/garden.md", "vault").text.startswith("# Garden")
    assert fake.get("./home//garden.md:1-1", "vault").path == "home/garden.md"


@pytest.mark.slow
def test_cli_get_of_a_binary_or_secret_is_one_error_line(hybrid_home, secrets_vault):
    for ref in ("bin.md", ".env", "home"):
        r = cli(hybrid_home, "get", ref, "--vault", "vault")
        assert r.returncode == 1 and r.stderr.startswith("error: ") and "Traceback" not in r.stderr
        assert "sk-secret" not in r.stdout + r.stderr


# --- status and vacuum -----------------------------------------------------------------------
@pytest.mark.parametrize("damage", [b"", b"garbage" * 100])
@pytest.mark.slow
def test_status_reports_a_damaged_vault_and_still_lists_the_others(fake, vault, tmp_path, damage):
    other = tmp_path / "other"
    write(other, "o.md", "# O\n\nsome words\n")
    fake.add_vault(vault, "a-bad")
    fake.add_vault(other, "b-good")
    fake.index()
    fake.close()
    (fake.config.vault("a-bad").index_dir / "catalog.sqlite").write_bytes(damage)
    for f in fake.config.vault("a-bad").index_dir.glob("catalog.sqlite-*"):
        f.unlink()
    bad, good = fake.status()
    assert bad.error and good.error is None and good.notes == 1
    r = cli(fake.config.path.parent, "status")
    assert r.returncode == 0 and "UNREADABLE" in r.stdout and "b-good" in r.stdout
    fake.index()  # heals
    assert fake.status()[0].error is None and fake.status()[0].notes == 4


@pytest.mark.slow
def test_cli_vacuum(hybrid_home, vault):
    write(hybrid_home, "config.toml", '[settings]\nembedder = "hash:64"\n')
    assert cli(hybrid_home, "index", str(vault), "--name", "vault").returncode == 0
    for i in range(5):
        write(vault, "home/garden.md", f"# Garden\n\nversion {i} of the garden\n")
        assert cli(hybrid_home, "index").returncode == 0
    r = cli(hybrid_home, "vacuum", "--json")
    assert r.returncode == 0, r.stderr
    (rep,) = __import__("json").loads(r.stdout)
    assert rep["vault"] == "vault" and rep["bytes_after"] <= rep["bytes_before"]
    assert cli(hybrid_home, "query", "garden", "--mode", "lexical").returncode == 0


# --- found by the black-box re-check ---------------------------------------------------------
def test_symlinks_to_hidden_or_excluded_files_are_neither_indexed_nor_read(fake, vault):
    write(vault, ".env", "AWS_KEY=AKIASECRETLEAK\n")
    write(vault, ".git/config", "[remote]\nurl = SECRETGITURL\n")
    write(vault, "archive/old.md", "# Old\n\nSECRETARCHIVED words\n")
    (vault / "notes").mkdir()
    (vault / "notes/envlink.md").symlink_to("../.env")
    (vault / "notes/gitcfg.md").symlink_to("../.git/config")
    (vault / "notes/archlink.md").symlink_to("../archive/old.md")
    (vault / "notes/archdir").symlink_to("../archive")
    (vault / "notes/gardenlink.md").symlink_to("../home/garden.md")  # an allowed target
    fake.add_vault(vault, "vault", exclude=["archive/**"])
    fake.index()
    for secret in ("akiasecretleak", "secretgiturl", "secretarchived"):
        assert fake.search(secret, mode="lexical") == []
    for ref in ("notes/envlink.md", "notes/gitcfg.md", "notes/archlink.md", "notes/archdir/old.md"):
        with pytest.raises(PathRefused):
            fake.get(ref, "vault")
    hits = fake.search("tomatoes", mode="lexical")  # the same text as home/garden.md: folded into it
    assert "notes/gardenlink.md" in {h.path for h in hits} | {c.split(":")[1] for h in hits for c in h.also_in}
    assert fake.get("notes/gardenlink.md", "vault").text.startswith("# Garden")


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("args", [dict(query="\ud800"), dict(query="ok", folders=["\udfff"]),
                                  dict(query="ok", tags=["a\ud800"]), dict(query="ok", vaults=["\ud800"])])
def test_unpaired_surrogates_are_a_clean_error(fake, vault, args):
    from hybrid.retrieval.limits import BadSearchArgs
    fake.add_vault(vault, "vault")
    fake.index()
    with pytest.raises(BadSearchArgs, match="not valid text"):
        fake.search(**args)


@pytest.mark.slow
def test_cli_query_with_non_utf8_bytes_is_one_error_line(hybrid_home, vault):
    write(hybrid_home, "config.toml", '[settings]\nembedder = "hash:64"\n')
    assert cli(hybrid_home, "index", str(vault), "--name", "vault").returncode == 0
    env = dict(os.environ, HYBRID_HOME=str(hybrid_home))
    r = subprocess.run([sys.executable.encode(), b"-m", b"hybrid", b"query", b"--local", b"hello \xff"],
                       env=env, capture_output=True, timeout=300)
    assert r.returncode == 1 and r.stderr.startswith(b"error: ") and b"Traceback" not in r.stderr


def test_remove_waits_for_a_first_reembed_before_the_folder_exists(fake, vault):
    from hybrid.core.files import lock_dir
    fake.add_vault(vault, "big")
    idx = fake.config.vault("big").index_dir
    lock = lock_dir(idx)  # what an indexer holds while it builds <name>.reembed-tmp
    try:
        assert not idx.exists()
        with pytest.raises(IndexLocked):
            fake.remove_vault("big")
        with pytest.raises(IndexLocked):
            fake.rename_vault("big", "other")
    finally:
        lock.release()
    assert "big" in load_config().vaults


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_a_stray_file_in_the_index_folder_never_jams_reembed(fake, vault):
    fake.add_vault(vault, "vault")
    fake.index()
    idx = fake.config.vault("vault").index_dir
    write(idx, ".DS_Store", "finder junk")
    for _ in range(3):
        fake.index(reembed=True)
    assert fake.search("tomatoes", mode="lexical")
    kept = list(idx.parent.rglob(".DS_Store"))
    assert kept and all(p.read_text() == "finder junk" for p in kept)  # moved aside, never deleted


@pytest.mark.parametrize("name,make", [("vectors.faiss", "dir"), ("lexical", "file")])
@pytest.mark.slow
def test_hybrid_names_of_the_wrong_kind_are_one_error_line(hybrid_home, vault, name, make):
    write(hybrid_home, "config.toml", '[settings]\nembedder = "hash:64"\n')
    assert cli(hybrid_home, "index", str(vault), "--name", "vault").returncode == 0
    target = hybrid_home / "data" / "vaults" / "vault" / name
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    target.mkdir() if make == "dir" else target.write_text("mine")
    for args in (["index"], ["query", "tomatoes", "--mode", "lexical", "--local"]):
        r = cli(hybrid_home, *args)
        assert r.returncode == 1 and "error: " in r.stderr and "Traceback" not in r.stderr
        assert "move it away" in r.stderr
    assert target.exists()  # not ours: left where it is


def test_vault_name_with_a_trailing_newline_is_refused(fake, vault):
    with pytest.raises(VaultError, match="not allowed"):
        fake.add_vault(vault, "nl\n")


def test_an_emptied_vault_folder_keeps_its_index(fake, vault, tmp_path):
    """An unmounted drive shows an empty mount point: that must not delete every note."""
    fake.add_vault(vault, "vault")
    fake.index()
    hidden_away = tmp_path / "away"
    shutil.move(str(vault), str(hidden_away))
    vault.mkdir()  # the empty mount point
    with pytest.raises(VaultError, match="no documents now"):
        fake.index()
    assert fake.status()[0].notes == 4 and fake.search("tomatoes", mode="lexical")
    vault.rmdir()
    shutil.move(str(hidden_away), str(vault))
    r = fake.index()[0]
    assert r.chunks_embedded == 0 and r.removed == 0
