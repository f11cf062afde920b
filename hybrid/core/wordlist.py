"""Shipped word lists: a word found in one is a real word, never a typo to repair.

The lists are the word-frequency dictionaries inside the ``pyspellchecker`` wheel (MIT; counts
from the OpenSubtitles corpus, cleaned by its author of misspellings and foreign words): one
gzipped JSON object ``{"word": count}`` per language, one entry a line, sorted, nothing downloaded
at run time. A list is read only when a query holds a word that no searched vault knows, once per
process, and kept as its decompressed bytes: a lookup is a binary search over its lines, where
parsing the English list into a dict would cost ~0.5 s of a cold ``hybrid query``.
"""

from __future__ import annotations

import gzip
import logging
import re
import threading
from collections.abc import Iterable

log = logging.getLogger("hybrid")
# Counts below this are too rare to trust as words (most lists start at 50, the count their
# author gives the words he adds by hand; the Basque list goes down to 1).
FLOOR = 50

_lists: dict[str, tuple[bytes, bool]] = {}
_lock = threading.Lock()


def _data(lang: str) -> tuple[bytes, bool]:
    """The decompressed list of ``lang`` (b"" when the package or the list is missing: logged
    once, and no word counts as known through it), and whether its lines look sorted."""
    with _lock:
        got = _lists.get(lang)
        if got is None:
            try:
                from importlib.resources import files
                data = gzip.decompress((files("spellchecker") / "resources" / f"{lang}.json.gz").read_bytes())
            except (ModuleNotFoundError, FileNotFoundError, OSError) as exc:
                log.warning("word list %r unavailable (%s): only the vaults' words count as real "
                            "words; `pip install pyspellchecker` restores it", lang, exc)
                data = b""
            got = _lists[lang] = (data, _looks_sorted(data))
        return got


def _line(data: bytes, pos: int) -> tuple[int, int]:
    """(start, end) of the line holding offset ``pos``."""
    end = data.find(b"\n", pos)
    return data.rfind(b"\n", 0, pos) + 1, len(data) if end < 0 else end


def _looks_sorted(data: bytes, probes: int = 64) -> bool:
    """Whether lines taken across ``data`` are each no greater than the next (the package writes
    its lists with sorted keys; a binary search relies on it, a list that is not gets a scan)."""
    for k in range(1, probes):
        s, e = _line(data, len(data) * k // probes)
        s2, e2 = _line(data, min(e + 1, len(data)))
        if s2 > s and data[s2:e2].startswith(b'"') and data[s:e].startswith(b'"') and data[s:e] > data[s2:e2]:
            return False
    return True


def count(word: str, lang: str) -> int:
    """How often ``word`` (lower case) occurs in ``lang``'s list (0: not in it)."""
    data, ordered = _data(lang)
    key = b'"' + word.encode("utf-8") + b'": '
    if ordered:  # binary search over the lines between the opening "{" and the closing "}"
        lo, hi = data.find(b"\n") + 1, data.rfind(b"\n")
        while lo < hi:
            s, e = _line(data, (lo + hi) // 2)
            if data[s:e] < key:
                lo = e + 1
            else:
                hi = s
        at = lo if data.startswith(key, lo) else -1
    else:
        at = data.find(key)
    if at < 0:
        return 0
    m = re.match(rb"\d+", data[at + len(key):at + len(key) + 20])
    return int(m.group(0)) if m else 0


def is_word(word: str, languages: Iterable[str]) -> bool:
    """Whether ``word`` is in the list of one of ``languages`` at least :data:`FLOOR` times."""
    w = word.lower()
    if '"' in w or "\\" in w:
        return False
    return any(count(w, lang) >= FLOOR for lang in languages)
