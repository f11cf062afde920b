"""The signals of related notes (hybrid.retrieval.related), on graphs written by hand; expected
values derived from the documented formulas."""

from __future__ import annotations

import math

import numpy as np

from hybrid.retrieval.related import (
    Signals,
    Weights,
    by_note,
    link_signals,
    nearest_chunks,
    rank,
    reasons,
    tag_weights,
    without_links,
)
from hybrid.store.base import NoteMeta
from hybrid.store.graph import LinkGraph


def graph(links: dict[str, list[str]], tags: dict[str, list[str]] | None = None) -> tuple[LinkGraph, dict[str, int]]:
    names = sorted(set(links) | {t for ts in links.values() for t in ts} | set(tags or {}))
    ids = {n: i + 1 for i, n in enumerate(names)}
    notes = [NoteMeta(ids[n], f"{n}.md", n, (tags or {}).get(n, []), [], 0.0, links.get(n, [])) for n in names]
    return LinkGraph.build(notes), ids


def test_links_either_way_and_co_citation():
    g, ids = graph({"a": ["b"], "c": ["a"], "hub": ["a", "d", "e"], "z": ["a", "d"]})
    got = link_signals(g, ids["a"], {})
    assert got[ids["b"]].links_to and not got[ids["b"]].linked_from
    assert got[ids["c"]].linked_from and not got[ids["c"]].links_to
    d = got[ids["d"]]
    assert sorted(d.cociters) == [ids["hub"], ids["z"]]
    x = 1 / math.log(2 + 3) + 1 / math.log(2 + 2)  # hub links to 3 notes, z to 2
    assert math.isclose(d.cocite_score, x / (1 + x))
    assert got[ids["e"]].cociters == [ids["hub"]]
    assert ids["a"] not in got


def test_shared_tags_weighted_by_rarity():
    g, ids = graph({}, {"a": ["kafka", "work"], "b": ["kafka"], "c": ["work"], "d": ["work"], "e": ["home"]})
    idf = tag_weights(g)
    assert math.isclose(idf["work"], math.log(1 + 5 / 3)) and math.isclose(idf["kafka"], math.log(1 + 5 / 2))
    got = link_signals(g, ids["a"], idf)
    assert got[ids["b"]].tags == ["kafka"]
    assert math.isclose(got[ids["b"]].tag_score, idf["kafka"] / (idf["kafka"] + idf["work"]))
    assert got[ids["b"]].tag_score > got[ids["c"]].tag_score  # the rarer tag says more
    assert ids["e"] not in got
    hidden = link_signals(g, ids["a"], idf, shown=lambda t: t != "kafka")
    assert ids["b"] not in hidden and hidden[ids["c"]].tags == ["work"]


def test_without_links_takes_out_both_directions_only_of_that_note():
    g, ids = graph({"a": ["b"], "c": ["a", "b"]})
    cut = without_links(g, ids["a"])
    assert cut.neighbours(ids["a"]) == set()
    assert cut.outlinks(ids["c"]) == [ids["b"]] and set(cut.notes) == set(g.notes)
    assert g.neighbours(ids["a"]) == {ids["b"], ids["c"]}  # the graph itself is untouched


def test_score_and_rank():
    w = Weights(meaning=1.0, link=0.3, tags=0.2, cocited=0.3)
    s = Signals(meaning=0.5, links_to=True, tag_score=0.5, cocite_score=0.25)
    assert math.isclose(s.score(w), 0.5 + 0.3 + 0.2 * 0.5 + 0.3 * 0.25)
    found = {1: Signals(meaning=0.4), 2: Signals(meaning=0.2, linked_from=True), 3: Signals(meaning=-0.1), 4: s}
    assert [f for f, _, _ in rank(found, w, 10)] == [4, 2, 1]  # nothing of no score
    assert [f for f, _, _ in rank(found, w, 1, drop=[4])] == [2]


def test_best_chunk_of_each_note():
    assert by_note({10: 0.9, 11: 0.95, 12: 0.5, 99: 0.99}, {10: 1, 11: 1, 12: 2}) == {1: (0.95, 11), 2: (0.5, 12)}


class Arm:
    """A vector arm over a few vectors (exact inner product), as the port describes it."""
    hidden_files = frozenset()
    exact = True

    def __init__(self, vecs: dict[int, list[float]]):
        self.vecs = {i: np.asarray(v, dtype=np.float32) / np.linalg.norm(v) for i, v in vecs.items()}

    def count(self):
        return len(self.vecs)

    def search(self, query, k, allowed=None, banned=()):
        got = [(i, float(v @ query)) for i, v in self.vecs.items()
               if i not in banned and (allowed is None or i in allowed)]
        return sorted(got, key=lambda x: (-x[1], x[0]))[:k]


def test_meaning_by_mean_or_by_best_pair():
    arm = Arm({1: [1, 0, 0], 2: [0, 1, 0], 3: [1, 1, 0]})
    queries = np.asarray([[1, 0, 0], [0, 1, 0]], dtype=np.float32)
    mean = nearest_chunks(arm, queries, "mean", 3)
    assert max(mean, key=lambda cid: mean[cid]) == 3 and math.isclose(mean[3], 1.0, abs_tol=1e-6)
    best = nearest_chunks(arm, queries, "best", 3)
    assert math.isclose(best[1], 1.0, abs_tol=1e-6) and math.isclose(best[2], 1.0, abs_tol=1e-6)
    assert nearest_chunks(arm, queries, "best", 3, allowed={3}) == {3: best[3]}
    assert nearest_chunks(arm, queries[:0], "mean", 3) == {}


def test_reasons_in_words():
    s = Signals(meaning=0.61, links_to=True, linked_from=True, tags=["a", "b"])
    assert reasons(s, ["x.md", "y.md", "z.md", "w.md"]) == [
        "linked both ways", "similar in meaning (cosine 0.61)", "shared tags: #a, #b",
        "co-cited by 4 notes: x.md, y.md, z.md and 1 more"]
    assert reasons(Signals(), []) == []
