"""`hybrid status` says where the config and the data live and whether a server is running."""
import json
import os

from click.testing import CliRunner
from helpers import indexed_vault

from hybrid.cli import main


def test_status_names_paths_and_the_server(tmp_path, monkeypatch):
    h = indexed_vault(tmp_path, {"a.md": "# A\n\nalpha\n", "b.md": "---\nprivate: true\n---\n# B\n"})
    home = h.config.path.parent
    monkeypatch.setenv("HYBRID_HOME", str(home))
    (home / "config.toml").write_text('[settings]\nembedder = "hash:64"\n\n' + (home / "config.toml").read_text())
    out = CliRunner().invoke(main, ["status"]).output
    assert f"config {home / 'config.toml'}" in out and f"data {home / 'data'}" in out
    assert "no server running" in out and "agents see 1 notes (1 private" in out
    info = home / "data" / "server.json"
    info.write_text(json.dumps({"url": "http://127.0.0.1:9", "pid": os.getpid(), "token": False}))
    assert "server running at http://127.0.0.1:9" in CliRunner().invoke(main, ["status"]).output
    info.write_text(json.dumps({"url": "http://127.0.0.1:9", "pid": 2**22 + 12345}))  # no such process
    assert "no server running" in CliRunner().invoke(main, ["status"]).output
    h.close()
