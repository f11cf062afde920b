"""Snippets: the one-pass matcher finds exactly what a regex per query word found, and a long
query costs no regex compilation per word per hit (issue #9: a 4,000-character query spent
seconds compiling patterns)."""
import random
import re

import pytest

from hybrid.retrieval.hits import needle_hits, snippet


def reference_hits(low, needles):
    return sorted((m.start(), n) for n in set(needles) if len(n) >= 2
                  for m in re.finditer(r"(?<!\w)" + re.escape(n), low))


def test_needle_hits_equal_the_per_word_regex_version():
    rng = random.Random(7)
    vocab = ["orders", "orders-created", "order", "--flag", "k7qx2m", "é", "ünïcode", "a", "to",
             "the", "10.0.0.0/24", "tail", "tailscale", "-", "x", "(orders)", "x-orders", "word"]
    for _ in range(300):
        low = " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 120)))
        needles = rng.sample(vocab, rng.randint(1, 8))
        assert sorted(needle_hits(low, needles)) == reference_hits(low, needles)


def test_snippet_shows_the_query_words():
    text = "filler " * 200 + "the tailscale subnet router needs advertise-routes " + "filler " * 200
    out = snippet(text, ["tailscale", "advertise-routes"], 120)
    assert "tailscale" in out and "advertise-routes" in out and out.startswith("…")


def test_snippet_centres_on_a_word_inside_a_cjk_run():
    """CJK text has no spaces: a word anywhere in a run is a place to centre on."""
    text = "あ" * 400 + "保管庫をOneDriveに" + "い" * 400
    assert needle_hits(text.lower(), ["保管庫", "onedrive"]) == [(400, "保管庫"), (404, "onedrive")]
    out = snippet(text, ["保管庫", "onedrive"], 100)
    assert "保管庫をOneDriveに" in out and out.startswith("…") and out.endswith("…")


@pytest.mark.slow  # scale: 20 snippets of a 1,000-word query
def test_long_query_compiles_no_regex_per_word(monkeypatch):
    words = [f"w{i:04d}" for i in range(1000)]
    text = " ".join(words[::-1])
    calls = []
    real = re._compile
    monkeypatch.setattr(re, "_compile", lambda *a: calls.append(a) or real(*a))
    for _ in range(20):
        snippet(text, words, 300)
    assert len(calls) <= 2 * 20  # the old matcher looked up 1,000 patterns per call


def every_word_start(low, needles):
    """The matcher as it was: every place no word character precedes, tried in turn."""
    from hybrid.core.tokens import SPACED_WORD
    out = []
    for m in re.finditer(rf"(?<!{SPACED_WORD}).", low, re.S):
        out += [(m.start(), n) for n in sorted(set(needles)) if len(n) >= 2 and low.startswith(n, m.start())]
    return out


def test_needle_hits_visit_only_where_a_needle_starts_and_find_the_same():
    """Spaced words, CJK runs (every character is a word start), punctuation, overlapping
    needles at one place (``tail`` and ``tailscale``), regex characters in a needle, and a
    query with more starts than the one pattern takes: the same hits, in the same order."""
    from hybrid.retrieval import hits as H
    rng = random.Random(11)
    vocab = ["tail", "tailscale", "保管庫", "保管", "を", "onedrive", "c++", "(x)", "a.b", "10.0.0.0/24",
             "é", "ünïcode", "-", "--flag", "\n", "word", "wörd", "[link]", "x" * 30]
    for _ in range(300):
        low = rng.choice(["", " "]).join(rng.choice(vocab) for _ in range(rng.randint(0, 80)))
        needles = rng.sample(vocab, rng.randint(0, 8))
        assert needle_hits(low, needles) == every_word_start(low, needles)
    many = [f"{chr(0x4e00 + i)}{chr(0x4e00 + i)}" for i in range(H.PREFIX_SCAN + 1)]
    text = "".join(many[::-3]) + " word"
    assert needle_hits(text, many + ["word"]) == every_word_start(text, many + ["word"])
