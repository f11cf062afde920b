"""What a vault can hold besides markdown, and the sources that are not folders of files.

Every kind of document becomes a :class:`hybrid.sources.markdown.Note` (lines of markdown-like text with
a title, tags and dates), so chunking, both indexes, citations and filters work on all of them
alike. A document's kind follows from its vault-relative path's suffix (:func:`kind_of`), which
is how ``--source`` filters and ``hybrid status`` counts work without a column of their own:

    note      ``.md``        a markdown note
    pdf       ``.pdf``       text per page; each page is a section ``Page N`` (citations ``#page=N``)
    text      ``.txt``       plain text, line for line
    web       ``.html/.htm`` a saved page reduced to its main text (trafilatura)
    bookmark  ``.bookmark``  one browser bookmark (title, folder path, tags, URL, fetched text)
    slack     ``.slack``     one channel's messages of one day, grouped by thread

A vault's ``kind`` says where its documents come from: ``notes`` (a folder: the first four
kinds), ``bookmarks`` (a browser's export file) or ``slack`` (a Slack export, zip or folder).
The last two have no file per document: their documents are :class:`VirtualDoc` s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

KIND_SUFFIXES: dict[str, tuple[str, ...]] = {
    "note": (".md",),
    "pdf": (".pdf",),
    "text": (".txt",),
    "web": (".html", ".htm"),
    "bookmark": (".bookmark",),
    "slack": (".slack",),
}
KINDS = tuple(KIND_SUFFIXES)
# where the documents of a vault come from → the kinds it can hold
VAULT_KINDS: dict[str, tuple[str, ...]] = {
    "notes": ("note", "pdf", "text", "web"),
    "bookmarks": ("bookmark",),
    "slack": ("slack",),
}


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



def kind_of(path: str) -> str:
    """The document kind of a vault-relative path (``note`` for anything unknown: a vault's
    include globs decide what is indexed, markdown is the default reading)."""
    low = path.lower()
    for kind, suffixes in KIND_SUFFIXES.items():
        if low.endswith(suffixes):
            return kind
    return "note"


def check_kinds(kinds: object) -> tuple[str, ...]:
    """``kinds`` (a name or names) as a tuple of known kinds, or ValueError naming them."""
    items = [kinds] if isinstance(kinds, str) else list(kinds or ())  # type: ignore[call-overload]
    out = []
    for k in items:
        name = str(k).strip().lower()
        name = {"notes": "note", "md": "note", "markdown": "note", "txt": "text", "html": "web",
                "bookmarks": "bookmark"}.get(name, name)
        if name not in KIND_SUFFIXES:
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
