"""What a store does on a hot standby (a streaming replica): it tells one apart from a
read-only role (:func:`in_recovery`), writes nothing there, logs once what it skipped, and runs
again a read that replay cancelled (a recovery conflict)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from hybrid.core.errors import StoreUnavailable

log = logging.getLogger("hybrid")
T = TypeVar("T")
_SKIPPED: set[tuple[str, str]] = set()  # (server, what): logged already in this process


STANDBY = ("PostgreSQL at {where} is a read-only standby: index on the primary (a URL of several "
           "hosts picks it with target_session_attrs=read-write)")


def in_recovery(conn: Any) -> bool:
    """Whether the server is a hot standby (replaying a primary's WAL): it refuses every write,
    whatever the role may do."""
    return bool(conn.execute("SELECT pg_is_in_recovery()").fetchone()[0])


def replay_lag(conn: Any) -> float | None:
    """On a standby, how many seconds its replay is behind the last change it received (0 when
    it has replayed all it received; None when it has replayed nothing yet). Read on the
    standby alone: how far the primary is ahead is not known there."""
    row = conn.execute("SELECT CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0 "
                       "ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp()) END").fetchone()
    return None if row[0] is None else max(0.0, float(row[0]))


class ReplayConflict(StoreUnavailable):
    """A standby cancelled a read to replay its primary's changes (a recovery conflict)."""

    def __init__(self, where: str):
        super().__init__(f"the standby at {where} cancelled a query to replay its primary's changes (a "
                         f"recovery conflict), twice; run it again, and set hot_standby_feedback = on (or a "
                         f"longer max_standby_streaming_delay) on the standby: docs/team-mode.md, Read replicas")


def skipped(server: str, what: str, message: str, *args: Any) -> None:
    """Log, once per process for each server and kind, a write that a read-only server made
    hybrid skip (or a read it had to run again)."""
    if (server, what) not in _SKIPPED:
        _SKIPPED.add((server, what))
        log.warning(message, *args)


def read_again(where: str, run: Callable[[], T]) -> T:
    """``run()`` (reads: one statement, or one transaction of them), once more if a standby
    cancelled it to replay its primary's changes. Such a cancel comes when replay must remove
    rows or take a lock the read still needs and ``max_standby_streaming_delay`` has run out;
    the second run reads the replayed state. Cancelled twice: :class:`ReplayConflict`, one line
    naming the standby's settings that avoid it."""
    try:
        return run()
    except ReplayConflict:
        skipped(where, "conflict", "%s: a read was cancelled by the standby's replay (recovery conflict) and run "
                "again; hot_standby_feedback = on on the standby avoids most of these", where)
        return run()
