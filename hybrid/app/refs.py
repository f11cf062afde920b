"""What a note reference names: every form a user or an agent has at hand resolves to a vault,
a note and a line range.

Accepted (all by ``hybrid get`` and MCP ``get_note``)::

    home-lab/networking.md            a vault-relative path
    home-lab/networking               … without ``.md``
    home-lab/networking.md:12-40      … with a line range (``:12`` is one line)
    home:home-lab/networking.md:12-40 the citation ``hybrid query`` prints and search hits carry
    Home network                      a note title, file name or alias (unique in the vault)
    [[Home network#Tailscale]]        Obsidian's wikilink, also ``![[…]]`` and ``[[…|shown text]]``
    networking#Tailscale              a heading (nested: ``Note#Setup#Tailscale``): its section
    networking#^dns-table             a block id: the block that carries it
    obsidian://open?vault=…&file=…    the ``uri`` of a search hit

Parsing is pure (:func:`parse_ref`); finding a title needs the catalog and sections need the
note's text (:func:`section_lines`), both done by :mod:`hybrid.app.reader`.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Collection
from dataclasses import dataclass

LINES_RE = re.compile(r":(?P<start>\d+)(?:-(?P<end>\d+))?$")
VAULT_PREFIX_RE = re.compile(r"^(?P<vault>[A-Za-z0-9][A-Za-z0-9_.-]{0,63}):(?!//)")


def heading_of(line: str) -> tuple[int, str] | None:
    """(level, text) of a markdown heading line, as the chunker reads it (chunk.HEADING_RE and
    notes.heading_text: no regex that backtracks on a heading padded with spaces), else None."""
    from hybrid.indexing.chunk import HEADING_RE
    from hybrid.sources.markdown import heading_text
    m = HEADING_RE.match(line)
    return (len(m.group(1)), heading_text(m.group(2))) if m else None


@dataclass
class Ref:
    path: str                   # a path, a path without .md, or a title / file name / alias
    vault: str | None = None    # named by a ``vault:`` prefix or an obsidian:// URI
    vault_folder: str | None = None  # an obsidian:// URI names the vault's folder, not its name
    start: int | None = None
    end: int | None = None
    heading: list[str] | None = None  # ``Note#A#B`` → ["A", "B"]
    block: str | None = None    # ``Note#^id`` → "id"


def parse_ref(text: str, vault_names: Collection[str] = ()) -> Ref:
    """The parts of reference ``text`` (see the module docstring). A ``name:`` prefix counts as
    a vault only when ``name`` is one of ``vault_names``."""
    t = text.strip()
    if t.startswith("obsidian://"):
        return _parse_uri(t)
    if t.startswith("!"):
        t = t[1:]
    if t.startswith("[[") and t.endswith("]]"):
        t = t[2:-2].strip()
    if "|" in t:  # [[Note|shown text]]
        t = t.split("|", 1)[0].strip()
    ref = Ref(path=t)
    m = VAULT_PREFIX_RE.match(t)
    if m and m.group("vault") in vault_names:
        ref.vault, t = m.group("vault"), t[m.end():]
    m = LINES_RE.search(t)
    if m:
        ref.start = int(m.group("start"))
        ref.end = int(m.group("end") or m.group("start"))
        t = t[:m.start()]
    if "#" in t:  # Obsidian allows no '#' in file names
        t, frag = t.split("#", 1)
        if frag.startswith("^"):
            ref.block = frag[1:].strip()
        elif frag.strip():
            ref.heading = [h.strip() for h in frag.split("#") if h.strip()]
    ref.path = t.strip()
    return ref


def _parse_uri(uri: str) -> Ref:
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(uri).query)
    file = (query.get("file") or query.get("path") or [""])[0]
    folder = query.get("vault")
    return Ref(path=file, vault_folder=folder[0] if folder else None)


def heading_key(text: str) -> str:
    """A heading as Obsidian matches it in a link: case and spacing ignored, ``#`` and
    ``[[…]]``/``|`` characters (which links cannot hold) dropped."""
    text = re.sub(r"[#|\[\]^]", " ", text)
    return " ".join(text.lower().split())


def heading_lines(lines: list[str]) -> list[tuple[int, int, str]]:
    """(0-based line index, level, :func:`heading_key`) of every heading in ``lines``, in order;
    headings inside code fences don't count."""
    from hybrid.sources.markdown import FENCE_RE
    heads: list[tuple[int, int, str]] = []
    fence = ""
    for i, line in enumerate(lines):
        f = FENCE_RE.match(line)
        if f:
            mark = f.group(1)[0]
            fence = "" if fence == mark else (fence or mark)
            continue
        if fence:
            continue
        h = heading_of(line)
        if h:
            heads.append((i, h[0], heading_key(h[1])))
    return heads


def section_lines(lines: list[str], heading: list[str]) -> tuple[int, int] | None:
    """1-based (first, last) line of the section under ``heading`` (each element a heading
    nested in the one before, as in ``Note#A#B``), or None. Headings in code fences don't count."""
    heads = heading_lines(lines)
    lo, hi = 0, len(lines)  # the span searched for the next part of the heading path
    found = None
    for want in (heading_key(x) for x in heading):
        for n, (i, level, key) in enumerate(heads):
            if lo <= i < hi and key == want:
                end = next((j for j, lv, _ in heads[n + 1:] if lv <= level), len(lines))
                found, lo, hi = (i, end), i + 1, end
                break
        else:
            return None
    assert found is not None
    return found[0] + 1, found[1]


def block_lines(lines: list[str], block: str) -> tuple[int, int] | None:
    """1-based (first, last) line of the block carrying ``^block``: its paragraph (or list or
    table), or, for an id on a line of its own, the block just above it."""
    tag = re.compile(r"(?:^|\s)\^" + re.escape(block) + r"\s*$")
    for i, line in enumerate(lines):
        if tag.search(line):
            first = i - 1 if line.strip() == f"^{block}" else i
            while first > 0 and lines[first - 1].strip():
                first -= 1
            return first + 1, i + 1
    return None
