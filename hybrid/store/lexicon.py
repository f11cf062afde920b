"""The lexical arm's model, the same for every backend: the query it is given, the units it
ranks (chunks and whole sections), the fields a unit is indexed under, and the stemmer both
tantivy (:mod:`hybrid.store.local.lexical`) and PostgreSQL (:mod:`hybrid.store.pg.lexical`)
read text with, so both stores rank alike."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from hybrid.core.tokens import STOPWORDS, WORD_RE, has_cjk, ident_tokens, split_cjk
from hybrid.sources import kind_of, kind_term
from hybrid.sources.markdown import CONTEXT, context_words
from hybrid.store.base import ChunkRow

# tantivy sums one saturated BM25 per field, so a word in a short title or heading already
# counts about as much as a word the body repeats: boosts above the body's made a title sharing
# two words of a long question outrank the text that answers it (issue #29: SciFact, and
# obsidian-help too, gained from these lower ones; eval/reports/quality/scifact.md)
FIELD_BOOSTS = {"title": 0.5, "headings": 0.5, "body": 1.0}
UNITS = ("chunk", "section")
OVERLAP_PROBE = 24  # characters of a chunk's start looked for in the previous chunk's end
IDENT_BOOST = 1.0
FUZZY_BOOST = 0.5  # a word one edit away counts half what the word itself counts in the body
FUZZY_MIN_LEN = 5


@dataclass
class LexicalQuery:
    terms: list[str] = field(default_factory=list)      # free words as typed
    phrases: list[str] = field(default_factory=list)    # required phrases
    excludes: list[str] = field(default_factory=list)   # words or phrases that must not occur
    # the misspelled words, also matched one edit away (with ``fuzzy``); None: the arm judges
    # by its own vocabulary (a word of 5+ letters it does not hold)
    typos: list[str] | None = None


def only_stopwords(terms: Sequence[str]) -> bool:
    """Whether ``terms`` are nothing but stopwords (``the who``): such a query keeps them."""
    return not any(w.lower() not in STOPWORDS for w in terms)


def without_stopwords(text: str) -> str:
    """``text`` with its stopwords left out; the whole of it when it is nothing else."""
    return " ".join(w for w in re.findall(r"\S+", text) if w.lower() not in STOPWORDS) or text


def typo_candidates(terms: Sequence[str]) -> list[str]:
    """The words of ``terms`` (lower case, each once) an arm may judge misspelled when the
    caller did not (``LexicalQuery.typos`` is None): 5+ characters, not a number, not CJK."""
    words = dict.fromkeys(w for t in terms for w in WORD_RE.findall(t.lower()))
    return [w for w in words if len(w) >= FUZZY_MIN_LEN and not w.isdigit() and not has_cjk(w)]


def spellable(word: str) -> bool:
    """Whether typo repair may judge ``word`` (lower case): 5+ letters of a script written with
    spaces. A CJK word is read as bigrams: one edit away from it is another word, no typo."""
    return len(word) >= FUZZY_MIN_LEN and word.isalpha() and not has_cjk(word)


class StemAnalyzer:
    """The analyzer of the title, headings and body fields: ``.analyze(text)`` gives the stems
    (also what the PostgreSQL store indexes, so both stores read text alike). Words are split at
    anything not a letter or digit, lower-cased, accents folded and stemmed as English; a run
    of CJK characters becomes its overlapping character bigrams first
    (:func:`hybrid.core.tokens.split_cjk`), so ``保管庫`` is read as ``保管 管庫``.

    tantivy runs ``tokenizer`` itself on the documents it indexes (a Python function cannot be
    a tantivy tokenizer): what is given to it must go through :meth:`prepare` first."""

    def __init__(self) -> None:
        import tantivy
        self.tokenizer = (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
                          .filter(tantivy.Filter.remove_long(40))
                          .filter(tantivy.Filter.lowercase())
                          .filter(tantivy.Filter.ascii_fold())
                          .filter(tantivy.Filter.stemmer("english")).build())
        self._stems = functools.lru_cache(maxsize=16384)(self._analyzed)

    @staticmethod
    def prepare(text: str) -> str:
        """``text`` as :attr:`tokenizer` must read it (CJK runs as spaced bigrams)."""
        return split_cjk(text)

    def analyze(self, text: str) -> list[str]:
        return self.tokenizer.analyze(split_cjk(text))

    def stems(self, text: str) -> tuple[str, ...]:
        """:meth:`analyze`'s stems as a tuple, the most recent texts' kept: a search reads the
        same passages' and words' stems again and again (its marks, its coverage, its
        confidence), a long-lived handle across searches. Indexing uses :meth:`analyze`."""
        return self._stems(text)

    def _analyzed(self, text: str) -> tuple[str, ...]:
        return tuple(self.analyze(text))


def stem_analyzer() -> StemAnalyzer:
    """The stemming analyzer both stores read text with (:class:`StemAnalyzer`)."""
    return StemAnalyzer()


@dataclass
class DocFields:
    """What the lexical arm indexes of a chunk or a section (tantivy's fields; the PostgreSQL
    store's tsvector parts, :mod:`hybrid.store.pg.lexical`)."""
    title: str       # title, file name, aliases
    headings: str    # heading path and tags
    body: str
    ident: list[str]  # identifier tokens (:func:`hybrid.core.tokens.ident_tokens`)
    folders: list[str]  # every ancestor folder of the note, and its kind's term (sources.kind_term)
    tags: list[str]     # every tag and its ancestors (``a/b`` gives ``a``, ``a/b``)


def doc_fields(c: ChunkRow, section: Sequence[ChunkRow] = ()) -> DocFields:
    """The fields of chunk ``c``, or (``section`` given: its chunks, ``c`` the first) of the
    section."""
    stem = c.path.rsplit("/", 1)[-1].removesuffix(".md")
    parts = c.path.split("/")[:-1]
    folders = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)] + [kind_term(kind_of(c.path))]
    tags: list[str] = []
    for t in c.tags:
        segs = t.split("/")
        tags.extend("/".join(segs[:i]) for i in range(1, len(segs) + 1))
    title = " ".join([c.title, stem, *c.aliases])
    body = section_text([r.text for r in section]) if section else c.text
    # an H1 that repeats the note's title is the title: not counted once more as a heading
    named = c.title.strip().lower()
    heads = [h for h in c.heading.split(" > ") if h and h.strip().lower() != named]
    if CONTEXT in c.props:  # a picture: where notes show it (hybrid.indexing.context)
        heads += context_words(c.properties)
    return DocFields(title, " ".join([*heads, *c.tags]), body,
                     ident_tokens(" ".join([body, c.heading, title, c.path])), folders, tags)


def units(batches: Iterable[list[ChunkRow]]) -> Iterator[tuple[str, list[ChunkRow]]]:
    """``("chunk", [row])`` for each chunk as they stream in, and ``("section", rows)`` for
    each run of consecutive chunks (by id) with the same note and heading path: the indexer
    stores a note's chunks under consecutive ids, in order."""
    run: list[ChunkRow] = []
    for batch in batches:
        for c in sorted(batch, key=lambda r: r.id):
            if run and (c.path, c.heading) != (run[-1].path, run[-1].heading):
                yield "section", run
                run = []
            run.append(c)
            yield "chunk", [c]
    if run:
        yield "section", run


def section_text(texts: Sequence[str]) -> str:
    """The text of consecutive chunks of one section, each chunk's start that repeats the end
    of the one before (the chunker's overlap) dropped, so BM25 counts each word once."""
    out = list(texts[:1])
    for prev, nxt in zip(texts, texts[1:]):
        out.append(nxt[overlap(prev, nxt):])
    return "\n".join(out)


def overlap(prev: str, nxt: str) -> int:
    """Length of the longest start of ``nxt`` that ``prev`` ends with (0 when shorter than
    ``OVERLAP_PROBE`` characters: a coincidence, not the chunker's overlap)."""
    probe = nxt[:OVERLAP_PROBE]
    if len(probe) < OVERLAP_PROBE:
        return 0
    i = prev.find(probe)
    while i != -1:
        if nxt.startswith(prev[i:]):
            return len(prev) - i
        i = prev.find(probe, i + 1)
    return 0
