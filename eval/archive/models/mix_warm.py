"""Warm hybrid query latency of the default mix against MiniLM alone, interleaved query by query
in one process (so both see the same machine load), on two homes that index the same vault:

    HYBRID_HOME=/tmp/a hybrid index hybrid/sample_vault --name sample      # with embedder = "minilm"
    HYBRID_HOME=/tmp/b hybrid index hybrid/sample_vault --name sample      # the default
    PYTHONPATH=eval/bench .venv/bin/python eval/archive/models/mix_warm.py /tmp/a /tmp/b [--rounds 15]

Prints the p50 of each for English questions, and the mix's for questions in other languages.
"""

from __future__ import annotations

import argparse
import statistics
import time

ENGLISH = ["tailscale subnet router", "how do we roll back a deploy", "sourdough starter feeding schedule",
           "kafka consumer lag runbook", "which isolation level prevents write skew", "backup retention for the nas"]
OTHER = ["Wie füttere ich den Sauerteig?", "如何回滚部署", "¿cómo hago una copia de seguridad del NAS?"]


def main() -> None:
    import hybrid
    from hybrid.embedders import make_embedder
    from hybrid.embedders.mix import DEFAULT, MixEmbedder
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("minilm_home")
    ap.add_argument("mix_home")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    minilm = make_embedder("minilm")
    mix = MixEmbedder(minilm, make_embedder("use-multilingual"))
    a = hybrid.open(args.minilm_home, embedders=[minilm], embedder="minilm")
    b = hybrid.open(args.mix_home, embedders=[mix], embedder=DEFAULT)
    for h in (a, b):
        for q in ENGLISH + OTHER:
            h.search(q)
    ta: list[float] = []
    tb: list[float] = []
    to: list[float] = []
    for _ in range(args.rounds):
        for q in ENGLISH:
            for h, t in ((a, ta), (b, tb)):
                s = time.perf_counter()
                h.search(q)
                t.append(time.perf_counter() - s)
        for q in OTHER:
            s = time.perf_counter()
            b.search(q)
            to.append(time.perf_counter() - s)

    def p50(t: list[float]) -> float:
        return statistics.median(t) * 1000

    print(f"warm hybrid p50, English: minilm {p50(ta):.1f} ms, mix {p50(tb):.1f} ms "
          f"(ratio {p50(tb) / p50(ta):.2f}); mix, other languages {p50(to):.1f} ms")


if __name__ == "__main__":
    main()
