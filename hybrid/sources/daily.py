"""How a vault names its daily notes, read from its Obsidian settings: the core daily-notes
plugin's ``.obsidian/daily-notes.json`` and the Periodic Notes plugin's
``.obsidian/plugins/periodic-notes/data.json`` (its ``daily`` format, when enabled). Their
moment.js formats, with the default ``YYYY-MM-DD``, give a note without a frontmatter date the
date its name holds (:class:`hybrid.core.dates.NameDates`)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from hybrid.core.dates import NameDates

if TYPE_CHECKING:
    from hybrid.core.config import Vault

log = logging.getLogger("hybrid")

DAILY_NOTES = ".obsidian/daily-notes.json"
PERIODIC_NOTES = ".obsidian/plugins/periodic-notes/data.json"
SETTINGS_MAX_BYTES = 1 << 20  # a plugin's settings file read (a larger one is not a settings file)
_cache: dict[str, tuple[tuple, NameDates]] = {}


def name_dates(root: Path | str) -> NameDates:
    """The daily-note formats of the folder vault at ``root`` (none configured: the defaults
    alone). Read again only when one of the two files changes (two stats a call)."""
    root = str(root)
    files = [os.path.join(root, DAILY_NOTES), os.path.join(root, PERIODIC_NOTES)]
    stamp = tuple(_stat(f) for f in files)
    hit = _cache.get(root)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    formats: list[str] = []
    daily = _read(files[0]) if stamp[0] else None
    if isinstance(daily, dict):
        formats.append(daily.get("format") or "")
    periodic = _read(files[1]) if stamp[1] else None
    day = periodic.get("daily") if isinstance(periodic, dict) else None
    if isinstance(day, dict) and day.get("enabled", True) is not False:
        formats.append(day.get("format") or "")
    got = NameDates(tuple(dict.fromkeys(f.strip() for f in formats if isinstance(f, str) and f.strip())))
    _cache[root] = (stamp, got)
    return got


def vault_name_dates(vault: Vault) -> NameDates | None:
    """:func:`name_dates` of a folder vault; None for a source (its documents are dated by
    their text)."""
    return name_dates(vault.path) if vault.is_folder else None


def _stat(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


def _read(path: str) -> object:
    """The JSON of a plugin's settings file; None (and a log line) when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(SETTINGS_MAX_BYTES + 1)
        if len(data) > SETTINGS_MAX_BYTES:
            raise ValueError("too large for a settings file")
        return json.loads(data)
    except (OSError, ValueError, RecursionError) as exc:
        log.info("%s: not read (%s); daily notes named by the default formats only", path, exc)
        return None
