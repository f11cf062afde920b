"""How long a reranker takes to score one query's candidates (issue #11: 30 candidates in
<= 300 ms p50 on the 2-core machine).

The candidates are real chunks of a vault, cut by the engine's Chunker (default settings, but
chunks of up to ``--tokens``).
Each is written the way the rerank stage passes it (``title > heading`` line, then the chunk
text). The script keeps those closest to ``--tokens`` word pieces, about 150 by default. The
queries are the bundled sample's labelled queries, taken in turn. Each spec is built once and
warmed up. Then every repeat times one ``scores(query, candidates)`` call per spec, with the
specs rotated so they share the machine's noise. It prints JSON: the median (p50), p95, min and
max in ms per spec, and how much of the CPUs other processes used during the repeats
(``others_share``: 0 = quiet, 0.5 = one of two cores taken). Timings on a busy machine are
worth little.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/models/rerank_latency.py [--spec late] [--spec late@96] \\
        [--candidates 30] [--tokens 150] [--repeat 21] [--vault ../shared/vaults/obsidian-help]

``late@N`` (or ``late:<embedder>@N``) is that spec with passages cut to N word pieces instead of
the default; a ``/fp32`` suffix keeps torch in float32 where the CPU would allow bfloat16.

``ollama:<model>`` specs talk to the ``ollama_host`` setting. With ``--fake-ollama``, they talk
to a stand-in server in this process instead. That server answers every request at once with
fixed logprobs, so the figure is the reranker's own overhead: prompts, 30 HTTP round trips
through the thread pool, and parsing. It is not a model's speed. No Ollama can be installed on
the machine these figures come from.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import common
from onnx_embed import cpu_jiffies, others_share

SAMPLE_QUERIES = Path(__file__).resolve().parents[3] / "hybrid" / "data" / "sample.queries.jsonl"


def candidates(vault: Path, n: int, tokens: int, seed: int = 0) -> list[str]:
    """``n`` passages of ``vault`` as the rerank stage writes them, of about ``tokens`` word
    pieces each (the closest ``3n``, then ``n`` of those at random)."""
    from hybrid.core.config import SETTINGS
    from hybrid.embedders import WordPieceCounter, minilm_path
    from hybrid.indexing.chunk import Chunker
    from hybrid.indexing.reading import read_bytes
    from hybrid.sources import markdown as notes
    s = {x.name: x.default for x in SETTINGS}
    counter = WordPieceCounter(minilm_path() / "tokenizer.json")
    # chunks of up to ``tokens`` (the default chunk_tokens, 128, would cap every passage below 150)
    chunker = Chunker(counter, 254, max(tokens, s["chunk_tokens"]), s["chunk_overlap"], s["context_header"])
    passages: dict[str, None] = {}
    for entry in sorted(notes.discover(vault, s["include"], s["exclude"]), key=lambda e: e.path):
        text, _ = notes.decode(read_bytes(entry), entry.path)
        note = notes.parse_note(entry.path, text)
        for c in chunker.chunk(note):
            where = " > ".join(p for p in [note.title, c.heading] if p)
            passages.setdefault(f"{where}\n{c.text}", None)
    pool = sorted(passages, key=lambda p: abs(counter([p])[0] - tokens))[:3 * n]
    return random.Random(seed).sample(pool, min(n, len(pool)))


class FakeOllama(BaseHTTPRequestHandler):
    """Answers /api/generate at once: "yes" with fixed logprobs."""
    protocol_version = "HTTP/1.1"  # keep-alive, as a real Ollama
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed ACK

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        top = [{"token": "yes", "logprob": -0.3}, {"token": "no", "logprob": -1.4}]
        data = json.dumps({"model": body["model"], "response": "yes", "done": True,
                           "logprobs": [{"token": "yes", "logprob": -0.3, "top_logprobs": top}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def build(spec: str, host: str):
    """The reranker of ``spec``; ``late...@N`` cuts passages to N word pieces and ``late.../fp32``
    keeps torch in float32 (no bfloat16 even where the CPU has it)."""
    from hybrid.embedders import make_reranker
    base, fp32 = spec.removesuffix("/fp32"), spec.endswith("/fp32")
    if base.startswith("late") and ("@" in base or fp32):
        from hybrid.embedders.late import MAX_TOKENS, LateInteractionReranker
        base, _, tokens = base.partition("@")
        return LateInteractionReranker(base.partition(":")[2] or "minilm", max_tokens=int(tokens or MAX_TOKENS),
                                       bf16=False if fp32 else None)
    return make_reranker(spec, ollama_host=host)


def run(specs: list[str], vault: Path, n: int, tokens: int, repeat: int, warmup: int,
        host: str) -> dict:
    from hybrid.embedders import WordPieceCounter, minilm_path
    passages = candidates(vault, n, tokens)
    queries = [json.loads(line)["text"] for line in SAMPLE_QUERIES.read_text().splitlines() if line.strip()]
    counts = WordPieceCounter(minilm_path() / "tokenizer.json")(passages)
    rerankers = {s: build(s, host) for s in specs}
    for r in rerankers.values():
        for i in range(warmup):
            r.scores(queries[i % len(queries)], passages)
    times: dict[str, list[float]] = {s: [] for s in specs}
    noise: dict[str, list[float]] = {s: [] for s in specs}
    for i in range(repeat):
        order = specs[i % len(specs):] + specs[:i % len(specs)]
        for s in order:
            c0, t0 = cpu_jiffies(), time.perf_counter()
            out = rerankers[s].scores(queries[i % len(queries)], passages)
            dt = time.perf_counter() - t0
            assert len(out) == len(passages)
            times[s].append(dt)
            noise[s].append(others_share(c0, cpu_jiffies(), dt))
    res: dict = {"vault": str(vault), "candidates": len(passages), "repeats": repeat, "warmup": warmup,
                 "passage_tokens": {"mean": round(statistics.mean(counts), 1), "min": min(counts),
                                    "max": max(counts)},
                 "cpus": os.cpu_count(), "results": {}}
    for s in specs:
        r = rerankers[s]
        ms = times[s]
        res["results"][s] = {
            "id": r.id, **common.summary_ms(ms), "min": round(min(ms) * 1000, 2),
            "max": round(max(ms) * 1000, 2),
            "max_tokens": getattr(r, "max_tokens", None), "precision": getattr(r, "precision", None),
            "others_share_median": round(statistics.median(noise[s]), 2)}
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", action="append", help="rerank_model spec (repeatable; default: late)")
    ap.add_argument("--candidates", type=int, default=30)
    ap.add_argument("--tokens", type=int, default=150, help="word pieces per candidate (about)")
    ap.add_argument("--repeat", type=int, default=21, help="timed calls per spec (>= 15)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--vault", type=Path, default=common.OBSIDIAN_HELP,
                    help="default: obsidian-help beside the checkout, else the bundled sample vault")
    ap.add_argument("--fake-ollama", action="store_true",
                    help="ollama: specs talk to an in-process stand-in (measures overhead only)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    if args.repeat < 15:
        raise SystemExit("--repeat must be at least 15")
    vault = args.vault
    if not vault.is_dir():
        import hybrid
        vault = Path(hybrid.__file__).parent / "sample_vault"
    from hybrid.core.config import SETTINGS
    host = next(x.default for x in SETTINGS if x.name == "ollama_host")
    server = None
    if args.fake_ollama:
        server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOllama)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        host = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        import torch
        res = {"started": time.strftime("%Y-%m-%d %H:%M"), "load_avg_at_start": os.getloadavg(),
               "torch_threads": torch.get_num_threads(), "fake_ollama": args.fake_ollama,
               **run(args.spec or ["late"], vault, args.candidates, args.tokens, args.repeat,
                     args.warmup, host),
               "load_avg_at_end": os.getloadavg()}
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
    print(json.dumps(res, indent=2))
    if args.json:
        args.json.write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
