"""hybrid: local-first hybrid (BM25 + vector) retrieval over markdown vaults.

    import hybrid
    h = hybrid.open()
    h.add_vault("~/notes", name="notes")
    h.index()
    for hit in h.search("how did I set up tailscale", top_k=5):
        print(hit.citation, hit.heading, hit.snippet)
"""

from .api import Hybrid, NoteText, VaultStatus, open
from .errors import HybridError
from .indexer import IndexReport
from .search import Hit

__all__ = ["open", "Hybrid", "Hit", "IndexReport", "NoteText", "VaultStatus", "HybridError"]
__version__ = "0.1.0"
