import pytest

from hybrid.retrieval.fuse import content_stems, coverage, demote, merge_by_score, ranks, rrf
from hybrid.store.lexicon import stem_analyzer


def test_rrf_scores_are_sums_of_reciprocal_ranks():
    out = dict(rrf([["a", "b", "c"], ["c", "a"]], k=60))
    assert out["a"] == pytest.approx(1 / (60 + 1) + 1 / (60 + 2))
    assert out["c"] == pytest.approx(1 / (60 + 3) + 1 / (60 + 1))
    assert out["b"] == pytest.approx(1 / (60 + 2))
    assert [k for k, _ in rrf([["a", "b", "c"], ["c", "a"]], k=60)] == ["a", "c", "b"]


def test_rrf_weights_and_validation():
    out = dict(rrf([["a"], ["b"]], k=10, weights=[2.0, 1.0]))
    assert out["a"] == pytest.approx(2 / 11) and out["b"] == pytest.approx(1 / 11)
    with pytest.raises(ValueError):
        rrf([["a"]], weights=[1, 2])


def test_helpers():
    assert ranks(["x", "y"]) == {"x": 1, "y": 2}
    assert merge_by_score([[("a", 0.5), ("b", 0.1)], [("c", 0.9)]], 2) == [("c", 0.9), ("a", 0.5)]
    assert [k for k, _ in demote([("a", 1.0), ("b", 0.95)], {"a": 0.1})] == ["b", "a"]


def test_a_cjk_query_is_covered_by_the_bigrams_a_passage_shares():
    """The coverage of adaptive fusion compares like with like: the query's CJK bigrams (less
    those of Hiragana alone, CJK's function words) with the passage's."""
    analyze = stem_analyzer().analyze
    want = content_stems("保管庫はどこ OneDrive", analyze)
    assert want == {"保管", "管庫", "庫は", *analyze("OneDrive")}
    assert coverage(want, ["保管庫をOneDriveに置いている"], analyze) == 3 / 4
    assert coverage(want, ["同期の設定"], analyze) == 0.0
