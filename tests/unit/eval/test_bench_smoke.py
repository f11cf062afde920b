"""The scale benchmark suite at its smallest sizes: correctness only (counts, recall of the
approximate index), never timings — the machine is shared and noisy. The large sizes run on
demand with ``eval/bench/run.py``."""


import pytest
from helpers import REPO

pytestmark = pytest.mark.slow  # benchmarks, even at their smallest sizes

BENCH = REPO / "eval" / "bench"


@pytest.fixture(autouse=True)
def bench_on_path(monkeypatch):
    """The bench files are scripts that import their siblings (``import common``), as they do
    when run as ``python eval/bench/NAME.py``; here their folder goes on sys.path per test."""
    monkeypatch.syspath_prepend(str(BENCH))
    from hybrid import embedders  # a bench may register its `bench` spec: only for this test
    monkeypatch.setattr(embedders.registry, "_EXACT", dict(embedders.registry._EXACT))


def test_vector_bench_small(tmp_path):
    import vectors
    res = vectors.run([20_000], ["clustered"], ["flat-float32", "ivf-float32", "ivf-float16"], 40,
                      tmp_path / "out", verbose=False, work_dir=tmp_path)
    by = {r["layout"]: r for r in res}
    assert set(by) == {"flat-float32", "ivf-float32", "ivf-float16"}
    assert not [r for r in res if "error" in r], [r.get("error") for r in res]
    assert by["flat-float32"]["kind"] == "flat" and by["flat-float32"]["unfiltered"]["recall10"] == 1.0
    for name in ("ivf-float32", "ivf-float16"):
        r = by[name]
        assert r["kind"] == "ivf" and r["nprobe"] < r["nlist"]
        for mode in ("unfiltered", "allowed10", "banned1"):
            assert r[mode]["recall10"] >= 0.98, (name, mode, r[mode])
            assert r[mode]["short_queries"] == 0
    assert by["ivf-float16"]["bytes_per_vector"] * 1.9 <= by["ivf-float32"]["bytes_per_vector"]
    assert (tmp_path / "out" / "results.json").exists()


def test_engine_bench_small(tmp_path):
    """A generated vault through the whole scale benchmark (index, re-index, warm queries,
    server, cold CLI): every stage runs, counts agree, every query mode answers."""
    import scale

    import hybrid
    res = scale.run([120], queries=6, out_dir=tmp_path / "out", work=tmp_path, repeat=1, log=lambda *_: None)
    (r,) = res
    assert r["notes"] == 120 and r["chunks"] > 120
    h = hybrid.open(tmp_path / "home-120")
    st = h.status()[0]
    assert st.notes == 120 and st.chunks == r["chunks"] and st.pending == 0
    store = h.session.store(h.vaults[0])
    assert store.lexical.count() == store.vector.count() == r["chunks"]
    for where in ("warm", "http"):
        for mode in ("lexical", "vector", "hybrid", "hybrid+filters"):
            assert r[where][mode]["answered"] == 6, (where, mode)
    assert set(r["stage_seconds"]) >= {"discover", "read_parse", "chunk", "embed", "catalog", "tantivy", "faiss"}
    assert r["reindex"]["noop_s"] > 0 and r["bytes_per_chunk"] > 0
