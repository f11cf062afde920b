"""The ONNX Runtime backend against the real torch model: same vectors (fp32), close vectors
(int8), order kept, the graph built once and reused, and no torch once it exists."""
import json
import random
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # the real torch model, ONNX export, a subprocess

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from hybrid.core.errors import ModelUnavailable  # noqa: E402
from hybrid.embedders import (  # noqa: E402
    MINILM_ID,
    OnnxEmbedder,  # noqa: E402
    make_embedder,
    spec_id,
)

LONG = " ".join(f"Paragraph {i}: the consumer group rebalanced after partition {i % 12} lagged "
                f"behind the `orders-created` topic." for i in range(40))
TEXTS = [
    "",
    "   ",
    "hello",
    "Sourdough bread with 75% hydration",
    "How do I set up a Tailscale subnet router?",
    "Kafka > Consumers\nThe `orders-created` topic has 12 partitions; billing reads it.",
    "```python\ndef f(x: int) -> int:\n    return x * 2\n```",
    "| Key | Value |\n| --- | --- |\n| rrf_k | 10 |\n| weight_vector | 1.5 |",
    "Ünïcödé café naïve façade — “quotes” and ‘apostrophes’",
    "日本語のテキストと中文字符 mixed with English",
    "🎉 emoji 🚀 only 🙂",
    "#home-lab/networking [[Network]] ![[diagram.png]] %%comment%%",
    "K7QX2M 10.0.0.0/24 2024-03-14T09:30:00Z v1.12.0",
    "Tomatoes need six hours of sun.",
    "  leading and trailing whitespace\n\n",
    "ALL CAPS HEADLINE ABOUT RELEASE NOTES",
    "Obsidian Sync > Version history\n- Restore a previous version of a note from the sidebar.",
    "a " * 300,
    LONG,
    "Graph view > Filters\nShow attachments, orphans and existing files only.",
]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.fixture(scope="session")
def onnx_cache(tmp_path_factory):
    """One cache dir for the session: the export (~5 s) and quantization happen once."""
    return tmp_path_factory.mktemp("onnx-models")


@pytest.fixture(scope="session")
def onnx_fp32(onnx_cache):
    return OnnxEmbedder("fp32", cache_dir=onnx_cache)


@pytest.fixture(scope="session")
def onnx_int8(onnx_cache, onnx_fp32):
    onnx_fp32.ensure_model()  # int8 is quantized from the fp32 file; build that first, once
    return OnnxEmbedder("int8", cache_dir=onnx_cache)


@pytest.fixture(scope="session")
def torch_vectors(minilm_torch):
    return minilm_torch.embed_documents(TEXTS)


def test_texts_cover_truncation(counter):
    assert max(counter(TEXTS)) > 300  # beyond max_seq_length=256: truncation is exercised


def test_fp32_matches_torch(onnx_fp32, torch_vectors):
    vecs = onnx_fp32.embed_documents(TEXTS)
    assert vecs.shape == (len(TEXTS), 384) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1, atol=1e-5)
    assert cosines(vecs, torch_vectors).min() >= 0.99999  # the same model: ~2e-7 apart
    assert np.abs(vecs - torch_vectors).max() < 1e-5
    q = onnx_fp32.embed_query(TEXTS[4])
    assert q.shape == (384,) and float(q @ torch_vectors[4]) >= 0.99999


def test_int8_close_to_torch(onnx_int8, torch_vectors):
    vecs = onnx_int8.embed_documents(TEXTS)
    assert cosines(vecs, torch_vectors).min() >= 0.98


def test_batches_keep_the_callers_order(onnx_cache, onnx_fp32):
    small = OnnxEmbedder("fp32", cache_dir=onnx_cache, batch_size=3)  # 7 batches, length-sorted
    perm = random.Random(7).sample(range(len(TEXTS)), len(TEXTS))
    shuffled = small.embed_documents([TEXTS[i] for i in perm])
    whole = onnx_fp32.embed_documents(TEXTS)
    assert cosines(shuffled, whole[perm]).min() >= 0.9999
    assert small.embed_documents([]).shape == (0, 384)


def test_ids_and_protocol(minilm, minilm_torch, onnx_fp32, onnx_int8, counter):
    """Both runtimes of the same vectors record one id (indexes are interchangeable); int8's
    vectors differ and record their own."""
    assert isinstance(minilm, OnnxEmbedder) and minilm.variant == "fp32"  # the default runs without torch
    assert minilm.id == minilm_torch.id == onnx_fp32.id == MINILM_ID
    assert spec_id("minilm") == spec_id("minilm-onnx") == spec_id("minilm-torch") == MINILM_ID
    assert spec_id("minilm-int8") == onnx_int8.id == MINILM_ID + "+onnx-int8"
    assert onnx_fp32.dim == 384 and onnx_fp32.max_tokens == minilm_torch.max_tokens == 254
    assert onnx_int8.count_tokens(TEXTS) == counter(TEXTS)


def test_make_embedder_uses_the_data_dir(hybrid_home):
    emb = make_embedder("minilm-int8", batch_size=8)
    assert isinstance(emb, OnnxEmbedder) and emb.batch_size == 8 and emb.variant == "int8"
    assert emb.cache_dir == hybrid_home / "data" / "models"
    assert not emb.cache_dir.exists()  # nothing is built until the first embedding


def test_second_instance_reuses_the_cached_graph(onnx_cache, onnx_int8, monkeypatch):
    onnx_int8.embed_query("build")
    files = sorted(onnx_cache.iterdir())
    assert [f.suffix for f in files] == [".onnx", ".onnx"]  # fp32 and int8, no temp files left
    before = {f: f.stat().st_mtime_ns for f in files}

    def no_export(self, out):
        raise AssertionError("re-exported although the graph is cached")
    monkeypatch.setattr(OnnxEmbedder, "_export", no_export)
    again = OnnxEmbedder("int8", cache_dir=onnx_cache)
    assert again.ensure_model() == onnx_int8.ensure_model()
    assert np.allclose(again.embed_query(TEXTS[5]), onnx_int8.embed_query(TEXTS[5]), atol=1e-6)
    assert {f: f.stat().st_mtime_ns for f in sorted(onnx_cache.iterdir())} == before


def embed_in_a_fresh_process(cache, variants, texts) -> dict:
    """{"heavy": torch-family modules the process imported, "vectors": {variant: vectors}} from
    a new interpreter embedding ``texts`` with OnnxEmbedder over ``cache``."""
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from hybrid.embedders import OnnxEmbedder\n"
        f"cache, variants = Path({str(cache)!r}), {list(variants)!r}\n"
        "texts = json.loads(sys.stdin.read())\n"
        "out = {v: OnnxEmbedder(v, cache_dir=cache).embed_documents(texts).tolist() for v in variants}\n"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules]\n"
        "print(json.dumps({'heavy': heavy, 'vectors': out}))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], input=json.dumps(texts), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_the_graph_is_built_and_embeds_without_torch(tmp_path, onnx_fp32):
    """From the wheel's safetensors to a query vector in a fresh process that never imports
    torch (hybrid.embedders.bert_onnx): the default install need not carry it for MiniLM."""
    got = embed_in_a_fresh_process(tmp_path, ["fp32"], TEXTS[:6])
    assert got["heavy"] == [] and [p.suffix for p in tmp_path.iterdir()] == [".onnx"]
    assert np.abs(np.array(got["vectors"]["fp32"]) - onnx_fp32.embed_documents(TEXTS[:6])).max() < 1e-6


def test_cached_graph_embeds_without_torch(onnx_cache, onnx_fp32, onnx_int8):
    onnx_int8.ensure_model()
    got = embed_in_a_fresh_process(onnx_cache, ["fp32", "int8"], TEXTS[:4])
    assert got["heavy"] == []
    assert np.allclose(got["vectors"]["fp32"], onnx_fp32.embed_documents(TEXTS[:4]), atol=1e-5)


def test_missing_onnxruntime_is_one_line(onnx_cache, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # makes `import onnxruntime` fail
    with pytest.raises(ModelUnavailable, match=r"pip install onnxruntime"):
        OnnxEmbedder("fp32", cache_dir=onnx_cache).embed_query("x")
