"""Split a note into chunks along its heading hierarchy.

Each chunk keeps its heading path and its 1-based, inclusive line range in the original file.
Size is counted in the embedder's own tokens, and the embedded text (contextual header + chunk)
never exceeds what the model reads. A long section is split between blocks (paragraphs, list
items, tables, code fences) with block-level overlap; a block larger than the budget is split
by lines, and a line larger than the budget by tokens, in time linear in its length.

Pasted binary is not text: base64 payloads (``data:…;base64,…`` URIs and long base64 runs) are
replaced by a placeholder, and any other ASCII "word" over LONG_WORD characters is shortened,
in the chunk text only; line numbers still point at the file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from hybrid.sources.markdown import (
    FENCE_RE,
    HEADING_RE,
    Note,
    carried_heads,
    context_header,
    context_words,
    heading_text,
)

LIST_ITEM_RE = re.compile(r"^\s{0,3}(?:[-*+]|\d{1,9}[.)])\s")
TABLE_RE = re.compile(r"^\s*\|")

TokenCounter = Callable[[Sequence[str]], list[int]]

BLOB_MIN = 200     # a run of base64 characters this long (no spaces) is data, not words
LONG_WORD = 1000   # longer runs of ASCII without spaces are cut to LONG_WORD_KEPT characters + "…"
LONG_WORD_KEPT = 200
BLOB_PLACEHOLDER = "[base64]"
# A data URI's payload, or a bare base64 run. The look-behind makes each run start once, so the
# scan stays linear on a multi-megabyte line.
BLOB_RE = re.compile(r"(?<=;base64,)[A-Za-z0-9+/=%]+"
                     r"|(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{" + str(BLOB_MIN) + ",}=*")
# ASCII only: Chinese, Japanese or Thai prose has no spaces and is text, however long.
LONG_WORD_RE = re.compile(r"(?<![!-~])[!-~]{" + str(LONG_WORD) + ",}")


def _unblob(match: re.Match[str]) -> str:
    """A data-URI payload always goes; a bare run only when it looks like base64 (upper and
    lower case and digits), not a long path or identifier."""
    run = match.group(0)
    if match.start() >= 8 and match.string[match.start() - 8:match.start()] == ";base64,":
        return BLOB_PLACEHOLDER
    if re.search(r"[A-Z]", run) and re.search(r"[a-z]", run) and re.search(r"[0-9]", run):
        return BLOB_PLACEHOLDER
    return run


def clean_line(line: str) -> str:
    """The line as text to index: base64 blobs replaced, absurdly long words shortened."""
    if len(line) < BLOB_MIN:
        return line
    line = BLOB_RE.sub(_unblob, line)
    if len(line) >= LONG_WORD:
        line = LONG_WORD_RE.sub(lambda m: m.group(0)[:LONG_WORD_KEPT] + "…", line)
    return line


def _indexable(note: Note) -> Note:
    """The note with every line cleaned (same number of lines, so ranges still cite the file)."""
    lines = [clean_line(x) for x in note.lines]
    return note if lines == note.lines else replace(note, lines=lines)


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
    stack = carried_heads(note.properties)  # a page of a series starts under the page before's
    cur = _Section([t for _, t in stack], note.body_start - 1, note.body_start - 1, [])
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
            stack.append((level, heading_text(heading.group(2)) or "#" * level))
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
MIN_SEGMENT = 64    # characters: segments shorter than this could not find a space to cut at


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
        return context_header(note.title, note.aliases, path, context_words(note.properties)) \
            if self.context_header else ""

    def chunk(self, note: Note) -> list[Chunk]:
        note = _indexable(note)
        sections = [s for s in _sections(note) if self._has_content(note, s)]
        if not sections:
            return []
        blocks = [b for s in sections for b in s.blocks]
        counts = self.count(["\n".join(note.lines[b.start:b.end]) for b in blocks])
        for b, n in zip(blocks, counts):
            b.tokens = n
        headers = [self.header(note, s.path) for s in sections]
        header_tokens = self.count(headers) if self.context_header else [0] * len(headers)
        for i, n in enumerate(header_tokens):
            if n > self.hard_max // 2:  # a header that would crowd out the text is left out
                headers[i], header_tokens[i] = "", 0
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
            # a heading goes with the text after it, even over the budget (_enforce_limit
            # still holds the model's limit): alone it would be a bare heading as a whole hit
            if cur and total + p.tokens > budget and not self._only_headings(note, cur):
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

    @staticmethod
    def _only_headings(note: Note, blocks: list[_Block]) -> bool:
        return all(b.end - b.start == 1 and HEADING_RE.match(note.lines[b.start]) for b in blocks)

    def _split_block(self, note: Note, block: _Block, budget: int) -> list[_Block]:
        """A block over budget: split by lines (a code fence or table too, as a last resort).
        A single line is left whole for _enforce_limit to cut (counting it again costs time)."""
        if block.end - block.start == 1:
            return [block]
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
        Over-long texts (a single huge line) are cut by _split_text, in time linear in their
        length (the binary search it replaced took 60 s on one 200 KB line).

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
            out.extend(self._split_text(c, exact[i]))
        return out

    def _split_text(self, c: Chunk, tokens: int) -> list[Chunk]:
        """Cut an over-long chunk into pieces that fit with its header, at whitespace where
        possible. Each piece keeps the lines it came from."""
        header = c.embed_text[: len(c.embed_text) - len(c.text)]
        htok = self.count([header])[0] if header else 0
        budget = max(1, self.hard_max - htok)
        spans = self._fit(c.text, header, budget, tokens - htok)
        exact_lines = c.text.count("\n") == c.end_line - c.start_line  # nothing stripped
        pieces: list[Chunk] = []
        line, pos = c.start_line, 0
        for a, b in spans:
            if exact_lines:
                line += c.text.count("\n", pos, a)
                first, last, pos = line, line + c.text.count("\n", a, b), a
            else:
                first, last = c.start_line, c.end_line
            piece = c.text[a:b]
            pieces.append(Chunk(c.heading_path, first, last, piece, header + piece))
        return pieces

    def _fit(self, text: str, header: str, budget: int, tokens: int) -> list[tuple[int, int]]:
        """Spans of ``text`` (whitespace trimmed) of at most ``budget`` tokens that each fit the
        model with ``header``. Linear: the text is counted in small segments (_segments), the
        segments are packed greedily by their counts, and each pack is counted once more to
        check; a pack that does not fit (a tokenizer whose counts do not add up across the cut)
        falls back to its segments, and a segment that still does not fit is halved."""
        max_chars = 32 * self.hard_max
        segs = self._segments(text, tokens, budget, max_chars)
        packs: list[list[tuple[int, int, int]]] = []
        total = 0
        for seg in segs:
            if packs and total + seg[2] <= budget and seg[1] - packs[-1][0][0] <= max_chars:
                packs[-1].append(seg)
                total += seg[2]
            else:
                packs.append([seg])
                total = seg[2]
        spans = [_trim(text, p[0][0], p[-1][1]) for p in packs]
        counts = self.count([header + text[a:b] for a, b in spans])
        out: list[tuple[int, int]] = []
        for pack, span, n in zip(packs, spans, counts):
            if n <= self.hard_max or len(pack) == 1 and span[1] - span[0] <= 1:
                out.append(span)
            elif len(pack) > 1:
                out.extend(self._fit_each(text, header, [(a, b) for a, b, _ in pack]))
            else:
                out.extend(self._fit_each(text, header, _halves(text, *span)))
        return [sp for sp in out if sp[1] > sp[0]]

    def _fit_each(self, text: str, header: str,
                  spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Check spans one by one with the header; halve those that do not fit (rare: only for
        tokenizers whose counts are not additive). Work is bounded by the spans' total length
        times the halving depth, and the spans are a single pack."""
        out: list[tuple[int, int]] = []
        todo = [_trim(text, a, b) for a, b in reversed(spans)]
        while todo:
            a, b = todo.pop()
            if b <= a:
                continue
            if b - a <= 1 or self.count([header + text[a:b]])[0] <= self.hard_max:
                out.append((a, b))
            else:
                todo.extend(reversed(_halves(text, a, b)))
        return out

    def _segments(self, text: str, tokens: int, budget: int,
                  max_chars: int) -> list[tuple[int, int, int]]:
        """Consecutive (start, end, tokens) segments covering ``text`` (``tokens`` in all), each
        at most ``budget`` tokens and ``max_chars`` characters. A range over either limit is cut
        into pieces averaging a quarter of the budget (so greedy packing fills chunks well), all
        counted in one call; only pieces still over are cut again. Each character is counted
        about once more, not once per step of a binary search."""
        out: list[tuple[int, int, int]] = []
        todo = [(0, len(text), tokens)]  # a stack, in reverse text order
        while todo:
            a, b, n = todo.pop()
            if (n <= budget and b - a <= max_chars) or b - a <= 1:
                out.append((a, b, n))
                continue
            k = max(math.ceil(4 * n / budget), math.ceil(2 * (b - a) / max_chars))
            k = max(2, min(k, (b - a) // MIN_SEGMENT))  # counts that do not add up overshoot k
            cuts = _cuts(text, a, b, min(k, b - a))
            counts = self.count([text[x:y] for x, y in cuts])
            todo.extend(reversed([(x, y, m) for (x, y), m in zip(cuts, counts)]))
        return out


_PUNCT_TAIL = re.compile(r".*[^\w\s]", re.S)


def _cuts(text: str, a: int, b: int, k: int) -> list[tuple[int, int]]:
    """``text[a:b]`` in ``k`` consecutive spans of about equal length. Each cut moves back (by
    at most half a span) to whitespace, else to punctuation, so words stay whole and the
    pieces' token counts add up; with neither nearby it cuts mid-word."""
    width = (b - a) / k
    bounds = [a]
    for i in range(1, k):
        ideal = a + round(i * width)
        floor = max(bounds[-1] + 1, ideal - int(width / 2))
        if ideal <= floor:
            cut = max(ideal, bounds[-1] + 1)
        else:
            space = max(text.rfind(" ", floor, ideal), text.rfind("\n", floor, ideal))
            if space > floor:
                cut = space
            else:
                m = _PUNCT_TAIL.match(text, floor, ideal)
                cut = m.end() - 1 if m and m.end() - 1 > floor else ideal
        if cut < b:
            bounds.append(cut)
    bounds.append(b)
    return [(x, y) for x, y in zip(bounds, bounds[1:]) if y > x]


def _halves(text: str, a: int, b: int) -> list[tuple[int, int]]:
    return _cuts(text, a, b, 2) if b - a > 1 else [(a, b)]


def _trim(text: str, a: int, b: int) -> tuple[int, int]:
    """The span without leading and trailing whitespace."""
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b
