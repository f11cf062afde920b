"""The installed distribution's version, looked up when asked (importlib.metadata costs ~30 ms
of imports that ``hybrid --help`` need not pay)."""

from __future__ import annotations

import functools


@functools.cache
def version() -> str:
    from importlib import metadata
    try:
        return metadata.version("hybrid")
    except metadata.PackageNotFoundError:  # a source tree on sys.path, never installed
        return "0+unknown"
