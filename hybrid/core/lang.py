"""Which language a short text (a query) is in, as much as a multilingual embedder needs to
know: how far it is *not English*, from 0 (English) to 1 (another language).

No model and nothing downloaded. Three kinds of evidence, cheapest first:

1. **Script.** Letters outside the Latin script (Cyrillic, Greek, Arabic, Hebrew, Han, kana,
   Hangul, Thai, Devanagari...) are another language's; a run of Han or kana counts as one word
   per two characters (those scripts write no spaces).
2. **The English word list** (:mod:`hybrid.core.wordlist`, pyspellchecker's): a Latin-script text
   whose every word is in it, without letters English does not use (``ü``, ``ñ``, ``ç``...), is
   English. This is the common case, and it reads one list.
3. Otherwise each word is weighed in the word lists of the Latin-script languages the lists
   cover (de es fr it nl pt): a word goes to the language in which it is relatively most
   frequent (``al`` and ``pie`` are far more Spanish than English), by a factor of
   :data:`MARGIN`; a word in no list (a product name, a typo, vault jargon) says nothing.

``foreign(text)`` is the share of the words that are another language's, among the words
that say anything.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from hybrid.core import wordlist

LATIN_LISTS = ("de", "es", "fr", "it", "nl", "pt")
# Word-count totals of pyspellchecker's lists (0.8 series), to compare a word's relative
# frequency across languages; computing them costs ~0.8 s of parsing.
TOTALS = {"en": 1_646_569_324, "de": 123_710_846, "es": 688_805_284, "fr": 353_876_198,
          "it": 445_269_334, "nl": 382_426_387, "pt": 387_750_743}
MARGIN = 4.0  # how much more frequent (relatively) a word must be in another language
WORD_RE = re.compile(r"[^\W\d_]+", re.U)
# what is not prose in any language: links, URLs, code spans and fenced blocks, HTML tags
NOT_PROSE_RE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`|\]\([^)\s]*\)|[a-z][a-z0-9+.-]*://\S+|<[^>\n]*>",
                          re.S | re.I)
CLOSE_SCRIPTS = ("CJK", "HIRAGANA", "KATAKANA")  # written without spaces between words


@lru_cache(maxsize=4096)
def _script(ch: str) -> str:
    name = unicodedata.name(ch, "")
    return name.split(" ", 1)[0] if name else ""


def foreign(text: str) -> float:
    """The share (0..1) of ``text``'s words that are not English (see the module docstring);
    0 for a text with no words."""
    latin: list[str] = []
    other = 0.0
    for run in WORD_RE.findall(NOT_PROSE_RE.sub(" ", text)):
        scripts = {_script(c) for c in run}
        if scripts <= {"LATIN"}:
            latin.append(run.lower())
        elif scripts & set(CLOSE_SCRIPTS):
            other += max(1.0, len(run) / 2)
        else:
            other += 1.0
    if not latin:
        return 1.0 if other else 0.0
    english, foreign_words = _weigh(tuple(latin))
    said = english + foreign_words + other
    return (foreign_words + other) / said if said else 0.0


def _weigh(words: tuple[str, ...]) -> tuple[float, float]:
    """(English words, other languages' words) among Latin-script ``words``: all English when
    every word is in the English list in English letters, else each word as :func:`_word` says."""
    known = [w for w in words if len(w) > 1]
    if all(map(_plain, known)):  # read from the English list alone (a cold query: 15 ms, not 100)
        return float(len(known)), 0.0
    judged = [_word(w) for w in known]
    return float(sum(v > 0 for _, v in judged)), float(sum(v < 0 for _, v in judged))


@lru_cache(maxsize=1 << 16)
def _plain(w: str) -> bool:
    """Whether ``w`` is in the English list, in English letters (what :func:`_word` says first)."""
    return w.isascii() and wordlist.count(w, "en") >= wordlist.FLOOR


@lru_cache(maxsize=1 << 16)
def _word(w: str) -> tuple[bool, int]:
    """(in the English list in English letters, verdict: 1 English, -1 another language, 0 no
    list says), cached: a vault's words repeat, and each lookup is a binary search per list."""
    count = wordlist.count(w, "en")
    rel_en = count / TOTALS["en"] if count >= wordlist.FLOOR else 0.0
    if rel_en and w.isascii():
        plain = True
    else:
        plain = False
    if not w.isascii() and rel_en == 0.0:
        return plain, -1  # letters English does not use: einfügen, página
    rel_other = max((wordlist.count(w, lang) / TOTALS[lang] for lang in LATIN_LISTS), default=0.0)
    if rel_other > MARGIN * rel_en:
        return plain, -1
    return plain, 1 if rel_en else 0


SAMPLE_CHARS = 300  # of a chunk's text: some 50 words, enough to tell its language
# catalog meta an index run writes from a sample of the chunks and searches read
SHARE_META = "other_languages"  # the share of chunks not in English
LANGUAGES_META = "languages"    # the other languages they are in, by word list ("de,ru")


def other_language_share(texts: list[str]) -> float:
    """The share of ``texts`` (chunk texts, a sample of a vault's) written mostly in another
    language than English (:func:`foreign` of their first :data:`SAMPLE_CHARS` characters
    above one half)."""
    if not texts:
        return 0.0
    return sum(foreign(t[:SAMPLE_CHARS]) > 0.5 for t in texts) / len(texts)


def languages_held(texts: list[str]) -> list[str]:
    """The languages other than English that ``texts`` (chunk texts, a sample of a vault's)
    are written in, among those the shipped word lists cover (:data:`wordlist.LANGUAGES`):
    a text mostly not English (:func:`foreign` of its first :data:`SAMPLE_CHARS` characters
    above one half) is in the language whose list holds the most of its words, two at least
    (every language tied there). Typo repair takes a word of such a language as a word."""
    held: set[str] = set()
    for t in texts:
        sample = t[:SAMPLE_CHARS]
        if foreign(sample) <= 0.5:
            continue
        words = {w.lower() for w in WORD_RE.findall(NOT_PROSE_RE.sub(" ", sample)) if len(w) > 1}
        found = {lang: sum(_in_list(w, lang) for w in words) for lang in wordlist.LANGUAGES if lang != "en"}
        best = max(found.values(), default=0)
        if best >= 2:
            held.update(lang for lang, n in found.items() if n == best)
    return sorted(held)


@lru_cache(maxsize=1 << 16)
def _in_list(word: str, lang: str) -> bool:
    return wordlist.is_word(word, (lang,))  # cached: a vault's words repeat


# parts of a letter's Unicode name that are no script of their own (accents written apart, the
# long-vowel mark of kana, full-width Latin)
NO_SCRIPT = frozenset({"", "COMBINING", "MODIFIER", "FULLWIDTH", "HALFWIDTH", "KATAKANA-HIRAGANA"})


def unread_script(text: str, scripts: frozenset[str]) -> str | None:
    """The script most of ``text``'s words are written in when a model reading ``scripts``
    (Unicode script names as letters' names start: ``LATIN``, ``CYRILLIC``, ``CJK``...) reads
    none of them, title-cased (``Georgian``); None when most words are in ``scripts`` (or the
    text has no words). A word counts for the first script of its letters that is not read."""
    unread: dict[str, int] = {}
    words = 0
    for run in WORD_RE.findall(text):
        words += 1
        other = next((s for s in map(_script, run) if s not in scripts and s not in NO_SCRIPT), None)
        if other is not None:
            unread[other] = unread.get(other, 0) + 1
    if not unread or 2 * sum(unread.values()) <= words:
        return None
    return max(unread, key=lambda s: unread[s]).title()
