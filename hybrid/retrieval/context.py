"""Context around the hits: each hit with the text around it, read along its note's headings,
within one token budget for the whole answer (the request's ``context``).

A hit is a chunk; the answer often needs the paragraph above it, its section's start, the
parent section's intro or a sibling section. For each hit the note's chunks (from the ledger,
as the reader may see them: an agent's redacted, a hidden note's never) are laid out as a
heading tree, and the hit grows in steps (:func:`steps`): itself, the neighbouring chunks of its
section (above first), the section's start, the parent's intro, the rest of the section, its
subsections, its sibling sections, the grandparent's intro. Steps of all hits are taken in one
order, ``rank × STEP_PER_RANK + step`` (rank: the hit's place in the answer; the first hit grows
first, the next hit's own passage comes before the first hit's far context), each line at most
once, until the budget is spent:
a step that does not fit whole is taken as far as it fits, nearest lines first.

Lines are joined into blocks per note: lines that touch are one block, cited by its line range
(a step runs on through the blank lines between its section's chunks, so a passage and its
neighbours touch). Between sections a block ends unless the next line follows at once: what
lies between (blank lines, a heading with no text of its own) is not in the ledger. Text is
the ledger's, i.e. the note as it was indexed (an over-long line the chunker cut is joined back
with a space); a note changed on disk since is marked ``changed``.

Tokens are :func:`hybrid.core.tokens.count_tokens` of each line plus one for its line break;
the budget covers every block returned (the hits' own lines included), so an agent can rely on
it.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hybrid.core.tokens import count_tokens
from hybrid.retrieval.context_blocks import Block, Context, NoteContext
from hybrid.retrieval.hits import Hit
from hybrid.sources.markdown import HEADING_RE  # the chunker's (not hybrid.indexing: a search imports none of it)
from hybrid.store.base import ChunkRow

if TYPE_CHECKING:
    from hybrid.core.config import Vault
    from hybrid.retrieval.request import SearchRequest
    from hybrid.retrieval.result import SearchResult
    from hybrid.store.port import Searchable

# how many steps of context a hit's rank is worth: the hit ranked r+1 starts growing when the
# hit ranked r has taken this many steps (chosen on the tune half of qrels/obsidian-help-spans:
# eval/reports/notes/issue30-context.md)
STEP_PER_RANK = 1.0
# the hits' ranks: the order shown (a grouped answer's notes one after the other, each note's
# passages together) or their scores (a note's further passages often score below the next
# notes' best ones); chosen as STEP_PER_RANK is
ORDER = "shown"


# --- a note's layout ----------------------------------------------------------------------
@dataclass
class Section:
    """A run of chunks under one heading path, with the lines it spans."""
    path: list[str]
    chunks: list[ChunkRow]
    parent: int | None = None

    @property
    def first(self) -> int:
        return self.chunks[0].start_line

    @property
    def last(self) -> int:
        return max(c.end_line for c in self.chunks)


class Layout:
    """A note's chunks as a heading tree, and its text by line (blank lines inside a section
    filled in: between two chunks of one section there is nothing but blank lines)."""

    def __init__(self, rows: Sequence[ChunkRow]):
        rows = sorted(rows, key=lambda r: (r.start_line, r.id))
        self.sections: list[Section] = []
        for r in rows:
            path = r.heading.split(" > ") if r.heading else []
            if self.sections and self.sections[-1].path == path:
                self.sections[-1].chunks.append(r)
            else:
                self.sections.append(Section(path, [r]))
        for j, s in enumerate(self.sections):  # the nearest section above whose path leads to this one
            s.parent = next((k for k in range(j - 1, -1, -1)
                             if len(self.sections[k].path) < len(s.path)
                             and s.path[:len(self.sections[k].path)] == self.sections[k].path), None)
        self.lines: dict[int, str] = {}
        self.section_of: dict[int, int] = {}
        for j, s in enumerate(self.sections):
            for ln in range(s.first, s.last + 1):
                self.lines.setdefault(ln, "")
                self.section_of.setdefault(ln, j)
            for c in s.chunks:
                self._put(c)
        self.cost = {ln: count_tokens(t) + 1 for ln, t in self.lines.items()}

    def _put(self, c: ChunkRow) -> None:
        parts = c.text.split("\n")
        if len(parts) != c.end_line - c.start_line + 1:
            # a piece of a line too long for the model (the chunker cut it): the pieces claim
            # the same lines; their text is joined
            parts = [c.text.replace("\n", " ")] + [""] * (c.end_line - c.start_line)
        for ln, text in zip(range(c.start_line, c.end_line + 1), parts):
            have = self.lines.get(ln, "")
            if not have or have in text:
                self.lines[ln] = text
            elif text not in have:
                self.lines[ln] = f"{have} {text}"

    def locate(self, chunk_id: int, start: int) -> tuple[int, int] | None:
        """(section index, chunk index in it) of a hit's chunk, else of the chunk at its line."""
        for j, s in enumerate(self.sections):
            for i, c in enumerate(s.chunks):
                if c.id == chunk_id:
                    return j, i
        for j, s in enumerate(self.sections):
            for i, c in enumerate(s.chunks):
                if c.start_line <= start <= c.end_line:
                    return j, i
        return None

    def intro(self, j: int) -> list[int]:
        """Section ``j``'s start: its heading and the rest of its first chunk (of the first
        chunk with text, when the chunker left the heading alone in one)."""
        s = self.sections[j]
        end = next((c.end_line for c in s.chunks if self.says(range(c.start_line, c.end_line + 1))),
                   s.chunks[0].end_line)
        return list(range(s.first, end + 1))

    def steps(self, j: int, i: int) -> list[list[int]]:
        """The context of chunk ``i`` of section ``j``, step by step, each step's lines nearest
        first: itself; the chunk above; the chunk below; the section's start; the parent's
        intro; the rest of the section, outwards; the first chunk of each subsection; the
        sections beside it (nearest first); the grandparent's intro."""
        s = self.sections[j]
        c = s.chunks[i]
        out = [list(range(c.start_line, c.end_line + 1))]

        def up(k: int) -> list[int]:  # chunk k of the section, read upwards to the one below it
            stop = s.chunks[k + 1].start_line - 1
            return list(range(stop, s.chunks[k].start_line - 1, -1))

        def down(k: int) -> list[int]:  # chunk k, from where the one above it ended
            return list(range(s.chunks[k - 1].end_line + 1, s.chunks[k].end_line + 1))

        above, below = list(range(i - 1, -1, -1)), list(range(i + 1, len(s.chunks)))
        if above:
            out.append(up(above.pop(0)))
        if below:
            out.append(down(below.pop(0)))
        if i > 0:
            out.append(self.intro(j))
        if s.parent is not None:
            out.append(self.intro(s.parent))
        while above or below:
            if above:
                out.append(up(above.pop(0)))
            if below:
                out.append(down(below.pop(0)))
        out += [self.intro(k) for k, t in enumerate(self.sections) if t.parent == j]
        kin = [k for k, t in enumerate(self.sections) if k != j and t.parent == s.parent]
        out += [self.intro(k) for k in sorted(kin, key=lambda k: (abs(k - j), k > j))]
        if s.parent is not None and self.sections[s.parent].parent is not None:
            out.append(self.intro(self.sections[s.parent].parent))  # type: ignore[arg-type]
        return out

    def says(self, lines: Sequence[int]) -> bool:
        """Whether ``lines`` hold any text besides headings and blank lines."""
        return any(t.strip() and not HEADING_RE.match(t) for t in (self.lines.get(x, "") for x in lines))

    def blocks(self, chosen: set[int]) -> list[tuple[int, int]]:
        """(first, last) line of each run of ``chosen`` lines. Steps run on through the blank
        lines between a section's chunks, so the lines of one passage and its neighbours touch;
        a line nobody paid for is never sent."""
        out: list[tuple[int, int]] = []
        for ln in sorted(chosen):
            if out and ln == out[-1][1] + 1:
                out[-1] = (out[-1][0], ln)
            else:
                out.append((ln, ln))
        blank = {ln for ln in chosen if not self.lines.get(ln, "").strip()}
        trimmed = []
        for first, last in out:  # blank lines at a block's edges are left out
            while first < last and first in blank:
                first += 1
            while last > first and last in blank:
                last -= 1
            if first not in blank:
                trimmed.append((first, last))
        return trimmed


# --- gathering ----------------------------------------------------------------------------
def with_context(result: SearchResult, targets: Sequence[tuple[Vault, Searchable]],
                 request: SearchRequest) -> SearchResult:
    """``result`` with the context its request asks for (none when ``request.context`` is 0)."""
    if request.context:
        result.context = gather(targets, result, request.context)
    return result


def gather(targets: Sequence[tuple[Vault, Searchable]], hits: Sequence[Hit], budget: int,
           step_per_rank: float = STEP_PER_RANK, max_steps: int | None = None,
           order: str = ORDER) -> Context:
    """The context of ``hits`` (the answer, in the order shown) within ``budget`` tokens in all,
    read from each hit's store as its reader sees it (see the module docstring). ``max_steps``
    keeps only the first steps of each hit (1: the hits' own lines, the measure's baseline);
    ``order``: the hits' ranks, ``shown`` (the answer's order: a note's passages together) or
    ``score`` (their fused scores)."""
    ctx = Context(budget)
    stores = {v.name: (v, s) for v, s in targets}
    notes: dict[tuple[str, str], tuple[Layout, int, NoteContext]] = {}
    ranked = range(len(hits)) if order == "shown" else sorted(range(len(hits)), key=lambda n: -hits[n].score)
    heap: list[tuple[float, int, int, list[int], tuple[str, str]]] = []
    for rank, n in enumerate(ranked):
        h = hits[n]
        key = (h.vault, h.path)
        if key not in notes:
            got = _note(stores.get(h.vault), h)
            if got is None:
                continue
            notes[key] = got
        layout = notes[key][0]
        where = layout.locate(h.chunk_id, h.start_line)
        if where is None:
            continue
        for step, lines in enumerate(layout.steps(*where)[:max_steps]):
            heapq.heappush(heap, (rank * step_per_rank + step, rank, step, lines, key))
    chosen: dict[tuple[str, str], set[int]] = {k: set() for k in notes}
    left = budget
    while heap and left > 0:
        _, _, _, lines, key = heapq.heappop(heap)
        layout, mine = notes[key][0], chosen[key]
        taken: list[int] = []
        for ln in lines:
            if ln in mine:
                continue
            cost = layout.cost.get(ln)
            if cost is None or cost > left:
                break  # nearest lines first: what lies past one that does not fit is not taken
            mine.add(ln)
            taken.append(ln)
            left -= cost
        if taken and any(x not in mine for x in lines) and not layout.says(taken):
            mine.difference_update(taken)  # cut short before any text: a lone heading is no context
            left += sum(layout.cost[x] for x in taken)
    for h in hits:  # notes in the order shown
        key = (h.vault, h.path)
        if key not in notes or notes[key][2].blocks or not chosen[key]:
            continue
        layout, _, note = notes[key]
        for first, last in layout.blocks(chosen[key]):
            j = layout.section_of.get(first)
            text = "\n".join(layout.lines.get(x, "") for x in range(first, last + 1))
            note.blocks.append(Block(first, last, list(layout.sections[j].path) if j is not None else [], text,
                                     sum(layout.cost.get(x, 0) for x in range(first, last + 1)),
                                     [x.citation for x in hits if (x.vault, x.path) == key
                                      and x.start_line <= last and first <= x.end_line]))
        ctx.notes.append(note)
    ctx.used = sum(b.tokens for n in ctx.notes for b in n.blocks)
    return ctx


def _note(target: tuple[Vault, Searchable] | None, hit: Hit) -> tuple[Layout, int, NoteContext] | None:
    """The layout of ``hit``'s note from its store (None when the reader may no longer see it
    or it is gone)."""
    if target is None:
        return None
    vault, store = target
    row = store.catalog.chunks([hit.chunk_id]).get(hit.chunk_id)
    if row is None:
        return None
    ids = sorted(store.ledger.chunk_ids_of([row.file_id]))
    rows = [r for r in store.catalog.chunks(ids).values() if not r.dead and r.file_id == row.file_id]
    if not rows:
        return None
    return Layout(rows), row.file_id, NoteContext(hit.vault, hit.path, hit.title,
                                                  changed=_changed(vault, store, row.file_id))


def _changed(vault: Vault, store: Searchable, file_id: int) -> bool:
    """Whether the note's file differs (size, modification time) from what was indexed (no:
    where the vault's folder is not on this machine, the ledger is all there is to read)."""
    if not vault.is_folder or not vault.path.is_dir():
        return False
    row = store.ledger.file_rows([file_id]).get(file_id)
    if row is None:
        return True
    try:
        st = os.stat(vault.path / row.path)
    except OSError:
        return True
    return (st.st_size, st.st_mtime_ns) != (row.size, row.mtime_ns)
