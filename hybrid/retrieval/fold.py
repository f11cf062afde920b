"""Near-identical passages folded into the better one, so ten hits are ten different answers.

Vaults repeat themselves: a template's boilerplate in every daily note, a section pasted into
three pages, a page saved twice. A candidate passage whose text resembles a passage already
taken for the answer at least ``duplicate_similarity`` is not shown on its own: its citation
goes under that hit's ``also_in`` ("also in: A, B") and the next candidate takes its place.

Resemblance is the Jaccard index of the two texts' sets of word 3-shingles (Broder, "On the
resemblance and containment of documents", 1997): lower-cased words, punctuation and
whitespace ignored, so a copy re-wrapped or with its markup changed is still a copy, and one
edited in a word or two still resembles it closely. Two passages that start with different
headings are never copies (:func:`heading_of`). The threshold is set from data in
eval/reports/notes/issue30-dups.md. Sets are exact (no MinHash sketch): a search compares a few dozen
passages at most, each only with the ones already taken (:func:`hybrid.retrieval.notes.select`
asks for a candidate only when it would take it), and only with those that pass the prefix
filter of set-similarity joins (Chaudhuri, Ganti & Kaushik 2006; Bayardo et al., "Scaling up
all pairs similarity search", 2007): with the shingles of every passage in one global order,
two sets whose Jaccard index reaches ``t`` share an element among their first
``n - ceil(t·n) + 1`` (``n``: each one's size). Passages already taken are indexed by those
prefixes, so a candidate is intersected in full only with the few that share one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hybrid.retrieval.hits import Hit
    from hybrid.store.base import ChunkRow

SHINGLE = 3  # words per shingle
WORD_RE = re.compile(r"\w+")
HEADING_RE = re.compile(r"\s{0,3}#{1,6}\s+(.*)")


def heading_of(text: str) -> str | None:
    """The heading a passage starts with (lower case, words only), None when it starts with
    none. Two passages under different headings are different answers however alike their
    words ("Add a site password" / "Remove a site password": the same steps, one word apart)."""
    m = HEADING_RE.match(text.split("\n", 1)[0])
    return " ".join(WORD_RE.findall(m.group(1).lower())) if m else None


def same_heading(a: str | None, b: str | None) -> bool:
    """Whether two passages may be copies by their headings: both under the same one, or one
    of them (a section's continuation) under none."""
    return a is None or b is None or a == b


def shingles(text: str) -> frozenset[tuple[str, ...]]:
    """``text``'s 3-word shingles (a text of fewer words: itself, as one)."""
    words = WORD_RE.findall(text.lower())
    if len(words) < SHINGLE:
        return frozenset([tuple(words)]) if words else frozenset()
    return frozenset(zip(words, words[1:], words[2:]))  # built in C: a search shingles dozens


@lru_cache(maxsize=8192)
def signature(text: str) -> tuple[frozenset, str | None, tuple]:
    """A passage's shingles, heading and shingles in the global order of the prefix filter
    (by hash), kept across searches: a long-lived handle meets the same passages again and
    again (on the sample set 70 searches take 2,800 candidates, 798 of them distinct)."""
    found = shingles(text)
    return found, heading_of(text), tuple(sorted(found, key=hash))


def prefix_length(n: int, threshold: float) -> int:
    """How many of a set's first elements (in the global order) any set resembling it at
    ``threshold`` or more must share one of."""
    return n - math.ceil(threshold * n - 1e-9) + 1 if n else 0


def resemblance(a: frozenset, b: frozenset) -> float:
    """The Jaccard index of two shingle sets (two empty sets: 0, nothing to compare)."""
    if not a or not b:
        return 0.0
    common = len(a & b)
    return common / (len(a) + len(b) - common)


class Folder:
    """Decides, candidate by candidate in the order an answer takes them, whether one is a copy
    of a passage already taken (``texts``: the candidates' texts, by index)."""

    def __init__(self, texts: Sequence[str], threshold: float):
        self.texts, self.threshold = texts, threshold
        self.taken: list[tuple[int, frozenset, str | None]] = []
        self.by_prefix: dict[tuple, list[int]] = {}  # a shingle → positions in taken whose prefix holds it
        self.folded: dict[int, list[int]] = {}  # a taken index → the indexes folded into it

    def copy_of(self, i: int) -> int | None:
        """The taken passage ``i`` resembles at least the threshold (the best taken first),
        which it is folded into; None, and ``i`` counts as taken, when there is none."""
        mine, head, ordered = signature(self.texts[i])
        n = len(mine)
        prefix = ordered[:prefix_length(n, self.threshold)]
        near = sorted({pos for s in prefix for pos in self.by_prefix.get(s, ())})
        for pos in near:
            j, theirs, their_head = self.taken[pos]
            m = len(theirs)
            # Jaccard <= min/max of the sizes: most pairs are ruled out without intersecting
            if min(n, m) >= self.threshold * max(n, m) and same_heading(head, their_head) \
                    and resemblance(mine, theirs) >= self.threshold:
                self.folded.setdefault(j, []).append(i)
                return j
        for s in prefix:
            self.by_prefix.setdefault(s, []).append(len(self.taken))
        self.taken.append((i, mine, head))
        return None


def annotate(hits: Sequence[Hit], shown: Sequence[int], folder: Folder, keys: Sequence[tuple[str, int]],
             rows: Mapping[tuple[str, int], ChunkRow]) -> None:
    """Give each hit (``shown[n]`` its candidate index) the citations of the candidates folded
    into it, best first."""
    from hybrid.retrieval.hits import cite
    for h, i in zip(hits, shown):
        h.also_in = [cite(keys[j][0], rows[keys[j]]) for j in folder.folded.get(i, ())]
