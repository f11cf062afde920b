"""Engine benchmark (issue #2 figures). Never run by pytest: timings here are medians over
repeats on a shared, noisy machine.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/speed/engine.py [--vault ../shared/vaults/obsidian-help] \\
        [--out eval/reports/speed/engine.md]

Measures, on a copy of the vault in a temp dir (the engine never writes into a vault, but the
benchmark edits a note):
- `hybrid --help` and a cold `hybrid query --mode lexical` process (wall time, torch imported?);
- a full `hybrid index` as a subprocess (wall time, peak RSS);
- the same full index in-process, with the embedding stage's throughput compared with the
  embedder's own ``embed_documents`` on the very same texts, in the same run;
- no-op re-index and one-edited-note re-index with the model warm (API);
- warm in-process query latency p50/p95 for lexical, vector, hybrid;
- index bytes on disk per chunk.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import OBSIDIAN_HELP, REPORTS, heading_queries, pct, record_texts


def run(cmd, env, repeat=1):
    times = []
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - t)
        if out.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed: {out.stderr}")
    return times, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vault", type=Path, default=OBSIDIAN_HELP)
    ap.add_argument("--out", type=Path, default=REPORTS / "speed" / "engine.md")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    if not args.vault.is_dir():
        raise SystemExit(f"vault {args.vault} not found")

    tmp = Path(tempfile.mkdtemp(prefix="hybrid-bench-"))
    vault = tmp / "vault"
    shutil.copytree(args.vault, vault)
    exe = [sys.executable, "-m", "hybrid"]
    res: dict = {"vault": str(args.vault), "python": sys.version.split()[0], "cpus": os.cpu_count()}

    # --- full index as a user runs it (subprocess: wall time, peak RSS) ----------------------
    env = dict(os.environ, HYBRID_HOME=str(tmp / "home-cli"))
    t, out = run(exe + ["index", str(vault), "--name", "bench", "--json"], env)
    report = json.loads(out.stdout)[0]
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    res["cli_full_index_s"] = round(t[0], 2)
    res["cli_peak_rss_mb"] = round(rss, 1)
    res["notes"], res["chunks"] = report["added"], report["chunks"]

    # --- cold processes --------------------------------------------------------------------
    t, _ = run(exe + ["--help"], env, args.repeat)
    res["help_s_median"] = round(statistics.median(t), 3)
    probe = ("import sys, runpy; sys.argv=['hybrid','query','obsidian://open','--mode','lexical','-n','5'];\n"
             "try:\n    runpy.run_module('hybrid', run_name='__main__')\n"
             "except SystemExit:\n    pass\n"
             "print('torch-imported' if 'torch' in sys.modules else 'no-torch', file=sys.stderr)")
    t, out = run([sys.executable, "-c", probe], env, args.repeat)
    res["cold_lexical_query_s_median"] = round(statistics.median(t), 3)
    res["cold_lexical_query_torch"] = out.stderr.strip().splitlines()[-1]
    t, _ = run(exe + ["query", "how do I sync notes between devices", "-n", "5"], env, 3)
    res["cold_hybrid_query_s_median"] = round(statistics.median(t), 3)

    # --- in-process: embedding throughput vs bare encode --------------------------------------
    import hybrid
    from hybrid.embedders import make_embedder

    emb = make_embedder("minilm")
    emb.embed_documents(["warm up"] * 8)
    seen = record_texts(emb)
    h = hybrid.open(tmp / "home-api", embedders=[emb])
    h.add_vault(vault, "bench")
    r = h.index()[0]
    res["api_full_index_s"] = r.seconds
    res["api_stage_seconds"] = r.stage_seconds
    pipeline_tp = r.chunks_embedded / r.stage_seconds["embed"]
    t0 = time.perf_counter()  # the embedder alone (ONNX Runtime since issue #10) on the same texts
    bare = emb.bare_embed_documents(seen)
    bare_s = time.perf_counter() - t0
    res["embedded_chunks"] = r.chunks_embedded
    res["pipeline_embed_chunks_per_s"] = round(pipeline_tp, 1)
    res["bare_encode_chunks_per_s"] = round(len(seen) / bare_s, 1)
    res["throughput_ratio_pipeline_over_bare"] = round(pipeline_tp / (len(seen) / bare_s), 3)
    assert bare.shape[0] == len(seen)

    # --- incremental ----------------------------------------------------------------------
    noop = [h.index()[0].seconds for _ in range(args.repeat)]
    res["noop_reindex_s_median"] = round(statistics.median(noop), 3)
    target = sorted(vault.rglob("*.md"))[len(list(vault.rglob("*.md"))) // 2]
    edits = []
    for i in range(args.repeat):
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(f"\n\nBenchmark edit {i}: a new paragraph about quokka number {i}.\n")
        rr = h.index()[0]
        assert rr.updated == 1, rr
        edits.append(rr.seconds)
    res["one_edit_reindex_s_median"] = round(statistics.median(edits), 3)
    res["edited_note"] = str(target.relative_to(vault))

    # --- warm query latency ---------------------------------------------------------------
    qs = heading_queries(vault, args.queries)
    for q in qs[:5]:
        h.search(q, mode="hybrid")
    for mode in ("lexical", "vector", "hybrid"):
        lat = []
        for q in qs:
            t0 = time.perf_counter()
            h.search(q, mode=mode, top_k=10)
            lat.append((time.perf_counter() - t0) * 1000)
        res[f"{mode}_ms_p50"] = round(pct(lat, 50), 2)
        res[f"{mode}_ms_p95"] = round(pct(lat, 95), 2)
    res["queries"] = len(qs)

    # --- disk -----------------------------------------------------------------------------
    st = h.status()[0]
    res["disk_bytes"] = st.disk_bytes
    res["disk_bytes_per_chunk"] = round(st.disk_bytes / max(1, st.chunks))
    idx = h.config.vault("bench").index_dir
    res["disk_breakdown"] = {p.name: sum(f.stat().st_size
                                         for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file())
                             for p in idx.iterdir()}
    h.close()
    shutil.rmtree(tmp, ignore_errors=True)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# Engine benchmark\n",
             f"Command: `PYTHONPATH=eval/bench .venv/bin/python eval/archive/speed/engine.py --vault {args.vault}`\n",
             f"Run: {time.strftime('%Y-%m-%d %H:%M')} on {res['cpus']} CPUs, Python {res['python']}\n",
             "| figure | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in res.items() if k not in ("vault", "python", "cpus")]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps(res, indent=2), encoding="utf-8")
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
