"""The embedding cache hybrid eval shares between chunkings: a text embedded for one chunking is
served to the next bit for bit, and the figures are the same as with fresh embeddings."""
import json

import numpy as np
import pytest
from helpers import CountingEmbedder, write

from hybrid.core.settings import Settings
from hybrid.eval.inputs import Problems, load_qrels, load_queries
from hybrid.eval.run import CachingEmbedder, grid, run_eval


def test_a_reused_vector_is_the_fresh_one_bit_for_bit():
    inner = CountingEmbedder("hash:64")
    cached = CachingEmbedder(inner)
    first = cached.embed_documents(["tomatoes need sun", "kafka lag"])
    again = cached.embed_documents(["kafka lag", "sourdough", "tomatoes need sun"])
    assert inner.texts == 3 and cached.embedded == 3 and cached.requested == 5 and cached.reused == 2
    fresh = inner.inner.embed_documents(["kafka lag", "sourdough", "tomatoes need sun"])
    assert again.tobytes() == fresh.astype(np.float32).tobytes()
    assert again[2].tobytes() == first[0].tobytes()
    other = CachingEmbedder(CountingEmbedder("hash:32"))
    assert other.key("kafka lag") != cached.key("kafka lag")  # the embedder's id is in the key
    off = CachingEmbedder(CountingEmbedder("hash:64"), reuse=False)
    off.embed_documents(["a", "a"])
    assert off.embedded == 2 and off.reused == 0


@pytest.mark.slow  # ranx compiles nDCG with numba on first use
def test_two_chunkings_embed_shared_texts_once_and_score_the_same(vault, tmp_path):
    write(vault, "long.md", "# Long\n\n" + "\n\n".join(f"## Part {i}\n\n" + f"word{i} " * 60 for i in range(6)))
    q = write(tmp_path, "q.jsonl", '{"qid": "g", "text": "tomatoes sun"}\n{"qid": "p", "text": "word3"}\n')
    r = write(tmp_path, "r.json", json.dumps({"g": {"home/garden.md": 2}, "p": {"long.md": 2}}))
    p = Problems()
    queries, qrels = load_queries(q, p), load_qrels(r, p)
    configs = grid(["lexical", "vector", "hybrid"], [48, 96], [8], [True], [10], [(1.0, 1.5)])
    settings = Settings(embedder="hash:64")
    runs = {}
    for reuse in (True, False):
        emb = CountingEmbedder("hash:64")
        res = run_eval(vault, queries, qrels, configs, settings, Problems(), embedder=emb, metrics=["ndcg@10"],
                       reuse_embeddings=reuse, workdir=tmp_path)
        runs[reuse] = (emb.texts, res)
    (cached_texts, cached), (fresh_texts, fresh) = runs[True], runs[False]
    # the short notes chunk alike under both sizes: embedded once; the long one differs
    assert cached_texts == cached.chunks_embedded < fresh_texts == fresh.chunks_embedded
    assert cached.chunks_reused == fresh_texts - cached_texts > 0
    assert [(c.config.name, c.metrics, c.run) for c in cached.results] == \
           [(c.config.name, c.metrics, c.run) for c in fresh.results]


@pytest.mark.slow
def test_minilm_vectors_do_not_depend_on_the_batch(minilm):
    """The cache serves a text's vector from whichever batch embedded it first: with the real
    model that is the vector of the text embedded alone, bit for bit."""
    cached = CachingEmbedder(minilm)
    cached.embed_documents(["tomatoes need six hours of sun",
                            "a much longer text about kafka consumer lag, partitions and offsets " * 3])
    reused = cached.embed_documents(["tomatoes need six hours of sun"])
    assert cached.reused == 1
    assert reused.tobytes() == minilm.embed_documents(["tomatoes need six hours of sun"]).tobytes()


@pytest.mark.slow  # ranx compiles nDCG with numba on first use
def test_the_evaluations_own_index_is_deleted_after_it(vault, tmp_path, monkeypatch):
    """`hybrid eval` indexes the vault into a temporary home of its own (a copy of the notes'
    text): it is gone once the figures are out, in the system's temp folder as in a given one."""
    import tempfile
    q = write(tmp_path, "q.jsonl", '{"qid": "g", "text": "tomatoes sun"}\n')
    r = write(tmp_path, "r.json", json.dumps({"g": {"home/garden.md": 2}}))
    queries, qrels = load_queries(q, Problems()), load_qrels(r, Problems())
    configs = grid(["lexical"], [48], [8], [True], [10], [(1.0, 1.5)])
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    for workdir in (None, tmp_path / "work"):
        if workdir:
            workdir.mkdir()
        res = run_eval(vault, queries, qrels, configs, Settings(embedder="hash:64"), Problems(),
                       embedder=CountingEmbedder("hash:64"), metrics=["ndcg@10"], workdir=workdir)
        assert res.results[0].metrics["ndcg@10"] > 0
        assert list((workdir or temp).iterdir()) == []
