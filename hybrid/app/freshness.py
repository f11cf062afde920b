"""What `hybrid index` would do now: how many of a vault's files are new, changed or deleted on
disk since its last index run, for `hybrid status`.

The same comparison the indexer's plan makes, and no more costly: the folder is listed (one
stat per file) and each file's size and mtime compared with the catalog's record; only a file
whose stat differs is read and hashed, as the indexer does, so a file merely touched (same
content) does not count as changed. A file the indexer skipped and remembers
(:mod:`hybrid.indexing.skipped`), unchanged since, counts as skipped, not as new or changed;
one over the size limit that no run has met yet is not counted. Owners only: an agent is never
told this (it would show private file activity).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hybrid.core.config import Vault
    from hybrid.core.settings import Settings


@dataclass
class Changes:
    """Files on disk that the index does not reflect yet."""
    new: int = 0
    changed: int = 0
    deleted: int = 0
    skipped: int = 0   # files an index run skipped, unchanged since (not tried again)
    skipped_files: list[dict[str, str]] = field(default_factory=list)  # {"path", "reason"} of each

    @property
    def up_to_date(self) -> bool:
        return not (self.new or self.changed or self.deleted)

    @property
    def text(self) -> str:
        """``up to date`` or ``3 new, 1 changed, 2 deleted: run `hybrid index```, then how many
        files are skipped (``· 2 skipped (`hybrid status --skipped` says why)``)."""
        if self.up_to_date:
            out = "up to date"
        else:
            parts = [f"{n} {what}" for n, what in ((self.new, "new"), (self.changed, "changed"),
                                                   (self.deleted, "deleted")) if n]
            out = f"{', '.join(parts)}: run `hybrid index`"
        if self.skipped:
            out += f" · {self.skipped} skipped (`hybrid status --skipped` says why)"
        return out


@dataclass
class Ledger:
    """What a vault's index records of its files, read once: the rows (by path), whether the
    next run reads every note again (the chunking changed), the skipped files and failures
    (:mod:`hybrid.indexing.skipped`) and, when asked, each file's chunks (by file id)."""
    known: dict
    rechunk_all: bool
    skips: dict
    chunks: dict[int, int] = field(default_factory=dict)
    ocr_key: str = ""  # the vault's OCR as a skipped image is judged by (Limits.ocr_key)


def read_ledger(vault: Vault, settings: Settings, chunks: bool = False) -> Ledger | None:
    """The ledger of ``vault``'s index; None when it was never indexed (or cannot be read)."""
    from hybrid.core.errors import HybridError
    from hybrid.indexing import skipped
    from hybrid.indexing.indexer import chunking_meta
    from hybrid.sources.daily import vault_name_dates
    from hybrid.store import open_store
    try:
        store = open_store(vault)
    except HybridError:
        return None  # never indexed, or unreadable: `hybrid index` says which
    try:
        cat = store.catalog
        rechunk_all = cat.get_meta("chunking") not in (None, chunking_meta(settings, vault_name_dates(vault), vault))
        from hybrid.core.lang import LANGUAGES_META
        from hybrid.sources.ocr import PLAN_META, vault_plan, with_plan
        from hybrid.sources.sandbox import convert_limits
        ocr = with_plan(convert_limits(settings), vault_plan(vault, cat.get_meta(LANGUAGES_META),
                                                             cat.get_meta(PLAN_META)))
        return Ledger(cat.files(), rechunk_all, skipped.load(cat), cat.chunks_per_file() if chunks else {},
                      ocr.ocr_key)
    finally:
        store.close()


def judge(entry, ledger: Ledger, settings: Settings, failures: bool = False) -> tuple[str, str]:
    """(verdict, detail) on one listed file, as the indexer's plan would judge it: ``unchanged``,
    ``skipped`` (a skip the ledger remembers, still holding; detail: its reason), ``too_large``
    (no run met it yet; detail: why), ``new``, ``reread`` (the chunking changed), ``changed``,
    ``same`` (touched, the same content), ``vanished`` or ``unreadable`` (detail: the error);
    with ``failures``, ``failed`` (the last run failed on it as it is now; detail: the error).
    Only a file whose stat differs from the record is read (hashed)."""
    from hybrid.indexing.reading import content_hash, size_limit
    row, skip = ledger.known.get(entry.path), ledger.skips.get(entry.path)
    fresh = row is not None and (row.size, row.mtime_ns) == (entry.size, entry.mtime_ns)
    if fresh and not ledger.rechunk_all:
        return "unchanged", ""
    if skip is not None and skip.holds(entry, settings, ledger.ocr_key):
        return "skipped", skip.reason  # what the indexer would do: pass it over, quietly
    if failures and skip is not None and skip.failed and (skip.size, skip.mtime_ns) == (entry.size, entry.mtime_ns):
        return "failed", skip.reason
    limit, setting = size_limit(settings, entry.path)
    if entry.size > limit:
        return "too_large", f"{entry.path}: {entry.size:,} bytes is over {setting} ({limit:,}); skipped"
    if row is None:
        return "new", ""
    if ledger.rechunk_all:
        return "reread", ""  # the chunking settings changed: every note is chunked again
    try:
        same = content_hash(entry) == row.hash
    except FileNotFoundError:
        return "vanished", ""  # gone since it was listed
    except OSError as exc:
        return "unreadable", f"{entry.path}: cannot read ({exc.strerror or exc}); kept its previous chunks"
    return ("same" if same else "changed"), ""


def changes_on_disk(vault: Vault, settings: Settings) -> Changes | None:
    """What an index run of ``vault`` would add, re-read and remove now; None when that cannot
    be told (the folder is missing, or the vault was never indexed)."""
    from hybrid.sources import walk
    from hybrid.store.agent.view import AgentView
    if not vault.is_folder:
        return None  # a source's export is read whole by `hybrid index`; nothing cheap to tell
    if not vault.path.is_dir():
        return None
    ledger = read_ledger(vault, settings)
    if ledger is None:
        return None
    out = Changes()
    present: set[str] = set()
    for entry in walk.discover(vault.path, vault.include, vault.exclude,
                                    link_exclude=AgentView.of(vault, settings).exclude_patterns):
        present.add(entry.path)
        verdict, detail = judge(entry, ledger, settings)
        if verdict == "skipped":
            out.skipped += 1
            out.skipped_files.append({"path": entry.path, "reason": detail})
        elif verdict == "new":
            out.new += 1
        elif verdict in ("reread", "changed"):
            out.changed += 1
        elif verdict == "vanished":
            present.discard(entry.path)
    out.deleted = sum(1 for p in ledger.known if p not in present)
    return out
