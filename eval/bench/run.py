"""The scale benchmark suite (issue #5): one command, one report with plots.

    .venv/bin/python eval/bench/run.py                  # standard: ~10k and ~100k chunks
    .venv/bin/python eval/bench/run.py --profile full   # adds ~1M chunks and 1M vectors (~1 h)
    .venv/bin/python eval/bench/run.py --profile smoke  # minutes; what the CI smoke test runs smaller

Writes ``eval/reports/speed/scale/report.md`` (or ``--report``) and its PNGs next to it, raw JSON under
``eval/out/bench/`` (ignored by git). Sections: environment; `hybrid --help`; embedding
throughput vs the bare model and cores busy (model.py); engine at scale (scale.py); vector index
alone at up to 1M vectors (vectors.py). Every timing is a median or percentile over repeats on
whatever else the machine is doing — the report records the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import REPORTS, SCRATCH

PROFILES = {
    "smoke": {"notes": [300], "queries": 30, "repeat": 3, "model_notes": 60,
              "vectors": {"clustered": [10_000], "uniform": [10_000], "queries": 50}},
    "standard": {"notes": [1500, 15000], "queries": 200, "repeat": 5, "model_notes": 400,
                 "vectors": {"clustered": [10_000, 100_000], "uniform": [10_000, 100_000], "queries": 200}},
    # Uniform vectors stop at 100k: IVF degenerates to scanning every list there (the point is
    # made), and calibrating it at 1M would cost a quarter of an hour per layout.
    "full": {"notes": [1500, 15000, 150000], "queries": 200, "repeat": 5, "model_notes": 400,
             "vectors": {"clustered": [10_000, 100_000, 1_000_000], "uniform": [10_000, 100_000],
                         "queries": 200}},
}


def help_time(repeat: int) -> float:
    exe = str(Path(sys.executable).with_name("hybrid"))
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run([exe, "--help"], capture_output=True, check=True)
        times.append(time.perf_counter() - t)
    return round(statistics.median(times), 3)


def environment() -> dict:
    import faiss
    import tantivy  # noqa: F401
    return {"python": platform.python_version(), "cpus": os.cpu_count(), "faiss": faiss.__version__,
            "machine": platform.machine(), "load_before": os.getloadavg()[0],
            "date": time.strftime("%Y-%m-%d %H:%M")}


def plot_scale(results: list[dict], out: Path) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = []
    chunks = [r["chunks"] for r in results]
    for where in ("warm", "http"):
        fig, ax = plt.subplots(figsize=(6, 4))
        for mode in ("lexical", "vector", "hybrid", "hybrid+filters"):
            ax.plot(chunks, [r[where][mode]["p50"] for r in results], marker="o", label=f"{mode} p50")
        ax.plot(chunks, [r[where]["hybrid"]["p95"] for r in results], ls="--", marker=".", label="hybrid p95")
        ax.set_xscale("log")
        ax.set_xlabel("chunks in the vault")
        ax.set_ylabel("ms per query")
        ax.set_title(f"Query latency vs corpus size ({'in-process' if where == 'warm' else 'HTTP /api/search'})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        name = f"latency_{where}.png"
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        names.append(name)
    fig, ax = plt.subplots(figsize=(7, 4))
    stages = ["discover", "read_parse", "chunk", "embed", "catalog", "tantivy", "faiss"]
    width = 0.8 / max(1, len(results))
    for i, r in enumerate(results):
        tp = [r["chunks"] / max(r["stage_seconds"].get(s, 0), 1e-6) for s in stages]
        ax.bar([x + i * width for x in range(len(stages))], tp, width, label=f"{r['chunks']:,} chunks")
    ax.set_xticks([x + width * (len(results) - 1) / 2 for x in range(len(stages))], stages, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("chunks per second (log)")
    ax.set_title("Indexing throughput per stage (bench embedder)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "stages.png", dpi=110)
    plt.close(fig)
    names.append("stages.png")
    fig, ax = plt.subplots(figsize=(6, 4))
    notes = [r["notes"] for r in results]
    ax.plot(notes, [r["reindex"]["noop_s"] for r in results], marker="o", label="no-op re-index")
    ax.plot(notes, [r["reindex"]["one_change_s"] for r in results], marker="o", label="one note changed")
    ax.set_xscale("log")
    ax.set_xlabel("notes in the vault")
    ax.set_ylabel("seconds (median)")
    ax.set_title("Re-index time vs vault size")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "reindex.png", dpi=110)
    plt.close(fig)
    names.append("reindex.png")
    return names


def scale_markdown(results: list[dict]) -> str:
    lines = ["| notes | chunks | vector index | full index s | cores busy | peak RSS MB | "
             "bytes/chunk (catalog / tantivy / faiss) | no-op re-index s | one change s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        p = r["bytes_per_chunk_parts"]
        lines.append(f"| {r['notes']:,} | {r['chunks']:,} | {r['vector_index']} | {r['wall_s']} | "
                     f"{r['cpu_busy_cores']} | {r['peak_rss_mb']:,.0f} | "
                     f"{r['bytes_per_chunk']:,} ({p['catalog']:,} / {p['tantivy']:,} / {p['faiss']:,}) | "
                     f"{r['reindex']['noop_s']} | {r['reindex']['one_change_s']} |")
    lines += ["", "Stage seconds of the full index (read/parse/chunk run on a thread beside embedding, so "
              "`read_embed_wall` is their overlapped wall time):", "",
              "| chunks | " + " | ".join(results[0]["stage_seconds"]) + " |",
              "|---|" + "---|" * len(results[0]["stage_seconds"])]
    for r in results:
        lines.append(f"| {r['chunks']:,} | " + " | ".join(str(v) for v in r["stage_seconds"].values()) + " |")
    lines += ["", "Query latency in ms, p50 / p95 / p99 (top 8; each arm 100 candidates; queries are 2–4 "
              "consecutive words from random notes; `hybrid+filters` adds `folder: work`, ~30 % of notes):", "",
              "| chunks | where | lexical | vector | hybrid | hybrid+filters |", "|---|---|---|---|---|---|"]
    for r in results:
        for where, label in (("warm", "in-process"), ("http", "HTTP")):
            cells = [f"{r[where][m]['p50']} / {r[where][m]['p95']} / {r[where][m]['p99']}"
                     for m in ("lexical", "vector", "hybrid", "hybrid+filters")]
            lines.append(f"| {r['chunks']:,} | {label} | " + " | ".join(cells) + " |")
    lines += ["", "Cold processes (median wall seconds) and server memory:", "",
              "| chunks | `query --mode lexical --local` | `query` hybrid via server | "
              "`query --mode lexical` via server | `query --local` hybrid (loads the model) | "
              "`query --local --mode vector` | server RSS MB |",
              "|---|---|---|---|---|---|---|"]
    for r in results:
        c, hs = r["cold"], r["http"]
        lines.append(f"| {r['chunks']:,} | {c['cold_cli_lexical_local_s']} | {hs['cold_cli_hybrid_via_server_s']} | "
                     f"{hs['cold_cli_lexical_via_server_s']} | {c['cold_cli_hybrid_local_s']} | "
                     f"{c['cold_cli_vector_local_s']} | {hs['server_rss_mb']:,.0f} |")
    return "\n".join(lines)


def model_markdown(m: dict) -> str:
    return "\n".join([
        f"Generated vault of {m['notes']} notes ({m['chunks']:,} chunks, {m['embedded']:,} embedded), "
        f"embedder `{m['embedder']}`, batch {m['batch_size']}.", "",
        "| figure | value |", "|---|---|",
        f"| pipeline embedding throughput (chunks/s) | {m['pipeline_chunks_per_s']} |",
        f"| bare {m['baseline']} on the same texts (chunks/s) | {m['bare_chunks_per_s']} |",
        f"| ratio pipeline / bare (target ≥ 0.9) | {m['ratio_pipeline_over_bare']} |",
        f"| cores busy during the full index (CPU s / wall s; 2 cores) | {m['index_cpu_busy_cores']} |",
        f"| cores busy during bare encode | {m['bare_cpu_busy_cores']} |",
        f"| full index wall s | {m['full_index_s']} |",
        f"| stage seconds | {m['stage_seconds']} |"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", choices=sorted(PROFILES), default="standard")
    ap.add_argument("--report", type=Path, default=REPORTS / "speed" / "scale" / "report.md")
    ap.add_argument("--work", type=Path, default=Path("/tmp/hybrid-bench"))
    ap.add_argument("--skip", default="", help="comma list of sections to skip: model,scale,vectors")
    ap.add_argument("--reuse-index", action="store_true",
                    help="scale: keep the indexes an earlier run built (their index figures are reused)")
    ap.add_argument("--reuse-json", action="store_true",
                    help="model, vectors: report the results an earlier run saved under eval/out/bench/")
    args = ap.parse_args()
    prof = PROFILES[args.profile]
    skip = set(filter(None, args.skip.split(",")))
    out_raw = SCRATCH
    out_raw.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    fig_dir = args.report.parent
    fig_dir.mkdir(parents=True, exist_ok=True)
    env = environment()
    env["help_s"] = help_time(5)
    print(f"[bench] profile {args.profile}; `hybrid --help` {env['help_s']} s", flush=True)
    model = scale = vec = None
    if args.reuse_json:
        model = json.loads((out_raw / "model.json").read_text())
        vec = [r for d in ("clustered", "uniform") if (out_raw / f"vectors-{d}" / "results.json").exists()
               for r in json.loads((out_raw / f"vectors-{d}" / "results.json").read_text())["results"]]
        skip |= {"model", "vectors"}
    if "model" not in skip:
        import model as model_bench
        model = model_bench.run(prof["model_notes"], work=args.work)
        (out_raw / "model.json").write_text(json.dumps(model, indent=2))
    if "scale" not in skip:
        import scale as scale_bench
        scale = scale_bench.run(prof["notes"], prof["queries"], out_raw / "scale", args.work, prof["repeat"],
                                reuse=args.reuse_index)
    if "vectors" not in skip:
        import vectors as vector_bench
        v = prof["vectors"]
        vec = []
        for dist in ("clustered", "uniform"):
            vec += vector_bench.run(v[dist], [dist], vector_bench.DEFAULT_LAYOUTS, v["queries"],
                                    out_raw / f"vectors-{dist}")
    env["load_after"] = os.getloadavg()[0]

    flags = (f" --profile {args.profile}" if args.profile != "standard" else "") + \
        (" --reuse-index" if args.reuse_index else "") + (" --reuse-json" if args.reuse_json else "")
    cmd = "`.venv/bin/python eval/bench/run.py" + flags + "`"
    if args.reuse_index or args.reuse_json:
        cmd += (" (reusing what an earlier run of the same profile built or measured: the full-index "
                "figures and/or the model and vector sections; everything else measured again)")
    parts = ["# Scale benchmark", "", f"Command: {cmd} (profile `{args.profile}`). Run {env['date']} on "
             f"{env['cpus']} cores ({env['machine']}), Python {env['python']}, FAISS {env['faiss']}; load average "
             f"{env['load_before']:.2f} before, {env['load_after']:.2f} after. Timings are medians/percentiles "
             f"on a shared machine: compare ratios, not single numbers.", "",
             f"`hybrid --help`: {env['help_s']} s (median of 5 cold processes).", ""]
    if model:
        parts += ["## Embedding throughput vs the bare model", "", model_markdown(model), ""]
    if scale:
        names = plot_scale(scale, fig_dir)
        parts += ["## Engine at scale", "", "Generated vaults (`eval/bench/genvault.py`), indexed with the `bench` "
                  "embedder: hashed 384-d document vectors (instant, so the figures isolate index costs) and the "
                  "real MiniLM model for queries (so query latency includes its forward pass). Vector rankings "
                  "under it mean nothing; only time and memory are measured.", "", scale_markdown(scale), ""]
        parts += [f"![{n}]({n})" for n in names] + [""]
    if vec:
        import vectors as vector_bench  # noqa: F811
        vector_bench.plot(vec, fig_dir)
        parts += ["## Vector index alone", "", vector_bench.markdown(vec), ""]
    args.report.write_text("\n".join(parts) + "\n", encoding="utf-8")
    print(f"[bench] wrote {args.report}")


if __name__ == "__main__":
    main()
