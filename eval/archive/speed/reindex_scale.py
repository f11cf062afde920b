"""Full and no-op re-index time of a generated vault with the hash embedder (pipeline cost
without the model). Issue #5 groundwork; medians over repeats, not a test.

    .venv/bin/python eval/bench/genvault.py --notes 10000 --out /tmp/v10k
    PYTHONPATH=eval/bench .venv/bin/python eval/archive/speed/reindex_scale.py --vault /tmp/v10k
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import hybrid


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vault", type=Path, required=True)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    h = hybrid.open(Path(tempfile.mkdtemp(prefix="hybrid-scale-")), embedder="hash:384")
    h.add_vault(args.vault, "scale")
    r = h.index()[0]
    print(f"full index: {r.added} notes, {r.chunks} chunks, {r.seconds:.2f} s, stages {r.stage_seconds}")
    noop = [h.index()[0].seconds for _ in range(args.repeat)]
    print(f"no-op re-index: median {statistics.median(noop):.3f} s over {args.repeat} ({noop})")


if __name__ == "__main__":
    main()
