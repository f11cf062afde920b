"""What a passage looks like to a reader, whichever door shows it: its markdown rendered as
readable text (:func:`readable`), and the words of it that answer the query (:class:`Marker`),
whole words matched as written or by their stem, never a function word. The doors only style
them: the CLI in colour (:func:`mark_spans`), the search page with ``<mark>`` (the same rule in
``faces/ui/static/app.js``), MCP as plain text."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence

from hybrid.core.tokens import CJK_RE, HIRAGANA_RE, SPACED_WORD, STOPWORDS, bigrams

FENCE_RE = re.compile(r"^[ \t]{0,3}(```|~~~)")
HEADING_RE = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+")
QUOTE_RE = re.compile(r"^[ \t]{0,3}(?:>[ \t]?)+(?:\[![\w-]+\][+-]?[ \t]*)?")  # quote, Obsidian callout
TABLE_RULE_RE = re.compile(r"^\s*\|?[\s:|-]*-{3,}[\s:|-]*\|?\s*$")
CODE_SPAN_RE = re.compile(r"(`+)(.+?)\1")
# an HTML tag (Obsidian renders a note's inline HTML: a reader sees what is between tags) or comment
HTML_TAG_RE = re.compile(r"<!--.*?-->|</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")
HTML_BREAK_RE = re.compile(r"<br\s*/?>", re.I)
CELL_SPLIT_RE = re.compile(r"(?<!\\)\|")  # a table row's cell border (not an escaped \|)
LIST_MARK_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
WIKILINK_RE = re.compile(r"!?\[\[([^\[\]|]*)(?:\|([^\[\]]*))?\]\]")
MDLINK_RE = re.compile(r"!?\[([^\[\]]*)\]\((?:[^()\s]|\([^()\s]*\))*(?:\s+\"[^\"]*\")?\)")
EMPHASIS_RES = (
    re.compile(r"(\*\*|~~|==)(?=\S)(.+?)(?<=\S)\1"),
    re.compile(r"(?<!\w)(__)(?=\S)(.+?)(?<=\S)__(?!\w)"),
    re.compile(r"(?<![\w*])(\*)(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?![\w*])"),
    re.compile(r"(?<![\w_])(_)(?=[^\s_])([^_\n]+?)(?<=[^\s_])_(?![\w_])"),
)
# a word of a passage or a query: identifiers whole (orders-created, 10.0.0.0/24), and their parts
TOKEN_RE = re.compile(r"\w[\w\-./]*\w|\w")
PART_RE = re.compile(r"\w+")


def readable(text: str) -> str:
    """``text`` (markdown) as a reader sees it rendered: no code-fence lines (the code stays),
    heading hashes, quote and callout markers, table rules, emphasis markers (``**``, ``__``,
    ``*``, ``_``, ``~~``, ``==``), backticks or HTML tags and comments (``<br>`` is a space);
    ``[[note|alias]]`` shows ``alias``, ``[[note#part]]`` shows ``note › part``, ``[text](url)``
    shows ``text``; a table row shows its cells, the empty ones left out, between `` · ``; a
    line that repeats the heading right above it (a canvas card's first line, which is also its
    heading) is shown once. Code keeps its characters (``__init__`` in backticks or in a fence
    stays as it is, and so does ``<div>`` there)."""
    out: list[str] = []
    fence = heading = ""
    for line in text.split("\n"):
        m = FENCE_RE.match(line)
        if fence:
            if m and m.group(1) == fence:
                fence = ""
            else:
                out.append(line)
            continue
        if m:
            fence = m.group(1)
            continue
        if TABLE_RULE_RE.match(line) and "-" in line:
            continue
        titled = HEADING_RE.match(line)
        line = QUOTE_RE.sub("", HEADING_RE.sub("", line), count=1)
        if line.lstrip().startswith("|"):
            cells = [_inline(c).strip() for c in CELL_SPLIT_RE.split(line.strip().strip("|"))]
            shown = " · ".join(c for c in cells if c)
        else:
            shown = _inline(line)
        if heading and not titled and LIST_MARK_RE.sub("", shown).strip() == heading:
            heading = ""
            continue
        heading = shown.strip() if titled else ""  # only the line right below a heading repeats it
        out.append(shown)
    return "\n".join(out)


def _inline(line: str) -> str:
    """One line's inline markdown rendered; code spans lose their backticks and nothing else. A
    wikilink whose target holds a code span (``[[networking#`pi-parents` via DERP]]``) is a link:
    Obsidian reads the link first; a wikilink inside a code span stays code."""
    if "[[" in line and "`" in line:
        codes = [(m.start(), m.end()) for m in CODE_SPAN_RE.finditer(line)]
        line = WIKILINK_RE.sub(lambda m: m.group(0) if any(a <= m.start() < b for a, b in codes)
                               else _wikilink(m).replace("`", ""), line)
    parts, last = [], 0
    for m in CODE_SPAN_RE.finditer(line):
        parts += [_prose(line[last:m.start()]), m.group(2).strip()]
        last = m.end()
    return "".join(parts) + _prose(line[last:])


def _prose(text: str) -> str:
    if "<" in text:
        text = HTML_TAG_RE.sub("", HTML_BREAK_RE.sub(" ", text))
    text = WIKILINK_RE.sub(_wikilink, text)
    text = MDLINK_RE.sub(lambda m: m.group(1), text)
    for pattern in EMPHASIS_RES:
        text = pattern.sub(lambda m: m.group(2), text)
    return text


def _wikilink(m: re.Match) -> str:
    if m.group(2) is not None and m.group(2).strip():
        return m.group(2).strip()
    target = m.group(1).strip()
    note, _, part = target.partition("#")
    part = part.lstrip("^")
    return f"{note} › {part}" if note and part else note or part


# --- which words to mark ---------------------------------------------------------------------
class Marker:
    """``Marker(query, stem)(text)``: the distinct words of ``text`` (lower case, sorted) that
    are words of ``query``: the same word, or one with the same stem (``tomatoes`` for
    ``tomato``); an identifier of the query (``orders-created``) as a whole, its parts as
    words. Whole words only (``in`` never marks ``Internal``), never a function word or a
    single character. ``stem``: the lexical arm's analyzer (text -> stems); each word of the
    passages is stemmed once per search however many hits hold it.

    Text without spaces between words (Chinese, Japanese) is matched as the lexical arm reads
    it, by character bigrams: each longest stretch of the passage covered by bigrams of the
    query is marked (``保管庫`` in ``保管庫を`` for a query ``保管庫はどこ``), unless it is all
    Hiragana (particles and endings: ``いる``, ``ここ``, CJK's function words)."""

    def __init__(self, query: str, stem: Callable[[str], Sequence[str]]):
        self.stem = functools.lru_cache(maxsize=None)(stem)
        low = query.lower()
        self.bigrams = frozenset(b for run in CJK_RE.findall(low) for b in bigrams(run) if len(b) == 2)
        written: set[str] = set()
        for token in TOKEN_RE.findall(CJK_RE.sub(" ", low)):
            parts = [p for p in PART_RE.findall(token) if not p.isdigit()] if token != token.strip(".-/") \
                or not token.isalnum() else []  # 10.0.0.0/24 marks itself, not every "10"
            written.update(w for w in (token, *parts) if _content(w))
        self.written = frozenset(written)
        self.stems = frozenset(s for w in written if w.isalnum() for s in self.stem(w) if _content(s))
        self.compounds = tuple(w for w in written if not w.isalnum())
        # stems keep a word's first two letters, so only words starting like one are looked at
        # (written words and stems are content words: two letters or more)
        starts = {w[:2] for w in (*written, *self.stems) if w.isalnum()}
        self.starts = tuple(sorted(starts))
        self.candidates = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, self.starts)) + r")\w*") \
            if starts else None

    def __call__(self, text: str) -> list[str]:
        return self.marks(text.lower())

    def marks(self, low: str, words: dict[str, set[str]] | None = None) -> list[str]:
        """What ``self(text)`` gives, from ``text.lower()`` (kept by a caller that has it) and
        optionally its words by their starts (:func:`words_by_start` of it, likewise kept: the
        words to look at are then looked up rather than scanned for)."""
        if not (self.written or self.bigrams):
            return []
        out = {c for c in self.compounds if c in low and _mark_re((c,)).search(low)}  # type: ignore[union-attr]
        if self.bigrams:
            out.update(self._cjk(low))
            low = CJK_RE.sub(" ", low)  # the words of spaced scripts around them
        if self.candidates is not None:
            if words is None or self.bigrams:
                found = set(self.candidates.findall(low))
            else:
                found = set().union(*(words.get(s, ()) for s in self.starts))
            for w in found:
                if w in self.written or (w.isalnum() and _content(w) and self._stem(w) in self.stems):
                    out.add(w)
        return sorted(out)

    def _cjk(self, low: str) -> set[str]:
        """The longest stretches of ``low``'s CJK runs covered by the query's bigrams."""
        out = set()
        for run in CJK_RE.findall(low):
            covered = [False] * len(run)
            for i in range(len(run) - 1):
                if run[i:i + 2] in self.bigrams:
                    covered[i] = covered[i + 1] = True
            start = None
            for i, c in enumerate([*covered, False]):
                if c and start is None:
                    start = i
                elif not c and start is not None:
                    part, start = run[start:i], None
                    if not HIRAGANA_RE.fullmatch(part):
                        out.add(part)
        return out

    def _stem(self, word: str) -> str | None:
        out = self.stem(word)
        return out[0] if len(out) == 1 else None


def words_by_start(low: str) -> dict[str, set[str]]:
    """The distinct words (runs of word characters) of ``low`` of two characters or more, by
    their first two: the words :class:`Marker`'s pattern of starts (a query word's first two
    letters; it marks no shorter word) would find in it."""
    out: dict[str, set[str]] = {}
    for w in set(PART_RE.findall(low)):
        if len(w) > 1:
            out.setdefault(w[:2], set()).add(w)
    return out


def _content(word: str) -> bool:
    return len(word) >= 2 and word not in STOPWORDS


@functools.lru_cache(maxsize=64)
def _mark_re(words: tuple[str, ...]) -> re.Pattern | None:
    if not words:
        return None
    alternatives = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    return re.compile(rf"(?<!{SPACED_WORD})(?:{alternatives})(?!{SPACED_WORD})", re.IGNORECASE)


def mark_spans(line: str, words: Iterable[str]) -> list[tuple[int, int]]:
    """(start, end) of each whole-word occurrence in ``line`` of the marked ``words`` (a hit's
    :attr:`~hybrid.retrieval.hits.Hit.marks`), the longest where several start together. A
    CJK character is no part of a spaced script's word: ``OneDrive`` is whole in ``OneDriveに``,
    and a mark of CJK characters is whole anywhere in their run."""
    pattern = _mark_re(tuple(sorted(set(words))))
    return [] if pattern is None else [m.span() for m in pattern.finditer(line)]
