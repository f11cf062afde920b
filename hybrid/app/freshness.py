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


def changes_on_disk(vault: Vault, settings: Settings) -> Changes | None:
    """What an index run of ``vault`` would add, re-read and remove now; None when that cannot
    be told (the folder is missing, or the vault was never indexed)."""
    from hybrid.core.errors import HybridError
    from hybrid.indexing import skipped
    from hybrid.indexing.indexer import chunking_meta
    from hybrid.indexing.reading import content_hash, size_limit
    from hybrid.sources import markdown as notes_mod
    from hybrid.store import open_store
    from hybrid.store.agent.view import AgentView
    if not vault.is_folder:
        return None  # a source's export is read whole by `hybrid index`; nothing cheap to tell
    if not vault.path.is_dir():
        return None
    try:
        store = open_store(vault)
    except HybridError:
        return None  # never indexed, or unreadable: `hybrid index` says which
    try:
        known = store.catalog.files()
        rechunk_all = store.catalog.get_meta("chunking") not in (None, chunking_meta(settings, vault))
        skips = skipped.load(store.catalog)
    finally:
        store.close()
    out = Changes()
    present: set[str] = set()
    for entry in notes_mod.discover(vault.path, vault.include, vault.exclude,
                                    link_exclude=AgentView.of(vault, settings).exclude_patterns):
        present.add(entry.path)
        row, skip = known.get(entry.path), skips.get(entry.path)
        fresh = row is not None and (row.size, row.mtime_ns) == (entry.size, entry.mtime_ns)
        if skip is not None and not (fresh and not rechunk_all) and skip.holds(entry, settings):
            out.skipped += 1  # what the indexer would do: pass it over, quietly
            out.skipped_files.append({"path": entry.path, "reason": skip.reason})
            continue
        if entry.size > size_limit(settings, entry.path)[0]:
            continue  # the indexer skips it (with a warning): nothing it would do
        if row is None:
            out.new += 1
        elif rechunk_all:
            out.changed += 1  # the chunking settings changed: every note is chunked again
        elif row.size != entry.size or row.mtime_ns != entry.mtime_ns:
            try:
                same = content_hash(entry) == row.hash
            except FileNotFoundError:
                present.discard(entry.path)  # gone since it was listed
                continue
            except OSError:
                continue  # unreadable: the indexer keeps its previous chunks
            out.changed += not same
    out.deleted = sum(1 for p in known if p not in present)
    return out
