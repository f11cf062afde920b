"""The filesystem watcher: real files, real watchdog, real index (hash embedder).

Every wait is bounded polling; nothing asserts on timing."""
import os
import shutil
import threading
import time

import pytest
from helpers import write

from hybrid.app.watch import VaultWatcher
from hybrid.store.local.store import VaultStore

# watchdog itself warns when it adds the watch of a just-created nested folder twice (mkdir -p
# under a recursive watch); the watch is simply replaced, so this is noise, not a failure.
pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")

WAIT = 15.0       # upper bound for anything to happen; tests normally finish far sooner
DEBOUNCE = 0.2


def until(predicate, timeout=WAIT):
    """Poll ``predicate`` every 0.1 s until it is true; False after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def hit_paths(h, query):
    return {hit.path for hit in h.search(query, mode="lexical", top_k=50, vaults=["vault"])}


def watcher_threads():
    return [t for t in threading.enumerate()
            if t.name.startswith("hybrid-watch") or type(t).__name__.endswith("Emitter")]


@pytest.fixture
def watch(fake, vault):
    fake.add_vault(vault, "vault")
    fake.index(["vault"])
    made = []

    def start(**kwargs):
        w = VaultWatcher(fake, ["vault"], debounce=DEBOUNCE, **kwargs).start()
        made.append(w)
        assert w.wait_idle(WAIT)  # the start-up sync
        return w

    yield start
    for w in made:
        w.stop()
    fake.close()


@pytest.fixture
def watcher(watch):
    return watch()


def test_start_syncs_once_and_reports_state(watcher):
    st = watcher.state()["vault"]
    assert st["watching"] and not st["pending"] and st["last_error"] is None
    assert st["runs"] == 1 and st["last_indexed"] is not None


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_new_note_is_found(watcher, fake, vault):
    write(vault, "ideas/kites.md", "# Kites\n\nA quetzalcoatl kite needs strong wind.\n")
    assert until(lambda: hit_paths(fake, "quetzalcoatl") == {"ideas/kites.md"})


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_a_skipped_file_is_not_warned_about_on_every_change(watch, fake, vault, caplog):
    """A binary "note" is skipped (one warning) and remembered: the watcher's runs on later
    changes neither read it nor warn about it again, until it changes itself."""
    (vault / "blob.md").write_bytes(b"\x00\x01 binary" * 20)
    assert fake.index(["vault"])[0].skipped == 1
    w = watch()
    caplog.clear()
    write(vault, "ideas/kites.md", "# Kites\n\nA quetzalcoatl kite needs strong wind.\n")
    assert until(lambda: hit_paths(fake, "quetzalcoatl") == {"ideas/kites.md"}) and w.wait_idle(WAIT)
    assert not [r for r in caplog.records if "blob.md" in r.getMessage()]
    assert fake.status()[0].changes.skipped == 1
    (vault / "blob.md").write_bytes(b"\x00\x02 binary, edited" * 20)
    assert until(lambda: any("blob.md: binary content" in r.getMessage() for r in caplog.records))


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_edit_replaces_old_words(watcher, fake, vault):
    write(vault, "home/garden.md", "# Garden\n\nCucumbers want partial shade.\n")
    assert until(lambda: "home/garden.md" in hit_paths(fake, "cucumbers")
                 and "home/garden.md" not in hit_paths(fake, "tomatoes"))


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_deleted_note_vanishes(watcher, fake, vault):
    assert hit_paths(fake, "tomatoes") == {"home/garden.md"}
    (vault / "home/garden.md").unlink()
    assert until(lambda: "home/garden.md" not in hit_paths(fake, "tomatoes"))
    assert until(lambda: fake.status()[0].notes == 3)


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_renamed_note_moves(watcher, fake, vault):
    os.rename(vault / "home/garden.md", vault / "home/vegetables.md")
    assert until(lambda: hit_paths(fake, "tomatoes") == {"home/vegetables.md"})


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("temp", ["home/.garden.md.tmp", "home/garden.md~"])
def test_editor_save_through_temp_file(watcher, fake, vault, temp):
    tmp = write(vault, temp, "# Garden\n\nPumpkins sprawl across the whole bed.\n")
    os.replace(tmp, vault / "home/garden.md")
    assert until(lambda: hit_paths(fake, "pumpkins") == {"home/garden.md"}
                 and "home/garden.md" not in hit_paths(fake, "tomatoes"))


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_hidden_and_foreign_files_trigger_nothing(watcher, vault):
    assert watcher.wait_idle(WAIT)
    runs = watcher.state()["vault"]["runs"]
    write(vault, ".obsidian/workspace.json", "{}")
    write(vault, ".obsidian/plugins/x/notes.md", "# not a note\n")
    write(vault, ".trash/old.md", "# trashed\n")
    write(vault, "home/photo.psd", "not really a png")
    time.sleep(DEBOUNCE * 3)  # past the debounce: a (wrongly) scheduled run would have started
    assert watcher.wait_idle(WAIT)
    assert watcher.state()["vault"]["runs"] == runs
    write(vault, "home/visible.md", "# Visible\n")  # the counter does move for a real note
    assert until(lambda: watcher.state()["vault"]["runs"] > runs)


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_burst_of_writes_coalesces(watcher, fake, vault):
    runs = watcher.state()["vault"]["runs"]
    for i in range(500):
        write(vault, f"burst/n{i:03d}.md", f"# Burst {i}\n\nToken burstword{i:03d} here.\n")
    assert until(lambda: fake.status()[0].notes == 504)
    assert watcher.wait_idle(WAIT)
    assert fake.status()[0].notes == 504
    for i in (0, 1, 137, 250, 498, 499):
        assert hit_paths(fake, f"burstword{i:03d}") == {f"burst/n{i:03d}.md"}
    assert watcher.state()["vault"]["runs"] - runs < 50


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_vault_moved_away_and_back(watcher, fake, vault):
    away = vault.parent / "vault-away"
    shutil.move(vault, away)
    assert until(lambda: not watcher.state()["vault"]["watching"])
    write(away, "home/while-away.md", "# Away\n\nA narwhal note written while unwatched.\n")
    shutil.move(away, vault)
    assert until(lambda: watcher.state()["vault"]["watching"])
    assert until(lambda: hit_paths(fake, "narwhal") == {"home/while-away.md"})
    write(vault, "home/back.md", "# Back\n\nThe axolotl returns.\n")
    assert until(lambda: hit_paths(fake, "axolotl") == {"home/back.md"})
    assert watcher.wait_idle(WAIT)
    assert watcher.state()["vault"]["last_error"] is None


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_vault_deleted_and_recreated(watcher, fake, vault):
    shutil.rmtree(vault)
    assert until(lambda: watcher.state()["vault"]["last_error"] is not None)
    assert "missing" in watcher.state()["vault"]["last_error"]
    write(vault, "fresh.md", "# Fresh\n\nA platypus in a brand new folder.\n")
    assert until(lambda: hit_paths(fake, "platypus") == {"fresh.md"})
    assert until(lambda: fake.status()[0].notes == 1)
    assert watcher.state()["vault"]["watching"]
    write(vault, "later.md", "# Later\n\nThe wombat came later.\n")  # the new watch is live
    assert until(lambda: hit_paths(fake, "wombat") == {"later.md"})


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_locked_index_is_retried(watch, fake, vault):
    reports = []
    watcher = watch(on_indexed=reports.append)
    store = VaultStore(fake.config.vault("vault").index_dir)
    lock = store.lock()  # another writer holds the vault
    try:
        write(vault, "home/locked.md", "# Locked\n\nThe pangolin waits its turn.\n")
        assert until(lambda: "another" in (watcher.state()["vault"]["last_error"] or ""))
    finally:
        lock.release()
        store.close()
    assert until(lambda: hit_paths(fake, "pangolin") == {"home/locked.md"})
    assert watcher.wait_idle(WAIT)
    assert watcher.state()["vault"]["last_error"] is None
    assert any(r.added == 1 for r in reports)


def test_stop_is_idempotent_and_leaves_no_threads(fake, vault):
    fake.add_vault(vault, "vault")
    fake.index(["vault"])
    with VaultWatcher(fake, debounce=DEBOUNCE) as w:
        assert w.wait_idle(WAIT)
        assert watcher_threads()
    assert not watcher_threads()
    w.stop()
    w.stop()
    assert not watcher_threads()
    assert not w.state()["vault"]["watching"]
    fake.close()


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_rescan_runs_without_events(watch):
    watcher = watch(rescan=0.3)  # catches events the OS dropped: a sync happens regardless
    runs = watcher.state()["vault"]["runs"]
    assert until(lambda: watcher.state()["vault"]["runs"] >= runs + 2)
    assert watcher.state()["vault"]["last_error"] is None


def test_no_vaults_registered_is_not_an_error(fake):
    with VaultWatcher(fake) as w:
        assert w.state() == {} and w.wait_idle(WAIT)
    assert not watcher_threads()


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_watcher_follows_the_registry(fake, vault, tmp_path):
    """A server started before a vault was registered watches it once it is (issue #9), and
    lets go of a vault that is removed."""
    import hybrid
    with VaultWatcher(fake, debounce=DEBOUNCE) as w:
        other = hybrid.open(embedder="hash:64")
        other.add_vault(vault, "vault")
        assert until(lambda: w.state().get("vault", {}).get("watching"))
        assert until(lambda: w.state()["vault"]["last_indexed"])
        write(vault, "later/note.md", "# Later\n\nA capybara note.\n")
        assert until(lambda: "later/note.md" in hit_paths(fake, "capybara"))
        other.remove_vault("vault", wait=WAIT)  # the watcher may be mid-run: wait for it
        assert until(lambda: "vault" not in w.state())
