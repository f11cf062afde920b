"""The catalog's SQLite connection: transactions that never mask the error that ended them,
and SQLite's disk-full and damaged-file errors turned into one-line domain errors (DiskFull names
the folder to free space in, CatalogCorrupt the command that rebuilds), wherever a statement or
a fetch raises them."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

from hybrid.core.errors import CatalogCorrupt, DiskFull


class Transaction:
    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self):
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type, exc, tb):
        """Commit, or roll back on error. SQLite rolls a transaction back by itself on some
        errors (disk full): then a ROLLBACK would fail with "no transaction is active" and mask
        the real error, so it is issued only while a transaction is open, and its own failure
        never replaces the error being raised."""
        if exc_type is None:
            try:
                self.db.execute("COMMIT")
                return False
            except BaseException:
                self._rollback()
                raise
        self._rollback()
        return False

    def _rollback(self) -> None:
        if self.db.in_transaction:
            try:
                self.db.execute("ROLLBACK")
            except sqlite3.Error:
                pass


SQLITE_CORRUPT, SQLITE_FULL, SQLITE_NOTADB = 11, 13, 26


def translate(exc: BaseException, where: Path | None) -> BaseException:
    """A one-line HybridError for SQLite's disk-full and damaged-file errors (anything else is
    returned unchanged): DiskFull names the folder to free space in, CatalogCorrupt the fix."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return exc
    code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
    if code == SQLITE_FULL or "database or disk is full" in str(exc):
        return disk_full(where, exc)
    if code in (SQLITE_CORRUPT, SQLITE_NOTADB) or "malformed" in str(exc) or "not a database" in str(exc):
        return CatalogCorrupt(f"{where}: the catalog is damaged ({exc}); run `hybrid index` to "
                              f"rebuild it from the notes")
    return exc


def disk_full(where: Path | None, exc: BaseException) -> DiskFull:
    folder = where.parent if where is not None and where.suffix else where
    return DiskFull(f"disk full: cannot write {where} ({exc}); free space on the disk holding "
                    f"{folder} and run `hybrid index` again")


def is_disk_full(exc: BaseException) -> bool:
    """ENOSPC however it arrives: an OSError, or a tantivy/FAISS error carrying its text."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc)
    return "No space left on device" in text or "os error 28" in text or "Disk quota exceeded" in text


def _translating(name: str):
    """A Cursor method that raises SQLite's errors translated (see ``translate``)."""
    method = getattr(sqlite3.Cursor, name)

    def call(self, *args):
        try:
            return method(self, *args)
        except sqlite3.DatabaseError as exc:
            raise translate(exc, getattr(self.connection, "where", None)) from None
    call.__name__ = name
    return call


class _Cursor(sqlite3.Cursor):
    """A cursor whose SQLite errors arrive translated, also mid-iteration."""
    execute = _translating("execute")
    executemany = _translating("executemany")
    executescript = _translating("executescript")
    fetchone = _translating("fetchone")
    fetchall = _translating("fetchall")
    __next__ = _translating("__next__")


class Connection(sqlite3.Connection):
    """A connection whose statements run on a translating ``_Cursor``."""
    where: Path | None = None

    def cursor(self, factory=_Cursor):
        return super().cursor(factory)

    def execute(self, sql, params=()):
        return self.cursor().execute(sql, params)

    def executemany(self, sql, params):
        return self.cursor().executemany(sql, params)

    def executescript(self, script):
        return self.cursor().executescript(script)
