"""Concurrent test runs on one machine each get their own embedded PostgreSQL: its data and
socket in a private directory outside pytest's shared (and rotated) temporary root, removed
at the end. A second pytest run started while this one's server is up has a server of its own,
and this one's keeps answering."""
import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
from helpers import REPO


def where(server) -> dict:
    info = server.get_postmaster_info()
    return {"pid": os.getpid(), "data": str(server.pgdata), "socket_dir": str(info.socket_dir),
            "port": info.port, "postmaster": info.pid}


def test_the_server_is_this_runs_own(pg_server, tmp_path_factory):
    me = where(pg_server)
    data = Path(me["data"])
    assert tmp_path_factory.getbasetemp() not in data.parents  # not where pytest rotates folders
    assert data.parent.name.startswith(f"hybrid-pg-{os.getpid()}-")
    assert Path(me["socket_dir"]) == data  # its socket is in its own data dir
    with psycopg.connect(pg_server.get_uri(), autocommit=True) as conn:
        assert conn.execute("SELECT inet_server_port()").fetchone() == (None,)  # no TCP port at all
    report = os.environ.get("HYBRID_PG_REPORT")
    if report:
        Path(report).write_text(json.dumps(me))


def test_a_second_run_at_the_same_time_has_its_own_server(pg_server, tmp_path):
    report = tmp_path / "other.json"
    env = dict(os.environ, HYBRID_PG_REPORT=str(report))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        f"{Path(__file__).relative_to(REPO)}::test_the_server_is_this_runs_own"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    other, me = json.loads(report.read_text()), where(pg_server)
    assert other["pid"] != me["pid"] and other["postmaster"] != me["postmaster"]
    assert other["data"] != me["data"] and other["socket_dir"] != me["socket_dir"]
    assert not Path(other["data"]).parent.exists()  # the other run removed its folder
    with psycopg.connect(pg_server.get_uri(), autocommit=True) as conn:  # ours is still up
        assert conn.execute("SELECT 1").fetchone() == (1,)
