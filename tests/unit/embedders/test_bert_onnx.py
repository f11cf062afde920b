"""The BERT graph written from a checkpoint (hybrid.embedders.bert_onnx) on a tiny seeded
model, and what the first use of a model does when its cache folder or files are not as
expected: one line naming the fix, never a traceback or a half-written file."""
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")

from hybrid.core.errors import ModelUnavailable  # noqa: E402
from hybrid.embedders import e5 as e5mod  # noqa: E402
from hybrid.embedders.bert_onnx import build_bert_graph  # noqa: E402

# graph_digest of the tiny model's graph as build_bert_graph wrote it before it was split into
# parts (issue #51): the split left every node, name, attribute and tensor as it was
TINY_DIGEST = "609400f4dbfb51def299ffcd4dac389b515f0c5384fd2fa9270e851865e97955"


def tiny_bert(folder: Path, prefix: str = "") -> Path:
    """A 2-layer BERT of width 8 with seeded random weights, saved as BertModel (or, with
    ``prefix`` "bert.", BertFor*) saves it, with the pooler sentence-transformers leaves unused."""
    from safetensors.numpy import save_file
    folder.mkdir(parents=True, exist_ok=True)
    h, ff, vocab, pos = 8, 16, 20, 16
    (folder / "config.json").write_text(json.dumps({
        "model_type": "bert", "hidden_act": "gelu", "hidden_size": h, "num_attention_heads": 2,
        "num_hidden_layers": 2, "intermediate_size": ff, "layer_norm_eps": 1e-12,
        "vocab_size": vocab, "max_position_embeddings": pos, "type_vocab_size": 2}))
    rng = np.random.default_rng(51)
    shapes = {"embeddings.word_embeddings.weight": (vocab, h), "embeddings.position_embeddings.weight": (pos, h),
              "embeddings.token_type_embeddings.weight": (2, h), "embeddings.LayerNorm.weight": (h,),
              "embeddings.LayerNorm.bias": (h,), "pooler.dense.weight": (h, h), "pooler.dense.bias": (h,)}
    for i in range(2):
        p = f"encoder.layer.{i}."
        for lin, (o, n) in {"attention.self.query": (h, h), "attention.self.key": (h, h),
                            "attention.self.value": (h, h), "attention.output.dense": (h, h),
                            "intermediate.dense": (ff, h), "output.dense": (h, ff)}.items():
            shapes[p + lin + ".weight"], shapes[p + lin + ".bias"] = (o, n), (o,)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[p + ln + ".weight"], shapes[p + ln + ".bias"] = (h,), (h,)
    save_file({prefix + k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()},
              str(folder / "model.safetensors"))
    return folder


def graph_digest(path: Path) -> str:
    """Every node (op, name, inputs, outputs, attributes), tensor (name, shape, type, values),
    input and output of the graph at ``path``, independent of how protobuf lays them out."""
    import onnx
    from onnx import helper, numpy_helper
    m = onnx.load(str(path))
    h = hashlib.sha256(f"ir{m.ir_version} opset{[(o.domain, o.version) for o in m.opset_import]} "
                       f"{m.graph.name}".encode())
    for n in m.graph.node:
        attrs = sorted((a.name, repr(helper.get_attribute_value(a))) for a in n.attribute)
        h.update(repr((n.op_type, n.name, list(n.input), list(n.output), attrs)).encode())
    for t in m.graph.initializer:
        h.update(repr((t.name, list(t.dims), t.data_type)).encode() + numpy_helper.to_array(t).tobytes())
    for v in list(m.graph.input) + list(m.graph.output):
        h.update(str(v).encode())
    return h.hexdigest()


@pytest.mark.parametrize("prefix", ["", "bert."])
def test_the_graph_of_a_tiny_bert_is_pinned(tmp_path, prefix):
    model = tiny_bert(tmp_path / "m", prefix)
    info = build_bert_graph(model, tmp_path / "g.onnx", name="tiny")
    assert graph_digest(tmp_path / "g.onnx") == TINY_DIGEST
    assert info == {"nodes": 81, "initializers": 48, "opset": 17, "ir_version": 8,
                    "unused_weights": [f"{prefix}pooler.dense.bias", f"{prefix}pooler.dense.weight"],
                    "weights_file": "model.safetensors"}


@pytest.mark.slow  # loads ONNX Runtime
def test_the_tiny_graph_runs_on_onnx_runtime(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    build_bert_graph(tiny_bert(tmp_path / "m"), tmp_path / "g.onnx", name="tiny")
    session = ort.InferenceSession(str(tmp_path / "g.onnx"), providers=["CPUExecutionProvider"])
    ids = np.array([[1, 5, 7, 2, 0]], dtype=np.int64)
    out = session.run(None, {"input_ids": ids, "attention_mask": (ids > 0).astype(np.int64),
                             "token_type_ids": np.zeros_like(ids)})[0]
    assert out.shape == (1, 5, 8) and np.isfinite(out).all()


def test_an_unreadable_checkpoint_is_one_line(tmp_path):
    """A damaged model.safetensors (e5-small's converted folder after a disk fault, say)."""
    model = tiny_bert(tmp_path / "m")
    (model / "model.safetensors").write_bytes(b"\x10\x00")
    with pytest.raises(ModelUnavailable) as exc:
        build_bert_graph(model, tmp_path / "g.onnx")
    assert "\n" not in str(exc.value) and str(model / "model.safetensors") in str(exc.value)
    assert not (tmp_path / "g.onnx").exists()


@pytest.mark.slow  # loads ONNX Runtime (the graph's name carries its version)
def test_an_unwritable_cache_folder_is_one_line(tmp_path):
    """MiniLM's graph is built at first use into the data folder; a read-only one (here: a file
    where the folder would be) is named, as e5-small's conversion names it."""
    pytest.importorskip("onnxruntime")
    from hybrid.embedders.onnx import OnnxEmbedder
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    emb = OnnxEmbedder("fp32", cache_dir=blocked / "models")
    with pytest.raises(ModelUnavailable, match=r"^cannot write the ONNX graph of all-MiniLM-L6-v2 into "):
        emb.ensure_model()


def test_a_converted_folder_missing_its_marker_is_converted_again(tmp_path, monkeypatch):
    """modules.json is written last, so a folder without it is not one this module finished
    (made by hand, or damaged since): the conversion replaces it instead of failing on it."""
    source = tmp_path / "image.bin"
    source.write_bytes(b"E5S1 stand-in")
    cache = tmp_path / "models"
    folder = e5mod.cache_folder(source, cache)
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"half")
    monkeypatch.setattr(e5mod, "read_image", lambda path: "image")
    monkeypatch.setattr(e5mod, "write_model", lambda image, out: (out / "modules.json").write_text("[]"))
    assert e5mod.ensure_model(source, cache) == folder
    assert sorted(p.name for p in folder.iterdir()) == ["modules.json"]
    assert [p.name for p in cache.iterdir() if p.name.startswith(".")] == []  # no temporary folder left
