"""The normalised copy of a text the redactor scans as well (:mod:`hybrid.store.agent.redact`):
what a byte pattern would miss — full-width letters folded, zero-width characters and HTML
entities resolved, a token cut by a line break re-joined, look-alike Cyrillic and Greek letters
folded in a word that mixes scripts — and its finds mapped back to the original's offsets.
"""

from __future__ import annotations

import html
import re
import unicodedata
from bisect import bisect_right
from functools import lru_cache
from typing import NamedTuple

_NON_ASCII_RE = re.compile(r"[^\x00-\x7f]+")
# The characters NFKC folds to one other character that notes hold most (spaces, a full-width
# colon), folded before looking at the rest one character at a time. The keyword and prose rules
# take a no-break space (French puts one before every colon) for a space themselves, so those two
# alone do not call for a copy.
_ONE_FOR_ONE = (("\u00a0", " "), ("\u202f", " "), ("\u3000", " "), ("\uff1a", ":"))
_SPACES_THE_RULES_KNOW = frozenset("\u00a0\u202f")
_ENTITY_RE = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_LINE_BREAK_RE = re.compile(r"\r?\n[ \t]*")
_PATH_SEPARATOR_RE = re.compile(r"[/+.]")
_CAMEL_CASE_RE = re.compile(r"[a-z]*(?:[A-Z][a-z]{2,})+[A-Z]{0,3}")


@lru_cache(maxsize=4096)
def _fold(char: str) -> str:
    """One character as the copy holds it: NFKC, invisible (format) characters dropped."""
    if unicodedata.category(char) == "Cf":
        return ""
    return unicodedata.normalize("NFKC", char)


_RANDOM_PIECE_RE = re.compile(r"\d|[a-z][A-Z]")


def _looks_random(run: str) -> bool:
    """A digit, or a capital after a small letter: a piece of a token, not a word (`Third`)."""
    return _RANDOM_PIECE_RE.search(run) is not None


# Cyrillic and Greek letters drawn like a Latin one (after Unicode's confusables.txt, the ones
# fonts draw alike), folded in the copy inside a word that holds Latin letters too: a token or a
# keyword with one such letter (`ghp_…О…`, `pаssword`) is invisible to every byte pattern. A word
# of one script keeps its letters, so Russian and Greek text is never rewritten.
_LOOK_ALIKES = str.maketrans(
    "АВЕКМНОРСТУХЅІЈԚԜаеорсухѕіјһԁԛԝӀӏҺԌԍ"   # Cyrillic
    "ΑΒΕΖΗΙΚΜΝΟΡΤΥΧοναικρυϲϳ"           # Greek
    "ɑɡ",                               # IPA
    "ABEKMHOPCTYXSIJQWaeopcyxsijhdqwIlHGg"
    "ABEZHIKMNOPTYXovaikpucj"
    "ag")
_IPA_LOOK_ALIKES = "ɑɡ"
_MIXED_RUN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def fold_look_alikes(text: str) -> str:
    """``text`` with every Cyrillic, Greek or IPA letter drawn like a Latin one folded to it."""
    return text.translate(_LOOK_ALIKES)


def _other_script(char: str) -> bool:
    """A Greek or Cyrillic character, an IPA letter drawn as a Latin one or a combining mark
    (what the mixed-script hint looks for)."""
    return "\u0370" <= char <= "\u052f" or char in _IPA_LOOK_ALIKES or _combining(char)


def _combining(char: str) -> bool:
    return "\u0300" <= char <= "\u036f"


def _look_alike_edits(text: str, hints: list[int]) -> list[tuple[int, int, str]]:
    """The one-character edits that fold look-alike letters to Latin in each word around a hint
    that mixes Latin letters with Cyrillic or Greek ones."""
    edits: list[tuple[int, int, str]] = []
    done = -1
    for pos in sorted(hints):
        if pos < done:
            continue  # in a word already seen
        start = end = pos
        while start > 0 and (text[start - 1] in _MIXED_RUN or _other_script(text[start - 1])):
            start -= 1
        while end < len(text) and (text[end] in _MIXED_RUN or _other_script(text[end])):
            end += 1
        done = end
        word = text[start:end]
        if any(c.isascii() and c.isalpha() for c in word) and any(_other_script(c) for c in word):
            edits += [(i, i + 1, "" if _combining(c) else folded) for i, c in enumerate(word, start)
                      if (folded := c.translate(_LOOK_ALIKES)) != c or _combining(c)]
    return edits


class View:
    """A copy of a text with some of its characters replaced (``edits``: sorted, disjoint
    ``(start, end, replacement)`` in the original), and the map from the copy's offsets back
    to the original's."""

    def __init__(self, text: str, edits: list[tuple[int, int, str]]) -> None:
        merged: list[tuple[int, int, str]] = []
        for s, e, rep in sorted(edits):
            if merged and s < merged[-1][1]:
                continue  # overlaps the previous edit: keep that one
            if merged and s == merged[-1][1]:  # adjacent: one edit (so copy offsets stay increasing)
                ps, _, prep = merged.pop()
                s, rep = ps, prep + rep
            merged.append((s, e, rep))
        parts: list[str] = []
        self._marks: list[tuple[int, int, int, int]] = []  # (copy start, copy end, start, end)
        pos = shift = 0
        for s, e, rep in merged:
            parts += [text[pos:s], rep]
            self._marks.append((s + shift, s + shift + len(rep), s, e))
            shift += len(rep) - (e - s)
            pos = e
        parts.append(text[pos:])
        self.text = "".join(parts)
        self._starts = [m[0] for m in self._marks]

    def original(self, i: int, *, end: bool) -> int:
        """The original offset of the copy's offset ``i``, as the start or the end of a span
        (a span that touches a replacement covers all it replaced)."""
        k = bisect_right(self._starts, i) - 1
        if k < 0:
            return i
        vs, ve, s, e = self._marks[k]
        if vs == ve and i == vs:  # at a deletion
            return s if end else e
        if i >= ve:
            return e + (i - ve)
        if i == vs:
            return s
        return e if end else s


def normalised_copy(text: str, scan: Scan) -> View | None:
    """The normalised copy of ``text`` to scan as well, or None when it would be the same. The
    checks are ordered so that plain ASCII text with no hint costs a few ``in`` tests (the scan's
    hints spare a Python regex over every text)."""
    edits: list[tuple[int, int, str]] = []
    copy = text
    folded_any = False
    if not text.isascii():
        for char, folded in _ONE_FOR_ONE:  # offsets stay the same; str.replace runs at C speed
            if char in copy:
                copy = copy.replace(char, folded)
                folded_any = folded_any or char not in _SPACES_THE_RULES_KNOW
        if scan.invisible or not unicodedata.is_normalized("NFKC", copy):
            for m in _NON_ASCII_RE.finditer(copy):
                run = m.group()
                if unicodedata.is_normalized("NFKC", run) and all(_fold(c) for c in run):
                    continue
                for i, char in enumerate(run, m.start()):
                    folded = _fold(char)
                    if folded != char:
                        edits.append((i, i + 1, folded))
    if "&" in text:
        for m in _ENTITY_RE.finditer(text):
            decoded = html.unescape(m.group())
            if decoded != m.group():
                edits.append((m.start(), m.end(), "".join(_fold(c) for c in decoded)))
    for s, e in scan.wrapped:
        for m in _LINE_BREAK_RE.finditer(text, s, e):
            before = text[text.rfind("\n", s, m.start()) + 1 or s:m.start()]
            after_end = text.find("\n", m.end(), e)
            after = text[m.end():e if after_end < 0 else after_end]
            if len(before) >= 16 and len(after) >= 4 and _looks_random(before) and _looks_random(after):
                edits.append((m.start(), m.end(), ""))
    # a space after a token followed by punctuation, unless a look-alike letter is folded in the
    # same run of text: `eyJ….еyJ…` is one token (a JWT) once `е` is `e`, not one then a dot
    edits += [(p, p, " ") for p in scan.punctuated if not any(_same_run(text, p, m) for m in scan.mixed)]
    if scan.mixed:
        edits += _look_alike_edits(text, scan.mixed)
    return View(copy, edits) if edits or folded_any else None


def _same_run(text: str, a: int, b: int) -> bool:
    """Whether ``a`` and ``b`` lie in one run of text with no space between them."""
    lo, hi = min(a, b), max(a, b)
    return hi - lo <= 4096 and not any(c.isspace() for c in text[lo:hi])


def token_piece(run: str) -> bool:
    """Whether a run of token characters before punctuation could be a provider token: a random-
    looking piece of 16 characters or more between `/`, `+` and `.` (not a path), other than a
    CamelCase name (`StaticSiteReconciler`)."""
    return any(len(p) >= 16 and _looks_random(p) and not _CAMEL_CASE_RE.fullmatch(p)
               for p in _PATH_SEPARATOR_RE.split(run))



class Scan(NamedTuple):
    """What one kingfisher pass found in a text."""

    found: list[tuple[int, int]]     # spans of built-in findings and of table cells
    judged: list[tuple[str, int, int, tuple[int, int] | None]]  # a project rule's value: rule, start,
    #                                  end, and the span to redact (None: a placeholder)
    wrapped: list[tuple[int, int]]   # hints for the normalised copy: runs cut by a line break,
    punctuated: list[int]            # ends of runs followed by punctuation,
    invisible: bool                  # whether the text holds an invisible character,
    mixed: list[int]                 # and where Latin touches Cyrillic or Greek
