"""Issue #31: a shared (PostgreSQL) vault holds what a reader needs. A machine without the folder
reads notes (`hybrid get`, MCP get_note, the search page's note view, backlinks, related notes,
--context) from the database, and gets what a machine with the folder gets; a database of the
schema before (no texts) is migrated by the indexer and its notes read again; the agent settings
live in the vault's meta, so servers with other settings follow them instead of re-indexing."""
import json
import logging
import os
import subprocess
import sys

import anyio
import psycopg
import pytest
from helpers import indexed_vault
from starlette.testclient import TestClient

import hybrid
from hybrid.core.errors import PathRefused, StoreUnavailable

NOTES = {
    "runbooks/rollback.md": "---\ntags: [ops]\naliases: [Undo deploy]\n---\n# Rolling back a deploy\n\n"
                            "Run `forge rollback --to PREVIOUS` and watch the canary.\n"
                            "If the database broke too, see [[Database failover]].\n\n"
                            "## Afterwards\n\nTell the channel what was rolled back.\n",
    "runbooks/db.md": "# Database failover\n\nPromote the replica with `pg_ctl promote`.\n"
                      "Then [[rollback|roll back]] the deploy if needed.\n",
    "decisions/flags.md": "# Feature flags\n\nWe use Unleash; flags live for one quarter.\n"
                          "A bad flag is undone like a deploy: [[rollback]].\n",
    "private/salary.md": "---\nprivate: true\n---\n# Salary\n\nThe raise is seven percent.\n",
    "ops/wifi.md": "# Wifi\n\nrouter login for the canary lab\npassword: falconorbit77\n",
    "notes.txt": "plain text, line one\nline two mentions the canary\n",
}
READS = ["runbooks/rollback.md", "rollback", "Undo deploy", "runbooks/rollback.md:6-7",
         "team:runbooks/db.md:3-4", "[[Database failover]]", "Rolling back a deploy#Afterwards",
         "decisions/flags", "ops/wifi.md", "notes.txt"]
OWNER = "KEY"


def cli(home, *args):
    env = dict(os.environ, HYBRID_HOME=str(home))
    return subprocess.run([sys.executable, "-m", "hybrid", *args], env=env, capture_output=True,
                          text=True, timeout=120)


def mcp_get(h, path: str) -> dict:
    from mcp import Client

    from hybrid.faces.mcp import build_server

    async def run():
        async with Client(build_server(h)) as c:
            return await c.call_tool("get_note", {"path": path})
    res = anyio.run(run)
    return {"error": res.content[0].text} if res.is_error else res.structured_content


def page_read(h, hit) -> dict:
    """The search page's note view of ``hit`` through the real app (signed in as its owner)."""
    from hybrid.faces.http import build_app
    client = TestClient(build_app(h, port=8765, owner_key=OWNER), base_url="http://127.0.0.1:8765")
    r = client.post("/ui/api/ticket", headers={"X-Hybrid-Owner": OWNER}, json={})
    client.get(r.json()["path"], follow_redirects=False)
    r = client.post("/ui/api/read", json={"vault": hit.vault, "path": hit.path, "start_line": hit.start_line,
                                          "end_line": hit.end_line, "heading_path": hit.heading_path})
    assert r.status_code == 200, r.text
    return r.json()


def everything(h, home) -> dict:
    """What every door answers about the notes: the comparison of a machine with and without
    the folder."""
    out: dict = {"get": {}, "agent": {}, "mcp": {}}
    for ref in READS:
        out["get"][ref] = h.get(ref, "team").to_dict()
        try:
            out["agent"][ref] = h.get(ref, "team", agent=True).to_dict()
        except PathRefused as exc:
            out["agent"][ref] = str(exc)
    for ref in ["runbooks/rollback.md", "ops/wifi.md", "team:runbooks/db.md:3-4", "private/salary.md"]:
        out["mcp"][ref] = mcp_get(h, ref)
    hits = h.search("rollback canary", mode="lexical", context=400)
    out["context"] = [[b.__dict__ for b in n.blocks] + [n.changed] for n in hits.context.notes]
    out["citations"] = [x.citation for x in hits]
    out["page"] = [page_read(h, x) for x in hits]
    out["related"] = [(r.path, round(r.score, 6)) for r in h.related("runbooks/rollback.md", "team").notes]
    out["agent_related"] = [r.path for r in h.related("runbooks/db.md", "team", agent=True).notes]
    p = cli(home, "get", "rollback", "--vault", "team", "--json")
    assert p.returncode == 0, p.stderr
    out["cli"] = json.loads(p.stdout)
    p = cli(home, "get", "runbooks/rollback.md", "--vault", "team", "--links")
    assert p.returncode == 0, p.stderr
    out["cli_links"] = p.stdout
    return out


def test_a_machine_without_the_folder_reads_what_one_with_it_reads(tmp_path, pg_url):
    h = indexed_vault(tmp_path, NOTES, "team", store="postgresql")
    with_folder = everything(h, tmp_path / "home")
    # what is compared holds what it should: text, backlinks with their lines, redaction, refusals
    rollback = with_folder["get"]["runbooks/rollback.md"]
    assert rollback["text"] == NOTES["runbooks/rollback.md"].rstrip("\n")
    assert {b["path"] for b in rollback["backlinks"]} == {"runbooks/db.md", "decisions/flags.md"}
    assert all(b["line"] for b in rollback["backlinks"])
    assert "falconorbit77" in with_folder["get"]["ops/wifi.md"]["text"]
    assert "falconorbit77" not in json.dumps(with_folder["agent"]) + json.dumps(with_folder["mcp"])
    assert "not a note you can read" in with_folder["mcp"]["private/salary.md"]["error"]
    assert with_folder["context"] and with_folder["page"] and with_folder["related"]
    assert "linked from 2 notes" in with_folder["cli_links"]
    h.close()

    (tmp_path / "vault").rename(tmp_path / "elsewhere")  # this machine no longer has the folder
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    without = everything(h, tmp_path / "home")
    assert without == with_folder
    # and a second machine that never had it
    other = hybrid.open(tmp_path / "b", embedder="hash:64")
    other.add_vault(tmp_path / "b" / "no-such-folder", "team", store="postgresql")
    assert other.get("rollback", "team").to_dict() == with_folder["get"]["rollback"]
    assert other.get("ops/wifi.md", "team", agent=True).to_dict() == with_folder["agent"]["ops/wifi.md"]
    h.close()
    other.close()


def test_bad_references_without_the_folder(tmp_path, pg_url):
    h = indexed_vault(tmp_path, NOTES, "team", store="postgresql")
    h.close()
    (tmp_path / "vault").rename(tmp_path / "elsewhere")
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    with pytest.raises(PathRefused, match="outside vault"):
        h.get("../elsewhere/runbooks/db.md", "team")
    with pytest.raises(PathRefused, match="outside vault"):
        h.get("../etc/passwd", "team", agent=True)
    with pytest.raises(PathRefused, match="no such note"):
        h.get("runbooks/nope.md", "team")
    # an agent asking for a private note reads the same words as for one that does not exist
    private = str(pytest.raises(PathRefused, h.get, "private/salary.md", "team", agent=True).value)
    absent = str(pytest.raises(PathRefused, h.get, "private/nope.md", "team", agent=True).value)
    assert private.replace("salary", "nope") == absent
    with pytest.raises(PathRefused, match="not a note you can read"):
        h.get("Salary", "team", agent=True)  # by title neither
    with pytest.raises(PathRefused, match="not a note you can read"):
        h.related("private/salary.md", "team", agent=True)
    assert h.get("private/salary.md", "team").text.endswith("seven percent.")  # its owner reads it
    h.close()


def test_schema_4_is_migrated_and_every_note_read_again(tmp_path, pg_url):
    """A database of the schema before texts (4): a reader is told to migrate; a writer's open
    migrates it, and until an index run has read the notes again a machine without the folder
    refuses them in one line (never an empty or older text); the next index run fills them in."""
    from hybrid.store.pg import connect
    h = indexed_vault(tmp_path, NOTES, "team", store="postgresql")
    before = h.get("rollback", "team").to_dict()
    h.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:  # as hybrid of schema 4 left it
        conn.execute("DROP TABLE hybrid_texts")
        conn.execute("UPDATE hybrid_schema SET version=4")
    reader = hybrid.open(tmp_path / "b", embedder="hash:64")
    reader.add_vault(tmp_path / "b" / "no-such-folder", "team", store="postgresql")
    with pytest.raises(StoreUnavailable, match="run `hybrid index` once to migrate it"):
        reader.get("rollback", "team")
    reader.close()
    from hybrid.store.pg.store import PgStore
    PgStore("team", pg_url, writer=True).close()  # migrated (as a server redoing the agent view would)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version FROM hybrid_schema").fetchone()[0] == connect.SCHEMA_VERSION
        assert conn.execute("SELECT count(*) FROM hybrid_texts").fetchone()[0] == 0
    reader = hybrid.open(tmp_path / "b", embedder="hash:64")
    with pytest.raises(PathRefused, match="holds no text of it yet.*run `hybrid index --vault team`"):
        reader.get("rollback", "team")
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    assert h.get("rollback", "team").to_dict() == before  # where the folder is, the file is read
    report = h.index()[0]
    assert report.updated == len(NOTES) and report.chunks_embedded == 0  # read again, nothing embedded
    assert reader.get("rollback", "team").to_dict() == before
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM hybrid_texts").fetchone()[0] == len(NOTES)
    assert h.index()[0].updated == 0  # and then nothing is read again
    h.close()
    reader.close()


def test_servers_follow_the_agent_settings_the_indexer_wrote(tmp_path, pg_url, caplog):
    """Two machines with the folder and other agent_exclude settings: one indexes, the other's
    agent searches follow the settings in the database (one warning line), never re-index; when
    the other indexes, its settings become the vault's and the first follows them."""
    from hybrid.store.agent.view import META_KEY, SETTINGS_KEY
    notes = {**NOTES, "journal/today.md": "# Today\n\nThe canary lab was quiet.\n"}
    a = indexed_vault(tmp_path / "a", notes, "team", store="postgresql")
    b = hybrid.open(tmp_path / "b", embedder="hash:64", agent_exclude=["journal"])
    b.add_vault(tmp_path / "a" / "vault", "team", store="postgresql")
    catalog = a.session.store(a.config.vault("team")).ledger
    version, indexed_under = catalog.data_version(), catalog.get_meta(META_KEY)
    caplog.set_level(logging.WARNING, logger="hybrid")
    for _ in range(3):  # in turn, as two servers answering agents would
        for h in (a, b):
            hits = h.search("canary lab", mode="lexical", agent=True)
            assert "journal/today.md" in [x.path for x in hits]  # a indexed with nothing excluded
            assert catalog.get_meta(META_KEY) == indexed_under  # no agent view redone for b's settings
    assert catalog.data_version() == version  # nobody re-indexed
    warned = [r.getMessage() for r in caplog.records if "following the store's" in r.getMessage()]
    assert len(warned) == 1 and "agent_exclude ['journal'] here, [] in the store" in warned[0]
    assert json.loads(catalog.get_meta(SETTINGS_KEY))["exclude"] == []
    b.index()  # b's settings become the vault's
    assert json.loads(catalog.get_meta(SETTINGS_KEY))["exclude"] == ["journal"]
    version = catalog.data_version()
    for _ in range(3):
        for h in (a, b):
            hits = h.search("canary lab", mode="lexical", agent=True)
            assert "journal/today.md" not in [x.path for x in hits]
            with pytest.raises(PathRefused, match="not a note you can read"):
                h.get("journal/today.md", "team", agent=True)
    assert catalog.data_version() == version
    # a's own settings changed while it runs (a config reload): they apply there at once and
    # become the vault's; b follows, and again nobody re-indexes in turn
    a.override(agent_exclude=["ops"])
    assert "ops/wifi.md" not in [x.path for x in a.search("canary lab", mode="lexical", agent=True)]
    assert json.loads(catalog.get_meta(SETTINGS_KEY))["exclude"] == ["ops"]
    indexed_under = catalog.get_meta(META_KEY)
    for _ in range(3):
        for h in (a, b):
            paths = [x.path for x in h.search("canary lab", mode="lexical", agent=True)]
            assert "ops/wifi.md" not in paths and "journal/today.md" in paths
            assert catalog.get_meta(META_KEY) == indexed_under
    a.close()
    b.close()


def test_a_local_vault_keeps_this_machines_agent_settings(tmp_path):
    """Nothing is written for a local vault: its readers are on the machine whose config it is."""
    from hybrid.store.agent.view import SETTINGS_KEY
    h = indexed_vault(tmp_path, NOTES, "v")
    assert h.session.store(h.config.vault("v")).ledger.get_meta(SETTINGS_KEY) is None
    h.close()


def test_pdfs_and_slack_days_are_read_from_the_database_as_they_were_extracted(tmp_path, pg_url):
    """What `get` shows of a document that is not markdown is its extracted text (a PDF's pages,
    a Slack day rendered), kept by the indexer: the same without the file or the export."""
    from helpers import write_pdf
    from test_source_vaults import SLACK, write_slack
    write_pdf(tmp_path / "vault" / "paper.pdf", ["Canary releases, page one", "Rollback plans, page two"])
    h = indexed_vault(tmp_path, {"a.md": "# A\n\nSee [[paper.pdf]].\n"}, "team", store="postgresql")
    h.add_source("slack", write_slack(tmp_path / "export"), "acme", store=pg_url)
    h.index()
    refs = [("paper.pdf", "team"), ("paper.pdf#page=2", "team"), ("ops/2024-03-05.slack", "acme"),
            ("acme:ops/2024-03-06.slack:1-3", None)]
    before = [h.get(ref, vault).to_dict() for ref, vault in refs]
    assert "Rollback plans" in before[1]["text"] and "Canary" not in before[1]["text"]
    assert "Bo Lind" in before[2]["text"] and len(SLACK) == 4
    h.close()
    (tmp_path / "vault").rename(tmp_path / "elsewhere")
    (tmp_path / "export").rename(tmp_path / "export-gone")
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    assert [h.get(ref, vault).to_dict() for ref, vault in refs] == before
    h.close()
