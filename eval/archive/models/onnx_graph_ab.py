"""A/B of MiniLM's ONNX graphs (issue #13): the one torch traced (recipe 1) against the one
``hybrid/embedders/bert_onnx.py`` writes without torch (recipe 2), fp32 and int8 (each graph
with its own int8 recipe: recipe 2 also keeps the attention output projections in fp32), in one
process, three rounds in shuffled order over the same texts.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/models/onnx_graph_ab.py --old-graph OLD.onnx --new-dir DIR \\
        [--vault ../shared/vaults/obsidian-help] [--texts 320]

OLD.onnx: a recipe-1 fp32 cache file (``…+onnx-ort<ver>-<fp>.onnx`` made by an older hybrid, or
by ``eval/scout/onnx_without_torch.py``'s comparison run). DIR: a data dir's ``models/`` holding
the recipe-2 fp32 and int8 files (``HYBRID_HOME=X PYTHONPATH=eval/bench .venv/bin/python
eval/archive/models/onnx_embed.py`` builds them under ``X/data/models``). Prints texts/s per
graph (median, and each round).
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import tempfile
import time
import warnings
from pathlib import Path

from hybrid.embedders.onnx import OnnxEmbedder


def old_int8(fp32: Path) -> Path:
    """Recipe 1's int8: FFN down-projections and layer 0 in fp32, everything else int8."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    graph = onnx.load(str(fp32)).graph
    shapes = {i.name: tuple(i.dims) for i in graph.initializer}
    weighted = [n for n in graph.node if n.op_type == "MatMul" and len(shapes.get(n.input[1], ())) == 2]
    keep = {n.name for n in weighted if shapes[n.input[1]][0] > shapes[n.input[1]][1]}
    keep |= {n.name for n in weighted if "/layer.0/" in n.name}
    out = Path(tempfile.mkdtemp()) / "old-int8.onnx"
    logging.disable(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantize_dynamic(str(fp32), str(out), weight_type=QuantType.QInt8, per_channel=True,
                         nodes_to_exclude=sorted(keep))
    logging.disable(logging.NOTSET)
    return out


def embedder(path: Path, variant: str) -> OnnxEmbedder:
    e = OnnxEmbedder(variant, cache_dir=Path(tempfile.mkdtemp()))
    e.model_file = lambda variant=None, p=path: p  # type: ignore[method-assign]
    return e


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old-graph", type=Path, required=True)
    ap.add_argument("--new-dir", type=Path, required=True)
    ap.add_argument("--vault", type=Path, default=Path(__file__).resolve().parents[4] / "shared/vaults/obsidian-help")
    ap.add_argument("--texts", type=int, default=320)
    args = ap.parse_args()
    new_fp32 = next(p for p in args.new_dir.glob("*+onnx-ort*.onnx"))
    new_int8 = next(p for p in args.new_dir.glob("*+onnx-int8-ort*.onnx"))
    graphs = {"fp32 traced": embedder(args.old_graph, "fp32"), "fp32 bert_onnx": embedder(new_fp32, "fp32"),
              "int8 recipe 1": embedder(old_int8(args.old_graph), "int8"),
              "int8 recipe 2": embedder(new_int8, "int8")}
    texts = [p.read_text(errors="ignore")[:1200] for p in sorted(args.vault.rglob("*.md"))][:args.texts]
    for e in graphs.values():
        e.embed_documents(texts[:32])  # warm up
    rates: dict[str, list[float]] = {k: [] for k in graphs}
    for r in range(3):
        order = list(graphs)
        random.Random(r).shuffle(order)
        for k in order:
            t = time.perf_counter()
            graphs[k].embed_documents(texts)
            rates[k].append(len(texts) / (time.perf_counter() - t))
    for k, v in rates.items():
        print(f"{k}: {statistics.median(v):.1f} texts/s {[round(x, 1) for x in v]}")


if __name__ == "__main__":
    main()
