"""Team mode on a real PostgreSQL + pgvector: what only a shared database has (several handles
and machines on one vault, roles and passwords, a server without pgvector, another schema
version) and its bad input. The engine's own cases (retrieval, incremental, crash, agent view)
run against both stores in their modules (``STORES``)."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from conftest import new_database
from helpers import indexed_vault, paths, write

import hybrid
from hybrid.core.errors import EmbedderMismatch, StoreUnavailable, VaultError

NOTES = {
    "runbooks/rollback.md": "# Rolling back a deploy\n\nRun `forge rollback --to PREVIOUS` and watch the canary.\n",
    "runbooks/db.md": "# Database failover\n\nPromote the replica with `pg_ctl promote`.\n",
    "decisions/flags.md": "# Feature flags\n\nWe use Unleash; flags live for one quarter.\n",
}


def cli(home, *args, env=None, timeout=120):
    e = dict(os.environ, HYBRID_HOME=str(home), **(env or {}))
    return subprocess.run([sys.executable, "-m", "hybrid", *args], env=e, capture_output=True,
                          text=True, timeout=timeout)


def one_error_line(p) -> str:
    """The run failed with exit 1 and one `error:` line on stderr (no traceback)."""
    assert p.returncode == 1, (p.returncode, p.stderr)
    lines = [x for x in p.stderr.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    return lines[0]


def admin(server, sql, db="postgres"):
    with psycopg.connect(server.get_uri(db), autocommit=True) as conn:
        return conn.execute(sql).fetchall() if sql.lstrip().upper().startswith(("SELECT", "SHOW")) \
            else conn.execute(sql)


def dbname(url: str) -> str:
    from urllib.parse import urlsplit
    return urlsplit(url).path.lstrip("/")


def socket_dir(url: str) -> str:
    return url.split("host=", 1)[1].split("&")[0]


# --- one database, many handles and machines ---------------------------------------------------
def test_a_second_machine_queries_what_the_first_indexes(tmp_path, pg_url):
    """Two homes (two machines) register the same vault on one database; only the first has
    the folder. The second's long-lived handle sees every committed change without reopening."""
    indexer = indexed_vault(tmp_path / "a", NOTES, "team", store="postgresql")
    reader = hybrid.open(tmp_path / "b", embedder="hash:64")
    reader.add_vault(tmp_path / "b" / "no-such-folder", "team", store="postgresql")
    assert paths(reader.search("rollback canary", mode="lexical"))[0] == "runbooks/rollback.md"
    assert reader.search("forge rollback", mode="vector")
    write(tmp_path / "a" / "vault", "runbooks/rollback.md", "# Rolling back\n\nUse the blue-green switch.\n")
    (tmp_path / "a" / "vault" / "decisions" / "flags.md").unlink()
    indexer.index()
    assert paths(reader.search("blue-green switch", mode="lexical")) == ["runbooks/rollback.md"]
    assert reader.search("canary", mode="lexical") == []
    assert reader.search("Unleash", mode="lexical") == []
    st, = reader.status()
    assert (st.notes, st.indexed) == (2, True) and st.store and "postgresql://" in st.store
    assert st.changes is None  # no folder here: nothing to compare with
    shown = cli(tmp_path / "b", "status").stdout
    assert "team: " in shown and "indexed in postgresql://" in shown and "queries only" in shown
    assert "FOLDER MISSING" not in shown and "MB on disk" not in shown
    indexer.close()
    reader.close()


def test_vaults_of_different_dimensions_share_one_database(tmp_path, pg_url):
    a = indexed_vault(tmp_path / "a", NOTES, "small", store="postgresql", embedder="hash:32")
    b = indexed_vault(tmp_path / "b", {"x.md": "# X\n\nforge rollback canary notes\n"}, "large",
                      store="postgresql", embedder="hash:96")
    assert paths(a.search("rollback canary", mode="vector"))[0] == "runbooks/rollback.md"
    assert paths(b.search("rollback canary", mode="vector")) == ["x.md"]
    assert {h.vault for h in a.search("rollback", mode="lexical")} == {"small"}  # vaults stay apart
    a.close()
    b.close()


def test_reembed_to_another_dimension_swaps_in_one_transaction(tmp_path, pg_url, monkeypatch):
    h = indexed_vault(tmp_path, NOTES, "team", store="postgresql", embedder="hash:64", ann_threshold=1)
    v = h.config.vault("team")
    from hybrid.store.pg.store import open_store
    store = open_store(v)
    assert store.vector.has_index() and store.vector.dim == 64  # ann_threshold 1: HNSW in use
    h2 = hybrid.open(tmp_path / "home", embedder="hash:32", ann_threshold=1)
    with pytest.raises(EmbedderMismatch, match="--reembed"):
        h2.index()
    r = h2.index(reembed=True)[0]
    assert r.chunks_embedded == r.chunks == 3
    assert store.vector.dim == 32 and store.vector.has_index()
    names = [n for (n,) in store.query("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'hybrid_vectors_hnsw%'")]
    assert names == [f"hybrid_vectors_hnsw_{store.vault_id}_32"]  # the old dimension's index is gone
    assert paths(h2.search("rollback canary", mode="vector"))[0] == "runbooks/rollback.md"
    got = store.catalog.vectors("", store.catalog.all_chunk_ids())  # read back as float32 bytes
    assert len(got) == 3 and all(len(b) == 32 * 4 for _, b in got)
    with pytest.raises(EmbedderMismatch, match="32-dimension"):  # a query of another size
        store.vector.search([0.1] * 64, 5)
    store.close()
    h.close()
    h2.close()


def test_eval_runs_on_postgresql_and_drops_its_vault(tmp_path, pg_url):
    root = tmp_path / "vault"
    for rel, text in NOTES.items():
        write(root, rel, text)
    home = tmp_path / "home"
    write(home, "config.toml", '[settings]\nembedder = "hash:64"\n')
    qdir = tmp_path / "q"
    qdir.mkdir()
    (qdir / "q.jsonl").write_text(json.dumps({"qid": "q1", "text": "rollback canary"}) + "\n")
    (qdir / "qrels.json").write_text(json.dumps({"q1": {"runbooks/rollback.md": 2}}))
    p = cli(home, "eval", "--vault", str(root), "--queries", str(qdir / "q.jsonl"), "--qrels",
            str(qdir / "qrels.json"), "--store", "postgresql", "--no-report", "--json")
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert {c["name"].split("-")[0] for c in got["configs"]} == {"lexical", "vector", "hybrid"}
    assert all(c["metrics"]["ndcg@10"] == 1.0 for c in got["configs"] if c["name"].startswith("lexical"))
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM hybrid_vaults").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM hybrid_chunks").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'hybrid_vectors_hnsw%'"
                            ).fetchone()[0] == 0


# --- bad input: one line that names the fix, exit 1, nothing half-written ----------------------
@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_unreachable_database(tmp_path):
    home = tmp_path / "home"
    (tmp_path / "vault").mkdir()
    write(tmp_path / "vault", "a.md", "# A\n\nalpha\n")
    env = {"HYBRID_DATABASE_URL": f"postgresql://kb@/kb?host={tmp_path}/no-server&connect_timeout=2"}
    assert cli(home, "vault", "add", str(tmp_path / "vault"), "--name", "team", "--store", "postgresql",
               env=env).returncode == 0
    for args in (("index",), ("query", "alpha"), ("status",)):
        p = cli(home, *args, env=env)
        if args == ("status",):
            assert p.returncode == 0 and "cannot reach PostgreSQL" in p.stdout + p.stderr
            continue
        line = one_error_line(p)
        assert "cannot reach PostgreSQL" in line and "HYBRID_DATABASE_URL" in line


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_unset_database_url(tmp_path, monkeypatch):
    monkeypatch.delenv("HYBRID_DATABASE_URL", raising=False)
    write(tmp_path / "vault", "a.md", "# A\n\nalpha\n")
    home = tmp_path / "home"
    assert cli(home, "vault", "add", str(tmp_path / "vault"), "--name", "team", "--store", "postgresql",
               env={}).returncode == 0
    env = {k: v for k, v in os.environ.items() if k != "HYBRID_DATABASE_URL"}
    p = subprocess.run([sys.executable, "-m", "hybrid", "index"], capture_output=True, text=True,
                       env=dict(env, HYBRID_HOME=str(home)), timeout=120)
    assert "HYBRID_DATABASE_URL is not set" in one_error_line(p)


def test_wrong_password_is_named_and_never_printed(tmp_path, pg_server):
    url = new_database(pg_server)
    (hba,), = admin(pg_server, "SHOW hba_file")
    original = Path(hba).read_text()
    admin(pg_server, "CREATE ROLE kb LOGIN PASSWORD 'right-horse-battery'")
    try:
        Path(hba).write_text("local all kb scram-sha-256\n" + original)
        admin(pg_server, "SELECT pg_reload_conf()")
        db = dbname(url)
        bad = f"postgresql://kb:Wr0ngPassw0rd@/{db}?host={socket_dir(url)}"
        write(tmp_path / "vault", "a.md", "# A\n\nalpha\n")
        home = tmp_path / "home"
        assert cli(home, "vault", "add", str(tmp_path / "vault"), "--name", "team", "--store",
                   "postgresql", env={"HYBRID_DATABASE_URL": bad}).returncode == 0
        for args in (("index",), ("query", "alpha")):
            p = cli(home, *args, env={"HYBRID_DATABASE_URL": bad})
            line = one_error_line(p)
            assert "refused the login of kb" in line and "password" in line
            assert "Wr0ngPassw0rd" not in p.stderr + p.stdout
        p = cli(home, "status", "--json", env={"HYBRID_DATABASE_URL": bad})
        assert "Wr0ngPassw0rd" not in p.stderr + p.stdout and "***" in p.stdout
    finally:
        Path(hba).write_text(original)
        admin(pg_server, "SELECT pg_reload_conf()")


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_a_password_is_not_written_to_the_config(tmp_path):
    write(tmp_path / "vault", "a.md", "# A\n\nalpha\n")
    home = tmp_path / "home"
    p = cli(home, "vault", "add", str(tmp_path / "vault"), "--store", "postgresql://kb:hunter22@db.internal/kb")
    line = one_error_line(p)
    assert "holds a password" in line and "HYBRID_DATABASE_URL" in line and "hunter22" not in p.stderr
    assert not (home / "config.toml").exists() or "hunter22" not in (home / "config.toml").read_text()
    assert "is no store hybrid knows" in one_error_line(cli(home, "vault", "add", str(tmp_path / "vault"),
                                                            "--store", "mysql://kb@db/kb"))


def test_a_server_without_pgvector(tmp_path, pg_server):
    """PostgreSQL 18's extension_control_path, pointed at an empty folder for one superuser,
    makes pgvector unavailable to it exactly as on a server where it was never installed."""
    url = new_database(pg_server)
    empty = tmp_path / "no-extensions"
    empty.mkdir()
    os.chmod(tmp_path, 0o755)
    admin(pg_server, "CREATE ROLE plain SUPERUSER LOGIN")
    admin(pg_server, f"ALTER ROLE plain SET extension_control_path = '{empty}'")
    db = dbname(url)
    home = tmp_path / "home"
    write(tmp_path / "vault", "a.md", "# A\n\nalpha\n")
    env = {"HYBRID_DATABASE_URL": f"postgresql://plain@/{db}?host={socket_dir(url)}"}
    assert cli(home, "vault", "add", str(tmp_path / "vault"), "--name", "team", "--store", "postgresql",
               env=env).returncode == 0
    line = one_error_line(cli(home, "index", env=env))
    assert "has no pgvector extension" in line and "install it" in line
    assert admin(pg_server, "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'hybrid%'", db)[0][0] == 0


def test_a_user_who_may_not_enable_pgvector(tmp_path, pg_server):
    url = new_database(pg_server)
    db = dbname(url)
    admin(pg_server, "CREATE ROLE app LOGIN")
    admin(pg_server, f"ALTER DATABASE {db} OWNER TO app")
    admin(pg_server, "GRANT CREATE ON SCHEMA public TO app", db)
    home = tmp_path / "home"
    write(tmp_path / "vault", "a.md", "# A\n\nalpha\n")
    env = {"HYBRID_DATABASE_URL": f"postgresql://app@/{db}?host={socket_dir(url)}"}
    assert cli(home, "vault", "add", str(tmp_path / "vault"), "--name", "team", "--store", "postgresql",
               env=env).returncode == 0
    line = one_error_line(cli(home, "index", env=env))
    assert "CREATE EXTENSION vector" in line
    # once an owner enables it, the same user indexes and queries
    admin(pg_server, "CREATE EXTENSION vector", db)
    assert cli(home, "index", env=env).returncode == 0
    assert "a.md" in cli(home, "query", "alpha", "-l", env=env).stdout


@pytest.mark.parametrize("version, message", [(0, "cannot migrate"), (99, "upgrade hybrid")])
def test_a_database_of_another_schema_version(tmp_path, pg_url, version, message):
    h = indexed_vault(tmp_path, NOTES, "team", store="postgresql")
    h.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE hybrid_schema SET version=%s", (version,))
        before = conn.execute("SELECT count(*), max(id) FROM hybrid_chunks").fetchone()
    home = tmp_path / "home"
    for args in (("query", "rollback"), ("index",)):
        line = one_error_line(cli(home, *args))
        assert message in line and f"schema {version}" in line
    with psycopg.connect(pg_url) as conn:  # nothing was written
        assert conn.execute("SELECT count(*), max(id) FROM hybrid_chunks").fetchone() == before
        assert conn.execute("SELECT version FROM hybrid_schema").fetchone()[0] == version


def test_an_older_schema_is_migrated_by_the_indexer(tmp_path, pg_url, monkeypatch):
    """A migration path (here a made-up step from schema 0) runs once, by a writer, in one
    transaction; readers before it name the command."""
    from hybrid.store.pg import connect
    h = indexed_vault(tmp_path, NOTES, "team", store="postgresql")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE hybrid_schema SET version=0")
    monkeypatch.setattr(connect, "MIGRATIONS", {**connect.MIGRATIONS, 0: "CREATE TABLE hybrid_migrated (x int)"})
    h2 = hybrid.open(tmp_path / "home", embedder="hash:64")
    with pytest.raises(StoreUnavailable, match="run `hybrid index` once to migrate it"):
        h2.search("rollback", mode="lexical")
    h2.index()
    assert paths(h2.search("forge rollback", mode="lexical"))[0] == "runbooks/rollback.md"
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version FROM hybrid_schema").fetchone()[0] == connect.SCHEMA_VERSION
        assert conn.execute("SELECT to_regclass('hybrid_migrated') IS NOT NULL").fetchone()[0]
    h.close()
    h2.close()


def test_a_vault_not_indexed_yet(tmp_path, pg_url):
    h = hybrid.open(tmp_path / "home", embedder="hash:64", store="postgresql")
    h.add_vault(tmp_path / "elsewhere", "team")  # no folder here: fine for a reader
    with pytest.raises(VaultError, match="not indexed yet"):
        h.search("x")
    with pytest.raises(VaultError, match="folder .* is missing"):
        h.index()
    h.close()


def test_the_lock_holder_is_named_and_freed_when_it_dies(tmp_path, pg_url):
    h = indexed_vault(tmp_path, NOTES, "team", store="postgresql")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time, hybrid\nfrom hybrid.store.pg.store import open_store\n"
        f"h = hybrid.open({str(tmp_path / 'home')!r})\n"
        "s = open_store(h.config.vault('team'), writer=True)\nprint('held', flush=True)\ntime.sleep(60)\n")],
        stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert holder.stdout.readline().strip() == "held"
        from hybrid.core.errors import IndexLocked
        with pytest.raises(IndexLocked, match=r"another `hybrid index` \(hybrid index .*\) is writing 'team'"):
            h.index()
        assert h.search("rollback", mode="lexical")  # readers are not blocked
    finally:
        holder.kill()
        holder.wait()
    t = time.monotonic()
    h.index(wait=10)  # a killed holder's session ends, and its lock with it
    assert time.monotonic() - t < 10
    h.close()


def test_a_read_only_connection_serves_every_kind_of_query(tmp_path, pg_server):
    """A query server pointed at a read replica: its sessions are read-only (no temporary
    objects, no writes). Simulated by a role whose transactions default to read-only."""
    url = new_database(pg_server)
    db = dbname(url)
    diary = {"private/diary.md": "---\nprivate: true\n---\n# D\n\nrollback secrets\n"}
    owner = indexed_vault(tmp_path / "a", {**NOTES, **diary}, "team", store=url)
    admin(pg_server, "CREATE ROLE replica LOGIN")
    admin(pg_server, "ALTER ROLE replica SET default_transaction_read_only = on")
    admin(pg_server, "GRANT SELECT ON ALL TABLES IN SCHEMA public TO replica", db)
    ro = f"postgresql://replica@/{db}?host={socket_dir(url)}"
    h = hybrid.open(tmp_path / "b", embedder="hash:64")
    h.add_vault(tmp_path / "b" / "elsewhere", "team", store=ro)
    for mode in ("lexical", "vector", "hybrid"):
        assert h.search("forge rollback canary", mode=mode)
        assert "private/diary.md" not in paths(h.search("rollback", mode=mode, agent=True, top_k=20))
    assert set(paths(h.search("rollback", mode="lexical", folders=["runbooks"]))) == {"runbooks/rollback.md"}
    assert h.status()[0].notes == 4 and h.status(agent=True)[0].notes == 3
    assert [x.path for x in h.search("folder:runbooks")]  # a listing: filters alone
    owner.close()
    h.close()


def test_a_shared_vault_is_not_renamed_from_one_machine(tmp_path, pg_url):
    h = indexed_vault(tmp_path, NOTES, "team", store="postgresql")
    with pytest.raises(VaultError, match="cannot be renamed here"):
        h.rename_vault("team", "kb")
    assert h.search("rollback", mode="lexical")
    h.close()


def test_vacuum_reclaims_cached_vectors_of_a_postgresql_vault(tmp_path, pg_url):
    h = indexed_vault(tmp_path, NOTES, "team", store="postgresql")
    write(tmp_path / "vault", "runbooks/rollback.md", "# Rolling back\n\nUse the blue-green switch.\n")
    h.index()
    with psycopg.connect(pg_url) as conn:
        before = conn.execute("SELECT count(*) FROM hybrid_embeddings").fetchone()[0]
    report, = h.vacuum()
    assert report.embeddings_removed == 1  # the edited note's old text
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM hybrid_embeddings").fetchone()[0] == before - 1
    assert paths(h.search("blue-green", mode="vector", top_k=1)) == ["runbooks/rollback.md"]
    h.close()


def test_a_lost_connection_is_one_line_and_the_next_query_reconnects(tmp_path, pg_url, pg_server):
    h = indexed_vault(tmp_path, NOTES, "team", store="postgresql")
    assert h.search("rollback", mode="hybrid")
    admin(pg_server, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'hybrid' "
                     f"AND datname = '{dbname(pg_url)}'")
    with pytest.raises(StoreUnavailable, match="lost the connection to PostgreSQL"):
        for _ in range(3):  # the server's notice of termination may come with the next query
            h.search("rollback", mode="lexical")
    assert paths(h.search("forge rollback", mode="hybrid"))[0] == "runbooks/rollback.md"
    h.close()


def test_missing_privileges_are_one_line_naming_them(tmp_path, pg_server):
    """A SELECT-only role running `hybrid index` and a role with no grants running `hybrid
    query` each get one `error:` line naming the privilege and the table, not a traceback."""
    url = new_database(pg_server)
    db = dbname(url)
    owner = indexed_vault(tmp_path / "a", NOTES, "team", store=url)
    owner.close()
    admin(pg_server, "CREATE ROLE reader LOGIN")
    admin(pg_server, "GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader", db)
    admin(pg_server, "CREATE ROLE nobody LOGIN")
    home = tmp_path / "b"
    write(home, "config.toml", '[settings]\nembedder = "hash:64"\n')
    for role, args in (("reader", ("index",)), ("nobody", ("query", "rollback")),
                       ("nobody", ("index",))):
        env = {"HYBRID_DATABASE_URL": f"postgresql://{role}@/{db}?host={socket_dir(url)}"}
        if not (home / "config.toml").read_text().count("[vaults"):
            assert cli(home, "vault", "add", str(tmp_path / "a" / "vault"), "--name", "team", "--store",
                       "postgresql", env=env).returncode == 0
        line = one_error_line(cli(home, *args, env=env))
        assert "permission denied" in line and f"role {role!r}" in line and "hybrid_" in line, line
        assert "GRANT" in line
    # a changed note: the first write is the embedding cache's (executemany in a transaction)
    write(tmp_path / "a" / "vault", "runbooks/new.md", "# New\n\nA brand new runbook about canaries.\n")
    env = {"HYBRID_DATABASE_URL": f"postgresql://reader@/{db}?host={socket_dir(url)}"}
    line = one_error_line(cli(home, "index", env=env))
    assert "permission denied" in line and "role 'reader'" in line and "INSERT" in line, line


def test_schema_1_is_migrated_to_keep_the_vectors_of_redacted_text(tmp_path, pg_url):
    """A database written by the hybrid before redacted vectors (schema 1) is migrated by the
    next index run: the notes that hold a redacted secret stay hidden from agents until their
    agent view is redone, then serve scores made from their redacted text."""
    from hybrid.store.pg import connect
    notes = {**NOTES, "ops/wifi.md": "# Wifi\n\nrouter login\npassword: falconorbit77\n"}
    h = indexed_vault(tmp_path, notes, "team", store="postgresql")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE hybrid_chunks DROP COLUMN agent_embed_hash, DROP COLUMN agent_embed_text")
        conn.execute("UPDATE hybrid_schema SET version=1")
    h.close()
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    with pytest.raises(StoreUnavailable, match="run `hybrid index` once to migrate it"):
        h.search("router", agent=True)
    h.index()
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version FROM hybrid_schema").fetchone()[0] == connect.SCHEMA_VERSION
        (n,) = conn.execute("SELECT count(*) FROM hybrid_chunks WHERE agent_embed_hash IS NOT NULL").fetchone()
    assert n == 1
    hits = h.search("router login", mode="vector", agent=True)
    assert "ops/wifi.md" in paths(hits) and "falconorbit77" not in json.dumps([x.to_dict() for x in hits])
    h.close()


def test_schema_3_is_migrated_and_copies_then_share_one_vector(tmp_path, pg_url):
    """Issue #30: schema 4 adds each chunk's text hash; the indexer migrates a schema-3 database,
    reads every note of an older chunking again, and the copies of a section share one cached
    vector, nothing embedded."""
    from helpers import CountingEmbedder, set_chunking_version
    section = "## Shared\n\nThe same words pasted into two notes about different things.\n"
    notes = {"a.md": "# A\n\nApples.\n\n" + section, "b.md": "# B\n\nBoats.\n\n" + section}
    h = indexed_vault(tmp_path, notes, "team", store="postgresql")
    h.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP INDEX hybrid_chunks_body")
        conn.execute("ALTER TABLE hybrid_chunks DROP COLUMN body_hash")
        conn.execute("UPDATE hybrid_schema SET version=3")
        # as an older hybrid left it: each copy with a vector of its own
        second = conn.execute("SELECT max(id) FROM hybrid_chunks WHERE text LIKE '## Shared%'").fetchone()[0]
        conn.execute("INSERT INTO hybrid_embeddings(vault, model, text_hash, vec) SELECT e.vault, e.model, "
                     "'own-copy', e.vec FROM hybrid_embeddings e JOIN hybrid_chunks c ON c.embed_hash = "
                     "e.text_hash AND c.vault = e.vault WHERE c.id = %s", (second,))
        conn.execute("UPDATE hybrid_chunks SET embed_hash = 'own-copy' WHERE id = %s", (second,))
    emb = CountingEmbedder("hash:64")
    h = hybrid.open(tmp_path / "home", embedders=[emb], embedder="hash:64")
    with pytest.raises(StoreUnavailable, match="run `hybrid index` once to migrate it"):
        h.search("apples", mode="lexical")
    h.index()  # migrates; the notes themselves are unchanged
    set_chunking_version(h.config.vault("team"), 7)
    report = h.index()[0]
    assert report.updated == 2 and emb.texts == 0
    st = h.status()[0]
    assert (st.shared_chunks, st.shared_texts, st.embeddings_saved) == (2, 1, 1)
    h.vacuum()
    with psycopg.connect(pg_url) as conn:  # the copy's own vector is gone: no chunk uses it
        assert conn.execute("SELECT count(*) FROM hybrid_embeddings WHERE text_hash='own-copy'").fetchone()[0] == 0
    h.close()


def test_the_hnsw_build_asks_for_the_memory_its_graph_needs(tmp_path, pg_url, monkeypatch, caplog):
    """The HNSW index is built with maintenance_work_mem raised to what the graph needs (in
    memory, not inserted on disk one element at a time), for that statement only."""
    import logging

    from hybrid.store.pg import vector
    asked: list[str] = []
    monkeypatch.setattr(vector, "build_memory_mb", lambda n, dim, m: asked.append(f"{n}x{dim}, m {m}") or 96)
    seen: list[str] = []
    real = vector.PgVector.ensure_index

    def spy(self):
        run = self.store.query

        def query(sql, params=()):
            if "maintenance_work_mem" in sql or "USING hnsw" in sql:
                seen.append(sql if "SHOW" in sql else sql.split(" ON ")[0])
            return run(sql, params)
        self.store.query = query
        try:
            return real(self)
        finally:
            del self.store.query
    monkeypatch.setattr(vector.PgVector, "ensure_index", spy)
    with caplog.at_level(logging.INFO, logger="hybrid"):
        h = indexed_vault(tmp_path, NOTES, "team", store="postgresql", embedder="hash:64", ann_threshold=1)
    assert asked and asked[0].endswith("x64, m 16")
    assert seen[0] == "SHOW maintenance_work_mem"
    assert seen[1] == "SET LOCAL maintenance_work_mem = '96MB'"
    assert seen[2].startswith("CREATE INDEX hybrid_vectors_hnsw_")
    with psycopg.connect(pg_url) as conn:  # SET LOCAL: the server's own value is untouched
        assert conn.execute("SHOW maintenance_work_mem").fetchone()[0] == "64MB"
    assert any("HNSW index built" in r.getMessage() for r in caplog.records)
    h.close()
