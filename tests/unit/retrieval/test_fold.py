"""Near-identical passages fold into the better one (hybrid.retrieval.fold, notes.select)."""

from __future__ import annotations

import pytest

from hybrid.retrieval.fold import Folder, resemblance, shingles
from hybrid.retrieval.notes import select


def test_shingles_ignore_case_punctuation_and_whitespace():
    assert shingles("Install the **plugin**, then\n  restart.") == shingles("install the plugin then restart")
    assert len(shingles("one two three four five")) == 3  # 5 words: 3 shingles of 3
    assert shingles("two words") == frozenset([("two", "words")])  # shorter than a shingle: one
    assert shingles("  ** \n") == frozenset()


def test_resemblance_is_the_jaccard_index_of_the_shingles():
    a, b = shingles("a b c d e"), shingles("a b c d x")  # {abc, bcd, cde} and {abc, bcd, cdx}
    assert resemblance(a, b) == pytest.approx(2 / (3 + 3 - 2))
    assert resemblance(a, a) == 1.0
    assert resemblance(a, frozenset()) == 0.0 and resemblance(frozenset(), frozenset()) == 0.0


TEXTS = ["Sync keeps your vault the same on every device you own.",                 # 0
         "Sync keeps your vault the same on every device you own!",                 # 1: a copy
         "Publish turns notes into a website that anyone can read.",                # 2
         "Sync keeps your vault the same on every phone you own.",                  # 3: one word changed
         "Backups are kept for a year and can be restored from the history view."]  # 4


def test_a_folder_folds_each_copy_into_the_first_passage_it_resembles():
    f = Folder(TEXTS, 0.7)
    assert [f.copy_of(i) for i in range(5)] == [None, 0, None, None, None]
    # one word in eleven changed: 6 of the 9 shingles kept, 6 / 12 = 0.5 < 0.7
    assert resemblance(shingles(TEXTS[0]), shingles(TEXTS[3])) == pytest.approx(6 / 12)
    assert f.folded == {0: [1]}
    loose = Folder(TEXTS, 0.5)
    assert [loose.copy_of(i) for i in range(5)] == [None, 0, None, 0, None]


def test_exact_only_folds_only_identical_text():
    f = Folder(TEXTS, 1.0)
    assert [f.copy_of(i) for i in range(5)] == [None, 0, None, None, None]


def _ranked(notes_and_lines):
    return [((n, i), ("v", n), lines) for i, (n, lines) in enumerate(notes_and_lines)]


def test_select_skips_folded_passages_and_fills_the_answer_from_further_down():
    ranked = _ranked([("a.md", (1, 5)), ("b.md", (1, 5)), ("c.md", (1, 5)), ("d.md", (1, 5))])
    texts = [TEXTS[0], TEXTS[1], TEXTS[2], TEXTS[4]]
    f = Folder(texts, 0.7)
    assert select(ranked, 3, by_note=False, copy_of=f.copy_of) == [0, 2, 3]
    assert f.folded == {0: [1]}
    f = Folder(texts, 0.7)
    assert select(ranked, 3, by_note=True, copy_of=f.copy_of) == [0, 2, 3]  # notes: b.md's only passage folded
    assert select(ranked, 3, by_note=False) == [0, 1, 2]  # no folder: as before


def test_select_asks_only_about_passages_it_would_take():
    ranked = _ranked([("a.md", (1, 5)), ("a.md", (3, 8)), ("b.md", (1, 5)), ("c.md", (1, 5))])
    asked: list[int] = []
    f = Folder([TEXTS[0], TEXTS[0], TEXTS[2], TEXTS[4]], 0.7)

    def copy_of(i):
        asked.append(i)
        return f.copy_of(i)
    assert select(ranked, 2, by_note=True, copy_of=copy_of) == [0, 2]
    assert asked == [0, 2]  # 1 overlaps a better passage of its note; 3's note came too late


def test_passages_under_different_headings_are_different_answers():
    steps = "\n\n1. In the ribbon, select Publish.\n2. Select the site, then Options.\n3. Enter the password."
    texts = ["### Add a site password" + steps, "### Remove a site password" + steps,
             "### Add a  site password!" + steps, steps.strip()]
    assert resemblance(shingles(texts[0]), shingles(texts[1])) >= 0.7  # alike by their words
    f = Folder(texts, 0.7)
    # another heading: its own answer; the same heading re-typed, or none (a continuation): a copy
    assert [f.copy_of(i) for i in range(4)] == [None, None, 0, 0]


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.7, 0.9, 1.0])
def test_the_prefix_filter_folds_exactly_what_comparing_every_pair_folds(threshold):
    """The Folder intersects a candidate only with taken passages sharing a prefix shingle; the
    decisions must be those of comparing it with every taken passage, best first."""
    import random
    rng = random.Random(7)
    words = "sync vault device note link tag page plugin theme graph canvas file folder".split()
    bases = [[rng.choice(words) for _ in range(rng.randint(2, 40))] for _ in range(6)]
    texts = []
    for _ in range(120):
        w = list(rng.choice(bases))
        for _ in range(rng.randint(0, 6)):  # a few words edited, added or dropped
            k = rng.randrange(len(w) + 1)
            op = rng.random()
            if op < 0.4 and k < len(w):
                w[k] = rng.choice(words)
            elif op < 0.7:
                w.insert(k, rng.choice(words))
            elif k < len(w):
                del w[k]
        texts.append(" ".join(w))
    folder, taken, folded = Folder(texts, threshold), [], 0
    for i, text in enumerate(texts):
        mine = shingles(text)
        expected = next((j for j in taken if resemblance(mine, shingles(texts[j])) >= threshold), None)
        assert folder.copy_of(i) == expected, (i, threshold)
        if expected is None:
            taken.append(i)
        else:
            folded += 1
    assert 0 < folded < len(texts) - 1  # the case is not trivial either way
