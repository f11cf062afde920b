"""Files and folders, the way every writer of hybrid's data treats them: a lock file beside a
folder (one writer at a time), and directory entries made durable."""

from __future__ import annotations

import os
from pathlib import Path

from hybrid.core.errors import IndexLocked


def package_data(name: str) -> str:
    """The text of ``hybrid/data/<name>``, read beside this package's files (what pip installs;
    importlib.resources would import zipfile and more into a cold query for it)."""
    return (Path(__file__).resolve().parent.parent / "data" / name).read_text(encoding="utf-8")


def sibling(directory: Path, suffix: str) -> Path:
    return directory.with_name(directory.name + suffix)


def lock_dir(directory: Path, timeout: float = 0):
    """The writer lock of an index dir; raises IndexLocked naming the holder when it cannot be had."""
    from filelock import FileLock, Timeout

    directory.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(sibling(directory, ".lock")), timeout=timeout)
    try:
        lock.acquire()
    except Timeout:
        raise IndexLocked(f"another `hybrid index` is writing {directory.name!r}; "
                          f"wait for it to finish or pass --wait SECONDS") from None
    return lock


def fsync_dir(path: Path) -> None:
    """Make new directory entries in ``path`` durable (POSIX; a no-op where folders cannot be
    opened)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
