"""Time what one bad note or one bad request used to cost (issue #9): chunking a single 200 KB
line (ordinary words, and pasted base64) with the real WordPiece counter, and a 4,000-character
query asking for 1,000 hits on the bundled sample vault (hash embedder, so only the engine is
timed). Medians over repeats; prints one line per figure.

    .venv/bin/python eval/bench/bad_input.py
    PYTHONPATH=/path/to/older/checkout .venv/bin/python eval/bench/bad_input.py   # the same on older code
"""

from __future__ import annotations

import base64
import random
import statistics
import tempfile
import time
from pathlib import Path

import hybrid
from hybrid.embedders import WordPieceCounter, minilm_path
from hybrid.indexing.chunk import Chunker
from hybrid.sources.markdown import parse_note


def median_seconds(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def long_line(kind: str, size: int = 200_000) -> str:
    rng = random.Random(1)
    if kind == "words":
        words = ["kafka", "consumer", "partition", "offset", "retention", "broker", "idempotent"]
        return " ".join(rng.choice(words) for _ in range(size // 8))[:size]
    return base64.b64encode(rng.randbytes(size * 3 // 4)).decode()


def main() -> None:
    counter = WordPieceCounter(minilm_path() / "tokenizer.json")
    chunker = Chunker(counter, 254, 128, 32, True)
    for kind in ("words", "base64"):
        note = parse_note("p.md", "# Pasted\n\n" + long_line(kind) + "\n")
        s = median_seconds(lambda note=note: chunker.chunk(note), 3)
        print(f"chunk one 200 KB line of {kind}: {s:.2f} s (median of 3)")

    sample = Path(hybrid.__file__).parent / "sample_vault"
    h = hybrid.open(tempfile.mkdtemp(prefix="hybrid-bad-input-"), embedder="hash:64")
    h.add_vault(sample, "sample")
    h.index()
    rng = random.Random(1)
    words = " ".join(p.read_text(encoding="utf-8") for p in sample.rglob("*.md")).split()
    query = ""
    while len(query) < 3990:
        query += rng.choice(words)[:8].replace('"', "") + " "
    query = query[:3999]
    for mode in ("lexical", "hybrid"):
        s = median_seconds(lambda mode=mode: h.search(query, top_k=1000, mode=mode), 5)
        print(f"4,000-character query, top_k 1000, {mode}: {s:.2f} s (median of 5)")


if __name__ == "__main__":
    main()
