"""The rerank stage with a tiny cross-encoder the test builds itself (random BERT, no download)."""
import shutil

import pytest

from hybrid.core.errors import ModelUnavailable
from hybrid.embedders import make_reranker, minilm_path
from hybrid.retrieval.rerank import blend, pinned


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory):
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    out = tmp_path_factory.mktemp("tiny-ce")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512, num_labels=1)
    BertForSequenceClassification(config).save_pretrained(out)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(minilm_path() / name, out / name)
    return out


def test_blend_weighs_fusion_order_against_the_model():
    # A strong model preference lifts rank 4 over a neutral rank 2 ...
    s = blend([0.0, 0.0, 0.0, 6.0])
    assert s[3] > s[1]
    # ... but a mildly disliked rank 1 stays above a mildly liked rank 10.
    s = blend([-1.0] + [0.0] * 8 + [1.0])
    assert s[0] > s[9]
    # deeper in the list the model gets its way
    deep = blend([0.0] * 10 + [-5.0, 8.0])
    assert deep[11] > deep[10]


def test_exact_literal_in_top_hit_is_pinned():
    assert pinned(["orders-created"], ["the Orders-Created topic", "other"]) == 1
    assert pinned(["orders-created", "10.0.0.0/24"], ["orders-created only", "x"]) == 0
    assert pinned([], ["anything"]) == 0


@pytest.mark.slow
def test_real_loading_and_scoring(tiny_cross_encoder):
    r = make_reranker(str(tiny_cross_encoder))
    s = r.scores("tailscale subnet router", ["advertise routes on the router", "sourdough hydration"])
    assert len(s) == 2 and all(isinstance(x, float) for x in s) and s[0] != s[1]
    # deterministic for the same inputs
    assert r.scores("tailscale subnet router", ["advertise routes on the router"])[0] == pytest.approx(s[0])


@pytest.mark.slow
def test_search_with_rerank(fake, vault, tiny_cross_encoder):
    fake.add_vault(vault, "vault")
    fake.index()
    fake.override(rerank_model=str(tiny_cross_encoder))
    plain = fake.search("tailscale routes", top_k=3)
    hits = fake.search("tailscale routes", top_k=3, rerank=True)
    assert {h.path for h in hits} <= {h.path for h in fake.search("tailscale routes", top_k=50)}
    assert all(h.rerank_score is not None for h in hits)
    assert plain[0].rerank_score is None


def test_missing_cross_encoder_is_one_line(fake, vault, tmp_path):
    fake.add_vault(vault, "vault")
    fake.index()
    with pytest.raises(ModelUnavailable, match="set `rerank_model`"):
        fake.search("tailscale", rerank=True)
    fake.override(rerank_model="nobody/not-a-cached-model")
    with pytest.raises(ModelUnavailable, match="neither a local directory nor in the local Hugging Face cache"):
        fake.search("tailscale", rerank=True)
    fake.override(rerank_model=str(tmp_path))
    with pytest.raises(ModelUnavailable, match="no config.json"):
        fake.search("tailscale", rerank=True)


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_rerank_is_skipped_when_an_exact_literal_answers(fake, vault, monkeypatch):
    fake.add_vault(vault, "vault")
    fake.index()
    calls = []

    class Counting:
        id = "counting"

        def scores(self, query, passages):
            calls.append(query)
            return [0.0] * len(passages)

    monkeypatch.setattr(fake, "reranker", lambda: Counting())
    hits = fake.search("orders-created", top_k=3, rerank=True)
    assert "orders-created" in hits[0].text and calls == []
    assert all(h.rerank_score is None for h in hits)
    hits = fake.search("tomatoes in the sun", top_k=3, rerank=True)
    assert calls == ["tomatoes in the sun"] and hits[0].rerank_score is not None
