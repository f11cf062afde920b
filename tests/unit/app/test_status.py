"""`hybrid status` says where the config and the data live and whether a server is running."""
import json
import os

from click.testing import CliRunner
from helpers import indexed_vault

from hybrid.faces.cli.main import main


def test_status_names_paths_and_the_server(tmp_path, monkeypatch):
    h = indexed_vault(tmp_path, {"a.md": "# A\n\nalpha\n", "b.md": "---\nprivate: true\n---\n# B\n"})
    home = h.config.path.parent
    monkeypatch.setenv("HYBRID_HOME", str(home))
    (home / "config.toml").write_text('[settings]\nembedder = "hash:64"\n\n' + (home / "config.toml").read_text())
    out = CliRunner().invoke(main, ["status"]).output
    assert f"config {home / 'config.toml'}" in out and f"data {home / 'data'}" in out
    assert "no server running" in out and "agents see 1 notes (1 hidden: 1 private)" in out
    info = home / "data" / "server.json"
    info.write_text(json.dumps({"url": "http://127.0.0.1:9", "pid": os.getpid(), "token": False}))
    assert "server running at http://127.0.0.1:9" in CliRunner().invoke(main, ["status"]).output
    info.write_text(json.dumps({"url": "http://127.0.0.1:9", "pid": 2**22 + 12345}))  # no such process
    assert "no server running" in CliRunner().invoke(main, ["status"]).output
    h.close()


def test_status_says_whether_a_watcher_runs(tmp_path, monkeypatch):
    """A real watcher (as `hybrid watch` / `serve --watch` run it) announces itself while it
    runs; a note left by a process that died is not taken for a live watcher."""
    from hybrid.app.watch import VaultWatcher, running_watchers
    h = indexed_vault(tmp_path, {"a.md": "# A\n\nalpha\n"})
    home = h.config.path.parent
    monkeypatch.setenv("HYBRID_HOME", str(home))
    (home / "config.toml").write_text('[settings]\nembedder = "hash:64"\n\n' + (home / "config.toml").read_text())
    assert "no watcher running" in CliRunner().invoke(main, ["status"]).output
    with VaultWatcher(h, debounce=0.05):
        assert [w["vaults"] for w in running_watchers(home / "data")] == [["v"]]
        assert f"watcher running (pid {os.getpid()}: v)" in CliRunner().invoke(main, ["status"]).output
    assert running_watchers(home / "data") == [] and not list((home / "data" / "watchers").iterdir())
    (home / "data" / "watchers" / "1-dead.json").write_text(json.dumps({"pid": 2**22 + 12345, "vaults": ["v"]}))
    assert "no watcher running" in CliRunner().invoke(main, ["status"]).output
    h.close()


def test_status_counts_files_new_changed_deleted_since_the_last_run(tmp_path, monkeypatch):
    from helpers import write

    from hybrid.app.freshness import Changes
    h = indexed_vault(tmp_path, {"a.md": "# A\n\nalpha\n", "b.md": "# B\n\nbeta\n", "c.md": "# C\n\ngamma\n",
                                 "d.md": "---\nprivate: true\n---\n# D\n\ndelta\n"})
    home, vault = h.config.path.parent, tmp_path / "vault"
    monkeypatch.setenv("HYBRID_HOME", str(home))
    (home / "config.toml").write_text('[settings]\nembedder = "hash:64"\n\n' + (home / "config.toml").read_text())
    assert h.status()[0].changes == Changes() and h.status()[0].changes.text == "up to date"
    write(vault, "new1.md", "# N\n\nnew\n")
    write(vault, "sub/new2.md", "# N2\n\nnewer\n")
    write(vault, "a.md", "# A\n\nalpha, edited\n")
    stat = (vault / "b.md").stat()
    os.utime(vault / "b.md", ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))  # touched only
    (vault / "c.md").unlink()
    (vault / "d.md").unlink()  # a private note's activity: owners see it, agents never
    (vault / "notes.csv").write_text("not a note")  # outside the include globs
    st, = h.status()
    assert st.changes == Changes(new=2, changed=1, deleted=2)
    assert st.changes.text == "2 new, 1 changed, 2 deleted: run `hybrid index`"
    counts = {"new": 2, "changed": 1, "deleted": 2, "skipped": 0, "skipped_files": []}
    assert st.to_dict()["changes"] == counts
    out = CliRunner().invoke(main, ["status"]).output
    assert "files on disk: 2 new, 1 changed, 2 deleted: run `hybrid index`" in out
    row, = json.loads(CliRunner().invoke(main, ["status", "--json"]).output)
    assert row["changes"] == counts
    agent, = h.status(agent=True)
    assert agent.changes is None  # agents are not told about file activity
    report, = h.index()
    assert (report.added, report.updated, report.removed) == (2, 1, 2)  # what status announced
    assert h.status()[0].changes == Changes()
    assert "files on disk: up to date" in CliRunner().invoke(main, ["status"]).output
    h.close()


def test_status_changes_follow_chunking_settings_and_a_missing_folder(tmp_path):
    import shutil

    import hybrid
    from hybrid.app.freshness import Changes
    h = indexed_vault(tmp_path, {"a.md": "# A\n\nalpha\n", "b.md": "# B\n\nbeta\n"})
    h.close()
    rechunk = hybrid.open(tmp_path / "home", embedder="hash:64", chunk_tokens=64)
    assert rechunk.status()[0].changes == Changes(changed=2)  # `hybrid index` would re-chunk both
    rechunk.close()
    shutil.rmtree(tmp_path / "vault")
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    assert h.status()[0].changes is None and not h.status()[0].exists
    h.close()


def test_status_of_a_vault_never_indexed(tmp_path, monkeypatch):
    """A registered vault not yet indexed: its line, where its text would go, and nothing about
    agents (there is no index to count)."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("# A\n\nalpha\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[settings]\nembedder = "hash:64"\n\n'
                                      f'[vaults.n]\npath = "{tmp_path / "notes"}"\n')
    monkeypatch.setenv("HYBRID_HOME", str(home))
    result = CliRunner().invoke(main, ["status"])
    assert result.exit_code == 0, result.output
    assert "(not indexed" in result.output and "text sent to: nowhere" in result.output
    assert "agents see" not in result.output
