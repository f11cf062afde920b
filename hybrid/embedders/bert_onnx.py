"""A BERT encoder as an ONNX graph, written node by node with the ``onnx`` helper API from the
``model.safetensors`` of a sentence-transformers folder: no torch, no transformers.

What :mod:`hybrid.embedders.onnx` runs for ``minilm`` / ``minilm-int8`` / ``e5-small``. The graph is the
bare transformer (token embeddings out); pooling and normalization stay in numpy. Built this way
it matches sentence-transformers to cosine >= 0.9999998 on 198 texts (max abs diff 2.2e-7) and
torch's own ONNX export bit for bit (``eval/scout/onnx_without_torch.py``, where it was
prototyped). Node names follow torch's exporter (``/encoder/layer.0/…``): the int8 recipe finds
the first layer by them, and GELU is spelled as torch exports it so ONNX Runtime fuses it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from hybrid.core.errors import ModelUnavailable

OPSET = 17  # LayerNormalization (opset 17) is the newest op used; Erf needs 9, Softmax's 1-axis form 13
IR_VERSION = 8  # the IR version that goes with opset 17. helper.make_model would write a newer one
# (IR 14 with onnx 1.23), which older onnxruntime releases refuse to load; pinned.


def build_bert_graph(model_dir: Path, out: Path, name: str = "all-MiniLM-L6-v2") -> dict:
    """Write the BERT encoder of ``model_dir`` to ``out``: inputs ``input_ids``, ``attention_mask``,
    ``token_type_ids`` (int64, [batch, sequence]), output ``token_embeddings`` ([batch, sequence,
    hidden], the last hidden state). Needs numpy, safetensors and onnx only."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from safetensors.numpy import load_file

    cfg = json.loads((model_dir / "config.json").read_text())
    if cfg.get("model_type") != "bert" or cfg.get("hidden_act") != "gelu" \
            or cfg.get("position_embedding_type", "absolute") != "absolute":
        raise ModelUnavailable(f"{model_dir} is not a BERT model with GELU and absolute positions "
                               f"({cfg.get('model_type')}, {cfg.get('hidden_act')}): no ONNX graph for it")
    hidden, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    head_dim = hidden // heads
    eps = float(cfg["layer_norm_eps"])
    weights_file = model_dir / "model.safetensors"
    if not weights_file.exists():
        raise ModelUnavailable(f"{weights_file} is missing (a pytorch_model.bin would need torch to "
                               f"read): reinstall the package that ships the model")
    w = load_file(str(weights_file))
    # Checkpoints saved by BertModel have no prefix; those saved by BertFor* carry "bert.".
    prefix = "bert." if any(k.startswith("bert.") for k in w) else ""

    inits: list = []
    init_names: set[str] = set()
    nodes: list = []

    def init(name: str, array: np.ndarray) -> str:
        """A constant; a name already given is reused (small shared constants like ``zero``)."""
        if name not in init_names:
            init_names.add(name)
            inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    used: set[str] = set()

    def weight(key: str) -> np.ndarray:
        used.add(prefix + key)
        return w[prefix + key].astype(np.float32)

    def node(op: str, inputs: list[str], name: str, **attrs) -> str:
        """One node with one output, named like torch's exporter names them (``/encoder/layer.0/...``):
        hybrid's int8 recipe finds the first layer by ``/layer.0/`` in node names."""
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def linear(x: str, key: str, name: str) -> str:
        """x @ W.T + b; torch.nn.Linear stores W as [out, in], the graph keeps [in, out]."""
        wt = init(f"{key}.weight.T", weight(f"{key}.weight").T)
        b = init(f"{key}.bias", weight(f"{key}.bias"))
        return node("Add", [node("MatMul", [x, wt], f"{name}/MatMul"), b], f"{name}/Add")

    def layer_norm(x: str, key: str, name: str) -> str:
        return node("LayerNormalization", [x, init(f"{key}.weight", weight(f"{key}.weight")),
                                           init(f"{key}.bias", weight(f"{key}.bias"))],
                    f"{name}/LayerNormalization", axis=-1, epsilon=eps)

    i64 = lambda name, values: init(name, np.array(values, dtype=np.int64))  # noqa: E731
    f32 = lambda name, value: init(name, np.array(value, dtype=np.float32))  # noqa: E731

    # --- embeddings: word + position + token type, then LayerNorm -------------------------------
    # Position ids are 0..seq-1 (what BertModel uses when none are given): a Slice of the table
    # by the runtime sequence length. Sequences longer than max_position_embeddings (512) would
    # fail at the Add; the tokenizer truncates at 256 long before that.
    shape = node("Shape", ["input_ids"], "/embeddings/Shape")
    seq_len = node("Slice", [shape, i64("one", [1]), i64("two", [2])], "/embeddings/seq_len")
    positions = node("Slice", [init("position_embeddings", weight("embeddings.position_embeddings.weight")),
                               i64("zero", [0]), seq_len, i64("zero", [0])], "/embeddings/positions")
    words = node("Gather", [init("word_embeddings", weight("embeddings.word_embeddings.weight")), "input_ids"],
                 "/embeddings/words")
    types = node("Gather", [init("token_type_embeddings", weight("embeddings.token_type_embeddings.weight")),
                            "token_type_ids"], "/embeddings/token_types")
    x = node("Add", [node("Add", [words, types], "/embeddings/Add"), positions], "/embeddings/Add_1")
    x = layer_norm(x, "embeddings.LayerNorm", "/embeddings/LayerNorm")

    # --- additive attention mask, [batch, 1, 1, seq]: 0 where attended, float32 min elsewhere ---
    # (as BertModel's eager path builds it with transformers 5.x; older releases used -10000.
    # Either gives exp() == 0 in float32, so padded keys contribute exactly nothing.)
    m = node("Cast", ["attention_mask"], "/mask/Cast", to=TensorProto.FLOAT)
    m = node("Sub", [f32("one_f", 1.0), m], "/mask/Sub")
    m = node("Mul", [m, f32("mask_min", np.finfo(np.float32).min)], "/mask/Mul")
    mask = node("Unsqueeze", [m, i64("axes_1_2", [1, 2])], "/mask/Unsqueeze")

    heads_shape = i64("heads_shape", [0, 0, heads, head_dim])  # 0 = keep batch / sequence
    merged_shape = i64("merged_shape", [0, 0, hidden])
    scale = f32("inv_sqrt_head_dim", 1.0 / np.sqrt(head_dim))  # HF scales the scores (Q @ K^T) / sqrt(d)
    half, one, sqrt2 = f32("half", 0.5), f32("one_f", 1.0), f32("sqrt2", np.sqrt(2.0))

    for i in range(int(cfg["num_hidden_layers"])):
        k, n = f"encoder.layer.{i}", f"/encoder/layer.{i}"
        # self-attention: [b, s, h] -> [b, heads, s, d]
        def split(t: str, perm: list[int], what: str, n: str = n) -> str:
            return node("Transpose", [node("Reshape", [t, heads_shape], f"{n}/attention/self/{what}/Reshape")],
                        f"{n}/attention/self/{what}/Transpose", perm=perm)
        q = split(linear(x, f"{k}.attention.self.query", f"{n}/attention/self/query"), [0, 2, 1, 3], "q")
        kt = split(linear(x, f"{k}.attention.self.key", f"{n}/attention/self/key"), [0, 2, 3, 1], "k")
        v = split(linear(x, f"{k}.attention.self.value", f"{n}/attention/self/value"), [0, 2, 1, 3], "v")
        scores = node("MatMul", [q, kt], f"{n}/attention/self/scores")
        scores = node("Mul", [scores, scale], f"{n}/attention/self/scale")
        scores = node("Add", [scores, mask], f"{n}/attention/self/mask")
        probs = node("Softmax", [scores], f"{n}/attention/self/Softmax", axis=-1)
        ctx = node("MatMul", [probs, v], f"{n}/attention/self/context")
        ctx = node("Transpose", [ctx], f"{n}/attention/self/context/Transpose", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, merged_shape], f"{n}/attention/self/context/Reshape")
        a = linear(ctx, f"{k}.attention.output.dense", f"{n}/attention/output/dense")
        a = node("Add", [a, x], f"{n}/attention/output/residual")
        x = layer_norm(a, f"{k}.attention.output.LayerNorm", f"{n}/attention/output/LayerNorm")
        # feed-forward with exact GELU, (h * (1 + erf(h / sqrt(2)))) * 0.5, spelled as torch exports
        # it, Div(sqrt 2) -> Erf -> Add(1) -> Mul(h) -> Mul(0.5): ORT fuses this (with the bias Add)
        # into BiasGelu. The spelling (0.5 * h) * (1 + erf(h * (1/sqrt 2))) was left unfused (tried).
        h = linear(x, f"{k}.intermediate.dense", f"{n}/intermediate/dense")
        g = node("Erf", [node("Div", [h, sqrt2], f"{n}/intermediate/gelu/Div")], f"{n}/intermediate/gelu/Erf")
        g = node("Add", [g, one], f"{n}/intermediate/gelu/Add")
        g = node("Mul", [node("Mul", [h, g], f"{n}/intermediate/gelu/Mul"), half], f"{n}/intermediate/gelu/Mul_1")
        o = linear(g, f"{k}.output.dense", f"{n}/output/dense")
        o = node("Add", [o, x], f"{n}/output/residual")
        x = layer_norm(o, f"{k}.output.LayerNorm", f"{n}/output/LayerNorm")

    nodes.append(helper.make_node("Identity", [x], ["token_embeddings"], name="/output"))
    dims = ["batch", "sequence"]
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(name, TensorProto.INT64, dims)
         for name in ("input_ids", "attention_mask", "token_type_ids")],
        [helper.make_tensor_value_info("token_embeddings", TensorProto.FLOAT, [*dims, hidden])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="hybrid", ir_version=IR_VERSION)
    unused = set(w) - used  # the pooler (BertModel's, unused by sentence-transformers), position_ids
    onnx.checker.check_model(model)  # structure only (full_check would run shape inference too)
    onnx.save(model, str(out))
    return {"nodes": len(nodes), "initializers": len(inits), "opset": OPSET, "ir_version": IR_VERSION,
            "unused_weights": sorted(unused), "weights_file": weights_file.name}
