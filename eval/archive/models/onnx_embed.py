"""Is the ONNX Runtime backend worth it? Embedding throughput of bare `SentenceTransformer.encode`,
`minilm-onnx` (fp32) and `minilm-int8` on the same chunk texts, plus agreement with torch
(cosine), cold start and memory. Retrieval quality is measured with `hybrid eval` (commands in
eval/reports/models/onnx.md). Not a test: timings on a shared machine are noisy, so throughput is the
median of repeats, the backends interleaved block by block (rotating who goes first) and the
ratios taken within a repeat.

    HYBRID_HOME=/tmp/hybrid-onnx-bench PYTHONPATH=eval/bench .venv/bin/python eval/archive/models/onnx_embed.py \\
        [--vault ../shared/vaults/obsidian-help] [--sample 1500] [--repeat 3] [--json out.json]

The ONNX graphs are built on first use into HYBRID_HOME's data dir (timed separately).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
DEFAULT_VAULT = ROOT.parent / "shared" / "vaults" / "obsidian-help"
BACKENDS = ("bare", "minilm-onnx", "minilm-int8")
Encode = Callable[[Sequence[str]], np.ndarray]


def chunk_texts(vault: Path) -> list[str]:
    """The texts the indexer would embed for ``vault`` with default settings: same discovery,
    parsing and Chunker as hybrid/indexing/indexer.py, deduplicated like ``_embed_missing`` (first
    occurrence wins), notes in path order. The token counter is the model's tokenizer, shared
    by all three backends, so every backend sees the same chunks."""
    from hybrid.core.config import SETTINGS
    from hybrid.embedders import WordPieceCounter, minilm_path
    from hybrid.indexing.chunk import Chunker
    from hybrid.indexing.reading import read_bytes
    from hybrid.sources import markdown as notes
    s = {x.name: x.default for x in SETTINGS}
    chunker = Chunker(WordPieceCounter(minilm_path() / "tokenizer.json"), 254, s["chunk_tokens"],
                      s["chunk_overlap"], s["context_header"])
    texts: dict[str, None] = {}
    for entry in sorted(notes.discover(vault, s["include"], s["exclude"]), key=lambda e: e.path):
        text, _ = notes.decode(read_bytes(entry), entry.path)
        for c in chunker.chunk(notes.parse_note(entry.path, text)):
            texts.setdefault(c.embed_text, None)
    return list(texts)


def load(backend: str) -> Encode:
    """An encode function for ``backend``; the bare one is sentence-transformers as a user
    would call it, without the engine's wrapper."""
    from hybrid.embedders import make_embedder, minilm_path, offline_hf
    if backend == "bare":
        offline_hf()
        from sentence_transformers import SentenceTransformer
        model = SentenceTransformer(str(minilm_path()), device="cpu", local_files_only=True)
        return lambda texts: model.encode(list(texts), batch_size=32, convert_to_numpy=True,
                                          normalize_embeddings=True, show_progress_bar=False)
    emb = make_embedder(backend, batch_size=32)
    return emb.embed_documents


def build_graphs() -> dict[str, dict]:
    """Build (or find) the cached ONNX graphs first, so export time never counts as throughput."""
    from hybrid.embedders import make_embedder
    out = {}
    for spec in BACKENDS[1:]:
        emb = make_embedder(spec)
        t = time.perf_counter()
        existed = emb.model_file().exists()
        path = emb.ensure_model()
        out[spec] = {"build_s": None if existed else round(time.perf_counter() - t, 1),
                     "file_mb": round(path.stat().st_size / 1e6, 1)}
    return out


def cpu_jiffies() -> tuple[int, float]:
    """(busy jiffies of the whole machine, this process's CPU seconds incl. children)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    busy = sum(fields) - fields[3] - fields[4]  # minus idle and iowait
    t = os.times()
    return busy, t.user + t.system + t.children_user + t.children_system


def others_share(before: tuple[int, float], after: tuple[int, float], seconds: float) -> float:
    """Fraction of the machine's cores used by other processes during ``seconds``: the noise
    this measurement competed with (0 = quiet; 0.5 = one of two cores taken)."""
    hz = os.sysconf("SC_CLK_TCK")
    other = (after[0] - before[0]) / hz - (after[1] - before[1])
    return max(0.0, other / (seconds * (os.cpu_count() or 1)))


def throughput(texts: list[str], repeat: int, block: int) -> tuple[dict, dict[str, np.ndarray]]:
    """Texts/s per backend. Each repeat walks the sample in blocks of ``block`` texts (256 = the
    indexer's EMBED_GROUP, so each call is one the indexer would make) and runs every backend on
    each block before moving on, rotating who goes first: a change in the machine's load during
    a repeat then hits all backends alike. The ratio vs bare is taken within each repeat."""
    encoders = {b: load(b) for b in BACKENDS}
    for enc in encoders.values():
        enc(texts[:32])  # warm-up: first-run allocations, thread pools
    rates: dict[str, list[float]] = {b: [] for b in BACKENDS}
    parts: dict[str, list[np.ndarray]] = {}
    noise: list[float] = []
    for r in range(repeat):
        t0, c0 = time.perf_counter(), cpu_jiffies()
        spent = dict.fromkeys(BACKENDS, 0.0)
        parts = {b: [] for b in BACKENDS}
        for k, start in enumerate(range(0, len(texts), block)):
            turn = (r + k) % len(BACKENDS)
            for b in BACKENDS[turn:] + BACKENDS[:turn]:
                t = time.perf_counter()
                parts[b].append(encoders[b](texts[start:start + block]))
                spent[b] += time.perf_counter() - t
        for b in BACKENDS:
            rates[b].append(len(texts) / spent[b])
        noise.append(round(others_share(c0, cpu_jiffies(), time.perf_counter() - t0), 2))
        print(f"  repeat {r + 1}: " + ", ".join(f"{b} {rates[b][-1]:.1f}/s" for b in BACKENDS)
              + f" (other processes used {noise[-1]:.0%} of the CPUs)", file=sys.stderr, flush=True)
    res = {}
    for b in BACKENDS:
        ratios = [x / y for x, y in zip(rates[b], rates["bare"])]
        res[b] = {"texts_per_s": round(statistics.median(rates[b]), 1),
                  "repeats": [round(x, 1) for x in rates[b]],
                  "ratio_vs_bare": round(statistics.median(ratios), 2),
                  "ratios": [round(x, 2) for x in ratios]}
    res["other_processes_cpu_share"] = noise
    return res, {b: np.concatenate(v) for b, v in parts.items()}


def agreement(vectors: dict[str, np.ndarray]) -> dict:
    ref = vectors["bare"]
    out = {}
    for b in BACKENDS[1:]:
        cos = (vectors[b] * ref).sum(axis=1)
        out[b] = {"mean": round(float(cos.mean()), 5), "p1": round(float(np.percentile(cos, 1)), 5),
                  "min": round(float(cos.min()), 5)}
    return out


def child(backend: str, texts: list[str]) -> None:
    """One backend in a fresh process: time to the first query vector (imports, model load),
    then RSS after embedding ``texts`` (steady) and the high-water mark (peak)."""
    t = time.perf_counter()
    enc = load(backend)
    enc(["warm up"])
    cold = time.perf_counter() - t
    enc(texts)
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    mb = lambda key: round(int(status[key].split()[0]) / 1024, 1)  # noqa: E731
    print(json.dumps({"cold_first_vector_s": round(cold, 2), "steady_rss_mb": mb("VmRSS"),
                      "peak_rss_mb": mb("VmHWM"), "torch_imported": "torch" in sys.modules}))


def memory(texts: list[str]) -> dict:
    out = {}
    for b in BACKENDS:
        r = subprocess.run([sys.executable, __file__, "--child", b], input=json.dumps(texts),
                           capture_output=True, text=True, check=True)
        out[b] = json.loads(r.stdout.strip().splitlines()[-1])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vault", type=Path, default=DEFAULT_VAULT)
    ap.add_argument("--sample", type=int, default=1500)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--block", type=int, default=256, help="texts per embedding call")
    ap.add_argument("--memory-texts", type=int, default=256, help="texts embedded by each memory child")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--child", choices=BACKENDS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child, json.loads(sys.stdin.read()))
    if not args.vault.is_dir():
        raise SystemExit(f"vault {args.vault} not found")
    all_texts = chunk_texts(args.vault)
    texts = random.Random(args.seed).sample(all_texts, min(args.sample, len(all_texts)))
    res: dict = {"vault": str(args.vault), "chunk_texts": len(all_texts), "sample": len(texts),
                 "cpus": os.cpu_count(), "started": time.strftime("%Y-%m-%d %H:%M"),
                 "load_avg_at_start": os.getloadavg()}
    import onnxruntime
    res["onnxruntime"] = onnxruntime.__version__
    res["graphs"] = build_graphs()
    res["throughput"], vectors = throughput(texts, args.repeat, args.block)
    res["cosine_vs_bare"] = agreement(vectors)
    res["memory"] = memory(texts[:args.memory_texts])
    res["load_avg_at_end"] = os.getloadavg()
    print(json.dumps(res, indent=2))
    if args.json:
        args.json.write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
