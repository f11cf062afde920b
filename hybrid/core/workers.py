"""Named single-thread workers, each started on first use and kept for the process: work that
releases the GIL (a model's forward pass) runs there while the caller goes on."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

_workers: dict[str, ThreadPoolExecutor] = {}
_lock = threading.Lock()


def worker(name: str) -> ThreadPoolExecutor:
    """The one-thread executor called ``name`` (its thread is named ``name``)."""
    with _lock:
        got = _workers.get(name)
        if got is None:
            got = _workers[name] = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        return got
