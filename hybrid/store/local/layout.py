"""An index folder on disk, apart from what is in it: its writer lock, the names hybrid may
delete there, and the folder swap that ends a re-embed.

Beside each vault's index dir ``<dir>`` live ``<dir>.lock`` (held by whoever writes; outside the
dir so it survives the swap) and, during a re-embed, ``<dir>.reembed-tmp`` (the build),
``<dir>.reembed-ready`` (a complete build waiting to be swapped in) and ``<dir>.reembed-old``
(the previous index, removed once the swap is done). Only names hybrid creates are ever deleted.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import time
from pathlib import Path

from hybrid.core.faults import checkpoint
from hybrid.core.files import fsync_dir, sibling
from hybrid.store.local.lexical import TantivyIndex, remove_known

log = logging.getLogger("hybrid")
# Every name hybrid creates in an index dir; nothing else there is ever deleted.
KNOWN_FILE_RE = re.compile(r"^(catalog\.sqlite(-wal|-shm|-journal)?|"
                           r"catalog\.sqlite\.corrupt-[0-9T-]+(-wal)?|"
                           r"vectors\.faiss|vectors\.tmp|index\.lock)$")
AGENT_LEXICAL = "lexical-agent"   # the agent index's folder, beside ``lexical/``
LEXICAL_DIRS = ("lexical", AGENT_LEXICAL)  # the owner's tantivy index and the agent view's
REEMBED_TMP, REEMBED_READY, REEMBED_OLD = ".reembed-tmp", ".reembed-ready", ".reembed-old"


def remove_tree(directory: Path) -> list[str]:
    """Delete hybrid's own files in one index folder (see KNOWN_FILE_RE, and tantivy's files in
    ``lexical/``), then the folder if that empties it. Returns the names left behind."""
    if not directory.is_dir():
        return []
    inner = [f"{sub}/{n}" for sub in LEXICAL_DIRS for n in TantivyIndex.remove_files(directory / sub)]
    left = remove_known(directory, KNOWN_FILE_RE)
    return inner + [n for n in left if not any(n == sub and any(i.startswith(sub + "/") for i in inner)
                                                for sub in LEXICAL_DIRS)]


def purge_index_dir(directory: Path) -> list[str]:
    """Remove a vault's index: hybrid's known files in ``directory`` (catalog and its -wal/-shm,
    moved-aside catalogs, ``lexical/``, ``vectors.faiss``/``.tmp``, ``index.lock``), the
    re-embed folders beside it and its lock file, then ``directory`` itself if that leaves it
    empty. Anything else is left and logged. Returns what was left (paths relative to the
    parent folder); empty when everything went."""
    left = [f"{directory.name}/{n}" for n in remove_tree(directory)]
    for suffix in (REEMBED_TMP, REEMBED_READY, REEMBED_OLD):
        other = sibling(directory, suffix)
        left.extend(f"{other.name}/{n}" for n in remove_tree(other))
    sibling(directory, ".lock").unlink(missing_ok=True)
    return left


def recover_reembed(directory: Path) -> None:
    """Finish or undo what an interrupted re-embed left (the caller holds the lock): a complete
    build (``.reembed-ready``) is swapped in; an old folder already swapped out is removed, or
    put back if the swap never completed; an incomplete build (``.reembed-tmp``) is removed."""
    ready, old = sibling(directory, REEMBED_READY), sibling(directory, REEMBED_OLD)
    if old.exists() and directory.exists() and not ready.exists():
        remove_tree(old)
    elif old.exists() and not directory.exists() and not ready.exists():
        os.rename(old, directory)
    if ready.exists():
        log.warning("%s: finishing an interrupted re-embed (swapping the new index in)", directory.name)
        swap_in(directory)
    remove_tree(sibling(directory, REEMBED_TMP))


def swap_in(directory: Path) -> None:
    """Replace ``directory`` by its complete ``.reembed-ready`` sibling: two renames, each
    atomic; a crash between them is finished by ``recover_reembed``."""
    ready, old = sibling(directory, REEMBED_READY), sibling(directory, REEMBED_OLD)
    if directory.exists():
        _clear_old(old)
        os.rename(directory, old)
    checkpoint("reembed-mid-swap")
    os.rename(ready, directory)
    fsync_dir(directory.parent)
    remove_tree(old)


def _clear_old(old: Path) -> None:
    """Make room for the swap: remove an earlier ``.reembed-old`` folder, and when it still
    holds files hybrid did not create (a ``.DS_Store`` someone left in the index folder), move
    it aside under a unique name instead of deleting them, so no swap is ever jammed by it."""
    if old.exists():
        remove_tree(old)
    if old.exists():
        keep = old.with_name(f"{old.name}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
        os.rename(old, keep)
        log.warning("%s: kept files hybrid did not create in %s", old.parent, keep)


def folder_bytes(directory: Path) -> int:
    """Bytes of the files under ``directory``; a file a writer deletes while they are summed
    (a tantivy merge beside `hybrid status`) counts nothing."""
    total = 0
    for folder, _, names in os.walk(directory):  # a folder gone meanwhile is skipped, not raised
        for name in names:
            try:
                st = os.stat(os.path.join(folder, name), follow_symlinks=False)
            except FileNotFoundError:
                continue
            total += st.st_size if stat.S_ISREG(st.st_mode) else 0
    return total
