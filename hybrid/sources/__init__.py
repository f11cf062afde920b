"""What a vault can hold besides markdown, and the sources that are not folders of files.

Every kind of document becomes a :class:`hybrid.sources.markdown.Note` (lines of markdown-like text with
a title, tags and dates), so chunking, both indexes, citations and filters work on all of them
alike. A document's kind follows from its vault-relative path's suffix (:func:`kind_of`), which
is how ``--source`` filters and ``hybrid status`` counts work without a column of their own:

    note      ``.md``        a markdown note
    pdf       ``.pdf``       text per page; each page is a section ``Page N`` (citations ``#page=N``)
    text      ``.txt``       plain text, line for line
    web       ``.html/.htm`` a saved page reduced to its main text (trafilatura)
    canvas    ``.canvas``    an Obsidian canvas (JSON Canvas): each card a section (hits carry ``card``)
    excalidraw ``.excalidraw.md`` an Excalidraw drawing: its text elements and link targets
    docx      ``.docx``      a Word document, its headings as sections (python-docx)
    bookmark  ``.bookmark``  one browser bookmark (title, folder path, tags, URL, fetched text)
    slack     ``.slack``     one channel's messages of one day, grouped by thread

A vault's ``kind`` says where its documents come from: ``notes`` (a folder: every kind
but the last two), ``bookmarks`` (a browser's export file) or ``slack`` (a Slack export, zip or folder).
The last two have no file per document: their documents are :class:`VirtualDoc` s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Kind:
    """One kind of document: the suffixes that make a path one, and what its hits carry. How
    its bytes become a note is :data:`hybrid.sources.convert.READERS`'s entry of the same name."""
    name: str
    suffixes: tuple[str, ...]
    help: str                          # one line: the --source choice, the MCP argument
    aliases: tuple[str, ...] = ()      # other names accepted for it (``md``, ``html``)
    converted: bool = False            # parsed by third-party code in the converter worker
    rendered: bool = False             # its text is rendered from the file by our own reader (not
                                       # the file's lines): ``hybrid get`` shows that text
    owner_fields: bool = False         # its tags and frontmatter are the owner's (the agent view reads them)
    opens: str = "obsidian"            # what a hit's ``uri`` opens: ``obsidian``, its ``url``, or nothing
    paged: bool = False                # its sections are pages (a hit carries ``page``)
    carded: bool = False               # its sections are canvas cards (a hit carries ``card``)
    streamed: bool = False             # read from its file piece by piece, under max_pdf_bytes


# The registry of document kinds, in the order they are listed (``note`` first: a path no
# other kind claims is read as markdown; the longest suffix a path ends with decides, so
# ``.excalidraw.md`` is a drawing, not a note).
KIND_LIST = (
    Kind("note", (".md",), "markdown notes", ("notes", "md", "markdown"), owner_fields=True),
    Kind("pdf", (".pdf",), "PDFs, page by page (hits carry `page`)", converted=True, paged=True,
         streamed=True),
    Kind("text", (".txt",), "plain text", ("txt",)),
    Kind("web", (".html", ".htm"), "saved web pages, their main text", ("html",), converted=True),
    Kind("bookmark", (".bookmark",), "browser bookmarks (hits carry `url`)", ("bookmarks",),
         owner_fields=True, opens="url"),
    Kind("slack", (".slack",), "Slack messages, one channel's day", owner_fields=True, opens=""),
    Kind("canvas", (".canvas",), "Obsidian canvases, card by card (hits carry `card`)", ("canvases",),
         rendered=True, carded=True),
    Kind("excalidraw", (".excalidraw.md",), "Excalidraw drawings, their text and links",
         ("drawing", "drawings"), owner_fields=True, rendered=True),
    Kind("docx", (".docx",), "Word documents, by heading", ("word",), converted=True),
)
KIND = {k.name: k for k in KIND_LIST}
KINDS = tuple(KIND)
KIND_SUFFIXES: dict[str, tuple[str, ...]] = {k.name: k.suffixes for k in KIND_LIST}


@dataclass(frozen=True)
class Source:
    """Where the documents of a vault come from (a vault's ``kind``): a folder of files, or an
    export read whole whose documents are :class:`VirtualDoc` s
    (:data:`hybrid.sources.entries.EXPORTS` reads each)."""
    name: str
    kinds: tuple[str, ...]   # the document kinds it holds
    help: str
    suffix: str = ""         # its documents' suffix, dropped when a note is named by its title
    export_is_file: bool = False  # the export must be one file (not a folder)
    fetches: bool = False    # its documents' pages can be fetched on request (`index --fetch`)

    @property
    def folder(self) -> bool:
        return self.name == "notes"


SOURCES: dict[str, Source] = {s.name: s for s in (
    Source("notes", ("note", "pdf", "text", "web", "canvas", "excalidraw", "docx"),
           "a folder of notes (markdown, PDFs, text, saved pages, canvases, drawings, Word files)"),
    Source("bookmarks", ("bookmark",), "a browser's bookmarks export (HTML or JSON file)", ".bookmark",
           export_is_file=True, fetches=True),
    Source("slack", ("slack",), "a Slack export (zip or folder)", ".slack"),
)}
VAULT_KINDS: dict[str, tuple[str, ...]] = {s.name: s.kinds for s in SOURCES.values()}


def folder_globs() -> tuple[str, ...]:
    """The include globs that take every kind a folder of notes may hold (``**/*.md``, …); a
    suffix that another one already takes (``.excalidraw.md``: ``**/*.md``) adds no glob."""
    suffixes = [s for kind in SOURCES["notes"].kinds for s in KIND[kind].suffixes]
    return tuple(f"**/*{s}" for s in suffixes if not any(s != o and s.endswith(o) for o in suffixes))


def include_help() -> str:
    """What a folder vault indexes unless told otherwise, in words and globs (``vault add
    --help``), from this registry rather than spelled out where it would go stale."""
    kinds = [KIND[k].help.split(",")[0].split(" (")[0] for k in SOURCES["notes"].kinds]
    return f"{', '.join(kinds[:-1])} and {kinds[-1]}: {', '.join(folder_globs())}"


def agree_with_the_config() -> None:
    """The vault registry (core) names the sources a config file may hold, and the ``include``
    setting's default takes every kind a folder may hold; both are these (checked by the unit
    tests, not at each import: that imported the config and settings into `hybrid --help`)."""
    from hybrid.core.config import VAULT_KINDS as registered
    from hybrid.core.settings import Settings
    if tuple(SOURCES) != tuple(registered):
        raise RuntimeError(f"hybrid.core.config.VAULT_KINDS {registered} != the sources {tuple(SOURCES)}")
    if tuple(Settings().include) != folder_globs():
        raise RuntimeError(f"the include setting's default {Settings().include} != {folder_globs()}")



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
