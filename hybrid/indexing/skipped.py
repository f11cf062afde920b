"""The files an index run skipped, and why, remembered in the vault's ledger.

An image or a scanned PDF that OCR could not read, a damaged PDF, a file over the size limit,
one the converter gave up on, a canvas or drawing over its reader's bound or one nested deeper
than a reader's stack holds
(RecursionError) is skipped with one warning. Its record (the catalog's ``skipped`` meta entry: the same in both
backends) keeps its size and mtime, the limits it was judged under and, when it was read, its
content hash. While the file and those limits stay the same, later runs (the watcher's too)
pass it over without reading or warning again, and ``hybrid status`` counts it as skipped, not
as new. A file that changes is tried again; one that then indexes, or leaves the vault, leaves
the record. A file that could not be read at all (permissions, I/O) is tried on every run:
fixing that changes no mtime; so is one that raised an error nobody foresaw (it may be
hybrid's own, gone with an upgrade). Such a failure is recorded too, with the error, for
``hybrid status --files`` alone: its ``bounds`` are :data:`FAILED`, which no limits equal, so
it never :meth:`Skip.holds` and the next run reads the file again.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from hybrid.sources import KIND, kind_of

if TYPE_CHECKING:
    from hybrid.core.settings import Settings
    from hybrid.sources.walk import FileEntry

SKIPPED_META = "skipped"
FAILED = "failed"  # the bounds of a failure's record: tried again on every run


@dataclass
class Skip:
    """One skipped file as the ledger keeps it."""
    size: int
    mtime_ns: int
    reason: str             # the warning it was skipped with (names the file)
    bounds: str             # the limits it was judged under (see :func:`bounds_of`)
    hash: str | None = None  # its content hash, when it was read

    @property
    def failed(self) -> bool:
        """A failure (an unreadable file, an unforeseen error), not a skip: tried every run."""
        return self.bounds == FAILED

    def holds(self, entry: FileEntry, settings: Settings, ocr: str = "") -> bool:
        """Whether ``entry`` is still the file skipped, judged under the same limits (its
        size and mtime are; a file touched to the same content is judged by its hash), and
        the same OCR (``ocr``: the vault's :attr:`hybrid.sources.sandbox.Limits.ocr_key`)."""
        return (self.size, self.mtime_ns) == (entry.size, entry.mtime_ns) \
            and self.bounds == bounds_of(settings, entry.path, ocr)


def size_limit(settings: Settings, path: str) -> tuple[int, str]:
    """(bytes, setting name): the largest document of this kind that is indexed."""
    if KIND[kind_of(path)].streamed:
        return settings.max_pdf_bytes, "max_pdf_bytes"
    return settings.max_file_bytes, "max_file_bytes"


def bounds_of(settings: Settings, path: str, ocr: str = "") -> str:
    """The limits a file of ``path``'s kind is judged under: its size limit, and the converter's
    memory and time bounds; for a kind OCR may read (an image, a PDF), the vault's OCR too
    (``ocr``: :attr:`~hybrid.sources.sandbox.Limits.ocr_key`), so installing Tesseract or
    another language retries the images and scans it turned away. Raising one retries the
    files it turned away."""
    bounds = f"{size_limit(settings, path)[0]}B/{settings.convert_max_memory_mb}MB/{settings.convert_timeout}s"
    return f"{bounds}/{ocr}" if ocr and KIND[kind_of(path)].ocr else bounds


def load(catalog) -> dict[str, Skip]:
    """The skipped files the ledger remembers (none when it holds nothing readable)."""
    try:
        raw = json.loads(catalog.get_meta(SKIPPED_META) or "{}")
        return {str(p): Skip(**r) for p, r in raw.items()} if isinstance(raw, dict) else {}
    except (ValueError, TypeError, AttributeError):
        return {}


def dump(skips: dict[str, Skip]) -> str:
    return json.dumps({p: asdict(s) for p, s in sorted(skips.items())}, ensure_ascii=False)


def save(catalog, skips: dict[str, Skip], before: str | None) -> None:
    """Record ``skips``, when they differ from what the ledger held (``before``, its text)."""
    text = dump(skips)
    if text != (before or dump({})):
        catalog.set_meta(SKIPPED_META, text)
