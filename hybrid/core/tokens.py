"""Query and document tokens, as pure functions: identifier-shaped tokens, the literals a query
names verbatim, the parts an identifier is indexed under, English function words, the
character bigrams text written without spaces (Chinese, Japanese, Korean) is read as, and the
one-edit test of typo repair. The lexical index and the fusion stages build on these."""

from __future__ import annotations

import re
from collections.abc import Sequence

IDENT_RE = re.compile(r"-{0,2}\w[\w.\-/:@+=%~#?&\[\]()]*[\w/\])]|-{0,2}\w")
SPLIT_RE = re.compile(r"[=?&#\[\]()]")
BRACKETS = {")": "(", "]": "["}
WORD_RE = re.compile(r"[^\W_]+|\d+", re.U)
# Dropped from free-text queries (never from phrases, never from the index): question words and
# function words that only add noise to BM25 for natural-language questions.
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has
have having he her here hers herself him himself his how i if in into is it its itself just me
more most my myself no nor not now of off on once only or other our ours ourselves out over own
same she should so some such than that the their theirs them themselves then there these they
this those through to too under until up very was we were what when where which while who whom
why will with would you your yours yourself yourselves get got also
""".split())


# Letters of the scripts written without spaces between words: Han (with 々〆〇), Hiragana,
# Katakana (with ー, half-width forms) and Hangul. Korean puts spaces between phrases, but a
# phrase is a noun with its particle glued on (보관소를, 보관소에): read whole, the noun alone
# would never match it, so Hangul is split like the others (as Lucene's CJKAnalyzer does).
# Punctuation of those blocks (・ 、 。) is left out: it separates runs, as a space does.
CJK_CHARS = ("\u1100-\u11ff\u3005-\u3007\u3021-\u3029\u3041-\u3096\u309d-\u309f"
             "\u30a1-\u30fa\u30fc-\u30ff\u3131-\u318e\u31f0-\u31ff\u3400-\u4dbf"
             "\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7a3\ud7b0-\ud7ff\uf900-\ufaff"
             "\uff66-\uff9f\uffa0-\uffdc\U00020000-\U0003ffff")
CJK_RE = re.compile(f"[{CJK_CHARS}]+")
# a word character of a spaced script: what a whole word must not touch (a CJK character may:
# there every position is a word boundary)
SPACED_WORD = f"[^\\W{CJK_CHARS}]"
HIRAGANA_RE = re.compile("[\u3041-\u3096\u309d-\u309f]+")


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a character of a script written without spaces (:data:`CJK_CHARS`)."""
    return CJK_RE.search(text) is not None


def bigrams(run: str) -> list[str]:
    """The overlapping character bigrams of a run of CJK characters (``保管庫`` gives ``保管``,
    ``管庫``); a single character is its own unigram."""
    return [run] if len(run) < 2 else [run[i:i + 2] for i in range(len(run) - 1)]


def split_cjk(text: str) -> str:
    """``text`` with each run of CJK characters replaced by its :func:`bigrams`, spaced apart
    and from the words around them, so that any tokenizer splitting at spaces reads each
    bigram as a word, in order (a phrase of them is a phrase of bigrams). Text without CJK is
    returned as it is."""
    if text.isascii() or not has_cjk(text):  # isascii: a flag of the string, no scan
        return text
    return CJK_RE.sub(lambda m: " " + " ".join(bigrams(m.group())) + " ", text)


def identifiers(text: str) -> list[str]:
    """Identifier-shaped tokens of ``text`` as written: ``orders-created``, ``10.0.0.0/24``,
    ``--advertise-routes=10.0.0.0/24``, ``error[E0502]``, ``pg_try_advisory_lock(42001)``.
    Closing brackets without an opening one inside the token (prose like ``(see x)``) are
    dropped. CJK characters separate identifiers (``pg_dumpを使う`` holds ``pg_dump``); their
    words are the stemming analyzer's bigrams, never identifiers."""
    out = []
    if has_cjk(text):
        text = CJK_RE.sub(" ", text)
    for tok in IDENT_RE.findall(text):
        while tok and tok[-1] in BRACKETS and tok.count(tok[-1]) > tok.count(BRACKETS[tok[-1]]):
            tok = tok[:-1]
        if tok:
            out.append(tok)
    return out


SYMBOL_RE = re.compile(r"[^\w\s]{2,8}")  # a run of punctuation: `%%`, `==`, `![[`, `=>`
VERSION_RE = re.compile(r"v?(\d+(?:\.\d+)+)")  # a version number, with or without its "v"


def query_idents(text: str) -> list[str]:
    """The identifier tokens a query's text is looked up by in the ``ident`` field, by either
    store: its compound identifiers and runs of punctuation, and for a version number its other
    spelling too (``0.8.12`` finds the note named ``v0.8.12``, ``v1.6.0`` the one titled
    ``1.6.0``)."""
    out = [t for t in ident_tokens(text) if is_compound(t) or SYMBOL_RE.fullmatch(t)]
    for t in list(out):
        m = VERSION_RE.fullmatch(t)
        if m:
            out.append(m.group(1) if t.startswith("v") else "v" + t)
    return list(dict.fromkeys(out))


def symbols(text: str) -> list[str]:
    """Runs of two to eight punctuation characters (Markdown's ``%%`` comments, ``==``
    highlights, ``![[`` embeds): indexed as identifiers so that a query of them can match."""
    return SYMBOL_RE.findall(text)


def literals(words: Sequence[str]) -> list[str]:
    """The query tokens that name something verbatim: identifiers with inner punctuation
    (``FORGE-1533``), letter-digit codes (``K7QX2M``), all-caps names (``GOMEMLIMIT``) and words
    that are nothing but punctuation (``%%``)."""
    out = [w for w in words if SYMBOL_RE.fullmatch(w)]
    for tok in identifiers(" ".join(words)):
        core = tok.lstrip("-")
        if is_compound(tok) or (core.isalnum() and len(core) >= 4 and (
                (any(c.isdigit() for c in core) and any(c.isalpha() for c in core))
                or (core.isupper() and core.isalpha()))):
            out.append(tok)
    return list(dict.fromkeys(out))


def ident_tokens(text: str) -> list[str]:
    """Identifier-preserving tokens: each whitespace-delimited identifier, its ``=?&#``- and
    bracket-separated parts, and its word parts, lowercased; then the text's runs of
    punctuation (:func:`symbols`)."""
    out: list[str] = []
    for tok in identifiers(text.lower()):
        out.append(tok)
        if not tok.isalnum():
            parts = [p.strip("./:-") for p in SPLIT_RE.split(tok)]
            out.extend(p for p in parts if p and p != tok)
            out.extend(w for w in WORD_RE.findall(tok) if w != tok)
    out.extend(symbols(text))
    return out


def within_one_edit(a: str, b: str) -> bool:
    """Damerau-Levenshtein distance(a, b) <= 1 (one insertion, deletion, substitution or
    transposition of neighbours)."""
    if a == b:
        return True
    la, lb = len(a), len(b)
    if abs(la - lb) > 1:
        return False
    i = 0
    while i < min(la, lb) and a[i] == b[i]:
        i += 1
    if la == lb:
        return a[i + 1:] == b[i + 1:] or (a[i:i + 2] == b[i:i + 2][::-1] and a[i + 2:] == b[i + 2:])
    return a[i + 1:] == b[i:] if la > lb else a[i:] == b[i + 1:]


def is_compound(tok: str) -> bool:
    """True for identifiers with inner punctuation (worth an exact ``ident`` match)."""
    return not tok.isalnum() and bool(re.search(r"\w", tok)) and len(tok) > 1


# What count_tokens reads as one piece: a run of letters, a run of digits, one other visible
# character, one run of line breaks (spaces and tabs count nothing).
_PIECE_RE = re.compile(r"[^\W\d_]+|\d+|\n+|[^\s]", re.U)
LETTERS_PER_TOKEN = 5   # a run of letters costs one token per started 5 letters
DIGITS_PER_TOKEN = 3    # LLM tokenizers read numbers in groups of up to three digits


def count_tokens(text: str) -> int:
    """An estimate of how many tokens an LLM's tokenizer makes of ``text``, the same for every
    vault and model (the context budget of a search is counted with it). Errs on the high side
    for English, so a budget in these tokens holds in a real one: a word of letters costs one
    token per started :data:`LETTERS_PER_TOKEN` letters, a number one per started
    :data:`DIGITS_PER_TOKEN` digits, each other visible character one, each run of line breaks
    one; each CJK character costs one (those scripts' tokenizers read about a character a token)."""
    n = 0
    for m in _PIECE_RE.finditer(text):
        s = m.group()
        c = s[0]
        if c.isdigit():
            n += -(-len(s) // DIGITS_PER_TOKEN)
        elif c.isalpha():
            if s.isascii() or not has_cjk(s):
                n += -(-len(s) // LETTERS_PER_TOKEN)
            else:
                cjk = sum(len(r) for r in CJK_RE.findall(s))
                n += cjk + -(-(len(s) - cjk) // LETTERS_PER_TOKEN)
        else:
            n += 1
    return n
