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
# two-core machine that turned a 12 ms query embedding into 490 ms (measured; eval/reports/
# scale/report.md); sleeping idle threads cost ~nothing when the machine is idle. Set before either
# library loads; a value the user chose is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from hybrid.app.api import Hybrid, NoteText, VaultStatus, open  # noqa: E402
from hybrid.core.errors import HybridError  # noqa: E402
from hybrid.core.settings import Settings  # noqa: E402
from hybrid.indexing.report import IndexReport  # noqa: E402
from hybrid.retrieval.hits import Hit  # noqa: E402
from hybrid.retrieval.request import SearchRequest  # noqa: E402

__all__ = ["open", "Hybrid", "Hit", "IndexReport", "NoteText", "VaultStatus", "HybridError",
           "SearchRequest", "Settings"]


def __getattr__(name: str) -> str:
    """``hybrid.__version__``: the installed distribution's version, looked up on first use
    (importlib.metadata costs ~30 ms of imports that ``hybrid --help`` need not pay)."""
    if name == "__version__":
        from hybrid.core.version import version
        globals()["__version__"] = value = version()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
