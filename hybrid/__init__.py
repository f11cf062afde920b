"""hybrid: local-first hybrid (BM25 + vector) retrieval over markdown vaults.

    import hybrid
    h = hybrid.open()
    h.add_vault("~/notes", name="notes")
    h.index()
    for hit in h.search("how did I set up tailscale", top_k=5):
        print(hit.citation, hit.heading, hit.snippet)
"""

import os

# torch and FAISS each bring an OpenMP runtime whose idle threads spin for the CPU. On a busy
# two-core machine that turned a 12 ms query embedding into 490 ms (measured; eval/reports/speed/
# scale/report.md); sleeping idle threads cost ~nothing when the machine is idle. Set before either
# library loads; a value the user chose is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from typing import TYPE_CHECKING, Any  # noqa: E402

# What ``import hybrid`` offers, each imported where it lives on first use: the ``hybrid``
# command imports this package before anything else, and `hybrid --help`, Tab completion and a
# lexical query need none of the engine (importing it eagerly cost ~140 ms of a 0.2 s `--help`).
_EXPORTS = {
    "open": "hybrid.app.api", "Hybrid": "hybrid.app.api", "NoteText": "hybrid.app.reader",
    "VaultStatus": "hybrid.app.status", "HybridError": "hybrid.core.errors",
    "Settings": "hybrid.core.settings", "IndexReport": "hybrid.indexing.report",
    "Hit": "hybrid.retrieval.hits", "SearchRequest": "hybrid.retrieval.request",
}
__all__ = ["open", "Hybrid", "Hit", "IndexReport", "NoteText", "VaultStatus", "HybridError",
           "SearchRequest", "Settings"]

if TYPE_CHECKING:
    from hybrid.app.api import Hybrid, open  # noqa: A004
    from hybrid.app.reader import NoteText
    from hybrid.app.status import VaultStatus
    from hybrid.core.errors import HybridError
    from hybrid.core.settings import Settings
    from hybrid.indexing.report import IndexReport
    from hybrid.retrieval.hits import Hit
    from hybrid.retrieval.request import SearchRequest


def __getattr__(name: str) -> Any:
    """The public names of ``__all__``, imported on first use, and ``hybrid.__version__``: the
    installed distribution's version, looked up on first use (importlib.metadata costs ~30 ms
    of imports that ``hybrid --help`` need not pay)."""
    if name in _EXPORTS:
        from importlib import import_module
        value = getattr(import_module(_EXPORTS[name]), name)
    elif name == "__version__":
        from hybrid.core.version import version
        value = version()
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, "__version__"})
