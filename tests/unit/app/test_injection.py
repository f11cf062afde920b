"""Models are injected into a handle instead of written into its private attributes."""
import pytest

import hybrid
from hybrid.embedders import HashEmbedder


class CountingReranker:
    id = "counting"

    def __init__(self):
        self.calls = 0

    def scores(self, query, passages):
        self.calls += 1
        return [float(len(p)) for p in passages]


def test_embedder_instances_are_used_for_their_id(tmp_path, vault):
    emb = HashEmbedder(32)
    h = hybrid.open(tmp_path / "home", embedder="hash:32", embedders=[emb])
    h.add_vault(vault, "v")
    h.index()
    assert h.embedder("hash:32") is emb
    assert h.search("tomatoes", mode="vector")


def test_embedder_factory_builds_the_others(tmp_path, vault):
    built = []

    def factory(spec):
        built.append(spec)
        return HashEmbedder(int(spec.split(":")[1]))

    h = hybrid.open(tmp_path / "home", embedder="hash:24", embedder_factory=factory)
    h.add_vault(vault, "v")
    h.index()
    h.search("tomatoes")
    assert built == ["hash:24"] and h.status()[0].dim == 24


def test_reranker_instance_or_factory(tmp_path, vault):
    rr = CountingReranker()
    h = hybrid.open(tmp_path / "home", embedder="hash:16", reranker=rr)
    h.add_vault(vault, "v")
    h.index()
    hits = h.search("tomatoes", rerank=True)
    assert rr.calls == 1 and all(x.rerank_score is not None for x in hits)
    specs = []

    def factory(spec):
        specs.append(spec)
        return CountingReranker()

    h2 = hybrid.open(tmp_path / "home", embedder="hash:16", rerank_model="mine", reranker=factory)
    h2.search("tomatoes", rerank=True)
    h2.search("garden", rerank=True)
    assert specs == ["mine"]  # built once, kept


def test_options_with_a_ready_request_are_refused(fake):
    with pytest.raises(TypeError, match="inside the SearchRequest"):
        fake.search(hybrid.SearchRequest("x"), top_k=3)
