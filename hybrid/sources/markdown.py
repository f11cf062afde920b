"""Parse markdown into notes (frontmatter, tags, title, links); the folder walk that finds
them is :mod:`hybrid.sources.walk`."""

from __future__ import annotations

import datetime as dt
import logging
import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hybrid.core.dates import note_date

log = logging.getLogger("hybrid")

# Tag rules follow Obsidian: starts after whitespace or line start, runs of letters and digits of
# any script, emoji and other symbols, '_', '-' and '/' (nesting); ASCII punctuation other than
# those ends it, as does any other Unicode punctuation (:func:`_tag_text`); must contain a
# non-digit. Headings ("# Title") never match because a space follows the '#'.
TAG_RE = re.compile(r"(?:(?<=\s)|^)#([^\s!-,.:-@\[-^`{-~]+)", re.M)
_TAG_JOINERS = frozenset("\u200d\ufe0f\ufe0e")  # inside emoji sequences (ZWJ, variation selectors)
# No part of a link spans '[' or a line break, so every '[[' is scanned only up to the next
# '[': a line of ten thousand unclosed '[[' stays linear.
WIKILINK_RE = re.compile(r"!?\[\[([^\[\]|#\n]+)(?:#[^\[\]|\n]*)?(?:\|[^\[\]\n]*)?\]\]")
# A markdown link to a note or a picture of the vault: ``[text](Other%20note.md#Heading)``,
# ``![alt](scans/receipt.png)``; never a URL.
MDLINK_RE = re.compile(r"\]\((?![a-zA-Z][a-zA-Z0-9+.-]*:)<?([^()<>\s#]+?"
                       r"\.(?i:md|png|jpe?g|webp|gif|tiff?|bmp|heic|heif))(?:#[^()\s]*)?>?\)")
H1_RE = re.compile(r"#\s+(.*)")
CODE_SPAN_RE = re.compile(r"(`+)[^`]*?\1")  # an inline code span: `[[x]]`, ``a ` b``
FENCE_RE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
HEADING_RE = re.compile(r"\s{0,3}(#{1,6})\s+(.*)")  # as the chunker reads one; text cut by heading_text
# A ``%% hybrid: skip %%`` marker line (fullmatch), of any kind: :mod:`hybrid.sources.sections`
MARKER_RE = re.compile(r"\s{0,3}%%\s*hybrid\s*:\s*(\S*?)\s*%%\s*", re.I)


@dataclass
class Note:
    path: str
    title: str
    lines: list[str]            # the whole file, split on newlines (line i is lines[i-1])
    body_start: int             # 1-based line where the body starts (after frontmatter)
    tags: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    properties: dict[str, Any] = field(default_factory=dict)
    links: list[str] = field(default_factory=list)
    created: str | None = None
    updated: str | None = None
    date: float | None = None       # its own date (hybrid.core.dates.note_date), epoch seconds
    date_field: str | None = None   # … and the frontmatter field it came from
    warnings: list[str] = field(default_factory=list)
    title_line: int | None = None   # 0-based line of the heading the title was read from, if one


class BinaryFile(ValueError):
    """The file holds binary data, not text."""


def decode(data: bytes, path: str) -> tuple[str, list[str]]:
    """Bytes → text. NUL bytes mean binary (raises); invalid UTF-8 is replaced and reported."""
    if b"\x00" in data[:8192]:
        raise BinaryFile(f"{path}: binary content in a markdown file; skipped")
    warnings = []
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", errors="replace")
        warnings.append(f"{path}: invalid UTF-8 at byte {exc.start}; decoded with replacement characters")
    return text.replace("\r\n", "\n").replace("\r", "\n"), warnings


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v for v in re.split(r"[,\s]+", value) if v]
    if isinstance(value, (list, tuple, set)):
        return [str(v) for v in value if v is not None and str(v).strip()]
    return [str(value)]


def _jsonable(value: Any, depth: int = 0) -> Any:
    """Frontmatter → JSON-safe values. Whatever YAML produced must be storable: ints beyond 64
    bits, NaN/infinity and unknown types become strings, and nesting is cut at a depth that the
    loader already refuses, so a self-referencing value cannot recurse without end."""
    if depth > FRONTMATTER_MAX_DEPTH:
        return None
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if -2**63 <= value < 2**63 else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return str(value)


def _date(value: Any) -> str | None:
    """A real calendar date (``YYYY-MM-DD…``) or None: placeholders such as ``0000-00-00`` or
    ``2024-02-30`` stay in the properties as text but are no date."""
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, str) and re.match(r"^\d{4}-\d{2}-\d{2}", value):
        try:
            dt.date.fromisoformat(value[:10])
        except ValueError:
            return None
        return value.strip()
    return None


def heading_text(rest: str) -> str:
    """A heading's text without its closing ``#`` sequence: string operations, not a regex
    with a lazy group and trailing ``\\s*#*\\s*``, which backtracks cubically on a heading
    followed by thousands of spaces."""
    return rest.rstrip().rstrip("#").rstrip()


def normalize_tag(tag: str) -> str:
    """A tag as the indexes store it: no '#' or outer '/', NFC (a tag typed on macOS, whose
    file names and some keyboards give decomposed accents, is the same tag), lower case. A form
    that is shown and written into notes, so lower case, as Obsidian matches tags (``#Straße``
    keeps its ``ß``), not :func:`hybrid.core.folding.fold`, the key names are compared by."""
    return unicodedata.normalize("NFC", tag.strip().lstrip("#").strip("/")).lower()


def _tag_text(raw: str) -> str | None:
    """The tag a TAG_RE match starts: cut at the first Unicode punctuation, separator or
    control character other than '_', '-' and '/' (ASCII ones never get into a match), and
    None unless something in it is not a digit (``#1984`` is no tag)."""
    if not raw.isascii():
        for i, c in enumerate(raw):
            cat = unicodedata.category(c)
            if cat[0] in "PZC" and c not in "_-/" and c not in _TAG_JOINERS:
                raw = raw[:i]
                break
    return raw if any(not (c.isdigit() or c == "/") for c in raw) else None


FRONT_SCAN_LINES = 2000  # a front block must close within these lines to be read
# A reserved property recording why a note's front block could not be read. The agent view hides
# such a note (its privacy cannot be known); the owner still finds it. Never from a note itself:
# parse_note drops a property of that name that a front block spells out.
FRONT_UNREADABLE = "hybrid:front_unreadable"
# A reserved property recording that a note had more tags than are indexed
# (hybrid.store.base.MAX_NOTE_TAGS): the agent view hides it, since a private tag may be among
# those left out. Set by the indexer, never from a note itself (parse_note drops it).
TAGS_CUT = "hybrid:tags_cut"
# A reserved property of a picture: where the notes that show it show it, as ``[[note path,
# words], …]`` (hybrid.indexing.context). Set by the indexer, never from a note itself.
CONTEXT = "hybrid:context"
# A reserved property of a picture that is a page of a series (hybrid.sources.series): the
# headings in force at the end of the page before, which its text starts under, as ``[[path of
# the page it is on, text, type size / body size, level], …]`` top first. Set by the indexer.
CARRIED = "hybrid:carried"
LENT = (CONTEXT, CARRIED)  # a picture's reserved properties holding words of other files


def split_frontmatter(lines: list[str]) -> tuple[list[str] | None, int]:
    """Return (frontmatter lines or None, 1-based line where the body starts)."""
    fm, body_start, _ = front_block(lines)
    return fm, body_start


def front_block(lines: list[str]) -> tuple[list[str] | None, int, str | None]:
    """(front block lines or None, 1-based line where the body starts, why a block that opens
    on line 1 cannot be read: it does not close within FRONT_SCAN_LINES lines)."""
    if not lines or lines[0].strip() != "---":
        return None, 1, None
    for i in range(1, min(len(lines), FRONT_SCAN_LINES)):
        if lines[i].strip() in ("---", "..."):
            return lines[1:i], i + 2, None
    later = any(line.strip() in ("---", "...") for line in lines[FRONT_SCAN_LINES:])
    why = (f"its front block closes after line {FRONT_SCAN_LINES:,}" if later
           else "its front block (--- on line 1) is never closed")
    return None, 1, why  # the whole file is body


FRONTMATTER_MAX_BYTES = 64 * 1024  # larger frontmatter is ignored (the body is still indexed)
FRONTMATTER_MAX_DEPTH = 32         # nesting deeper than this is refused
# Size of the frontmatter with every alias expanded (characters of scalars plus one per node):
# plain YAML never exceeds its own length, so only alias tricks (a "billion laughs") reach this.
FRONTMATTER_MAX_EXPANDED = 2 * FRONTMATTER_MAX_BYTES


class FrontmatterRefused(ValueError):
    """Frontmatter that is too large, too deep or expands too far through aliases."""


def _yaml_loader():
    """A safe YAML loader (libyaml's when present) whose impossible timestamps (``0000-00-00``,
    ``2024-02-30``) and over-long integers stay text instead of raising ValueError: one
    template placeholder must not cost the note its frontmatter."""
    import yaml

    base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[valid-type,misc]
        pass

    def lenient(construct):
        def constructor(loader, node):
            try:
                return construct(loader, node)
            except ValueError:
                return loader.construct_scalar(node)
        return constructor

    for tag, construct in (("tag:yaml.org,2002:timestamp", base.construct_yaml_timestamp),
                           ("tag:yaml.org,2002:int", base.construct_yaml_int)):
        Loader.add_constructor(tag, lenient(construct))
    return Loader


_LOADER = None


def _expanded_size(root) -> int:
    """Size of the node graph with aliases expanded, without expanding it: each node's size is
    computed once (post-order, iterative) and shared. A cycle (``&a [*a]``), nesting deeper
    than FRONTMATTER_MAX_DEPTH or a mapping that holds a key twice (case and spaces aside, as
    hybrid reads keys) raises FrontmatterRefused: YAML allows no duplicate key, Obsidian refuses
    such a block, and the parser would keep the last (``private: true`` then ``private: false``
    is not a note that is not private)."""
    import yaml

    sizes: dict[int, int] = {}
    stack: list[tuple[Any, int, bool]] = [(root, 0, False)]
    open_: set[int] = set()
    while stack:
        node, depth, done = stack.pop()
        if depth > FRONTMATTER_MAX_DEPTH:
            raise FrontmatterRefused(f"nested deeper than {FRONTMATTER_MAX_DEPTH} levels")
        if isinstance(node, yaml.ScalarNode):
            sizes[id(node)] = len(node.value) + 1
            continue
        children = [x for pair in node.value for x in pair] if isinstance(node, yaml.MappingNode) \
            else list(node.value)
        if done:
            open_.discard(id(node))
            sizes[id(node)] = 1 + sum(sizes[id(c)] for c in children)
            continue
        if id(node) in sizes:
            continue
        if id(node) in open_:
            raise FrontmatterRefused("an alias refers to itself")
        if isinstance(node, yaml.MappingNode):
            keys = [k.value.strip().lower() for k, _ in node.value if isinstance(k, yaml.ScalarNode)]
            twice = next((k for i, k in enumerate(keys) if k in keys[:i]), None)
            if twice is not None:
                raise FrontmatterRefused(f"the key {twice!r} appears twice")
        open_.add(id(node))
        stack.append((node, depth, True))
        stack.extend((c, depth + 1, False) for c in children if id(c) not in sizes)
    return sizes[id(root)]


def load_frontmatter(text: str) -> Any:
    """Parse frontmatter YAML within bounds: at most FRONTMATTER_MAX_BYTES, nesting at most
    FRONTMATTER_MAX_DEPTH, and at most FRONTMATTER_MAX_EXPANDED once aliases are expanded, so
    293 bytes of nested aliases cannot become 39 MB of properties. Raises FrontmatterRefused
    (or yaml.YAMLError for malformed text)."""
    global _LOADER
    if len(text) > FRONTMATTER_MAX_BYTES:
        raise FrontmatterRefused(f"{len(text):,} characters is over {FRONTMATTER_MAX_BYTES:,}")
    if _LOADER is None:
        _LOADER = _yaml_loader()
    loader = _LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node) > FRONTMATTER_MAX_EXPANDED:
            raise FrontmatterRefused("aliases expand it beyond "
                                     f"{FRONTMATTER_MAX_EXPANDED:,} characters")
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _read_frontmatter(path: str, fm_lines: list[str], warnings: list[str]) -> tuple[dict[str, Any], str | None]:
    """(the frontmatter mapping, None), or ({}, why it cannot be read) with a warning naming
    the file: malformed, refused, not a mapping, or anything else the YAML library raises
    stays this note's problem."""
    import yaml

    why: str | None = None
    try:
        loaded = load_frontmatter("\n".join(fm_lines))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        why = f"malformed frontmatter{f' at line {mark.line + 2}' if mark is not None else ''}"
    except FrontmatterRefused as exc:
        why = f"frontmatter refused ({exc})"
    except Exception as exc:  # RecursionError from the pure-Python parser, and the unforeseen
        why = (f"unreadable frontmatter ({type(exc).__name__}: "
               f"{str(exc).splitlines()[0][:200] if str(exc) else ''})")
    else:
        if isinstance(loaded, dict):
            return loaded, None
        if loaded is None:
            return {}, None
        why = "frontmatter is not a mapping"
    warnings.append(f"{path}: {why}; indexed the text without it, and hidden from agents until "
                    "it is fixed")
    return {}, why


def note_links(body: list[str], meta: dict[str, Any]) -> list[str]:
    """The link targets of a note as written, once each, in order: wikilinks and embeds
    (``[[Note#Heading|shown]]`` → ``Note``), markdown links to a file of the vault
    (``[x](Other%20note.md)`` → ``Other note.md``), and wikilinks in front-block values
    (``up: "[[Projects]]"``). Resolved to notes by :mod:`hybrid.store.graph`. As in
    Obsidian, a link inside code (a fenced block, an inline code span) is an example, not a
    link."""
    from urllib.parse import unquote
    prose, in_fence = [], False
    for line in body:
        if FENCE_RE.match(line):
            in_fence = not in_fence
        elif not in_fence:
            prose.append(CODE_SPAN_RE.sub(" ", line) if "`" in line else line)
    text = "\n".join(prose)
    found = [m.strip() for m in WIKILINK_RE.findall(text)]
    if "](" in text:
        found += [unquote(m).strip() for m in MDLINK_RE.findall(text)]
    stack: list[Any] = list(meta.values())
    while stack:  # front-block values, nested lists included
        value = stack.pop(0)
        if isinstance(value, str) and "[[" in value:
            found += [m.strip() for m in WIKILINK_RE.findall(value)]
        elif isinstance(value, list):
            stack.extend(value)
    return list(dict.fromkeys(t for t in found if t))


def first_h1(body: list[str]) -> tuple[int, str] | None:
    """(index in ``body``, text) of its first level-1 heading outside code fences, or None."""
    in_fence = False
    for i, line in enumerate(body):
        if FENCE_RE.match(line):
            in_fence = not in_fence
        elif not in_fence and (m := H1_RE.match(line)) and heading_text(m.group(1)):
            return i, heading_text(m.group(1))
    return None


def file_title(path: str) -> str:
    """A markdown file's name without ``.md``: the title of a note with no other."""
    stem = path.rsplit("/", 1)[-1]
    return stem[:-3] if stem.lower().endswith(".md") else stem


def file_tags(lines: list[str]) -> list[str]:
    """The ``#tags`` of ``lines`` outside code blocks, in order (not once each)."""
    tags: list[str] = []
    in_fence = False
    for line in lines:
        if FENCE_RE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence and "#" in line:
            tags.extend(normalize_tag(t) for m in TAG_RE.findall(line) if (t := _tag_text(m)))
    return tags


def parse_note(path: str, text: str) -> Note:
    """Parse one note. Malformed or refused frontmatter is reported in ``warnings``; the text
    is kept."""
    lines = text.split("\n")
    fm_lines, body_start, unreadable = front_block(lines)
    warnings: list[str] = []
    if unreadable:
        warnings.append(f"{path}: {unreadable}; indexed the text without it, and hidden from "
                        "agents until it is fixed")
    meta: dict[str, Any] = {}
    if fm_lines is not None:
        meta, unreadable = _read_frontmatter(path, fm_lines, warnings)
    meta.pop(FRONT_UNREADABLE, None)
    meta.pop(TAGS_CUT, None)
    meta.pop(CONTEXT, None)
    meta.pop(CARRIED, None)
    lower = {str(k).lower(): v for k, v in meta.items()}

    body = lines[body_start - 1:]
    tags = [normalize_tag(t) for t in _as_list(lower.get("tags") or lower.get("tag"))]
    tags = list(dict.fromkeys(t for t in tags + file_tags(body) if t))
    fm_title = lower.get("title")
    h1 = first_h1(body)
    title_line = None
    if isinstance(fm_title, (str, int, float)) and str(fm_title).strip():
        title = str(fm_title).strip()
    elif h1 is not None:
        title, title_line = h1[1], body_start - 1 + h1[0]
    else:
        title = file_title(path)
    links = note_links(body, meta)
    bad: list[str] = []
    dated = note_date(meta, bad)
    for name in bad:  # a template's `created: {{date}}`: the field is passed over, not the note
        log.info("%s: frontmatter %s %r is not a date; not used as the note's date", path, name,
                 str(lower.get(name))[:80])
    return Note(
        path=path,
        title=title,
        title_line=title_line,
        lines=lines,
        body_start=body_start,
        tags=tags,
        aliases=_as_list(lower.get("aliases") or lower.get("alias")),
        properties={**_jsonable(meta), **({FRONT_UNREADABLE: unreadable} if unreadable else {})},
        links=links,
        created=_date(lower.get("created") or lower.get("date")),
        updated=_date(lower.get("updated") or lower.get("modified") or lower.get("lastmod")),
        date=dated[0] if dated else None,
        date_field=dated[1] if dated else None,
        warnings=warnings,
    )


HEADER_PART = 200   # characters kept of each part of the contextual header (title, headings)


def context_header(title: str, aliases: list[str], path: list[str], shown_in: Sequence[str] = ()) -> str:
    """The line embedded before a chunk's text: ``Title (aliases) > Heading > Subheading``; a
    picture's also says where notes show it (``shown_in``: :func:`context_words`)."""
    head = title[:HEADER_PART]
    names = ", ".join(a for a in aliases if a and a != title)
    if names:  # a note's other names: `Aliases (nickname, alternative name)`
        head += f" ({names[:HEADER_PART]})"
    parts = [p[:HEADER_PART] for i, p in enumerate(path) if not (i == 0 and p == title)]
    line = " > ".join([head, *parts])
    if shown_in:
        line += " (shown in " + "; ".join(shown_in)[:HEADER_PART + 100] + ")"
    return line + "\n"


def context_words(properties: Any) -> list[str]:
    """The words of a picture's :data:`CONTEXT` (where notes show it), from its properties;
    none for any other note, or a value not of that shape."""
    got = properties.get(CONTEXT) if isinstance(properties, dict) else None
    if not isinstance(got, list):
        return []
    return [str(e[1]) for e in got if isinstance(e, list) and len(e) == 2 and str(e[1]).strip()]


def context_sources(properties: Any) -> set[str]:
    """The paths of the files whose words a picture holds: the notes its :data:`CONTEXT` comes
    from, and the pages before it its :data:`CARRIED` headings are on."""
    lines = properties.get(CONTEXT) if isinstance(properties, dict) else None
    out = {str(e[0]) for e in lines if isinstance(e, list) and len(e) == 2} if isinstance(lines, list) else set()
    return out | {src for src, *_ in carried(properties)}


def carried(properties: Any) -> list[tuple[str, str, float, int]]:
    """A page's :data:`CARRIED` headings, top first, as ``(path of the page it is on, text,
    type size / body size, level)``; none for any other note or a value not of that shape."""
    got = properties.get(CARRIED) if isinstance(properties, dict) else None
    if not isinstance(got, list):
        return []
    return [(str(e[0]), str(e[1]), float(e[2]), e[3]) for e in got
            if isinstance(e, list) and len(e) == 4 and isinstance(e[2], (int, float))
            and isinstance(e[3], int) and 1 <= e[3] <= 6]


def carried_heads(properties: Any) -> list[tuple[int, str]]:
    """``[(level, text)]`` of a page's :data:`CARRIED` headings (:func:`carried`), top first."""
    return [(level, text) for _, text, _, level in carried(properties)]


HYPHEN_BREAK_RE = re.compile(r"(?<=[a-z])-\n(?=[a-z])")
HEADING_LIKE_RE = re.compile(r"^\s{0,3}#")


def converted_text(text: str) -> str:
    """Text a converter read (a PDF page's, OCR's) as lines of a note: one newline style, no
    NULs or form feeds, words broken by a hyphen at a line end joined, and no line that
    markdown would read as a heading or a code fence (those are ours: a PDF's page headings)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "").replace("\x0c", "\n")
    text = HYPHEN_BREAK_RE.sub("", text)
    lines = []
    for line in text.split("\n"):
        line = line.rstrip()
        if HEADING_LIKE_RE.match(line) or FENCE_RE.match(line):
            line = "\\" + line.lstrip()
        lines.append(line)
    return "\n".join(lines).strip("\n")
