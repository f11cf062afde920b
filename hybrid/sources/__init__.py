"""What a vault can hold besides markdown, and the sources that are not folders of files.

Every kind of document becomes a :class:`hybrid.sources.markdown.Note` (lines of markdown-like text with
a title, tags and dates), so chunking, both indexes, citations and filters work on all of them
alike. A document's kind follows from its vault-relative path's suffix (:func:`kind_of`), which
is how ``--source`` filters and ``hybrid status`` counts work without a column of their own.
The kinds and the sources (a vault's ``kind``: ``notes``, ``bookmarks``, ``slack``) are declared
once, in :mod:`hybrid.core.kinds`; what is here derives from those records. Sources other than a
folder have no file per document: their documents are :class:`VirtualDoc` s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hybrid.core.kinds import KIND, KIND_LIST, SOURCES, Kind, Source, folder_globs

__all__ = ["KIND", "KINDS", "KIND_LIST", "KIND_SUFFIXES", "SOURCES", "Kind", "Source",
           "FetchedPage", "VirtualDoc", "check_kinds", "check_source", "folder_globs", "include_help",
           "kind_of", "kind_term"]


KINDS = tuple(KIND)
KIND_SUFFIXES: dict[str, tuple[str, ...]] = {k.name: k.suffixes for k in KIND_LIST}


def include_help() -> str:
    """What a folder vault indexes unless told otherwise, in words and globs (``vault add
    --help``), from the kinds' records rather than spelled out where it would go stale."""
    kinds = [k.help.split(",")[0].split(" (")[0] for k in KIND_LIST if k.source == "notes" and k.included]
    return f"{', '.join(kinds[:-1])} and {kinds[-1]}: {', '.join(folder_globs())}"


def check_source(kind: str, path: Path) -> None:
    """VaultError unless ``path`` can be registered as a ``kind`` source (an export that exists;
    a file where the source is one)."""
    from hybrid.core.errors import VaultError
    source = SOURCES.get(kind)
    if source is None:
        raise VaultError(f"unknown source kind {kind!r} (known: {', '.join(SOURCES)})")
    if source.folder:
        return
    if not path.exists():
        raise VaultError(f"{kind} export {str(path)!r} does not exist")
    if source.export_is_file and not path.is_file():
        raise VaultError(f"{kind} export {str(path)!r} is not a file (export your browser's "
                         "bookmarks to an HTML or JSON file)")


@dataclass
class FetchedPage:
    """A bookmarked page's fetch (:func:`hybrid.sources.fetch.fetch_pages` returns these as
    ``Page``; a store's catalog keeps them): its main text when ``ok``, else the one-line
    ``error``."""
    url: str
    ok: bool
    title: str = ""
    text: str = ""
    error: str = ""
    status: int | None = None
    fetched_at: float = 0.0
    content_type: str = ""  # what the server said it sent (not stored)



# (suffix, kind) from the longest suffix to the shortest: the first a path ends with is its kind
_BY_SUFFIX = sorted(((s, k.name) for k in KIND_LIST for s in k.suffixes), key=lambda x: -len(x[0]))


def kind_of(path: str) -> str:
    """The document kind of a vault-relative path (``note`` for anything unknown: a vault's
    include globs decide what is indexed, markdown is the default reading). The longest
    suffix it ends with decides: ``sketch.excalidraw.md`` is a drawing."""
    low = path.lower()
    for suffix, kind in _BY_SUFFIX:
        if low.endswith(suffix):
            return kind
    return "note"


def check_kinds(kinds: object) -> tuple[str, ...]:
    """``kinds`` (a name or names) as a tuple of known kinds, or ValueError naming them."""
    items = [kinds] if isinstance(kinds, str) else list(kinds or ())  # type: ignore[call-overload]
    out = []
    for k in items:
        name = str(k).strip().lower()
        name = next((kd.name for kd in KIND_LIST if name in kd.aliases), name)
        if name not in KIND:
            raise ValueError(f"unknown source kind {k!r} (known: {', '.join(KINDS)})")
        out.append(name)
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class VirtualDoc:
    """One document of a source that is not a folder of files (a bookmark, a Slack day).

    ``path`` is its vault-relative path (unique within the source, ending in its kind's
    suffix); ``size`` and ``stamp`` change whenever its text may have changed (the indexer
    skips a document whose size and stamp equal what it recorded, like a file's size and
    mtime); ``load()`` returns its text: markdown with YAML frontmatter."""
    path: str
    size: int
    stamp: int
    load: Callable[[], str]


def kind_term(kind: str) -> str:
    """The term a document's kind is indexed under in the lexical index's ``folder`` field
    (never a folder: folders there are vault-relative, without a leading slash)."""
    return "/kind/" + kind
