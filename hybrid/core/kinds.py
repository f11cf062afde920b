"""Every kind of document and every source of documents, each declared once, in one record.

A document's kind follows from its vault-relative path's suffix (``hybrid.sources.kind_of``):

    note      ``.md``        a markdown note
    pdf       ``.pdf``       text per page; each page is a section ``Page N`` (citations ``#page=N``)
    text      ``.txt``       plain text, line for line
    web       ``.html/.htm`` a saved page reduced to its main text (trafilatura)
    canvas    ``.canvas``    an Obsidian canvas (JSON Canvas): each card a section (hits carry ``card``)
    excalidraw ``.excalidraw.md`` an Excalidraw drawing: its text elements and link targets
    docx      ``.docx``      a Word document, its headings as sections (python-docx)
    image     ``.png/.jpg/…`` an image, its text read by OCR (Tesseract); hits carry the lines' ``box``
    bookmark  ``.bookmark``  one browser bookmark (title, folder path, tags, URL, fetched text)
    slack     ``.slack``     one channel's messages of one day, grouped by thread

A vault's ``kind`` is the :class:`Source` its documents come from: ``notes`` (a folder of
files), ``bookmarks`` (a browser's export file) or ``slack`` (a Slack export, zip or folder).

Everything else about kinds is derived from these records, nowhere written again: the kinds a
``--source`` filter takes (``hybrid.sources``), how each is read (``hybrid.sources.convert``
binds :attr:`Kind.reads` to a reader), which the converter worker parses (:attr:`Kind.op`, an
operation of ``hybrid.sources.worker``), the ``include`` setting's default (:func:`folder_globs`)
and the vault kinds a config file may name (:data:`VAULT_KINDS`). The records live here, in the
lowest layer that needs them (the settings and the config read them), as plain data: the
readers and operations above are bound by name, and a test checks each name is bound.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """One kind of document: the suffixes that make a path one, how it is read, and what its
    hits carry."""
    name: str
    suffixes: tuple[str, ...]
    help: str                          # one line: the --source choice, the MCP argument
    reads: str                         # its reader, by name (hybrid.sources.convert.READINGS)
    source: str = "notes"              # the source (vault kind) whose documents it is
    aliases: tuple[str, ...] = ()      # other names accepted for it (``md``, ``html``)
    included: bool = True              # a folder vault indexes it by default (the ``include``
                                       # setting's default globs take it)
    op: str = ""                       # the converter worker's operation that parses it
                                       # (third-party code, hybrid.sources.worker); "": read here
    rendered: bool = False             # its text is rendered from the file by our own reader (not
                                       # the file's lines): ``hybrid get`` shows that text
    owner_fields: bool = False         # its tags and frontmatter are the owner's (the agent view reads them)
    markdown: bool = False             # Obsidian opens it as markdown: its headings and code blocks
                                       # are the owner's (exclude_sections, exclude_blocks apply)
    opens: str = "obsidian"            # what a hit's ``uri`` opens: ``obsidian``, its ``url``, or nothing
    paged: bool = False                # its sections are pages (a hit carries ``page``)
    carded: bool = False               # its sections are canvas cards (a hit carries ``card``)
    streamed: bool = False             # read from its file piece by piece, under max_pdf_bytes
    ocr: bool = False                  # its text may be read by OCR (the vault's OCR plan judges it)
    boxed: bool = False                # its lines have boxes in a picture (a hit carries ``box``)

    @property
    def converted(self) -> bool:
        """Parsed by third-party code in the converter worker."""
        return bool(self.op)


# pictures whose text OCR reads (HEIC/HEIF where pillow-heif is installed: hybrid[heic])
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".gif", ".tif", ".tiff", ".bmp", ".heic", ".heif")

# The kinds, in the order they are listed (``note`` first: a path no other kind claims is read
# as markdown; the longest suffix a path ends with decides, so ``.excalidraw.md`` is a drawing,
# not a note).
KIND_LIST = (
    Kind("note", (".md",), "markdown notes", "markdown", aliases=("notes", "md", "markdown"),
         owner_fields=True, markdown=True),
    Kind("pdf", (".pdf",), "PDFs, page by page (hits carry `page`)", "pdf", op="pdf", paged=True,
         streamed=True, ocr=True),
    Kind("text", (".txt",), "plain text", "text", aliases=("txt",)),
    Kind("web", (".html", ".htm"), "saved web pages, their main text", "web", aliases=("html",), op="html"),
    Kind("bookmark", (".bookmark",), "browser bookmarks (hits carry `url`)", "markdown", source="bookmarks",
         aliases=("bookmarks",), owner_fields=True, opens="url"),
    Kind("slack", (".slack",), "Slack messages, one channel's day", "markdown", source="slack",
         owner_fields=True, opens=""),
    Kind("canvas", (".canvas",), "Obsidian canvases, card by card (hits carry `card`)", "canvas",
         aliases=("canvases",), rendered=True, carded=True),
    Kind("excalidraw", (".excalidraw.md",), "Excalidraw drawings, their text and links", "drawing",
         aliases=("drawing", "drawings"), owner_fields=True, rendered=True, markdown=True),
    Kind("docx", (".docx",), "Word documents, by heading", "docx", aliases=("word",), op="docx"),
    Kind("image", IMAGE_SUFFIXES, "images, their text read by OCR (hits carry `box`)", "image",
         aliases=("images", "picture", "pictures"), op="image", streamed=True, ocr=True, boxed=True),
)
KIND: dict[str, Kind] = {k.name: k for k in KIND_LIST}


@dataclass(frozen=True)
class Source:
    """Where the documents of a vault come from (a vault's ``kind``): a folder of files, or an
    export read whole whose documents are ``hybrid.sources.VirtualDoc`` s
    (``hybrid.sources.entries.EXPORTS`` reads each, by this name)."""
    name: str
    help: str
    suffix: str = ""         # its documents' suffix, dropped when a note is named by its title
    export_is_file: bool = False  # the export must be one file (not a folder)
    fetches: bool = False    # its documents' pages can be fetched on request (`index --fetch`)

    @property
    def folder(self) -> bool:
        return self.name == "notes"

    @property
    def kinds(self) -> tuple[str, ...]:
        """The document kinds it holds (each kind names its source)."""
        return tuple(k.name for k in KIND_LIST if k.source == self.name)


SOURCE_LIST = (
    Source("notes", "a folder of notes (markdown, PDFs, text, saved pages, canvases, drawings, Word files, images)"),
    Source("bookmarks", "a browser's bookmarks export (HTML or JSON file)", ".bookmark",
           export_is_file=True, fetches=True),
    Source("slack", "a Slack export (zip or folder)", ".slack"),
)
SOURCES: dict[str, Source] = {s.name: s for s in SOURCE_LIST}
# the vault kinds a config file may name
VAULT_KINDS: tuple[str, ...] = tuple(SOURCES)


def own_file(kind: str) -> bool:
    """Whether a document of ``kind`` is a file of its own (a bookmark or a Slack day is a part
    of an export: no file to link to). An unknown kind: True."""
    k = KIND.get(kind)
    return k is None or SOURCES[k.source].folder


def ocr_globs() -> tuple[str, ...]:
    """The globs of the kinds read only by OCR (images): left out of a vault whose OCR is off."""
    return tuple(f"**/*{s}" for k in KIND_LIST if k.ocr and not k.paged for s in k.suffixes)


def folder_globs() -> tuple[str, ...]:
    """The include globs that take every kind a folder of notes indexes by default (``**/*.md``,
    …): the ``include`` setting's default. A suffix that another one already takes
    (``.excalidraw.md``: ``**/*.md``) adds no glob."""
    suffixes = [s for k in KIND_LIST if k.source == "notes" and k.included for s in k.suffixes]
    return tuple(f"**/*{s}" for s in suffixes if not any(s != o and s.endswith(o) for o in suffixes))
