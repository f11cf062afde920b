"""A vault whose indexes live in Milvus, through the front doors: the CLI in separate processes,
a Milvus that is down or goes away mid-run, Milvus Lite's one process at a time, and never a
password in what is printed. (The contract suite and the labelled sets run on every store kind:
tests/contract/store, tests/unit/retrieval/test_quality.py.)"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import _wait_for_port, milvus_admin, require_milvus
from helpers import free_port, hybrid_cmd, write

import hybrid
from hybrid.core.errors import StoreUnavailable

pytestmark = [pytest.mark.slow, pytest.mark.milvus]

NOTES = {"net.md": "# Network\n\nRun tailscale up to advertise the home routes.\n",
         "bread.md": "# Bread\n\nA sourdough starter is fed flour and water daily.\n"}


@pytest.fixture
def lite_server(tmp_path):
    """A Milvus Lite server of this test's own (so it can be stopped and started again):
    ``start()`` returns its port, ``stop()`` kills it; stopped at the end."""
    require_milvus()
    port, data, procs = free_port(), tmp_path / "milvus-data", []

    def start() -> int:
        proc = subprocess.Popen([sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(data),
                                 "--host", "127.0.0.1", "--port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=open(tmp_path / "server.log", "ab"))
        procs.append(proc)
        _wait_for_port(port, proc, tmp_path / "server.log")
        return port

    def stop() -> None:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=20)
        procs.clear()

    yield start, stop
    stop()


def vault(tmp_path):
    root = tmp_path / "vault"
    for rel, text in NOTES.items():
        write(root, rel, text)
    return root


def test_cli_indexes_and_queries_a_lite_file_in_turn(tmp_path):
    """`hybrid index` then `hybrid query`, each its own process, on a Milvus Lite file."""
    require_milvus()
    home, url = tmp_path / "home", f"milvus://{tmp_path / 'lite' / 'index.db'}"
    write(home, "config.toml", '[settings]\nembedder = "hash:64"\n')
    r = hybrid_cmd(home, "vault", "add", vault(tmp_path), "--name", "kb", "--store", url)
    assert r.returncode == 0, r.stderr
    r = hybrid_cmd(home, "index")
    assert r.returncode == 0, r.stderr
    r = hybrid_cmd(home, "query", "sourdough starter", "--json")
    assert r.returncode == 0, r.stderr
    assert '"bread.md"' in r.stdout and '"net.md"' not in r.stdout.split('"bread.md"')[0]
    r = hybrid_cmd(home, "status")
    assert r.returncode == 0 and url in r.stdout  # the URL as written


def test_a_second_process_on_a_lite_file_gets_one_line_naming_the_fix(tmp_path):
    require_milvus()
    home, url = tmp_path / "home", f"milvus://{tmp_path / 'lite' / 'index.db'}"
    h = hybrid.open(home, embedder="hash:64", store=url)
    h.add_vault(vault(tmp_path), "kb")
    h.index()
    assert h.search("sourdough", mode="lexical")  # this process holds the Lite folder
    try:
        r = hybrid_cmd(home, "query", "sourdough", "--mode", "lexical")
        assert r.returncode != 0
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "open in another process" in lines[0] and "milvus_lite server" in lines[0], r.stderr
        assert "Traceback" not in r.stderr
    finally:
        h.close()


def test_a_milvus_that_is_down_leaves_the_other_vaults_searchable(tmp_path, monkeypatch):
    """One line naming the store and what to do; never the password; the local vault answers."""
    require_milvus()
    monkeypatch.setenv("HYBRID_MILVUS_TOKEN", "kb:s3cret-pass")
    port = free_port()  # nothing listens there
    home = tmp_path / "home"
    h = hybrid.open(home, embedder="hash:64")
    write(tmp_path / "local", "tomatoes.md", "# Tomatoes\n\nTomatoes need six hours of sun.\n")
    h.add_vault(tmp_path / "local", "mine")
    h.index()
    h.add_vault(vault(tmp_path), "kb", store=f"milvus://127.0.0.1:{port}/kb")
    with pytest.raises(StoreUnavailable) as err:
        h.index(vaults=["kb"])
    message = str(err.value)
    assert f"milvus://127.0.0.1:{port}/kb" in message and "is Milvus running" in message
    assert "s3cret" not in message
    res = h.search("tomatoes sun")  # every vault: the one that is down is skipped, and said so
    assert [x.path for x in res] == ["tomatoes.md"]
    assert any("kb" in n and "Milvus" in n for n in res.notices), res.notices
    with pytest.raises(StoreUnavailable):
        h.search("sourdough", vaults=["kb"])  # named: its error, not an empty answer
    h.close()
    r = hybrid_cmd(home, "query", "sourdough", "--vault", "kb")  # the token is in the environment it inherits
    assert r.returncode != 0 and "s3cret" not in r.stdout + r.stderr
    assert len([line for line in r.stderr.splitlines() if line.strip()]) == 1, r.stderr


def test_nothing_indexed_is_lost_when_milvus_goes_away_mid_life(tmp_path, lite_server):
    """Indexed; Milvus stops; a note changes and `hybrid index` fails with one line, the ledger
    untouched; Milvus is back; the next run indexes the change and the search finds it."""
    start, stop = lite_server
    port = start()
    admin = milvus_admin(port)
    admin.create_database("kb")
    admin.close()
    root = vault(tmp_path)
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    h.add_vault(root, "kb", store=f"milvus://127.0.0.1:{port}/kb")
    assert h.index()[0].added == 2
    h.close()
    stop()
    (root / "bread.md").write_text("# Bread\n\nA rye levain is fed flour and water daily.\n", encoding="utf-8")
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    with pytest.raises(StoreUnavailable, match=r"Milvus at milvus://127\.0\.0\.1:\d+/kb.* running"):
        h.index()
    h.close()
    start()
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    report = h.index()[0]
    assert not report.error
    assert [x.path for x in h.search("rye levain", mode="lexical")] == ["bread.md"]
    assert not h.search("sourdough", mode="lexical")
    st = h.status()[0]
    assert st.pending == 0 and st.chunks == 2
    h.close()


def test_rename_and_remove_keep_milvus_in_step(tmp_path, milvus_server):
    """A renamed vault keeps its index (its collections renamed, aliases too); a removed one's
    collections are dropped, and another home's vault of the same name is never touched."""
    from conftest import new_milvus
    url = new_milvus(milvus_server)
    a = hybrid.open(tmp_path / "a", embedder="hash:64", store=url)
    a.add_vault(vault(tmp_path), "kb")
    a.index()
    b = hybrid.open(tmp_path / "b", embedder="hash:64", store=url)  # another home, same name, same database
    write(tmp_path / "other", "other.md", "# Other\n\nKept by the second home.\n")
    b.add_vault(tmp_path / "other", "kb")
    b.index()
    a.rename_vault("kb", "kb2")
    assert [x.path for x in a.search("sourdough", mode="lexical")] == ["bread.md"]
    assert [x.path for x in b.search("kept second home", mode="lexical")] == ["other.md"]
    a.remove_vault("kb2", purge=True)
    db = url.rsplit("/", 1)[1]
    admin = milvus_admin(milvus_server, db)
    left = admin.list_collections()
    admin.close()
    assert left and all(n.startswith("hy_kb_") for n in left)  # b's, untouched
    assert [x.path for x in b.search("kept second home", mode="lexical")] == ["other.md"]
    a.close()
    b.close()


def test_no_password_reaches_the_config(tmp_path):
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    with pytest.raises(StoreUnavailable, match="holds a password"):
        h.add_vault(vault(tmp_path), "kb", store="milvus://kb:s3cret@milvus.internal:19530/kb")
    config = tmp_path / "home" / "config.toml"
    assert not config.exists() or "s3cret" not in config.read_text(encoding="utf-8")
    h.close()



def test_a_first_index_past_the_estimate_writes_each_lexical_index_once(tmp_path, milvus_server, monkeypatch,
                                                                        caplog):
    """A new vault of more units than the mean-length estimate takes (5 here, 20,000 in use),
    whose later notes are longer: the owner's and the agent's lexical indexes are written once
    with the exact means, so neither the first run nor the next one rebuilds them."""
    import logging

    from conftest import new_milvus

    from hybrid.store.milvus import lexical as milvus_lexical
    monkeypatch.setattr(milvus_lexical, "ESTIMATE", 5)
    root = tmp_path / "vault"
    for i in range(30):
        body = ("The backup job restores snapshots from the NAS. " * (1 if i < 10 else 12))
        write(root, f"n{i:02}.md", f"# Note {i}\n\n{body}\n\n## More\n\n{body}\n")
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    try:
        h.add_vault(root, "m", store=new_milvus(milvus_server))
        with caplog.at_level(logging.INFO, logger="hybrid"):
            h.index()
            first = [r.getMessage() for r in caplog.records]
            caplog.clear()
            h.index()
            again = [r.getMessage() for r in caplog.records]
        assert not [m for m in first if "compacting" in m or "out of step" in m], first
        assert not [m for m in again if "compacting" in m or "building" in m or "out of step" in m], again
        assert [x.path for x in h.search("backup snapshots", mode="lexical", agent=True)][:1]
    finally:
        h.close()
