"""Team mode on a real streaming replica: a primary and a hot standby made from it with
``pg_basebackup -R`` (tests/pg_replica.py), the indexer on the primary and query servers on the
standby. hybrid knows it is on a standby (``pg_is_in_recovery()``): it never writes there, says
so in one line to a writer, and runs a read again that the standby's replay cancelled."""
import json
import logging
import os
import subprocess
import sys
import threading
import time

import psycopg
import pytest
from conftest import require_pg
from helpers import indexed_vault, paths, write
from pg_replica import replica_pair

import hybrid
from hybrid.core.errors import StoreUnavailable

NOTES = {
    "runbooks/rollback.md": "---\ntags: [ops]\n---\n# Rolling back a deploy\n\nRun `forge rollback --to PREVIOUS` "
                            "and watch the canary. See [[db]].\n",
    "runbooks/db.md": "---\ntags: [ops, db]\n---\n# Database failover\n\nPromote the replica with `pg_ctl promote`; "
                      "then roll back the deploy if the canary fails.\n",
    "decisions/flags.md": "# Feature flags\n\nWe use Unleash; flags live for one quarter.\n",
    "private/diary.md": "---\nprivate: true\n---\n# Diary\n\nrollback worries and the canary\n",
}
QUERIES = ("forge rollback canary", "database failover promote", "feature flags quarter", "rollback")


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    """A primary and its streaming standby for this module (stopped and deleted after it)."""
    require_pg()
    from conftest import pg_run_dir
    with replica_pair(pg_run_dir() / "pair") as pair:
        yield pair


_DBS = iter(range(1, 1000))


def new_db(pair) -> str:
    name = f"r{next(_DBS)}"
    pair.sql(pair.primary_uri(), f"CREATE DATABASE {name}")
    return name


def cli(home, *args, timeout=120):
    env = dict(os.environ, HYBRID_HOME=str(home))
    env.pop("HYBRID_DATABASE_URL", None)
    return subprocess.run([sys.executable, "-m", "hybrid", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def reader(tmp_path, url, name="team", folder=None, **settings):
    """A query server's handle on another machine whose store URL is ``url``: with the notes
    folder mounted (``folder``: `related` reads notes; part D of issue #31 puts their text in
    the database) or without one."""
    write(tmp_path / "reader", "config.toml", '[settings]\nembedder = "hash:64"\n')  # the CLI's too
    h = hybrid.open(tmp_path / "reader", **settings)
    h.add_vault(folder or tmp_path / "reader" / "no-folder", name, store=url)
    return h


def ranked(result) -> list[tuple[str, int, float]]:
    return [(h.path, h.start_line, round(h.score, 9)) for h in result]


@pytest.fixture
def team(tmp_path, replica):
    """The notes indexed on the primary, replayed on the standby: (indexer, primary reader,
    standby reader, database name)."""
    db = new_db(replica)
    owner = indexed_vault(tmp_path / "owner", NOTES, "team", store=replica.primary_uri(db))
    replica.wait_for_replay()
    folder = tmp_path / "owner" / "vault"
    on_primary = reader(tmp_path / "p", replica.primary_uri(db), folder=folder)
    on_standby = reader(tmp_path / "s", replica.standby_uri(db), folder=folder)
    yield owner, on_primary, on_standby, db
    for h in (owner, on_primary, on_standby):
        h.close()


def test_the_pair_is_a_real_streaming_replica(replica):
    assert replica.streaming()
    assert replica.sql(replica.standby_uri(), "SELECT pg_is_in_recovery()")[0][0] is True
    assert replica.sql(replica.primary_uri(), "SELECT pg_is_in_recovery()")[0][0] is False


def test_the_standby_answers_as_the_primary_does(team):
    """Every query kind, on the standby: the same hits, ranks and scores as on the primary."""
    _, on_primary, on_standby, _ = team
    for q in QUERIES:
        for mode in ("lexical", "vector", "hybrid"):
            assert ranked(on_standby.search(q, mode=mode)) == ranked(on_primary.search(q, mode=mode)), (q, mode)
            assert ranked(on_standby.search(q, mode=mode, agent=True)) == \
                ranked(on_primary.search(q, mode=mode, agent=True)), (q, mode)
        for filters in ({"folders": ["runbooks"]}, {"tags": ["db"]}):
            assert ranked(on_standby.search(q, **filters)) == ranked(on_primary.search(q, **filters))
    assert paths(on_standby.search("rollback", mode="lexical", folders=["runbooks"]))
    assert set(paths(on_standby.search("promote failover", mode="lexical", tags=["db"]))) == {"runbooks/db.md"}
    assert "private/diary.md" in paths(on_standby.search("rollback worries", top_k=20))
    assert "private/diary.md" not in paths(on_standby.search("rollback worries", top_k=20, agent=True))
    listing = on_standby.search("folder:runbooks")  # filters alone: a listing
    assert sorted(paths(listing)) == ["runbooks/db.md", "runbooks/rollback.md"]
    got = on_standby.search("forge rollback", context=400)
    assert got.context is not None and got.context.to_dict() == on_primary.search("forge rollback",
                                                                                  context=400).context.to_dict()
    rel_s = on_standby.related("runbooks/rollback.md", "team")
    rel_p = on_primary.related("runbooks/rollback.md", "team")
    assert [r.path for r in rel_s.notes] == [r.path for r in rel_p.notes] and rel_s.notes
    st, = on_standby.status()
    assert (st.notes, st.indexed, st.error) == (4, True, None)
    assert st.server.startswith("read-only standby") and on_primary.status()[0].server == ""
    assert on_standby.status(agent=True)[0].notes == 3


def test_the_cli_on_the_standby_prints_what_it_prints_on_the_primary(team, tmp_path):
    """Two query machines' `hybrid query --json`, one pointed at each server, agree; `hybrid
    status` on the standby's says it is one."""
    homes = {"p": tmp_path / "p" / "reader", "s": tmp_path / "s" / "reader"}
    out = {k: cli(home, "query", "forge rollback canary", "--json") for k, home in homes.items()}
    for p in out.values():
        assert p.returncode == 0, p.stderr
    assert json.loads(out["s"].stdout) == json.loads(out["p"].stdout)
    assert json.loads(out["s"].stdout)[0]["path"] == "runbooks/rollback.md"
    status = cli(homes["s"], "status")
    assert status.returncode == 0, status.stderr
    assert "server: read-only standby (" in status.stdout and "index on the primary" in status.stdout
    assert "server:" not in cli(homes["p"], "status").stdout
    shown = json.loads(cli(homes["s"], "status", "--json").stdout)
    assert shown[0]["server"].startswith("read-only standby")


def test_a_long_lived_reader_on_the_standby_sees_an_index_run_after_replay(team, tmp_path, replica):
    """Add, edit and delete notes on the primary's folder and index: once the standby has
    replayed up to the primary's position, the standby's open handle answers with the new state."""
    owner, _, on_standby, _ = team
    assert paths(on_standby.search("Unleash", mode="lexical")) == ["decisions/flags.md"]
    vault = tmp_path / "owner" / "vault"
    write(vault, "runbooks/rollback.md", "# Rolling back\n\nUse the blue-green switch.\n")
    write(vault, "runbooks/cache.md", "# Cache warmup\n\nPrime the memcached fleet before traffic.\n")
    (vault / "decisions" / "flags.md").unlink()
    owner.index()
    replica.wait_for_replay()
    assert paths(on_standby.search("blue-green switch", mode="lexical")) == ["runbooks/rollback.md"]
    assert paths(on_standby.search("memcached fleet", mode="lexical")) == ["runbooks/cache.md"]
    assert on_standby.search("Unleash", mode="lexical") == []
    assert on_standby.search("forge", mode="lexical") == []
    assert paths(on_standby.search("memcached fleet", mode="vector"))[0] == "runbooks/cache.md"
    assert on_standby.status()[0].notes == 4


def test_an_indexer_pointed_at_the_standby_stops_with_one_line_and_writes_nothing(team, tmp_path, replica):
    _, _, _, db = team
    folder = tmp_path / "second"
    write(folder, "new.md", "# New\n\nnothing to see\n")
    home = tmp_path / "writer-home"
    write(home, "config.toml", '[settings]\nembedder = "hash:64"\n')
    assert cli(home, "vault", "add", str(folder), "--name", "team", "--store",
               replica.standby_uri(db)).returncode == 0
    before = replica.sql(replica.standby_uri(db), "SELECT count(*), max(generation) FROM hybrid_vaults")
    for command in (("index",), ("vacuum",)):
        p = cli(home, *command)
        assert p.returncode == 1, (command, p.stdout, p.stderr)
        lines = [x for x in p.stderr.strip().splitlines() if x.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), (command, p.stderr)
        assert "is a read-only standby: index on the primary" in lines[0]
    replica.wait_for_replay()
    assert replica.sql(replica.primary_uri(db), "SELECT count(*), max(generation) FROM hybrid_vaults") == before
    assert replica.sql(replica.primary_uri(db), "SELECT count(*) FROM hybrid_files WHERE path = 'new.md'") == [(0,)]
    from hybrid.store.pg.store import PgStore
    with pytest.raises(StoreUnavailable, match="read-only standby: index on the primary"):
        PgStore("team", replica.standby_uri(db), writer=True)


def test_a_read_only_role_on_the_primary_is_not_taken_for_a_standby(team, tmp_path, replica):
    _, _, _, db = team
    replica.sql(replica.primary_uri(), "CREATE ROLE ro LOGIN")
    replica.sql(replica.primary_uri(), "ALTER ROLE ro SET default_transaction_read_only = on")
    replica.sql(replica.primary_uri(db), "GRANT SELECT ON ALL TABLES IN SCHEMA public TO ro")
    h = reader(tmp_path / "ro", replica.primary_uri(db, user="ro"))
    assert paths(h.search("forge rollback", mode="lexical"))[0] == "runbooks/rollback.md"
    assert h.status()[0].server == "read-only role or session; queries only"
    h.close()


def test_an_agent_view_the_standby_cannot_redo_is_skipped_and_logged_once(team, tmp_path, caplog):
    """A reader whose agent settings differ from the indexer's would redo the agent text as a
    writer on a primary; on a standby it skips that (logged once) and leaves those notes out."""
    _, _, _, db = team
    h = reader(tmp_path / "other", team[2].config.vault("team").store, redact_secrets=False)
    with caplog.at_level(logging.WARNING, logger="hybrid"):
        for _ in range(3):
            assert h.search("feature flags", agent=True) is not None
    said = [r for r in caplog.records if "is read-only (a standby)" in r.getMessage()]
    assert len(said) == 1 and "not redone here" in said[0].getMessage()
    h.close()


def _active_sleeper(pair, db: str, after=None):
    """The start time of the standby's running ``pg_sleep`` statement (a later one than
    ``after``), once there is one."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        rows = pair.sql(pair.standby_uri(db), "SELECT query_start FROM pg_stat_activity WHERE state = 'active' "
                                              "AND query LIKE 'SELECT count(*) FROM hybrid_chunks, pg_sleep%%'")
        starts = [r[0] for r in rows if after is None or r[0] > after]
        if starts:
            return starts[0]
        time.sleep(0.01)
    raise TimeoutError("the standby's statement did not start")


def _conflict(pair, db: str) -> None:
    """On the primary, a change whose replay must take an exclusive lock on hybrid_chunks (as a
    VACUUM that truncates the table or a migration does)."""
    with psycopg.connect(pair.primary_uri(db), autocommit=True) as conn, conn.transaction():
        conn.execute("LOCK TABLE hybrid_chunks IN ACCESS EXCLUSIVE MODE")


def _slow_read(pair, db: str):
    """A store on the standby and a thread (not started) that reads through it for 1.5 s:
    (store, what it got: "rows" or "error", thread)."""
    from hybrid.store.pg.store import PgStore
    store = PgStore("team", pair.standby_uri(db))
    got: dict = {}

    def read():
        try:
            got["rows"] = store.query("SELECT count(*) FROM hybrid_chunks, pg_sleep(1.5)").fetchall()
        except Exception as exc:  # noqa: BLE001 - the tests look at it
            got["error"] = exc
    return store, got, threading.Thread(target=read)


@pytest.fixture
def impatient_standby(replica):
    """The standby cancels a conflicting read at once (max_standby_streaming_delay 0)."""
    replica.set_standby(max_standby_streaming_delay="0")
    yield replica
    replica.set_standby(max_standby_streaming_delay="30s")


def test_a_read_cancelled_by_replay_is_run_again(team, impatient_standby, caplog):
    """Decided by this test: a recovery conflict costs a reader one retry, not an error."""
    pair = impatient_standby
    _, _, _, db = team
    store, got, t = _slow_read(pair, db)
    with caplog.at_level(logging.WARNING, logger="hybrid"):
        t.start()
        _active_sleeper(pair, db)
        _conflict(pair, db)
        t.join(60)
    assert "error" not in got, got.get("error")
    assert got["rows"] == [(pair.sql(pair.primary_uri(db), "SELECT count(*) FROM hybrid_chunks")[0][0],)]
    assert any("recovery conflict" in r.getMessage() for r in caplog.records)
    store.close()


def test_a_read_cancelled_twice_is_one_line_naming_the_settings(team, impatient_standby):
    pair = impatient_standby
    _, _, _, db = team
    store, got, t = _slow_read(pair, db)
    t.start()
    first = _active_sleeper(pair, db)
    _conflict(pair, db)
    _active_sleeper(pair, db, after=first)  # the retry
    _conflict(pair, db)
    t.join(60)
    assert "rows" not in got
    error = got["error"]
    assert isinstance(error, StoreUnavailable), error
    assert "cancelled a query to replay its primary's changes" in str(error)
    assert "hot_standby_feedback = on" in str(error) and "\n" not in str(error)
    assert store.query("SELECT 1").fetchone() == (1,)  # the handle reads on
    store.close()


def test_one_url_of_both_servers_sends_the_indexer_to_the_primary_and_readers_to_the_standby(tmp_path, replica):
    """As docs/team-mode.md tells a team: a URL naming both servers, with
    target_session_attrs=read-write for the indexer and prefer-standby for query servers."""
    db = new_db(replica)
    sockets = ",".join(u.split("host=", 1)[1] for u in (replica.standby_uri(db), replica.primary_uri(db)))
    both = f"postgresql://postgres@/{db}?host={sockets}"
    owner = indexed_vault(tmp_path / "owner", NOTES, "team", store=f"{both}&target_session_attrs=read-write")
    assert replica.sql(replica.primary_uri(db), "SELECT count(*) FROM hybrid_files") == [(4,)]
    replica.wait_for_replay()
    reversed_order = ",".join(reversed(sockets.split(",")))
    h = reader(tmp_path / "r", f"postgresql://postgres@/{db}?host={reversed_order}&target_session_attrs=prefer-standby")
    assert paths(h.search("forge rollback", mode="lexical"))[0] == "runbooks/rollback.md"
    assert h.status()[0].server.startswith("read-only standby")
    owner.close()
    h.close()
