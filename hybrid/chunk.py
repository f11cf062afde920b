"""Split a note into chunks along its heading hierarchy.

Each chunk keeps its heading path and its 1-based, inclusive line range in the original file.
Size is counted in the embedder's own tokens, and the embedded text (contextual header + chunk)
never exceeds what the model reads. A long section is split between blocks (paragraphs, list
items, tables, code fences) with block-level overlap; a block larger than the budget is split
by lines, and a line larger than the budget by tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

from .notes import FENCE_RE, Note

HEADING_RE = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
LIST_ITEM_RE = re.compile(r"^\s{0,3}(?:[-*+]|\d{1,9}[.)])\s")
TABLE_RE = re.compile(r"^\s*\|")

TokenCounter = Callable[[Sequence[str]], list[int]]


@dataclass
class Chunk:
    heading_path: list[str]
    start_line: int
    end_line: int
    text: str
    embed_text: str

    @property
    def heading(self) -> str:
        return " > ".join(self.heading_path)


@dataclass
class _Block:
    start: int        # 0-based index into note.lines
    end: int          # exclusive
    tokens: int = 0


@dataclass
class _Section:
    path: list[str]
    start: int
    end: int
    blocks: list[_Block]


def _sections(note: Note) -> list[_Section]:
    lines = note.lines
    sections: list[_Section] = []
    stack: list[tuple[int, str]] = []
    cur = _Section([], note.body_start - 1, note.body_start - 1, [])
    in_fence: str | None = None
    block_start: int | None = None

    def close_block(i: int) -> None:
        nonlocal block_start
        if block_start is not None:
            cur.blocks.append(_Block(block_start, i))
            block_start = None

    for i in range(note.body_start - 1, len(lines)):
        line = lines[i]
        fence = FENCE_RE.match(line)
        if in_fence is not None:
            if fence and fence.group(1)[0] == in_fence[0] and len(fence.group(1)) >= len(in_fence) \
                    and not line.strip()[len(fence.group(1)):].strip():
                in_fence = None
                close_block(i + 1)
            continue
        if fence:
            close_block(i)
            in_fence = fence.group(1)
            block_start = i
            continue
        heading = HEADING_RE.match(line)
        if heading:
            close_block(i)
            cur.end = i
            sections.append(cur)
            level = len(heading.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, heading.group(2).strip() or "#" * level))
            cur = _Section([t for _, t in stack], i, i, [_Block(i, i + 1)])
            continue
        if not line.strip():
            close_block(i)
            continue
        if block_start is not None:
            prev = lines[i - 1]
            starts_item = LIST_ITEM_RE.match(line) is not None
            table_edge = bool(TABLE_RE.match(line)) != bool(TABLE_RE.match(prev))
            if starts_item or table_edge:
                close_block(i)
        if block_start is None:
            block_start = i
    close_block(len(lines))
    cur.end = len(lines)
    sections.append(cur)
    return sections


SAFETY_MARGIN = 16  # tokens of slack before an estimate is re-counted exactly


class Chunker:
    """Chunks notes for one embedder (its token counter and input limit)."""

    def __init__(self, count_tokens: TokenCounter, model_max_tokens: int, chunk_tokens: int = 200,
                 overlap: int = 32, context_header: bool = True):
        self.count = count_tokens
        self.hard_max = model_max_tokens
        self.target = max(16, min(chunk_tokens, model_max_tokens))
        self.overlap = max(0, min(overlap, self.target // 2))
        self.context_header = context_header

    def header(self, note: Note, path: list[str]) -> str:
        if not self.context_header:
            return ""
        parts = [note.title] + [p for i, p in enumerate(path) if not (i == 0 and p == note.title)]
        return " > ".join(parts) + "\n"

    def chunk(self, note: Note) -> list[Chunk]:
        sections = [s for s in _sections(note) if self._has_content(note, s)]
        if not sections:
            return []
        blocks = [b for s in sections for b in s.blocks]
        counts = self.count(["\n".join(note.lines[b.start:b.end]) for b in blocks])
        for b, n in zip(blocks, counts):
            b.tokens = n
        headers = [self.header(note, s.path) for s in sections]
        header_tokens = self.count(headers) if self.context_header else [0] * len(headers)
        chunks: list[Chunk] = []
        estimates: list[int] = []
        for section, header, htok in zip(sections, headers, header_tokens):
            budget = max(8, min(self.target, self.hard_max) - htok)
            for start, end, tokens in self._pack(note, section.blocks, budget):
                text = "\n".join(note.lines[start:end]).strip("\n")
                chunks.append(Chunk(list(section.path), start + 1, end, text, header + text))
                estimates.append(htok + tokens)
        return self._enforce_limit(chunks, estimates)

    @staticmethod
    def _has_content(note: Note, s: _Section) -> bool:
        body = [b for b in s.blocks if not (b.end - b.start == 1 and HEADING_RE.match(note.lines[b.start]))]
        return any("".join(note.lines[b.start:b.end]).strip() for b in body)

    def _pack(self, note: Note, blocks: list[_Block], budget: int) -> list[tuple[int, int, int]]:
        """Greedy packing of blocks into (start, end, tokens) ranges of at most ``budget``
        tokens, with overlap."""
        pieces: list[_Block] = []
        for b in blocks:
            pieces.extend(self._split_block(note, b, budget) if b.tokens > budget else [b])
        out: list[tuple[int, int, int]] = []
        cur: list[_Block] = []
        total = 0
        for p in pieces:
            if cur and total + p.tokens > budget:
                out.append((cur[0].start, cur[-1].end, total))
                carry: list[_Block] = []
                carried = 0
                for q in reversed(cur):
                    if carried + q.tokens > self.overlap or carried + q.tokens + p.tokens > budget:
                        break
                    carry.insert(0, q)
                    carried += q.tokens
                cur, total = carry, carried
            cur.append(p)
            total += p.tokens
        if cur:
            out.append((cur[0].start, cur[-1].end, total))
        return out

    def _split_block(self, note: Note, block: _Block, budget: int) -> list[_Block]:
        """A block over budget: split by lines (a code fence or table too, as a last resort)."""
        idx = list(range(block.start, block.end))
        counts = self.count([note.lines[i] for i in idx])
        out: list[_Block] = []
        cur: _Block | None = None
        for i, n in zip(idx, counts):
            if cur is not None and cur.tokens + n > budget:
                out.append(cur)
                cur = None
            if cur is None:
                cur = _Block(i, i + 1, n)
            else:
                cur.end, cur.tokens = i + 1, cur.tokens + n
        if cur is not None:
            out.append(cur)
        return out

    def _enforce_limit(self, chunks: list[Chunk], estimates: list[int]) -> list[Chunk]:
        """Guarantee: no embedded text exceeds the model's limit, counted by its own tokenizer.
        Over-long texts (a single huge line) are cut by characters until they fit.

        A chunk's estimate (header + the sum of its blocks' counts) is exact for word-level
        tokenizers, whose pieces never span the line breaks between blocks; only chunks whose
        estimate comes near the limit are counted again, which halves the chunker's cost."""
        near = [i for i, e in enumerate(estimates) if e > self.hard_max - SAFETY_MARGIN]
        exact = dict(zip(near, self.count([chunks[i].embed_text for i in near])))
        out = []
        for i, c in enumerate(chunks):
            if exact.get(i, 0) <= self.hard_max:
                out.append(c)
                continue
            out.extend(self._split_text(c))
        return out

    def _split_text(self, c: Chunk) -> list[Chunk]:
        header = c.embed_text[: len(c.embed_text) - len(c.text)]
        pieces: list[Chunk] = []
        rest = c.text
        while rest:
            lo, hi = 1, len(rest)
            # Largest prefix that fits (binary search over characters, cut at whitespace).
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if self.count([header + rest[:mid]])[0] <= self.hard_max:
                    lo = mid
                else:
                    hi = mid - 1
            cut = lo
            if cut < len(rest):
                space = rest.rfind(" ", 0, cut)
                if space > cut // 2:
                    cut = space
            piece, rest = rest[:cut], rest[cut:].lstrip()
            pieces.append(Chunk(c.heading_path, c.start_line, c.end_line, piece, header + piece))
        return pieces
