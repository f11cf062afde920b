"""The shipped word lists are decompressed once per machine into the cache folder and mapped
from there (issue #48: the seven lists cost a cold query ~100 ms); lookups read the same."""

import gzip
import json
import mmap
from importlib.resources import files

import platformdirs
import pytest

from hybrid.core import wordlist


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(platformdirs, "user_cache_dir", lambda name: str(tmp_path / name))
    monkeypatch.setattr(wordlist, "_lists", {})
    return tmp_path / "hybrid" / "wordlists"


def _truth(lang: str) -> dict:
    return json.loads(gzip.decompress((files("spellchecker") / "resources" / f"{lang}.json.gz").read_bytes()))


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


def test_an_unwritable_cache_decompresses_in_the_process(cache, monkeypatch):
    cache.parent.mkdir(parents=True)
    cache.write_text("a file where the folder would be")  # mkdir fails: OSError
    assert wordlist.count("house", "en") == _truth("en")["house"]
    assert isinstance(wordlist._data("en")[0], bytes)
    assert [p.name for p in cache.parent.iterdir()] == ["wordlists"]  # no .part file left
