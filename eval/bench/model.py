"""Embedding throughput of the indexing pipeline against the bare model (issue #5).

A generated vault is indexed with a real embedder in this process; every text the pipeline
embeds is recorded, then the bare ``SentenceTransformer.encode`` embeds the very same texts with
the same batch size, in the same run. Also reports how many cores the full index kept busy
(CPU seconds / wall seconds) and per-stage seconds.

    .venv/bin/python eval/bench/model.py [--notes 400] [--embedder minilm]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import tempfile
import time
from pathlib import Path

import common
import genvault


def cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def run(notes: int = 400, embedder: str = "minilm", work: Path | None = None, log=print) -> dict:
    import hybrid
    from hybrid.embedders import make_embedder

    tmp = Path(tempfile.mkdtemp(prefix="hybrid-model-bench-", dir=work))
    try:
        vault = tmp / "vault"
        genvault.generate(vault, notes, seed=11)
        emb = make_embedder(embedder)
        emb.embed_documents(["warm up"] * 8)
        seen = common.record_texts(emb)
        h = hybrid.open(tmp / "home", embedder=embedder, embedders=[emb])
        h.add_vault(vault, "bench")
        log(f"[model] indexing {notes} generated notes with {embedder}")
        c0, w0 = cpu_seconds(), time.perf_counter()
        r = h.index()[0]
        cpu, wall = cpu_seconds() - c0, time.perf_counter() - w0
        pipeline = r.chunks_embedded / r.stage_seconds["embed"]
        log(f"[model] bare encode of the same {len(seen)} texts")
        model = getattr(emb, "model", None)
        c0, w0 = cpu_seconds(), time.perf_counter()
        if model is not None and hasattr(model, "encode"):
            model.encode(seen, batch_size=emb.batch_size, convert_to_numpy=True,
                         normalize_embeddings=True, show_progress_bar=False)
            baseline = "SentenceTransformer.encode"
        else:
            emb.bare_embed_documents(seen)
            baseline = "embedder.embed_documents (no pipeline)"
        bare_wall = time.perf_counter() - w0
        bare_cpu = cpu_seconds() - c0
        bare = len(seen) / bare_wall
        h.close()
        return {"embedder": embedder, "notes": notes, "chunks": r.chunks, "embedded": r.chunks_embedded,
                "full_index_s": round(wall, 2), "stage_seconds": r.stage_seconds,
                "index_cpu_busy_cores": round(cpu / wall, 2),
                "pipeline_chunks_per_s": round(pipeline, 1), "bare_chunks_per_s": round(bare, 1),
                "ratio_pipeline_over_bare": round(pipeline / bare, 3), "baseline": baseline,
                "bare_cpu_busy_cores": round(bare_cpu / bare_wall, 2), "batch_size": emb.batch_size}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--notes", type=int, default=400)
    ap.add_argument("--embedder", default="minilm")
    args = ap.parse_args()
    print(json.dumps(run(args.notes, args.embedder), indent=2))


if __name__ == "__main__":
    main()
