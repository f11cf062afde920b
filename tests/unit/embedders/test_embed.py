import pytest

from hybrid.core.errors import ConfigError, ModelUnavailable
from hybrid.embedders import make_embedder, minilm_path, spec_id


@pytest.mark.slow
def test_local_sentence_transformers_directory(minilm_torch):
    st = make_embedder(f"st:{minilm_path()}")
    assert st.id == spec_id(f"st:{minilm_path()}") and st.id.startswith("st:/")
    assert st.dim == 384 and st.max_tokens == 254  # read from the files, model not loaded yet
    assert st._model is None
    st._model = minilm_torch.model  # same weights; spare the test a second load
    v = st.embed_query("tailscale subnet router")
    assert v.shape == (384,) and abs(float((v ** 2).sum()) - 1) < 1e-4
    assert st.count_tokens(["hello world"]) == [2]


def test_missing_models_and_bad_specs_are_one_line(tmp_path):
    with pytest.raises(ModelUnavailable, match="no sentence-transformers model"):
        make_embedder(f"st:{tmp_path}")
    with pytest.raises(ConfigError, match="unknown embedder"):
        make_embedder("voyage:voyage-3")


@pytest.mark.slow
def test_minilm_document_and_query_vectors_agree(minilm):
    docs = minilm.embed_documents(["Sourdough bread with 75% hydration", "Kafka consumer lag runbook"])
    q = minilm.embed_query("how wet is my bread dough")
    assert docs.shape == (2, 384)
    assert float(docs[0] @ q) > float(docs[1] @ q)


@pytest.mark.slow
def test_openmp_threads_sleep_when_idle():
    """Importing hybrid asks OpenMP (torch, FAISS) for passive waits unless the user chose:
    spinning idle threads made query embedding 40x slower on a busy 2-core machine."""
    import subprocess
    import sys
    code = "import os, hybrid; print(os.environ.get('OMP_WAIT_POLICY'))"
    env = {k: v for k, v in __import__("os").environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "PASSIVE"
    out = subprocess.run([sys.executable, "-c", code], env={**env, "OMP_WAIT_POLICY": "ACTIVE"},
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ACTIVE"


@pytest.mark.slow
def test_query_embedding_leaves_the_thread_setting_alone(minilm_torch):
    """Queries run on one thread; document batches must keep every core afterwards."""
    import torch
    before = torch.get_num_threads()
    minilm_torch.embed_query("a short question")
    assert torch.get_num_threads() == before
