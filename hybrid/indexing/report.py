"""What an index run tells its caller: :class:`IndexReport` at the end, ``Progress`` as it goes.

Its own module so that every stage of a run (the indexer, the embed queue, fetching a source's
pages) can write to one report without importing the indexer."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

# progress(stage, done, total): what an index run reports as it goes, stage by stage in this
# order (a stage with nothing to do is not reported): "scan" (reading the changed notes, in
# files), "load" (loading the embedding model: only when something is embedded), "embed"
# (chunks embedded) and "write" (the catalog, then tantivy and FAISS). ``done <= total``
# always. A total is exact and never changes once given, except the embed stage's while notes
# are still being read: then it is an :class:`Estimate` (an int: callers that do not look see
# a number), refined as the reads go, and exact from the end of the reads on.
Progress = Callable[[str, int, "int | None"], None]
PROGRESS_STAGES = ("scan", "load", "embed", "write")
# IndexReport.stage_seconds keys, in pipeline order (read_embed_wall: the overlapped
# read_parse + chunk + embed stages' wall time).
STAGES = ("open", "discover", "read_parse", "chunk", "context", "embed", "read_embed_wall", "catalog",
          "tantivy", "faiss")


class Estimate(int):
    """A progress total that is an estimate (see ``Progress``): the chunks to embed while notes
    are still being read, from those found so far and the bytes left to read."""


@dataclass
class IndexReport:
    vault: str
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    skipped: int = 0
    chunks: int = 0
    chunks_embedded: int = 0
    cache_hits: int = 0
    chunks_shared: int = 0  # chunks that took the vector of an identical section (hybrid.indexing.shared)
    chunk_parts_reused: int = 0  # halves of a mix's vectors taken from a part's cache (an upgrade)
    upgraded: str | None = None  # the model id an upgrade added vectors to (see indexer._check_model)
    seconds: float = 0.0
    recovered: int = 0
    fetched: int = 0        # bookmarked pages fetched by this run (--fetch)
    fetch_failed: int = 0   # … that could not be fetched (each is a warning)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None   # set when this vault could not be indexed (the others were)

    def to_dict(self) -> dict:
        return asdict(self)

    def warn(self, message: str) -> None:
        """One warning: on the report, and logged."""
        self.warnings.append(message)
        logging.getLogger("hybrid").warning("%s", message)
