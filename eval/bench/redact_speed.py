"""Secret redaction cost and false positives on real notes: every .md file of a folder (default
the obsidian-help vault), whole and as 300-character windows; rule start-up without and with
kingfisher's compiled-rule cache. Prints JSON.

    .venv/bin/python eval/bench/redact_speed.py [--vault ../shared/vaults/obsidian-help]
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from hybrid.store.agent.redact import Redactor  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vault", default=str(Path(__file__).resolve().parents[3] / "shared/vaults/obsidian-help"))
    ap.add_argument("--cache", type=Path, help="kingfisher's compiled-rule cache (default: a new, empty one, so "
                                               "the first start-up compiles the rules)")
    args = ap.parse_args()
    notes = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(Path(args.vault).rglob("*.md"))]
    cache = args.cache or Path(tempfile.mkdtemp())
    t = time.perf_counter()
    Redactor(cache).redact("warm up")
    cold = time.perf_counter() - t
    t = time.perf_counter()
    r = Redactor(cache)
    r.redact("warm up")
    cached = time.perf_counter() - t
    per_note, per_window, redacted = [], [], 0
    for text in notes:
        t = time.perf_counter()
        out = r.redact(text)
        per_note.append((time.perf_counter() - t) * 1e6)
        redacted += out != text
        for i in range(0, min(len(text), 3000), 300):
            t = time.perf_counter()
            r.redact(text[i:i + 300])
            per_window.append((time.perf_counter() - t) * 1e6)
    per_note.sort()
    print(json.dumps({"notes": len(notes), "notes_with_a_redaction": redacted,
                      "rules_first_compile_s": round(cold, 2), "rules_from_cache_s": round(cached, 2),
                      "us_per_note_median": round(statistics.median(per_note), 1),
                      "us_per_note_p95": round(per_note[int(0.95 * len(per_note)) - 1], 1),
                      "us_per_300_chars_median": round(statistics.median(per_window), 1)}, indent=1))


if __name__ == "__main__":
    main()
