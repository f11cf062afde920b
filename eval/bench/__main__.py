"""The living benchmarks, behind one entry point (run from the checkout's root):

    .venv/bin/python -m eval.bench                 # the list, one line each
    .venv/bin/python -m eval.bench NAME [ARGS]     # one of them; NAME --help for its options

``python -m eval.bench NAME ARGS`` runs the bench's script exactly as ``python eval/bench/
<script>.py ARGS`` does (its folder first on ``sys.path``, so the scripts import each other as
``import common``); to measure another checkout's code, run the script by path with
``PYTHONPATH=<checkout>`` (``-m`` puts this checkout first). Each has a smoke test in
tests/unit/eval/test_benches.py that runs it here on a tiny input. One-off measurements are kept
by topic in eval/archive/, run with this folder on the path (eval/archive/README.md); the reports,
filed by the same topics, and the command behind each: eval/reports/README.md.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# name -> (script in this folder, what it measures): the benches a maintainer runs again
BENCHES: dict[str, tuple[str, str]] = {
    "perf-ab": ("perf_ab.py", "A/B of the whole query path between two checkouts (index, cold CLI, server, warm "
                              "search); before every release, into docs/performance.md"),
    "scale": ("scale.py", "the engine on generated vaults of growing size: index stages and throughput, re-index, "
                          "query latency in-process and over HTTP, cold CLI, memory"),
    "stores": ("stores.py", "every store kind (local, PostgreSQL, Milvus Lite) on the same generated vaults: index "
                            "throughput, bytes per chunk, warm latency per mode; docs/scale-out.md"),
    "vectors": ("vectors.py", "the FAISS layouts alone (flat/IVF x float32/float16/sq8) at 10k-1M vectors: build, "
                              "bytes, latency, recall@10"),
    "mixed-languages": ("mixed_languages.py", "`hybrid eval` on the sample vault with the notes of "
                                              "qrels/mixed-languages/, questions across languages"),
    "spelling": ("spelling.py", "what the spelling corrector rewrites: false rewrites of rightly spelled queries, "
                                "repairs of the labelled typos"),
    "redact-speed": ("redact_speed.py", "secret redaction cost per note and per window, and notes it changes, on a "
                                        "folder of real notes"),
    "redact-recall": ("redact_recall.py", "the secrets redactor's recall by class and language, hard negatives, "
                                          "lines redacted in real prose, CPU per chunk"),
    "bad-input": ("bad_input.py", "what one bad note or request costs: a 200 KB line chunked, a 4,000-character "
                                  "query for 1,000 hits"),
    "hostile-readers": ("hostile_readers.py", "what hostile canvases and drawings cost the readers and an index run"),
    "convert-bounds": ("convert_bounds.py", "what converting PDFs and web pages in a bounded worker costs, and the "
                                            "PDF bomb it stops"),
    "ocr": ("ocr.py", "text in pictures: character error rate, the sample set as PDFs, scans and images, OCR's "
                      "cost, the re-index of 1,000 unchanged images"),
}
# the rest of this folder: what the benches share (common.py), the scale suite around scale.py
# and vectors.py (run.py, model.py, genvault.py, hybrid_bench.py), sources.py's PDFs for
# convert_bounds.py, and the recipes that make hybrid's shipped parameter files
PARTS = ("common.py", "run.py", "model.py", "genvault.py", "hybrid_bench.py", "sources.py", "perf_ab_sides.py",
         "fit_store.py", "calibrate_confidence.py", "__main__.py")


def listing() -> str:
    width = max(map(len, BENCHES))
    lines = ["usage: python -m eval.bench NAME [ARGS]   (NAME --help: its options)", ""]
    lines += [f"  {name:<{width}}  {what}" for name, (_, what) in BENCHES.items()]
    lines += ["", "The scale suite (model, scale and vectors in one report): python eval/bench/run.py",
              "Shipped parameters: python eval/bench/fit_store.py, python eval/bench/calibrate_confidence.py",
              "An archived one-off: PYTHONPATH=eval/bench python eval/archive/TOPIC/NAME.py (eval/archive/README.md)"]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(listing())
        return 0
    name, *args = argv
    if name not in BENCHES:
        print(f"no bench {name!r}\n\n{listing()}", file=sys.stderr)
        return 2
    script = HERE / BENCHES[name][0]
    sys.path.insert(0, str(HERE))
    sys.argv = [str(script), *args]
    runpy.run_path(str(script), run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
