"""Shipped word lists: a word found in one is a real word, never a typo to repair.

The lists are pyspellchecker's word-frequency dictionaries (MIT; counts from the OpenSubtitles
corpus, cleaned by its author of misspellings and foreign words), read through its public API
(``SpellChecker(language=...).word_frequency``), nothing downloaded at run time. A list is read
only when a query holds a word that no searched vault knows, once per process: a lookup is a
binary search over the lines of the list written as sorted JSON, one entry a line, where
holding the English list as a dict would cost ~0.5 s of a cold ``hybrid query``. Each list is
written once per machine (and pyspellchecker release) into the user's cache folder and mapped
from there: the first use of a list loads it through pyspellchecker (0.02-1 s a list on a
2-core machine, English ~0.3 s; all twelve ~4 s, paid once), every later process maps the file.
Where the cache cannot be written, each process loads the lists it reads.

The file holds the bytes of the dictionary pyspellchecker ships (``json.dumps`` with sorted
keys, one entry a line; only the Persian list's line ends differ, CRLF there), so every
lookup answers what it answered when it read that file (checked on every word of every list).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Iterable
from typing import Any

log = logging.getLogger("hybrid")
# The languages whose lists the pyspellchecker wheel ships
LANGUAGES = ("en", "es", "fr", "de", "pt", "it", "ru", "nl", "ar", "eu", "fa", "lv")
# Counts below this are too rare to trust as words (most lists start at 50, the count their
# author gives the words he adds by hand; the Basque list goes down to 1).
FLOOR = 50

_lists: dict[str, tuple[Any, bool]] = {}
_lock = threading.Lock()


def _data(lang: str) -> tuple[Any, bool]:
    """The list of ``lang`` as sorted JSON lines (bytes, or a read-only map of its cached copy;
    b"" when pyspellchecker or the list is missing: logged once, and no word counts as known
    through it), and whether its lines look sorted."""
    with _lock:
        got = _lists.get(lang)
        if got is None:
            try:
                data = _cached(lang)
            except (ImportError, ValueError, OSError) as exc:  # PackageNotFoundError is an ImportError
                log.warning("word list %r unavailable (%s): only the vaults' words count as real "
                            "words; `pip install pyspellchecker` restores it", lang, exc)
                data = b""
            got = _lists[lang] = (data, _looks_sorted(data))
        return got


def _lines(lang: str) -> bytes:
    """``lang``'s word counts from pyspellchecker's public API, one ``"word": count`` a line in
    sorted order: the bytes of the gzipped JSON it ships (ValueError: no such language)."""
    import json

    from spellchecker import SpellChecker
    counts = SpellChecker(language=lang).word_frequency.dictionary
    return json.dumps(counts, sort_keys=True, indent=0, ensure_ascii=False).encode("utf-8")


def _cached(lang: str) -> Any:
    """:func:`_lines` of ``lang``: a map of its copy in the cache folder (named by the
    pyspellchecker release, so an upgrade makes a new one), written on first use through a
    temporary file renamed into place (two processes writing at once both write whole files);
    the bytes themselves where the cache cannot be written."""
    import mmap
    import os
    from importlib.metadata import version
    from pathlib import Path

    import platformdirs
    cached = Path(platformdirs.user_cache_dir("hybrid")) / "wordlists" / \
        f"{lang}.json.pyspellchecker-{version('pyspellchecker')}"
    try:
        with open(cached, "rb") as fh:
            return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # not made yet (or empty: ValueError)
        pass
    data = _lines(lang)
    part = cached.with_name(f"{cached.name}.{os.getpid()}.part")
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        part.write_bytes(data)
        os.replace(part, cached)
    except OSError as exc:  # a read-only home: loaded in each process
        log.debug("cannot cache word list %s (%s)", cached, exc)
        with contextlib.suppress(OSError):
            part.unlink(missing_ok=True)
    return data


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
        at = lo if data[lo:lo + len(key)] == key else -1
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
