"""How ``hybrid query`` shows its hits in a terminal: one block per note (its best passage, the
note's other passages as sub-lines), or one block per passage (``--passages``), or only the notes'
references (``-l``); query words highlighted, code fences and tables kept as lines, prose wrapped
to the terminal with a hanging indent, citations as OSC 8 hyperlinks. Colour, styles and links
only on a terminal, never with ``NO_COLOR`` (https://no-color.org) or ``TERM=dumb`` (links).
``--json`` is not drawn here: one object per note (its passages inside), or with ``--passages``
the passage list. A weak answer (nothing fair or strong) is said plainly first.
``--explain`` first shows how the query was read, then each hit's per-arm ranks and scores."""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import sys
import textwrap
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from hybrid.core.kinds import own_file
from hybrid.faces.cli.term import own, visible
from hybrid.retrieval.excerpt import mark_spans, readable
from hybrid.retrieval.hits import Hit, needle_hits, snippet

if TYPE_CHECKING:
    from hybrid.retrieval.request import SearchRequest
    from hybrid.retrieval.result import SearchResult

BLOCK_LINES = 8         # lines of a snippet kept as lines (code fence, table)
SUB_SNIPPET = 100       # characters of the snippet on a note's further passage
NOTHING_RELEVANT = "nothing relevant: no hit is even fair; the closest weak matches follow"
MIN_WIDTH = 40

FENCE_RE = re.compile(r"^\s{0,3}(```|~~~)")
TABLE_RE = re.compile(r"^\s*\|.*\|\s*$")
LEAD_RE = re.compile(r"\s*(?:[-*+]\s+(?:\[.\]\s+)?|\d+[.)]\s+|>\s*)?")  # list marker, quote


# --- what a terminal gets ------------------------------------------------------------------
def echo_keeps_styles(stream: Any) -> bool:
    """Whether ``click.echo`` keeps the escape sequences written to ``stream``, read from
    click's public parts as it decides: the current context's ``color`` when set (a command's
    ``context_settings``, or ``color=`` given to ``main``), otherwise whether ``stream`` is a
    terminal, or a Jupyter kernel's output, which shows them."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.color is not None:
        return ctx.color
    try:
        if stream.isatty():
            return True
    except Exception:  # noqa: BLE001 - a stream that cannot say is no terminal, for click too
        return False
    return type(stream).__module__.startswith("ipykernel.")


@dataclass
class Look:
    """Whether to style (colour, bold, dim), whether to link, and the width to wrap to."""
    styled: bool = False
    links: bool = False
    width: int = 80

    @classmethod
    def detect(cls) -> Look:
        """Styles when click would keep them (stdout a terminal, or colour forced) and
        ``NO_COLOR`` is unset or empty; links only then and when ``TERM`` is not ``dumb``."""
        styled = echo_keeps_styles(sys.stdout) and not os.environ.get("NO_COLOR")
        links = styled and os.environ.get("TERM", "") != "dumb"
        return cls(styled, links, max(MIN_WIDTH, shutil.get_terminal_size((80, 24)).columns))

    def style(self, text: str, **styles: Any) -> str:
        """``text`` styled, its escape sequences marked as hybrid's own (:func:`hybrid.faces.cli.term.own`)."""
        if not (self.styled and text):
            return text
        start, _, end = click.style("\x00", **styles).partition("\x00")
        return own(start) + text + own(end)

    def link(self, text: str, uri: str) -> str:
        """``text`` as an OSC 8 hyperlink to ``uri`` (plain ``text`` when links are off). The
        address is a hit's (a bookmark's as its page gave it): every character that is not
        printable ASCII is percent-encoded, so it can neither end the sequence nor start another."""
        if not (self.links and uri):
            return text
        uri = "".join(c if 0x20 < ord(c) < 0x7F else urllib.parse.quote(c, safe="") for c in uri)
        return own(f"\x1b]8;;{uri}\x1b\\") + text + own("\x1b]8;;\x1b\\")


# --- highlighting and text shapes ------------------------------------------------------------
def structured_lines(lines: Sequence[str]) -> list[bool]:
    """For each line: is it part of a fenced code block (fences included) or a table?"""
    marks, fence = [], ""
    for i, line in enumerate(lines):
        m = FENCE_RE.match(line)
        if fence:
            marks.append(True)
            if m and m.group(1) == fence:
                fence = ""
        elif m:
            fence = m.group(1)
            marks.append(True)
        else:
            near = [lines[j] for j in (i - 1, i + 1) if 0 <= j < len(lines)]
            marks.append(bool(TABLE_RE.match(line)) and any(TABLE_RE.match(x) for x in near))
    return marks


def block_excerpt(text: str, needles: Sequence[str], cap: int = BLOCK_LINES) -> list[str] | None:
    """The ``cap`` lines of ``text`` with the most distinct query words (the first such window),
    as lines, when they hold code-fence or table lines; None when they do not (the flat
    snippet then does). Dropped text before or after is marked with a ``…`` line."""
    lines = text.split("\n")
    marks = structured_lines(lines)
    if not any(marks):
        return None
    found = [{n for _, n in needle_hits(line.lower(), needles)} for line in lines]
    best, start = -1, 0
    for s in range(max(1, len(lines) - cap + 1)):
        score = len(set().union(*found[s:s + cap]))
        if score > best:
            best, start = score, s
    end = min(len(lines), start + cap)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    if not any(marks[start:end]):
        return None
    before = any(x.strip() for x in lines[:start])
    after = any(x.strip() for x in lines[end:])
    return (["…"] if before else []) + lines[start:end] + (["…"] if after else [])


# --- the renderer ----------------------------------------------------------------------------
@dataclass
class QueryView:
    """What ``hybrid query`` was asked to show, and the drawing of it."""
    top_k: int = 8
    passages: bool = False      # one block per passage, not per note
    as_json: bool = False
    files: bool = False         # -l: the notes' references only
    full: bool = False
    explain: bool = False
    look: Look = field(default_factory=Look)
    roots: dict[str, Path] = field(default_factory=dict)  # vault name → folder, for file:// links
    echo: Callable[..., None] = click.echo

    def __post_init__(self) -> None:
        if self.files and self.as_json:
            raise click.UsageError("-l prints references, --json prints hits: use one of them")
        if self.files and self.passages:
            raise click.UsageError("-l prints notes, --passages lists passages: use one of them")

    def show(self, result: SearchResult, request: SearchRequest) -> None:
        if result.corrections:
            self.echo(self.look.style(f"showing results for: {result.corrected_query}", dim=True), err=True)
        if result.suggestions:  # not applied: the query ran as typed, near spellings included
            self.echo(self.look.style(f"maybe you meant: {result.suggested_query}", dim=True), err=True)
        for notice in result.notices:
            self.echo(self.look.style(notice, dim=True), err=True)
        if self.explain:
            for line in explain_lines(result, request, self.look):
                self.echo(line, err=self.as_json or self.files)
        if result and result.relevant is False:
            self.echo(self.look.style(NOTHING_RELEVANT, fg="yellow"), err=True)
        if self.as_json:
            from hybrid.faces.cli.support import print_json
            answer = [n.to_dict() for n in result.notes] if result.grouped else [h.to_dict() for h in result]
            if result.context is not None:  # --context: the answer and its context in one object
                key = "notes" if result.grouped else "hits"
                print_json({key: answer, "context": result.context.to_dict()})
            else:
                print_json(answer)
            return
        if not result:
            if not result.below_min_score:  # else a notice above said they matched, under the bar
                self.echo("no hits", err=True)
            return
        if self.files:
            for n in result.notes:
                self.echo(n.ref)
            return
        blocks = [n.hits for n in result.notes] if result.grouped else [[h] for h in result]
        for i, hits in enumerate(blocks, 1):
            for line in self.block(i, hits):
                self.echo(line)
        if result.context is not None:
            for line in self.context_lines(result.context):
                self.echo(line)

    def context_lines(self, context) -> list[str]:
        """``--context``: each block of text around the hits under its citation, as indexed."""
        lk = self.look
        out = ["", lk.style(f"context: {context.used} of {context.budget} tokens", bold=True)]
        for note in context.notes:
            for b, cite in zip(note.blocks, note.citations()):
                where = " > ".join(b.heading_path)
                out.append(lk.style(cite, bold=True) + (lk.style(f"  {where}", fg="cyan") if where else ""))
                out += [("   " + line).rstrip() for line in b.text.split("\n")]
            if note.changed:
                out.append(lk.style(f"   ({note.path} changed since it was indexed: run `hybrid index`)",
                                    fg="yellow"))
        return out

    # one numbered block: the best passage in full view, the others as sub-lines
    def block(self, i: int, hits: list[Hit]) -> list[str]:
        lk, best = self.look, hits[0]
        number = f"{i}. "
        indent = " " * len(number)
        head = [lk.style(lk.link(best.citation, self.uri(best)), bold=True)]
        if self.passages:
            head.append(lk.style(f"{best.score:.4f}", dim=True))
            if not self.explain:
                head.append(arms_short(best))
        head.append(confidence_text(best, lk))
        out = [number + "  ".join(x for x in head if x)]
        where = heading_text(best)
        if where:
            out.append(indent + lk.style(where, fg="cyan"))
        if best.url:
            out.append(indent + lk.style(lk.link(best.url, best.url), dim=True))
        if self.explain:
            out.append(indent + arms_long(best, lk))
        out += self.body(best, best.marks, indent)
        if best.also_in:
            out.append(indent + lk.style(also_in_text(best), dim=True))
        for h in hits[1:]:
            out += self.sub_passage(h, h.marks, indent, best.confidence)
        return out

    def sub_passage(self, h: Hit, needles: Sequence[str], indent: str, shown: float | None) -> list[str]:
        """A further passage of a note: its line range (linked), heading, confidence when not the
        one ``shown`` for the note already, and a short snippet (``--full``: the whole chunk)."""
        lk = self.look
        lead = f"↳ p. {h.page}" if h.page is not None else f"↳ {h.start_line}-{h.end_line}"
        parts = [lk.style(lk.link(lead, self.uri(h)), dim=True)]
        if h.heading and h.heading_path[-1:] != [h.title]:
            parts.append(lk.style(h.heading_path[-1], fg="cyan"))
        if h.confidence is not None and h.confidence != shown:
            parts.append(confidence_text(h, lk))
        line = indent + "  ".join(parts)
        room = self.look.width - visible_len(line) - 3
        if room >= 20 and not self.full:
            short = snippet(readable(h.text) or h.snippet, needles, min(SUB_SNIPPET, room))
            line += "  " + highlight(short[:room], needles, lk)
        out = [line]
        if h.also_in:
            out.append(indent + "  " + lk.style(also_in_text(h), dim=True))
        if self.explain:
            out.append(indent + "  " + arms_long(h, lk))
        if self.full:
            out += self.body(h, needles, indent + "  ")
        return out

    def body(self, h: Hit, needles: Sequence[str], indent: str) -> list[str]:
        """The passage's text: all of it with ``--full``, else the snippet, as lines when its
        window holds a code fence or a table; prose wrapped with a hanging indent."""
        if self.full and h.text:
            lines: list[str] | None = h.text.strip("\n").split("\n")
        else:
            lines = block_excerpt(h.text, needles) if h.text else None
        if lines is None:
            return wrap(h.snippet, indent, self.look.width, needles, self.look)
        marks = structured_lines(lines)
        out: list[str] = []
        for line, verbatim in zip(lines, marks):
            if verbatim or not line.strip():
                out.append((indent + highlight(line, needles, self.look)).rstrip())
            else:
                out += wrap(readable(line), indent, self.look.width, needles, self.look, keep_lead=True)
        return out

    def uri(self, h: Hit) -> str:
        if h.uri or not own_file(h.source):
            return h.uri  # a source's document has no file of its own to link
        root = self.roots.get(h.vault)
        return (root / h.path).resolve().as_uri() if root else ""


def wrap(text: str, indent: str, width: int, needles: Sequence[str], look: Look,
         keep_lead: bool = False) -> list[str]:
    """``text`` wrapped to ``width`` under ``indent``, query words highlighted after wrapping
    (so escape codes never count as width). ``keep_lead``: a list item or quote keeps its
    leading whitespace and marker, and its continuation lines align after the marker."""
    lead = LEAD_RE.match(text).group(0) if keep_lead else ""  # type: ignore[union-attr]
    body = text[len(lead):] if keep_lead else text.strip()
    lines = textwrap.wrap(body, width=max(MIN_WIDTH // 2, width - len(indent) - len(lead)),
                          break_long_words=False, break_on_hyphens=False) or [""]
    pad = " " * len(lead)
    return [(indent + (lead if n == 0 else pad) + highlight(x, needles, look)).rstrip()
            for n, x in enumerate(lines)]


def highlight(line: str, needles: Sequence[str], look: Look) -> str:
    if not look.styled:
        return line
    out, last = [], 0
    for a, b in mark_spans(line, needles):  # the hit's own marks, whole words
        out += [line[last:a], look.style(line[a:b], bold=True, fg="yellow")]
        last = b
    return "".join(out) + line[last:]


def also_in_text(h: Hit) -> str:
    """``also in: PATH:LINES, …``: the near-identical passages folded into ``h``
    (:mod:`hybrid.retrieval.fold`), their vault named only when it is another one."""
    own = f"{h.vault}:"
    return "also in: " + ", ".join(c[len(own):] if c.startswith(own) else c for c in h.also_in)


def visible_len(text: str) -> int:
    return len(visible(text))


def heading_text(h: Hit) -> str:
    """Where the passage sits: its heading path, led by the note's title unless the path
    already starts with it."""
    if h.heading_path[:1] == [h.title]:
        return " › ".join(h.heading_path)
    return " › ".join(filter(None, [h.title, *h.heading_path]))


def confidence_text(h: Hit, look: Look) -> str:
    if h.confidence is None:
        return ""
    return look.style(f"{h.confidence_label} {h.confidence:.2f}", dim=True)


def arms_short(h: Hit) -> str:
    """``bm25#1 vec#3``: the ranks each arm gave the passage."""
    return " ".join(f"{name}#{rank}" for name, rank in (("bm25", h.lexical_rank), ("vec", h.vector_rank))
                    if rank)


def arms_long(h: Hit, look: Look) -> str:
    """Each arm's rank and score, the reranker's score, the fused score and the confidence."""
    def arm(name: str, rank: int | None, score: float | None) -> str:
        return f"{name} #{rank} ({score:.4g})" if rank else f"{name} -"
    parts = [arm("bm25", h.lexical_rank, h.lexical_score), arm("vector", h.vector_rank, h.vector_score)]
    if h.rerank_score is not None:
        parts.append(f"rerank {h.rerank_score:.4g}")
    if h.pin:
        parts.append(f"pinned ({h.pin})")
    if h.recency_penalty:
        parts.append(f"recency ×{1 - h.recency_penalty:.2g}")
    parts.append(f"fused {h.score:.4f}")
    if h.modified:
        parts.append(f"dated {h.modified[:10]} ({date_words(h.date_source)})")
    if h.confidence is not None:
        parts.append(f"confidence {h.confidence_label} {h.confidence:.2f}")
    return look.style(" · ".join(parts), dim=True)


def date_words(source: str) -> str:
    """``frontmatter created``, ``file name`` or ``file mtime``: where a hit's date came from,
    in words."""
    if source.startswith("frontmatter:"):
        return "frontmatter " + source.split(":", 1)[1]
    if source == "name":
        return "file name"
    return "file mtime" if source == "mtime" else source or "file mtime"


# --- --explain -------------------------------------------------------------------------------
def explain_lines(result: SearchResult, request: SearchRequest, look: Look) -> list[str]:
    """How the query was read: its words, required phrases, exclusions, the literals matched
    verbatim, corrected words, filters and mode. Blank line last."""
    from hybrid.core.tokens import literals
    p, f = result.parsed, request.filters
    rows: list[tuple[str, str]] = [("query", request.query), ("words", " ".join(p.terms) or "-")]
    if p.phrases:
        rows.append(("phrases", " ".join(f'"{x}"' for x in p.phrases) + " (required)"))
    if p.excludes:
        rows.append(("excluded", " ".join(p.excludes)))
    lits = literals(p.terms)
    if lits:
        rows.append(("literals", " ".join(lits) + literal_note(p.terms, lits, request.mode)))
    if result.corrections:
        rows.append(("corrected", ", ".join(f"{a} → {b}" for a, b in result.corrections.items())))
    if result.suggestions:
        rows.append(("maybe", ", ".join(f"{a} → {b}" for a, b in result.suggestions.items())
                     + " (searched as typed, near spellings included)"))
    props = dict.fromkeys([*map(str, f.props), *map(str, p.props)])  # the server's resolved ones too
    filters = ([f"folder {x}" for x in f.folders] + [f"tag {x}" for x in f.tags]
               + [f"source {x}" for x in f.sources] + [f"property {x}" for x in props])
    if f.since is not None:
        filters.append("since " + dt.datetime.fromtimestamp(f.since).strftime("%Y-%m-%d"))
    filters += [f"exclude {x}" for x in f.exclude_folders] + [f"vault {x}" for x in request.vaults or ()]
    rows.append(("filters", " · ".join(filters) or "none"))
    rows.append(("mode", request.mode + (", reranked" if request.rerank else "")))
    return [look.style(f"{k:<10}", bold=True) + v for k, v in rows] + [""]


def literal_note(terms: Sequence[str], lits: Sequence[str], mode: str) -> str:
    """Which literals exact-first ranks on top (hybrid mode; a long question's in-passing
    identifiers may not be, see :func:`hybrid.retrieval.exact.strong_literals`)."""
    if mode != "hybrid":
        return " (matched as written)"
    from hybrid.retrieval.exact import strong_literals
    strong = strong_literals(terms)
    if list(strong) == list(lits):
        return " (matched as written; passages naming them all rank first)"
    if not strong:
        return " (matched as written)"
    return f" (matched as written; passages naming {' '.join(strong)} rank first)"
