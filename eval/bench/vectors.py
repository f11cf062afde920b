"""Vector-only scale benchmark: what the FAISS layouts of ``hybrid.store.local.vector`` cost at 10k–1M
vectors, with embedding taken out of the picture (issue #5). Not a test: it reports medians and
percentiles, never asserts.

    .venv/bin/python eval/bench/vectors.py --quick                      # smoke run, < 2 min
    .venv/bin/python eval/bench/vectors.py                              # 10k, 100k, 1M
    .venv/bin/python eval/bench/vectors.py --sizes 100000 --layouts flat-float32,ivf-sq8

For every size N, distribution and layout it builds the index with ``FaissIndex.rebuild`` (the
engine's own path: training, nprobe calibration, atomic save) and then, in a fresh subprocess so
that peak RSS is the index's and not the builder's, loads the file and answers Q queries at the
engine's candidate depth (k=100): unfiltered, restricted to an allowed 10% of the ids, and with
1% of the ids banned. Recall@10 is measured against exact search on the float32 matrix.

Outputs (``--out``, default ``eval/out/bench/vectors``, ignored by git): ``results.json`` (one
record per (N, dist, layout), rewritten after every record so a long run that dies keeps what it
measured) and PNGs of latency, recall and bytes per vector (``vectors_*.png``). ``run()``, ``plot()`` and
``markdown()`` are the API for ``eval/bench/run.py``.

Two measurement choices matter on a shared machine: the query worker runs single-threaded by
default (``--threads``; a multi-threaded nq=1 search under CPU contention measured OpenMP waits,
~10x slower), and its peak RSS is read from ``VmHWM`` because Linux carries the parent's
high-water mark into a spawned child's ``ru_maxrss``.

Distributions (dim 384, unit float32 rows, deterministic by seed):

- ``clustered``: a topic mixture like text embeddings. N//500 random unit centres; each vector
  is a centre plus isotropic Gaussian noise of total norm ≈ ``SIGMA`` = 0.7, renormalized. Two
  members of one topic then have cosine ≈ 1/(1+σ²) ≈ 0.67, and the best of ~500 near-orthogonal
  noise draws adds a little, so a vector's nearest neighbour sits at cosine ≈ 0.73 (measured:
  0.729 median at 10k and 50k; σ = 0.6 gives 0.78, σ = 0.8 gives 0.68), inside the 0.6–0.8 of
  sentence embeddings. Each record stores the measured ``nn_cosine``. Caveat: topics are
  equal-sized and internally isotropic, so a point's 1st and 10th neighbours are close
  (0.73 vs 0.71); real corpora have uneven topics and more internal structure.
- ``uniform``: uniform on the sphere. No neighbourhood structure at all, so every IVF list is
  as likely as any other to hold a neighbour: the worst case for any ANN index.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import SCRATCH

DIM = 384
CHUNK = 65_536              # rows generated per step: memory stays ~1x the matrix
SIGMA = 0.7                 # clustered: noise norm relative to the unit centre (see docstring)
PER_CENTRE = 500            # clustered: one topic centre per this many vectors
DATA_SEED = 7
QUERY_SEED = 4321           # build() calibrates with seed 1234; benchmark queries must differ
K = 100                     # the engine's candidate depth for the vector arm
RECALL_K = 10
TRUTH_K = 64                # exact depth kept so the banned-1% truth can skip banned ids
WARMUP = 5
ALLOWED_FRACTION = 0.10
BANNED_FRACTION = 0.01
MODES = ("unfiltered", "allowed10", "banned1")

LAYOUTS = {                 # name -> (kind, storage)
    "flat-float32": ("flat", "float32"),
    "ivf-float32": ("ivf", "float32"),
    "ivf-float16": ("ivf", "float16"),
    "ivf-sq8": ("ivf", "sq8"),
    "flat-float16": ("flat", "float16"),
    "flat-sq8": ("flat", "sq8"),
}
DEFAULT_LAYOUTS = ("flat-float32", "ivf-float32", "ivf-float16", "ivf-sq8", "flat-sq8")
DEFAULT_SIZES = (10_000, 100_000, 1_000_000)
DISTS = ("clustered", "uniform")
DEFAULT_OUT = SCRATCH / "vectors"


# ---------------------------------------------------------------------------- vector sets

def _unit_rows(x: np.ndarray) -> None:
    """Normalize rows in place: the engine stores L2-normalized vectors and scores by inner
    product, so the benchmark must too."""
    x /= np.linalg.norm(x, axis=1, keepdims=True)


def clustered(n: int, seed: int = DATA_SEED) -> np.ndarray:
    """Topic-mixture unit vectors (see the module docstring for the choice of SIGMA). Filled
    chunk by chunk into one preallocated matrix so peak memory is ~1x the result."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(1, n // PER_CENTRE), DIM)).astype(np.float32)
    _unit_rows(centres)
    out = np.empty((n, DIM), dtype=np.float32)
    scale = np.float32(SIGMA / math.sqrt(DIM))
    for lo in range(0, n, CHUNK):
        hi = min(n, lo + CHUNK)
        block = out[lo:hi]
        block[:] = rng.standard_normal((hi - lo, DIM), dtype=np.float32)
        block *= scale
        block += centres[rng.integers(0, len(centres), hi - lo)]
        _unit_rows(block)
    return out


def uniform(n: int, seed: int = DATA_SEED) -> np.ndarray:
    """Uniform on the unit sphere (normalized Gaussians): no structure for IVF to exploit."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, DIM), dtype=np.float32)
    for lo in range(0, n, CHUNK):
        hi = min(n, lo + CHUNK)
        out[lo:hi] = rng.standard_normal((hi - lo, DIM), dtype=np.float32)
        _unit_rows(out[lo:hi])
    return out


GENERATORS = {"clustered": clustered, "uniform": uniform}


def ids_for(n: int) -> np.ndarray:
    """Chunk ids are not row numbers in the engine; a stride catches any row/id mix-up."""
    return np.arange(n, dtype=np.int64) * 7 + 3


# ---------------------------------------------------------------------------- ground truth

def nn_cosine(vecs: np.ndarray, rng, sample: int = 200) -> float:
    """Median cosine between a stored vector and its nearest other stored vector: the number
    the clustered generator was tuned to, recorded so every run shows what it measured."""
    import faiss
    rows = rng.choice(len(vecs), min(sample, len(vecs)), replace=False)
    sims, _ = faiss.knn(vecs[rows], vecs, 2, metric=faiss.METRIC_INNER_PRODUCT)
    return round(float(np.median(sims[:, 1])), 4)


def filter_sets(n: int, ids: np.ndarray, rng) -> tuple[np.ndarray, np.ndarray]:
    """Row numbers of the allowed 10% (a folder/tag filter) and the banned 1% (an exclusion)."""
    allowed = np.sort(rng.choice(n, max(1, int(n * ALLOWED_FRACTION)), replace=False))
    banned = np.sort(rng.choice(n, max(1, int(n * BANNED_FRACTION)), replace=False))
    return allowed, banned


def exact_truths(vecs: np.ndarray, ids: np.ndarray, q: np.ndarray, allowed: np.ndarray,
                 banned: np.ndarray) -> dict[str, np.ndarray]:
    """Exact top-10 ids per query for each mode, from the float32 matrix. Computed once per
    (N, dist) and shared by every layout. The banned truth is the unfiltered exact list with
    banned ids skipped (TRUTH_K deep is ample for 1% bans); the allowed truth is an exact
    search over the allowed rows only."""
    import faiss
    _, rows = faiss.knn(q, vecs, TRUTH_K, metric=faiss.METRIC_INNER_PRODUCT)
    top = ids[rows]
    banned_ids = np.isin(top, ids[banned])
    kept = [row[~mask][:RECALL_K] for row, mask in zip(top, banned_ids)]
    if min(len(r) for r in kept) < RECALL_K:
        raise RuntimeError("banned-1% truth ran out of depth; raise TRUTH_K")
    _, arows = faiss.knn(q, vecs[allowed], RECALL_K, metric=faiss.METRIC_INNER_PRODUCT)
    return {"unfiltered": top[:, :RECALL_K], "banned1": np.stack(kept),
            "allowed10": ids[allowed][arows]}


def prepare_case(dist: str, n: int, queries: int, case_dir: Path, seed: int) -> tuple[np.ndarray, np.ndarray, dict]:
    """Generate the vectors for (N, dist) and write what the query worker needs (queries,
    filter id sets, exact truths) as .npy files. Returns (vecs, ids, dataset stats)."""
    from hybrid.store.base import calibration_queries
    t0 = time.perf_counter()
    vecs = GENERATORS[dist](n, seed)
    gen_s = time.perf_counter() - t0
    ids = ids_for(n)
    rng = np.random.default_rng(QUERY_SEED)
    q = calibration_queries(vecs, queries, rng)
    allowed, banned = filter_sets(n, ids, rng)
    t0 = time.perf_counter()
    truths = exact_truths(vecs, ids, q, allowed, banned)
    truth_s = time.perf_counter() - t0
    case_dir.mkdir(parents=True, exist_ok=True)
    np.save(case_dir / "queries.npy", q)
    np.save(case_dir / "allowed.npy", ids[allowed])
    np.save(case_dir / "banned.npy", ids[banned])
    for mode, truth in truths.items():
        np.save(case_dir / f"truth_{mode}.npy", truth)
    stats = {"nn_cosine": nn_cosine(vecs, rng), "generate_s": round(gen_s, 2),
             "truth_s": round(truth_s, 2), "queries": int(len(q))}
    return vecs, ids, stats


# ---------------------------------------------------------------------------- build

def spec_for(layout: str):
    """The VectorSpec that forces a layout whatever N is: threshold 0 keeps flat, 1 makes IVF."""
    from hybrid.store.base import VectorSpec
    kind, storage = LAYOUTS[layout]
    return VectorSpec(storage=storage, ann_threshold=0 if kind == "flat" else 1, ann_recall=0.99)


def build_layout(vecs: np.ndarray, ids: np.ndarray, layout: str, path: Path) -> dict:
    """Build through the engine's own ``FaissIndex.rebuild`` (train, calibrate, atomic save)
    and time it end to end; the in-memory index is dropped so the parent does not double its
    footprint while the worker runs."""
    from hybrid.store.local.vector import FaissIndex
    vi = FaissIndex(path)
    t0 = time.perf_counter()
    info = vi.rebuild(ids, vecs, DIM, spec_for(layout))
    build_s = time.perf_counter() - t0
    del vi
    gc.collect()
    size = path.stat().st_size
    return {"build_s": round(build_s, 3), "file_bytes": size,
            "bytes_per_vector": round(size / len(ids), 1), "kind": info.get("kind"),
            "storage": info.get("storage"), "nlist": info.get("nlist"), "nprobe": info.get("nprobe"),
            "calibrated_recall": info.get("calibrated_recall"), "trained_on": info.get("trained_on")}


# ---------------------------------------------------------------------------- query worker

def _percentiles(ms: list[float]) -> dict:
    """p50/p95/p99/mean in ms: tails matter for an interactive search, not just the median."""
    a = np.asarray(ms)
    return {"p50": round(float(np.percentile(a, 50)), 3), "p95": round(float(np.percentile(a, 95)), 3),
            "p99": round(float(np.percentile(a, 99)), 3), "mean": round(float(a.mean()), 3)}


def _timed_searches(vi, q: np.ndarray, **filters) -> tuple[list[float], np.ndarray, list[int]]:
    """Run every query through ``FaissIndex.search`` exactly as the engine calls it (Python
    sets for filters, so per-query selector construction is part of the cost). Returns
    latencies (ms), the top-10 ids (padded with -1) and each query's result count."""
    ms, top, counts = [], np.full((len(q), RECALL_K), -1, dtype=np.int64), []
    for i, query in enumerate(q):
        t0 = time.perf_counter_ns()
        hits = vi.search(query, K, **filters)
        ms.append((time.perf_counter_ns() - t0) / 1e6)
        got = [h for h, _ in hits[:RECALL_K]]
        top[i, :len(got)] = got
        counts.append(len(hits))
    return ms, top, counts


def _selector_ms(allowed: set[int], repeats: int = 20) -> float:
    """Median cost of turning the allowed set into a FAISS selector, done on every filtered
    query: tells how much of the filtered latency is set handling rather than scanning."""
    import faiss
    ms = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        faiss.IDSelectorBatch(np.fromiter(set(allowed), dtype=np.int64))
        ms.append((time.perf_counter_ns() - t0) / 1e6)
    return round(float(np.median(ms)), 3)


def _rss_mb() -> float:
    """Peak RSS of this process's own address space, in MB. On Linux this is ``VmHWM`` rather
    than ``ru_maxrss``: the kernel carries the parent's high-water mark across fork+exec into
    ``ru_maxrss``, so a worker spawned by a builder holding a 1.5 GB matrix would report at least
    that. ``VmHWM`` belongs to the mm created by exec and starts from zero."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def worker(index_path: Path, case_dir: Path, result_path: Path) -> None:
    """Load one index file in this fresh process and measure it; writes a JSON dict."""
    import faiss

    from hybrid.store.local.vector import FaissIndex, recall_at
    base_mb = _rss_mb()  # interpreter + numpy + faiss + hybrid, before the index
    q = np.load(case_dir / "queries.npy")
    filters = {"unfiltered": {}, "allowed10": {"allowed": set(np.load(case_dir / "allowed.npy").tolist())},
               "banned1": {"banned": set(np.load(case_dir / "banned.npy").tolist())}}
    vi = FaissIndex(index_path)
    t0 = time.perf_counter()
    n = vi.count()  # first call reads the file
    load_s = time.perf_counter() - t0
    for query in q[:WARMUP]:
        vi.search(query, K)
    out = {"load_s": round(load_s, 3), "rss_base_mb": base_mb, "threads": faiss.omp_get_max_threads()}
    for mode in MODES:
        ms, top, counts = _timed_searches(vi, q, **filters[mode])
        expect = min(K, n, len(filters[mode].get("allowed", ())) or K)
        out[mode] = {"ms": _percentiles(ms),
                     "recall10": round(recall_at(top, np.load(case_dir / f"truth_{mode}.npy")), 4),
                     "min_results": int(min(counts)), "short_queries": int(sum(c < expect for c in counts))}
    out["selector_ms"] = _selector_ms(filters["allowed10"]["allowed"])
    out["rss_peak_mb"] = _rss_mb()
    result_path.write_text(json.dumps(out))


def measure(index_path: Path, case_dir: Path, threads: int | None) -> dict:
    """Run the worker in a fresh interpreter so its peak RSS is the loaded index's footprint,
    not the builder's (which held the matrix and the training copies). ``threads`` caps
    OpenMP/BLAS threads in the worker (see ``--threads``)."""
    result = case_dir / "worker.json"
    result.unlink(missing_ok=True)
    env = dict(os.environ)
    if threads:
        env["OMP_NUM_THREADS"] = env["OPENBLAS_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(index_path),
           "--case", str(case_dir), "--result", str(result)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0 or not result.exists():
        return {"error": (proc.stderr or proc.stdout)[-2000:]}
    return json.loads(result.read_text())


# ---------------------------------------------------------------------------- orchestration

def _record(n: int, dist: str, layout: str, stats: dict, built: dict, measured: dict) -> dict:
    """One flat-ish JSON record per (N, dist, layout); the load average says how shared the
    machine was when the figures were taken."""
    import faiss
    return {"n": n, "dist": dist, "layout": layout, "dim": DIM, "k": K, **stats, **built, **measured,
            "build_threads": faiss.omp_get_max_threads(), "loadavg_1m": round(os.getloadavg()[0], 2)}


def _save(results: list[dict], out_dir: Path) -> None:
    """Rewrite results.json after each record: a multi-hour 1M run keeps partial figures."""
    meta = _environment()
    (out_dir / "results.json").write_text(json.dumps({"environment": meta, "results": results}, indent=1))


def _environment() -> dict:
    """Enough context to read the figures later: versions and the shared machine's size."""
    import faiss
    return {"faiss": faiss.__version__, "numpy": np.__version__, "python": platform.python_version(),
            "cpus": os.cpu_count(), "machine": platform.machine(), "sigma": SIGMA,
            "per_centre": PER_CENTRE, "query_seed": QUERY_SEED}


def run(sizes, dists, layouts, queries, out_dir, threads: int | None = 1, seed: int = DATA_SEED,
        work_dir: Path | None = None, verbose: bool = True, build_threads: int | None = None) -> list[dict]:
    """Benchmark every (N, dist, layout); returns the records (also written to
    ``out_dir/results.json``, with PNGs). Index files live in a temp dir that is removed.

    ``threads`` (default 1) caps the query worker's threads: the engine answers one query
    vector at a time, and on a shared machine a multi-threaded nq=1 search mostly measures
    OpenMP barrier waits (flat 50k: p50 ~3.5 ms on 1 thread, ~36 ms on 2 under load).
    ``build_threads`` caps FAISS in this process for training and calibration (default: all)."""
    import faiss
    if build_threads:
        faiss.omp_set_num_threads(build_threads)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    unknown = set(layouts) - set(LAYOUTS) | set(dists) - set(GENERATORS)
    if unknown:
        raise ValueError(f"unknown layouts/dists: {sorted(unknown)}")
    tmp = Path(tempfile.mkdtemp(prefix="hybrid-vbench-", dir=work_dir))
    results: list[dict] = []
    try:
        for n in sizes:
            for dist in dists:
                results += _run_case(int(n), dist, layouts, queries, tmp, threads, seed, out_dir, results, verbose)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    plot(results, out_dir)
    return results


def _run_case(n, dist, layouts, queries, tmp, threads, seed, out_dir, done, verbose) -> list[dict]:
    """All layouts for one (N, dist): the vectors and truths are made once and shared."""
    case_dir = tmp / f"{dist}-{n}"
    vecs, ids, stats = prepare_case(dist, n, queries, case_dir, seed)
    if verbose:
        print(f"# {dist} N={n}: generated in {stats['generate_s']} s, exact truth {stats['truth_s']} s, "
              f"nn cosine {stats['nn_cosine']}", flush=True)
    records = []
    for layout in layouts:
        path = case_dir / f"{layout}.faiss"
        built = build_layout(vecs, ids, layout, path)
        measured = measure(path, case_dir, threads)
        path.unlink(missing_ok=True)
        records.append(_record(n, dist, layout, stats, built, measured))
        _save(done + records, out_dir)
        if verbose:
            print(_row(records[-1]), flush=True)
    del vecs
    gc.collect()
    return records


# ---------------------------------------------------------------------------- reporting

def _nl(r: dict) -> str:
    """nlist/nprobe for IVF; flat layouts have neither."""
    return f"{r['nlist']}/{r['nprobe']}" if r.get("nlist") else "—"


def _row(r: dict) -> str:
    """A compact one-line summary, printed as each record finishes."""
    if "error" in r:
        return f"{r['n']:>8} {r['dist']:<9} {r['layout']:<13} ERROR {r['error'].strip().splitlines()[-1]}"
    u, a, b = r["unfiltered"], r["allowed10"], r["banned1"]
    return (f"{r['n']:>8} {r['dist']:<9} {r['layout']:<13} build {r['build_s']:>7.2f}s "
            f"{r['bytes_per_vector']:>7.1f} B/v  nl/np {_nl(r):>9}  "
            f"p50/95/99 {u['ms']['p50']:.2f}/{u['ms']['p95']:.2f}/{u['ms']['p99']:.2f} ms  "
            f"allow {a['ms']['p50']:.2f}  ban {b['ms']['p50']:.2f}  "
            f"R@10 {u['recall10']:.3f}/{a['recall10']:.3f}/{b['recall10']:.3f}  RSS {r['rss_peak_mb']:.0f} MB")


def table(results: list[dict]) -> str:
    """The compact text table printed at the end of a CLI run."""
    head = (f"{'N':>8} {'dist':<9} {'layout':<13} (recall@10: unfiltered/allowed10/banned1)")
    return "\n".join([head] + [_row(r) for r in results])


def _md_rows(rows: list[dict]) -> list[str]:
    """One markdown table; "⚠ short" flags a filtered search that returned fewer than k hits."""
    lines = ["| N | layout | build s | B/vector | nlist/nprobe | p50 ms | p95 ms | p99 ms | p50 allow-10% "
             "| p50 ban-1% | recall@10 | recall@10 allow/ban | RSS MB |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['n']:,} | {r['layout']} | {r['build_s']:.2f} | {r['bytes_per_vector']:.0f} | "
                         f"{_nl(r)} | error | | | | | | | |")
            continue
        u, a, b = r["unfiltered"], r["allowed10"], r["banned1"]
        short = "" if not (a["short_queries"] or b["short_queries"]) else " ⚠ short"
        lines.append(f"| {r['n']:,} | {r['layout']} | {r['build_s']:.2f} | {r['bytes_per_vector']:.0f} | {_nl(r)} | "
                     f"{u['ms']['p50']:.2f} | {u['ms']['p95']:.2f} | {u['ms']['p99']:.2f} | {a['ms']['p50']:.2f} | "
                     f"{b['ms']['p50']:.2f} | {u['recall10']:.3f} | {a['recall10']:.3f} / {b['recall10']:.3f}{short} | "
                     f"{r['rss_peak_mb']:.0f} |")
    return lines


def markdown(results: list[dict]) -> str:
    """A report section: method in two paragraphs, then one table per distribution."""
    if not results:
        return "### Vector index at scale\n\nNo results.\n"
    env = _environment()
    q = results[0].get("queries")
    out = ["### Vector index at scale (vector-only, dim 384)", "",
           f"`eval/bench/vectors.py`: unit float32 vectors, no embedding. Each index is built with "
           f"`FaissIndex.rebuild` (ann_recall 0.99; IVF forced with ann_threshold=1, flat with 0) and "
           f"then loaded in a fresh process that answers {q} queries (stored vectors plus equal-norm "
           f"noise, seed {QUERY_SEED}) at k={K}: unfiltered, with an allowed set of 10% of the ids, "
           f"and with 1% of the ids banned. Latencies are per-query percentiles of `FaissIndex.search` "
           f"(including the per-query filter selector); recall@10 is against exact search on the "
           f"float32 matrix (for the filters, exact search over the permitted ids). RSS is the query "
           f"process's peak (VmHWM). Query process threads: {results[0].get('threads', '?')}; "
           f"faiss {env['faiss']}, {env['cpus']} CPUs (shared machine, 1-min load "
           f"{min(r['loadavg_1m'] for r in results):.1f}–{max(r['loadavg_1m'] for r in results):.1f}).", "",
           f"*clustered*: N/{PER_CENTRE} topic centres, noise norm σ={SIGMA} (median nearest-neighbour "
           f"cosine {_nn_range(results, 'clustered')}); *uniform*: uniform on the sphere, the worst "
           f"case for IVF (nn cosine {_nn_range(results, 'uniform')}).", ""]
    for dist in [d for d in DISTS if any(r["dist"] == d for r in results)]:
        rows = sorted((r for r in results if r["dist"] == dist),
                      key=lambda r: (r["n"], list(LAYOUTS).index(r["layout"])))
        out += [f"**{dist}**", ""] + _md_rows(rows) + [""]
    return "\n".join(out)


def _nn_range(results: list[dict], dist: str) -> str:
    """The measured nearest-neighbour cosine(s), so the report shows what the data looked like."""
    vals = sorted({r["nn_cosine"] for r in results if r["dist"] == dist})
    if not vals:
        return "n/a"
    return f"{vals[0]:.2f}" if vals[0] == vals[-1] else f"{vals[0]:.2f}–{vals[-1]:.2f}"


def _series(results: list[dict], dist: str, layout: str, value) -> tuple[list[int], list[float]]:
    """(N, value) points of one layout, sorted by N, skipping failed records."""
    rows = sorted((r for r in results if r["dist"] == dist and r["layout"] == layout and "error" not in r),
                  key=lambda r: r["n"])
    return [r["n"] for r in rows], [value(r) for r in rows]


def plot(results: list[dict], out_dir: Path) -> list[str]:
    """Write vectors_latency_<dist>.png (p50 vs N, one panel per filter mode),
    vectors_recall.png and vectors_bytes.png into ``out_dir``; returns the file names so a
    report can embed them (prefixed, as the orchestrator shares one figure folder)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ok = [r for r in results if "error" not in r]
    if not ok:
        return []
    out_dir = Path(out_dir)
    dists = [d for d in DISTS if any(r["dist"] == d for r in ok)]
    layouts = [layout for layout in LAYOUTS if any(r["layout"] == layout for r in ok)]
    names = [f"vectors_latency_{dist}.png" for dist in dists]
    for dist, name in zip(dists, names):
        _plot_latency(plt, ok, dist, layouts, out_dir / name)
    _plot_recall(plt, ok, dists, layouts, out_dir / "vectors_recall.png")
    _plot_bytes(plt, ok, dists, layouts, out_dir / "vectors_bytes.png")
    return names + ["vectors_recall.png", "vectors_bytes.png"]


def _plot_latency(plt, results, dist, layouts, path: Path) -> None:
    """Log-log: flat grows linearly with N, IVF roughly with √N, so slopes tell them apart."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5), sharey=True)
    for ax, mode in zip(axes, MODES):
        for layout in layouts:
            xs, ys = _series(results, dist, layout, lambda r, mode=mode: r[mode]["ms"]["p50"])
            ax.plot(xs, ys, marker="o", label=layout)
        ax.set(xscale="log", yscale="log", xlabel="N vectors", title=f"{dist}: {mode}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel(f"p50 latency, ms (k={K})")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_recall(plt, results, dists, layouts, path: Path) -> None:
    """Unfiltered recall@10 vs N with the 0.98 floor the engine promises."""
    fig, axes = plt.subplots(1, len(dists), figsize=(6.5 * len(dists), 4.5), squeeze=False)
    for ax, dist in zip(axes[0], dists):
        for layout in layouts:
            xs, ys = _series(results, dist, layout, lambda r: r["unfiltered"]["recall10"])
            ax.plot(xs, ys, marker="o", label=layout)
        ax.axhline(0.98, color="grey", linestyle="--", linewidth=1)
        ax.set(xscale="log", xlabel="N vectors", ylabel="recall@10 vs exact", title=dist)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_bytes(plt, results, dists, layouts, path: Path) -> None:
    """Grouped bars: per layout, one bar per N (IVF's centroids and ids amortize with N)."""
    sizes = sorted({r["n"] for r in results})
    fig, axes = plt.subplots(1, len(dists), figsize=(6.5 * len(dists), 4.5), squeeze=False)
    width = 0.8 / len(sizes)
    for ax, dist in zip(axes[0], dists):
        for j, n in enumerate(sizes):
            vals = [next((r["bytes_per_vector"] for r in results
                          if r["dist"] == dist and r["layout"] == layout and r["n"] == n), 0)
                    for layout in layouts]
            ax.bar(np.arange(len(layouts)) + j * width, vals, width, label=f"N={n:,}")
        ax.set_xticks(np.arange(len(layouts)) + 0.4 - width / 2, layouts, rotation=20)
        ax.set(ylabel="index file bytes / vector", title=dist)
        ax.axhline(DIM * 4, color="grey", linestyle="--", linewidth=1)
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------- CLI

def _csv(text: str) -> list[str]:
    """Comma lists on the command line, tolerant of spaces and trailing commas."""
    return [t.strip() for t in text.split(",") if t.strip()]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)))
    ap.add_argument("--dists", default=",".join(DISTS))
    ap.add_argument("--layouts", default=",".join(DEFAULT_LAYOUTS), help=f"any of {', '.join(LAYOUTS)}")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--seed", type=int, default=DATA_SEED)
    ap.add_argument("--threads", type=int, default=1,
                    help="OpenMP/BLAS threads for the query worker (default 1; 0 = library default)")
    ap.add_argument("--build-threads", type=int, default=0, help="FAISS threads for building (0 = all)")
    ap.add_argument("--tmp", type=Path, default=None, help="where index files are written (default: system temp)")
    ap.add_argument("--quick", action="store_true", help="sizes 10000,50000 and 50 queries: a smoke run")
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--case", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker, args.case, args.result)
        return
    sizes = [10_000, 50_000] if args.quick else [int(s) for s in _csv(args.sizes)]
    queries = 50 if args.quick else args.queries
    t0 = time.perf_counter()
    results = run(sizes, _csv(args.dists), _csv(args.layouts), queries, args.out, threads=args.threads or None,
                  seed=args.seed, work_dir=args.tmp, build_threads=args.build_threads or None)
    print()
    print(table(results))
    print(f"\n{len(results)} records in {time.perf_counter() - t0:.0f} s -> {args.out}/results.json")


if __name__ == "__main__":
    main()
