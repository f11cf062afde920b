"""The folder walk: which files of a vault are candidates (include/exclude globs, hidden
folders, symlinks that stay inside), as :class:`FileEntry` s; split from
:mod:`hybrid.sources.markdown`, which parses what it finds."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("hybrid")


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Translate a vault-relative glob (``**`` spans folders, ``*`` does not) to a regex."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        out.append("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


@dataclass
class FileEntry:
    path: str          # vault-relative, '/'-separated
    abspath: str       # a plain string: building 100k Path objects costs a no-op re-index 0.1 s
    size: int
    mtime_ns: int
    # A document of a source that is not a folder (a bookmark, a Slack day): its text comes
    # from ``load()``, ``mtime_ns`` is its stamp (see hybrid.sources.VirtualDoc) and
    # ``source_mtime_ns`` the source file's mtime, its date when the text names none.
    load: Callable[[], bytes] | None = None
    source_mtime_ns: int = 0


def hidden(rel: str) -> bool:
    """Whether a vault-relative path has a hidden part (``.obsidian/…``, ``.env``, ``.git/…``)."""
    return any(part.startswith(".") for part in rel.split("/"))


def target_allowed(abspath: str, real_root: Path, exclude: list[re.Pattern[str]]) -> bool:
    """For a file reached through a symlink: whether the file it really is lies inside the
    vault, in no hidden folder and not excluded. Judging only the link's own name would let
    ``notes/x.md -> ../.git/config`` (or a link into an excluded folder) be indexed and read."""
    real = os.path.realpath(abspath)
    try:
        rel = Path(real).relative_to(real_root).as_posix()
    except ValueError:
        return False
    return not hidden(rel) and not any(r.match(rel) for r in exclude)


# ``passed_over(path, why, detail, size)``: a file the walk did not yield, and why
PassedOver = Callable[[str, str, "str | None", "int | None"], None]


def discover(root: Path, include: list[str], exclude: list[str],
             link_exclude: Sequence[re.Pattern[str]] = (),
             passed_over: PassedOver | None = None) -> Iterator[FileEntry]:
    """Yield the vault's matching files. Hidden folders (``.obsidian``, ``.trash``, ``.git`` …)
    and hidden files are skipped; symlinks are followed only while they stay inside the vault,
    and a file reached through one only when the file it really is would be indexed itself
    (``target_allowed``; ``link_exclude`` are further patterns the file it really is must not
    match: the agent view's, so no link can show an agent-excluded note under another name);
    a folder reached twice (a symlink loop) is walked once. ``passed_over(path, why, detail,
    size)`` (given: ``hybrid status --files``) hears of each file not yielded, in walk order:
    ``hidden`` (a hidden folder once, its path ending in ``/``), ``not_included``, ``excluded``
    (``detail``: the glob), ``outside``, ``link_target``, ``broken_link`` or ``unlistable``
    (a folder; ``detail``: the error)."""
    inc = [glob_to_regex(p) for p in include]
    exc = [glob_to_regex(p) for p in exclude]
    tell = passed_over
    real_root = root.resolve()
    seen: set[tuple[int, int]] = set()
    stack = [(root, "", False)]
    while stack:
        folder, rel, linked = stack.pop()
        try:
            st = folder.stat()
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc_:
            log.warning("%s: cannot list folder (%s); skipped", folder, exc_.strerror or exc_)
            if tell is not None and rel:
                tell(rel, "unlistable", str(exc_.strerror or exc_), None)
            continue
        subdirs = []
        for entry in entries:
            if entry.name.startswith("."):
                if tell is not None:
                    tell(f"{rel}{entry.name}{'/' if _is_dir(entry) else ''}", "hidden", None, None)
                continue
            relpath = f"{rel}{entry.name}"
            try:
                is_link = entry.is_symlink()
                if is_link and not Path(entry.path).resolve().is_relative_to(real_root):
                    log.info("%s: symlink leads outside the vault; skipped", relpath)
                    if tell is not None:
                        tell(relpath, "outside", None, None)
                    continue
                st = entry.stat()  # follows symlinks
            except (OSError, RuntimeError) as why:
                if tell is not None:  # dangling link or a loop the resolver gave up on
                    tell(relpath, "broken_link", str(getattr(why, "strerror", None) or why), None)
                continue
            if stat.S_ISDIR(st.st_mode):
                subdirs.append((Path(entry.path), relpath + "/", linked or is_link))
            elif stat.S_ISREG(st.st_mode):
                if any(r.match(relpath) for r in inc) and not any(r.match(relpath) for r in exc):
                    if (linked or is_link) and not target_allowed(entry.path, real_root,
                                                                  [*exc, *link_exclude]):
                        log.info("%s: links to a hidden or excluded file; skipped", relpath)
                        if tell is not None:
                            tell(relpath, "link_target", None, st.st_size)
                        continue
                    yield FileEntry(relpath, entry.path, st.st_size, st.st_mtime_ns)
                elif tell is not None:
                    glob = next((g for g, r in zip(exclude, exc) if r.match(relpath)), None)
                    included = any(r.match(relpath) for r in inc)
                    tell(relpath, "excluded" if included else "not_included", glob if included else None, st.st_size)
        stack.extend(reversed(subdirs))


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def file_digest(source: str | bytes) -> str:
    """A document's content hash as the ledger records it (and the OCR cache keys it): of its
    bytes, or of the file at path ``source`` read in blocks (a large PDF never whole)."""
    h = hashlib.blake2b(digest_size=16)
    if isinstance(source, bytes):
        h.update(source)
    else:
        with open(source, "rb") as fh:
            while block := fh.read(1 << 20):
                h.update(block)
    return h.hexdigest()
