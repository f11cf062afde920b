"""Reading a note from disk for ``get`` / MCP ``get_note``: only files the index would cover.

A path is refused unless it lies inside the vault after symlinks, has no hidden part
(``.env``, ``.git/config``, ``.obsidian/plugins/…`` where plugins keep API keys), is matched
by the vault's include globs and none of its excludes, and is not over ``max_file_bytes``.

For an agent (:class:`AgentCheck`) the note must also be in the index and visible in the
agent view (:mod:`hybrid.store.agent.view`), the sections the vault leaves out of its notes are
blank lines (:mod:`hybrid.sources.sections`), and its text is redacted before the lines are cut. Every
refusal then reads the same, whether the note is private, excluded or absent, so an agent
cannot learn that a private note exists by asking for it.
"""

from __future__ import annotations

import posixpath
import re
import stat as stat_
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hybrid.app.refs import Ref, block_lines, parse_ref, section_lines
from hybrid.core.errors import PathRefused
from hybrid.sources import KIND, SOURCES, kind_of
from hybrid.sources.convert import judged_fields
from hybrid.sources.sections import LeaveOut, kept_text

if TYPE_CHECKING:
    from hybrid.app.links import LinkedNote, NoteLinks
    from hybrid.core.config import Vault
    from hybrid.sources.sandbox import Limits
    from hybrid.store.agent.view import AgentView, Hidden
    from hybrid.store.graph import LinkGraph
    from hybrid.store.port import Ledger

REF_RE = re.compile(r"^(?P<path>.+?)(?::(?P<start>\d+)(?:-(?P<end>\d+))?)?$")  # PATH[:START-END]


@dataclass
class NoteText:
    vault: str
    path: str
    start_line: int
    end_line: int
    total_lines: int
    text: str
    # cut by max_chars: ``end_line`` is then the last line returned (whole unless ``line_cut``),
    # and ``rest`` the lines of the request not returned (first, last), if any
    truncated: bool = False
    line_cut: bool = False
    rest: tuple[int, int] | None = None
    # the notes linking here and those this one links to (hybrid.app.links), each at most
    # MAX_LISTED, of *_total; None when not asked for or the note is not indexed
    backlinks: list[LinkedNote] | None = None
    links: list[LinkedNote] | None = None
    backlinks_total: int | None = None
    links_total: int | None = None

    def attach(self, found: NoteLinks | None) -> None:
        """Take the note's links (None: not known, the fields stay None)."""
        if found is not None:
            self.backlinks, self.links = found.backlinks, found.links
            self.backlinks_total, self.links_total = found.backlinks_total, found.links_total

    def to_dict(self) -> dict:
        out = asdict(self)
        out["rest"] = list(self.rest) if self.rest else None
        return out


@dataclass
class AgentCheck:
    """What reading as an agent needs: the view, the vault's catalog, the redactor (or None)."""
    view: AgentView
    catalog: Ledger
    redactor: Any

    def allows(self, rel: str, real: str) -> bool:
        """Whether an agent may read the indexed note ``rel`` (``real``: the file it really
        is, when reached through a symlink), as the index recorded it."""
        fields = self.catalog.file_fields(rel)
        if fields is None:
            return False
        tags, props = fields
        return self.view.hides(rel, tags, props) is None and self.view.hides(real) is None

    def allows_text(self, rel: str, text: str) -> bool:
        """Whether an agent may read ``text``, the document ``rel`` as it is read now: its front
        block and tags as they are in the file, not as they were when it was indexed (a note
        made private since is refused at once). Kinds without a front block of the owner's
        (PDFs, web pages, plain text) are judged by their path."""
        tags, props = judged_fields(rel, text)
        return self.view.hides(rel, tags, props) is None


def read_note(v: Vault, ref: Ref | str, start: int | None, end: int | None, max_chars: int | None,
              max_file_bytes: int, agent: AgentCheck | None = None,
              catalog: Ledger | None = None, max_pdf_bytes: int | None = None,
              convert: Limits | None = None) -> NoteText:
    """Lines ``start``..``end`` (1-based, inclusive; default all, or the section or block the
    reference names) of the note ``ref`` (any form :mod:`hybrid.app.refs` parses) in vault ``v``.
    ``catalog`` (the vault's, when indexed) resolves titles, file names and aliases. A
    document that is not markdown is read as the indexer read it (:mod:`hybrid.sources`): a
    PDF's text by page (``paper.pdf#page=3`` or ``#page=3-5``: those pages), a web page's
    main text, a bookmark or a Slack day rendered from its source. ``convert``: the bounds a
    PDF or web page is converted under (default: those of the default settings)."""
    if isinstance(ref, str):
        ref = parse_ref(ref)
    if not ref.path:
        raise PathRefused(EMPTY_REF)
    if ref.start is not None:
        start, end = ref.start, ref.end
    catalog = catalog or (agent.catalog if agent else None)
    if catalog is not None and catalog.keeps_text and not documents_here(v):
        rel, text = _ledger_text(v, ref.path, agent, catalog)
    elif v.is_folder:
        limits = (max_file_bytes, max_pdf_bytes or max_file_bytes)
        target, rel = _locate(v, ref.path, limits, agent, catalog)
        try:
            text = _file_text(v, target, rel, ref.path, convert)
        except PathRefused:
            if agent is not None:  # a file it cannot read now: it learns no more than of a hidden one
                raise agent_refusal(v, ref.path) from None
            raise
    else:
        rel, text = _source_text(v, ref.path, agent, catalog)
    if agent is not None and not agent.allows_text(rel, text):
        raise agent_refusal(v, ref.path)
    if agent is not None:  # the sections the index leaves out, left out for agents too (blank lines)
        text = kept_text(rel, text, LeaveOut.of(v))
    if agent is not None and agent.redactor is not None:
        text = agent.redactor.redact(text)  # the whole note, so no secret is cut in two
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    pages = _pages(ref.heading) if start is None and KIND[kind_of(rel)].paged else None
    if pages is not None:
        start, end = _page_lines(lines, rel, *pages)
    elif start is None and (ref.heading or ref.block):
        span = section_lines(lines, ref.heading) if ref.heading else block_lines(lines, ref.block or "")
        if span is None:
            what = "#".join(ref.heading) if ref.heading else f"^{ref.block}"
            raise PathRefused(f"{rel}: no {'heading' if ref.heading else 'block'} {what!r} in this note"
                              + _headings_hint(lines))
        start, end = span
    s = max(1, start or 1)
    e = min(len(lines), end or len(lines))
    if s > e and lines:
        raise PathRefused(f"{rel}: lines {s}-{e} are out of range (the note has {len(lines)} lines)")
    body = "\n".join(lines[s - 1:e])
    if max_chars is not None and len(body) > max_chars:
        return _cut(NoteText(v.name, rel, s, e, len(lines), body), lines, max_chars)
    return NoteText(v.name, rel, s, e, len(lines), body)


EMPTY_REF = "empty note reference: give a path, a title or a citation like vault:path:12-40"


def note_path(v: Vault, ref: Ref | str, max_file_bytes: int, agent: AgentCheck | None = None,
              catalog: Ledger | None = None, max_pdf_bytes: int | None = None) -> str:
    """The vault-relative path of the document ``ref`` names in ``v``, found and refused
    exactly as :func:`read_note` finds and refuses it, without reading it (``related`` asks
    about a note, not its lines)."""
    if isinstance(ref, str):
        ref = parse_ref(ref)
    if not ref.path:
        raise PathRefused(EMPTY_REF)
    catalog = catalog or (agent.catalog if agent else None)
    if catalog is not None and catalog.keeps_text and not documents_here(v):
        return _ledger_path(v, ref.path, agent, catalog)
    if v.is_folder:
        return _locate(v, ref.path, (max_file_bytes, max_pdf_bytes or max_file_bytes), agent, catalog)[1]
    return _source_path(v, ref.path, agent, catalog)


def _hidden_near(v: Vault, graph: LinkGraph, catalog: Ledger, fids: list[int], max_file_bytes: int,
                 agent: tuple[AgentView, Hidden, Any] | None) -> set[int]:
    """The notes an agent (``agent``: its view, the notes it hides as indexed, the redactor)
    may not see among all and those linked with ``fids``: the hidden ones, and those changed on
    disk since they were indexed judged again as they are now. Nothing for the owner (None)."""
    if agent is None:
        return set()
    from hybrid.store.agent.store import OnDisk, stale_verdicts
    view, seen, _ = agent
    hidden = set(seen.files)
    near: set[int] = set().union(*(graph.neighbours(f) for f in fids)) - hidden if fids else set()
    if near and v.path.is_dir():  # judged again where the file changed since it was indexed
        with seen.lock:
            hidden |= stale_verdicts(catalog, near, view, OnDisk(v.path, max_file_bytes), seen.on_disk)
    return hidden


def embedded_in(v: Vault, paths: list[str], graph: LinkGraph, catalog: Ledger, max_file_bytes: int,
                agent: tuple[AgentView, Hidden, Any] | None = None, limit: int = 10) -> dict[str, list[str]]:
    """{path: the paths of the notes that embed (or link to) it} for the documents ``paths``
    of folder vault ``v`` (an image's hits say where it is shown), in ``graph`` (the owner's);
    given ``agent``, only notes an agent may see (:func:`_hidden_near`)."""
    fids = {p: f for p in paths if (f := graph.by_path(p)) is not None}
    hidden = _hidden_near(v, graph, catalog, list(fids.values()), max_file_bytes, agent)
    if fids and not hidden.isdisjoint(fids.values()):
        fids = {p: f for p, f in fids.items() if f not in hidden}
    return {p: [graph.notes[b].path for b in graph.backlinks(f) if b not in hidden][:limit]
            for p, f in fids.items()}


def links_of(v: Vault, path: str, graph: LinkGraph, catalog: Ledger, max_file_bytes: int,
             max_pdf_bytes: int, agent: tuple[AgentView, Hidden, Any] | None = None) -> NoteLinks | None:
    """The links of note ``path`` of folder vault ``v`` (:mod:`hybrid.app.links`) in ``graph``
    (the owner's), as the owner may see them or, given ``agent`` (its view, the notes it hides
    as indexed, the redactor or None), as an agent may: the hidden notes left out and those
    changed on disk since they were indexed judged again as they are now. None when the note
    is not in the graph (not indexed)."""
    from hybrid.app.links import note_links
    redactor = agent[2] if agent is not None else None
    fid = graph.by_path(path)
    hidden = _hidden_near(v, graph, catalog, [fid] if fid is not None else [], max_file_bytes, agent)

    def read_text(p: str) -> str | None:
        # what is left of an agent's is visible as the file is now (judged just above), so the
        # owner's reader serves it, redacted whole (no secret cut in two) as get_note redacts
        try:
            text = read_note(v, Ref(path=p), None, None, None, max_file_bytes, catalog=catalog,
                             max_pdf_bytes=max_pdf_bytes).text
        except PathRefused:
            return None
        text = kept_text(p, text, LeaveOut.of(v))  # a link is one of what was indexed
        return redactor.redact(text) if redactor is not None else text
    return note_links(graph, path, read_text, hidden)


def _cut(note: NoteText, lines: list[str], max_chars: int) -> NoteText:
    """``note`` cut to at most ``max_chars`` characters at a line's end, so its line range is
    what it holds and the rest can be asked for by line; a first line longer than that alone is
    cut inside (``line_cut``)."""
    s, e = note.start_line, note.end_line
    size, last = -1, s - 1
    while last < e and size + 1 + len(lines[last]) <= max_chars:
        size += 1 + len(lines[last])
        last += 1
    if last < s:  # not even the first line fits
        body, last, cut = lines[s - 1][:max_chars], s, True
    else:
        body, cut = "\n".join(lines[s - 1:last]), False
    rest = (last + 1, e) if last < e else None
    return NoteText(note.vault, note.path, s, last, note.total_lines, body, truncated=True, line_cut=cut,
                    rest=rest)


def _file_text(v: Vault, target: Path, rel: str, asked: str, limits: Limits | None = None) -> str:
    """The text of a vault's file as the indexer reads it (markdown and plain text as they
    are; a web page's main text, a PDF's pages, a Word document: converted by the converter
    worker, under ``limits``, by default those of the default settings; a canvas's cards and a
    drawing's text as our own readers render them)."""
    from hybrid.sources.markdown import BinaryFile, decode
    from hybrid.sources.sandbox import ConvertError
    kind = KIND[kind_of(rel)]
    try:
        if kind.converted or kind.rendered:  # read as the indexer reads it; a PDF page by page
            from hybrid.sources.convert import to_note
            data = None if kind.paged else target.read_bytes()
            return "\n".join(to_note(rel, data, str(target), limits).lines)
        return decode(target.read_bytes(), rel)[0]
    except ConvertError as exc:  # no text, or over convert_max_memory_mb / convert_timeout
        raise PathRefused(f"{asked!r} is not a readable note in vault {v.name!r}: "
                          f"{exc.reason}") from None
    except (OSError, BinaryFile):
        raise PathRefused(f"{asked!r} is not a readable note in vault {v.name!r}") from None


def _source_text(v: Vault, path: str, agent: AgentCheck | None,
                 catalog: Ledger | None) -> tuple[str, str]:
    """(path, text) of a bookmark or Slack day of source ``v``, rendered from its export
    now; it must be in the index (an agent's: visible to it), found by path or by name."""
    from hybrid.sources.entries import document_text
    rel = _source_path(v, path, agent, catalog)
    assert catalog is not None  # _source_path refused otherwise
    try:
        text = document_text(v, catalog, rel)
    except (OSError, ValueError) as exc:
        raise PathRefused(f"{rel!r}: cannot read it from {v.path} ({exc})") from None
    if text is None:
        raise PathRefused(f"{rel!r} is no longer in {v.path}; run `hybrid index --vault {v.name}`")
    return rel, text


def _source_path(v: Vault, path: str, agent: AgentCheck | None, catalog: Ledger | None) -> str:
    """The indexed bookmark or Slack day of source ``v`` that ``path`` names, by path or by name
    (an agent's: only one it may see)."""
    if catalog is None:
        raise PathRefused(f"source {v.name!r} is not indexed yet; run `hybrid index --vault {v.name}`")
    refused = agent_refusal(v, path)
    known = set(catalog.files())
    rel = path if path in known else None
    if rel is None:
        names = _by_name(catalog, path.removesuffix(SOURCES[v.kind].suffix), agent)
        if len(names) != 1:
            raise refused
        rel = names[0]
    if agent is not None and not agent.allows(rel, rel):
        raise refused
    return rel


PAGE_REF_RE = re.compile(r"^page=(\d+)(?:-(\d+))?$", re.I)


def _pages(heading: list[str] | None) -> tuple[int, int] | None:
    """(first, last) page of a ``#page=N`` / ``#page=N-M`` reference, else None."""
    m = PAGE_REF_RE.match(heading[0]) if heading and len(heading) == 1 else None
    if m is None:
        return None
    first = int(m.group(1))
    return first, int(m.group(2) or first)


def _page_lines(lines: list[str], rel: str, first: int, last: int) -> tuple[int, int]:
    """The lines of pages ``first``..``last`` of a PDF's text (pages without text have none)."""
    from hybrid.sources.pdf import PAGE_HEADING, page_of
    starts = [(page_of(line[2:]), i + 1) for i, line in enumerate(lines)
              if line.startswith("# " + PAGE_HEADING)]
    inside = [(p, i) for p, i in starts if p is not None and first <= p <= last]
    if last < first or not inside:
        held = [p for p, _ in starts if p is not None]
        where = f" (pages with text: {held[0]}-{held[-1]})" if held else ""
        raise PathRefused(f"{rel}: no page {first}{f'-{last}' if last != first else ''} with text{where}")
    after = [i for p, i in starts if p is not None and p > last]
    return inside[0][1], (after[0] - 2 if after else len(lines))


def _headings_hint(lines: list[str]) -> str:
    from hybrid.app.refs import heading_of
    heads = [h[1] for line in lines if (h := heading_of(line))]
    return f" (its headings: {', '.join(heads[:8])}{', …' if len(heads) > 8 else ''})" if heads else ""


def _locate(v: Vault, path: str, max_file_bytes: int | tuple[int, int], agent: AgentCheck | None,
            catalog: Ledger | None) -> tuple[Path, str]:
    """The file ``path`` names: itself, itself + ``.md``, else the one note whose title, file
    name or alias it is (or whose path ends with it: Obsidian's shortest-path links)."""
    def get(p: str) -> tuple[Path, str]:
        return note_file(v, p, max_file_bytes) if agent is None else _agent_note_file(v, p, max_file_bytes, agent)

    try:
        return get(path)
    except PathRefused as first:
        tries = [path + ".md"] if not path.lower().endswith(".md") else []
        for p in tries:
            try:
                return get(p)
            except PathRefused:
                pass
        names = _by_name(catalog, path, agent) if catalog is not None else []
        if len(names) == 1:
            return get(names[0])
        if len(names) > 1:
            raise _ambiguous(v, path, names) from None
        raise first from None


def _ambiguous(v: Vault, path: str, names: list[str]) -> PathRefused:
    return PathRefused(f"{path!r} names {len(names)} notes in vault {v.name!r}: "
                       f"{', '.join(names[:6])}; give one of these paths")


def documents_here(v: Vault) -> bool:
    """Whether vault ``v``'s documents are on this machine (its folder, a source's export).
    Where they are, a note is read from its file as it is now (a note changed since it was
    indexed reads as it is, and one made private since is refused to agents at once); where
    they are not (a query server next to a shared database), from the ledger, when it keeps
    the texts (:attr:`hybrid.store.port.Reading.keeps_text`)."""
    return v.path.is_dir() if v.is_folder else v.path.exists()


def _ledger_text(v: Vault, path: str, agent: AgentCheck | None, catalog: Ledger) -> tuple[str, str]:
    """(path, text) of the indexed document ``path`` names, from the ledger."""
    rel = _ledger_path(v, path, agent, catalog)
    text = catalog.note_text(rel)
    if text is None:
        raise PathRefused(f"{rel!r}: the database holds no text of it yet (indexed by an older "
                          f"hybrid); run `hybrid index --vault {v.name}` where its folder is")
    return rel, text


def _ledger_path(v: Vault, path: str, agent: AgentCheck | None, catalog: Ledger) -> str:
    """The indexed document ``path`` names, found in the ledger alone as :func:`_locate` finds
    a file: by path (``.md`` optional), else by title, file name or alias (an agent's: only one
    it may see, refused in the same words whether private or absent). The ledger holds only
    what the indexer took in: include/exclude, hidden folders and size limits applied there."""
    if not v.is_folder:
        return _source_path(v, path, agent, catalog)
    rel = _check_syntax(v, path)
    refused = agent_refusal(v, path) if agent is not None else \
        PathRefused(f"{path!r}: no such note in vault {v.name!r}")
    tries = [rel] + ([rel + ".md"] if not rel.lower().endswith(".md") else [])
    found = next((p for p in tries if catalog.file_fields(p) is not None), None)
    if found is None:
        names = _by_name(catalog, path, agent)
        if len(names) > 1:
            raise _ambiguous(v, path, names)
        if not names:
            raise refused
        found = names[0]
    if agent is not None and not agent.allows(found, found):
        raise refused
    return found


def _by_name(catalog: Ledger, name: str, agent: AgentCheck | None) -> list[str]:
    """Indexed notes (an agent's: only those it may see) that ``name`` names."""
    key = " ".join(name.lower().removesuffix(".md").split())
    if not key:
        return []
    out = []
    for note in catalog.notes():
        path = note.path
        stem = path.rsplit("/", 1)[-1].lower().removesuffix(".md")
        low = path.lower().removesuffix(".md")
        names = {" ".join(note.title.lower().split()), stem, *(" ".join(str(a).lower().split())
                                                               for a in note.aliases)}
        if key in names or low.endswith("/" + key) or low == key:
            if agent is None or agent.allows(path, path):
                out.append(path)
    return sorted(out, key=lambda p: (p.count("/"), p))


def _agent_note_file(v: Vault, path: str, max_file_bytes: int | tuple[int, int],
                     agent: AgentCheck) -> tuple[Path, str]:
    """``note_file`` for an agent: refusals that depend on what is on disk all read the same."""
    _check_syntax(v, path)
    refused = agent_refusal(v, path)
    try:
        target, rel = note_file(v, path, max_file_bytes)
    except PathRefused:
        raise refused from None
    real = target.relative_to(v.path.resolve()).as_posix()
    if not agent.allows(rel, real):
        raise refused
    return target, rel


def agent_refusal(v: Vault, asked: str) -> PathRefused:
    """The one refusal an agent gets for a document it may not read, whether it is private,
    excluded or absent: the same words, so asking cannot tell them apart."""
    if v.is_folder:
        return PathRefused(f"{asked!r} is not a note you can read in vault {v.name!r} (use a path "
                           f"from a search hit)")
    return PathRefused(f"{asked!r} is not a document you can read in {v.kind} source {v.name!r} "
                       "(use a path from a search hit)")


def _check_syntax(v: Vault, path: str) -> str:
    """The normalised vault-relative path, or PathRefused for one that is absolute or leads
    out of the vault as written (judged on the text alone, nothing on disk)."""
    if not path or Path(path).is_absolute() or "\x00" in path or "\\" in path:
        raise PathRefused(f"{path!r}: give a path relative to vault {v.name!r}")
    rel = posixpath.normpath(path)
    if rel == ".." or rel.startswith("../"):
        raise PathRefused(f"{path!r} is outside vault {v.name!r}; refused")
    return rel


def note_file(v: Vault, path: str, max_file_bytes: int | tuple[int, int]) -> tuple[Path, str]:
    """The file behind vault-relative ``path``, if indexing would pick it up (see the module
    docstring). Anything else is refused with the same words whether or not it exists.
    ``max_file_bytes``: the limit, or (the limit, a PDF's limit)."""
    if isinstance(max_file_bytes, tuple):
        max_file_bytes = max_file_bytes[1] if KIND[kind_of(path)].streamed else max_file_bytes[0]
    from hybrid.sources.walk import glob_to_regex, target_allowed
    rel = _check_syntax(v, path)
    root = v.path.resolve()
    target = (root / rel).resolve()
    refused = PathRefused(f"{path!r} is not a note in vault {v.name!r} (only indexed files "
                          f"can be read: no hidden folders, include/exclude applied)")
    if not target.is_relative_to(root) or target == root:
        raise PathRefused(f"{path!r} is outside vault {v.name!r}; refused")
    parts = rel.split("/") + list(target.relative_to(root).parts)
    if rel == "." or any(p.startswith(".") for p in parts):
        raise refused
    exclude = [glob_to_regex(g) for g in v.exclude]
    if not any(glob_to_regex(g).match(rel) for g in v.include) \
            or any(r.match(rel) for r in exclude) \
            or not target_allowed(str(root / rel), root, exclude):
        raise refused
    try:
        st = target.stat()
    except OSError:
        raise PathRefused(f"{path!r}: no such note in vault {v.name!r}") from None
    if not stat_.S_ISREG(st.st_mode):
        raise refused
    if st.st_size > max_file_bytes:
        raise PathRefused(f"{path!r} is over max_file_bytes ({max_file_bytes:,}); not read")
    return target, rel

