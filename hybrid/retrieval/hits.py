"""What a search returns: :class:`Hit`, one cited passage, and the snippet shown with it."""

from __future__ import annotations

import functools
import re
import urllib.parse
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from hybrid.core.tokens import SPACED_WORD


@dataclass
class Hit:
    """One ranked passage with everything needed to cite and open it."""
    vault: str
    path: str
    title: str
    heading_path: list[str]
    start_line: int
    end_line: int
    snippet: str
    score: float
    lexical_rank: int | None = None
    lexical_score: float | None = None
    vector_rank: int | None = None
    vector_score: float | None = None
    rerank_score: float | None = None
    fused_score: float | None = None     # the fused (RRF) score, before exact-first and recency
    pin: str | None = None               # lifted by exact-first ("verbatim", "literal") or kept on
                                         # top through the rerank ("phrase")
    recency_penalty: float | None = None  # the recency demotion applied (score × (1 - penalty))
    # calibrated estimate (0..1) that this passage's note answers the query; see hybrid/retrieval/confidence.py
    confidence: float | None = None
    tags: list[str] = field(default_factory=list)
    modified: str = ""        # the note's date: its frontmatter's (see date_source), its name's, else its mtime
    date_source: str = ""     # where ``modified`` came from: "frontmatter:FIELD", "name" or "mtime"
    uri: str = ""
    chunk_id: int = 0
    text: str = ""
    source: str = "note"      # the document's kind (hybrid.sources): note, pdf, text, web, bookmark,
                              # slack, canvas, excalidraw, docx, image
    page: int | None = None   # a PDF hit's page (1-based)
    card: str = ""            # a canvas hit's card (its id in the canvas; its heading is the last
                              # of heading_path, its text this passage)
    url: str = ""             # a bookmark hit's page address
    box: list[int] | None = None  # an image hit's place: [x0, y0, x1, y1] around its lines, in
                                  # the image's pixels (hybrid.sources.ocr)
    embedded_in: list[str] = field(default_factory=list)  # an image hit: the notes that embed
                                                          # (or link to) it, by path
    marks: list[str] = field(default_factory=list)  # its words that answer the query, lower case
                                                    # (hybrid.retrieval.excerpt.Marker): what doors highlight
    also_in: list[str] = field(default_factory=list)  # citations of near-identical passages folded
                                                      # into this one (hybrid.retrieval.fold)

    @property
    def heading(self) -> str:
        return " > ".join(self.heading_path)

    @property
    def confidence_label(self) -> str:
        """``strong`` / ``fair`` / ``weak`` for :attr:`confidence` (empty when not computed)."""
        return confidence_label(self.confidence)

    @property
    def citation(self) -> str:
        """``vault:path:START-END``; a PDF's ``vault:path#page=N`` (what ``hybrid get`` reads)."""
        if self.page is not None:
            return f"{self.vault}:{self.path}#page={self.page}"
        return f"{self.vault}:{self.path}:{self.start_line}-{self.end_line}"

    def to_dict(self, *, text: bool = True) -> dict[str, Any]:
        """Every field plus ``citation``: what ``--json``, ``/api/search`` and MCP return.
        ``text=False`` leaves out the whole chunk (MCP: an agent reads it with get_note)."""
        data = {**asdict(self), "citation": self.citation}
        if not text:
            del data["text"]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Hit:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def cite(vault: str, row: Any) -> str:
    """The citation of a chunk row (``ChunkRow``), as :attr:`Hit.citation` gives it."""
    page = source_fields(row.path, row.heading, {}, "").get("page")
    if page is not None:
        return f"{vault}:{row.path}#page={page}"
    return f"{vault}:{row.path}:{row.start_line}-{row.end_line}"


STRONG, FAIR = 0.7, 0.4  # confidence from which a hit is called strong, fair (below: weak)


def confidence_label(confidence: float | None) -> str:
    """The word shown for a confidence: ``strong`` (>= 0.7), ``fair`` (>= 0.4), else ``weak``."""
    if confidence is None:
        return ""
    return "strong" if confidence >= STRONG else "fair" if confidence >= FAIR else "weak"


def source_fields(path: str, heading: str, properties: Any, vault_folder: str,
                  start_line: int | None = None, end_line: int | None = None) -> dict[str, Any]:
    """The fields of a hit that depend on its document's kind: ``source``, ``page`` (a PDF's
    section ``Page N``), ``card`` (the canvas card whose section holds ``start_line``), ``box``
    (an image's lines ``start_line``..``end_line``, where they are in it), ``url``
    (a bookmark's) and ``uri``, what opens it: Obsidian for a file of a vault (a canvas, a
    drawing, a Word file too), the page itself for a bookmark, nothing for a Slack day."""
    from hybrid.sources import KIND, kind_of
    kind = KIND[kind_of(path)]
    out: dict[str, Any] = {"source": kind.name}
    if kind.paged:
        from hybrid.sources.pdf import page_of
        out["page"] = page_of(heading.split(" > ", 1)[0])
    if kind.carded and start_line is not None:
        from hybrid.sources.canvas import card_at
        out["card"] = card_at(properties() if callable(properties) else properties, start_line)
    if kind.boxed and start_line is not None:
        from hybrid.sources.ocr import box_of
        out["box"] = box_of(properties() if callable(properties) else properties, start_line, end_line)
    if kind.opens == "url":
        props = properties() if callable(properties) else properties
        url = props.get("url") if isinstance(props, dict) else None
        out["url"] = out["uri"] = url if isinstance(url, str) else ""
    else:
        out["uri"] = obsidian_uri(vault_folder, path) if kind.opens == "obsidian" else ""
    return out


def obsidian_uri(vault_folder: str, path: str) -> str:
    file = path[:-3] if path.lower().endswith(".md") else path
    return ("obsidian://open?vault=" + urllib.parse.quote(vault_folder, safe="")
            + "&file=" + urllib.parse.quote(file, safe=""))


_WORD_START = re.compile(rf"(?<!{SPACED_WORD}).", re.S)  # in CJK text, every position
# how the query's own words are split for snippets and highlighting (hybrid.retrieval.pipeline.needles)
NEEDLE_RE = re.compile(r"\w[\w\-./]*\w|\w")


PREFIX_SCAN = 200  # past this many distinct two-letter starts, every word start is tried in Python


@functools.lru_cache(maxsize=16)
def _needle_index(needles: tuple[str, ...]) -> tuple[dict[str, tuple[str, ...]], re.Pattern[str] | None]:
    """Needles of 2+ characters grouped by their first two characters, and a pattern that
    finds the places where one of those starts with no word character before it (built once
    per query, not once per hit; None past :data:`PREFIX_SCAN` starts)."""
    out: dict[str, list[str]] = {}
    for n in needles:
        if len(n) >= 2:
            out.setdefault(n[:2], []).append(n)
    starts = None
    if len(out) <= PREFIX_SCAN:
        starts = re.compile(rf"(?<!{SPACED_WORD})(?=" + "|".join(map(re.escape, sorted(out))) + ")", re.S) \
            if out else re.compile(r"(?!)")
    return {k: tuple(v) for k, v in out.items()}, starts


def needle_hits(low: str, needles: Sequence[str]) -> list[tuple[int, str]]:
    """(position, needle) for every needle of 2+ characters that starts in ``low`` where no
    word character precedes it, in text order. One pass over the text: only the places where
    the first two characters of a needle follow no word character are visited (found by one
    pattern, in C), and there only the needles starting with those two are tried (a regex
    per needle, compiled anew for every hit of a 1,000-word query, took seconds; a visit to
    every word start was ~70 µs a passage)."""
    by_prefix, starts = _needle_index(tuple(sorted(set(needles))))
    places = (m.start() for m in (starts or _WORD_START).finditer(low))
    hits: list[tuple[int, str]] = []
    for pos in places:
        for n in by_prefix.get(low[pos:pos + 2], ()):
            if low.startswith(n, pos):
                hits.append((pos, n))
    return hits


def snippet(text: str, needles: Sequence[str], width: int = 300) -> str:
    """About ``width`` characters of ``text`` around the densest cluster of query words,
    cut at word boundaries, with ellipses where text was dropped. Hits pass their chunk as
    :func:`hybrid.retrieval.excerpt.readable` renders it."""
    flat = flatten(text)
    return flat_snippet(flat, flat.lower(), needles, width)


def flatten(text: str) -> str:
    """``text`` on one line, each run of white space one space (what :func:`snippet` cuts)."""
    return re.sub(r"\s+", " ", text).strip()


def flat_snippet(flat: str, low: str, needles: Sequence[str], width: int = 300) -> str:
    """:func:`snippet` of a text already flattened (``flat``: :func:`flatten`'s, ``low``: it in
    lower case), for a caller that keeps them (a passage returned by many searches)."""
    if len(flat) <= width:
        return flat
    hits = needle_hits(low, needles)
    start = 0
    if hits:
        best, j = (-1, 0), 0
        counts: dict[str, int] = {}
        for pos, n in hits:
            counts[n] = counts.get(n, 0) + 1
            while hits[j][0] < pos - width * 0.8:
                counts[hits[j][1]] -= 1
                if not counts[hits[j][1]]:
                    del counts[hits[j][1]]
                j += 1
            if len(counts) > best[0]:
                best = (len(counts), hits[j][0])
        start = max(0, best[1] - width // 6)
        start = min(start, max(0, len(flat) - width))
        if start:
            space = flat.find(" ", start)
            start = space + 1 if 0 <= space < start + 30 else start
    end = min(len(flat), start + width)
    if end < len(flat):
        space = flat.rfind(" ", start, end)
        end = space if space > start + width // 2 else end
    return ("…" if start else "") + flat[start:end].strip() + ("…" if end < len(flat) else "")
