"""Engine at scale (issue #5): generated vaults of growing size, indexed with the ``bench``
embedder (common.py: hashed document vectors, real MiniLM query embeddings).

Per vault size it measures: the full index as a subprocess (per-stage seconds, CPU busy, peak
RSS), bytes on disk per chunk, no-op and one-note-changed re-index (medians), warm in-process
query latency p50/p95/p99 per mode (lexical, vector, hybrid, hybrid+filters, and filtered vector and
hybrid searches from broad to narrow: ``FILTERS``), the same through
the HTTP server (``POST /api/search``) with the server's RSS, and cold ``hybrid query``
processes (lexical in-process; hybrid via the server; hybrid in-process).

    .venv/bin/python eval/bench/scale.py --notes 1500,15000 [--queries 200] [--out eval/out/bench/scale]
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import common
import genvault

HERE = Path(__file__).resolve().parent
WRAPPER = [sys.executable, str(HERE / "hybrid_bench.py")]
HYBRID = [str(Path(sys.executable).with_name("hybrid"))]
MODES = {"lexical": {"mode": "lexical"}, "vector": {"mode": "vector"}, "hybrid": {"mode": "hybrid"},
         "hybrid+filters": {"mode": "hybrid", "folders": ["work"]}}
# issue #31 (part B): filtered searches from broad to narrow (genvault: ten folders of a tenth
# each, dates over six years, tags from per-topic words); TOP_TAG is the vault's commonest tag
TOP_TAG = "<commonest tag>"
FILTERS = {"folder-broad": {"folders": ["work", "home-lab"]},            # ~half
           "folder-narrow": {"folders": ["finance"], "since": "2024-01-01"},  # a few %
           "tag": {"tags": [TOP_TAG]}, "since": {"since": "2024-01-01"}}
MODES.update({f"{mode}+{name}": {"mode": mode, **f} for mode in ("vector", "hybrid") for name, f in FILTERS.items()})


def concrete(args: dict, vault: Path) -> dict:
    """``args`` with TOP_TAG replaced by ``vault``'s commonest front-matter tag."""
    if TOP_TAG not in args.get("tags", ()):
        return args
    return {**args, "tags": [top_tag(vault)]}


@functools.cache
def top_tag(vault: Path) -> str:
    counts: collections.Counter[str] = collections.Counter()
    for p in vault.rglob("*.md"):
        m = re.search(r"^tags: \[?([^\]\n]*)\]?$", p.read_text(encoding="utf-8"), re.M)
        if m:
            counts.update(t.strip().lower() for t in m.group(1).split(","))
    return counts.most_common(1)[0][0]


def vault_for(notes: int, work: Path) -> Path:
    """Generated once per size and reused (byte-identical for a given size and seed)."""
    root = work / f"vault-{notes}"
    stamp = root / ".complete"
    if not stamp.exists():
        shutil.rmtree(root, ignore_errors=True)
        genvault.generate(root, notes)
        stamp.write_text("ok")
    return root


def queries_from(vault: Path, n: int, seed: int = 3) -> list[str]:
    """Two to four consecutive words from a random sentence of a random note: the vocabulary
    and term statistics real keyword queries against such a vault would have."""
    rng = random.Random(seed)
    files = sorted(vault.rglob("*.md"))
    out: list[str] = []
    while len(out) < n:
        text = rng.choice(files).read_text(encoding="utf-8")
        words = re.findall(r"[a-z]{3,}", text.split("---")[-1].lower())
        if len(words) < 6:
            continue
        k = rng.randint(2, 4)
        i = rng.randrange(len(words) - k)
        out.append(" ".join(words[i:i + k]))
    return out


def common_queries(vault: Path, n: int, seed: int = 3, top: int = 8,
                   window: int = 100) -> tuple[list[str], dict[str, float]]:
    """Two to four words drawn from the ``top`` words found in most chunks: the worst case for
    a keyword arm that scores every candidate (each word is in most of the vault). A chunk is
    approximated by a window of ``window`` consecutive body words of a note (chunks are 128
    tokens, about 100 words); stopwords (which the arm drops) are left out. Returns the queries
    and the share of windows holding each word chosen. (Issue #31, part A.)"""
    from hybrid.core.tokens import STOPWORDS
    df: collections.Counter[str] = collections.Counter()
    windows = 0
    for f in sorted(vault.rglob("*.md")):
        words = [w for w in re.findall(r"[a-z]{3,}", f.read_text(encoding="utf-8").split("---")[-1].lower())
                 if w not in STOPWORDS]
        for i in range(0, max(len(words), 1), window):
            df.update(set(words[i:i + window]))
            windows += 1
    chosen = [w for w, _ in df.most_common(top)]
    rng = random.Random(seed)
    out = [" ".join(rng.sample(chosen, rng.randint(2, 4))) for _ in range(n)]
    return out, {w: round(df[w] / windows, 3) for w in chosen}


def usage(stderr: str) -> dict:
    for line in stderr.splitlines():
        if line.startswith("BENCH_USAGE "):
            return json.loads(line[len("BENCH_USAGE "):])
    return {}


def full_index(home: Path, vault: Path) -> dict:
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    (home / "config.toml").write_text(f'[settings]\nembedder = "{common.BENCH_SPEC}"\n\n'
                                      f'[vaults.scale]\npath = "{vault}"\n', encoding="utf-8")
    env = dict(common.bench_env(home), HYBRID_BENCH_USAGE="1")
    t = time.perf_counter()
    out = subprocess.run(WRAPPER + ["index", "--json"], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if out.returncode:
        raise SystemExit(f"index failed: {out.stderr[-2000:]}")
    report = json.loads(out.stdout)[0]
    use = usage(out.stderr)
    idx = home / "data" / "indexes" / "scale"
    if not idx.exists():
        idx = next(p.parent for p in home.rglob("catalog.sqlite"))
    parts = {"catalog": common.dir_bytes(idx) - common.dir_bytes(idx / "lexical")
             - (idx / "vectors.faiss").stat().st_size,
             "tantivy": common.dir_bytes(idx / "lexical"), "faiss": (idx / "vectors.faiss").stat().st_size}
    chunks = report["chunks"]
    return {"notes": report["added"], "chunks": chunks, "wall_s": round(wall, 2),
            "stage_seconds": report["stage_seconds"], "cpu_busy_cores": round(use["cpu_s"] / use["wall_s"], 2),
            "peak_rss_mb": use["peak_rss_mb"], "bytes_per_chunk": round(common.dir_bytes(idx) / chunks),
            "bytes_per_chunk_parts": {k: round(v / chunks) for k, v in parts.items()},
            "index_dir": str(idx)}


def reindex(home: Path, vault: Path, repeat: int) -> dict:
    import hybrid
    h = hybrid.open(home)
    h.index()  # settle (e.g. a layout rebuild the full run scheduled)
    noop = [h.index()[0].seconds for _ in range(repeat)]
    files = sorted(vault.rglob("*.md"))
    one = []
    for i in range(repeat):
        target = files[(i * 7919) % len(files)]
        original = target.read_bytes()
        target.write_bytes(original + f"\nEdited for the benchmark, pass {i}.\n".encode())
        try:
            one.append(h.index()[0].seconds)
        finally:
            target.write_bytes(original)
        h.index()
    h.close()
    return {"noop_s": round(statistics.median(noop), 4), "one_change_s": round(statistics.median(one), 4),
            "repeat": repeat}


def warm_queries(home: Path, queries: list[str], common_words: Sequence[str] = (),
                 modes: Sequence[str] | None = None) -> dict:
    """Every mode (or only ``modes``) over ``queries``; with ``common_words``
    (:func:`common_queries`), the lexical and hybrid modes over them too (``lexical (common
    words)``, ``hybrid (common words)``)."""
    import hybrid
    h = hybrid.open(home)
    h.search("warm up the model", mode="hybrid" if modes is None or "hybrid" in modes else "lexical")
    out = {}
    runs = [(name, args, queries) for name, args in MODES.items() if modes is None or name in modes]
    if common_words:
        runs += [(f"{m} (common words)", MODES[m], list(common_words)) for m in ("lexical", "hybrid")
                 if modes is None or m in modes]
    for name, args, qs in runs:
        args = concrete(args, h.config.vault("scale").path)
        for q in qs[:5]:
            h.search(q, **args)
        times, answered = [], 0
        for q in qs:
            t = time.perf_counter()
            answered += bool(h.search(q, top_k=8, **args))
            times.append(time.perf_counter() - t)
        out[name] = {**common.summary_ms(times), "answered": answered}
    h.close()
    return out


def cold(cmd: list[str], env: dict, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        res = subprocess.run(cmd, env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - t)
        if res.returncode:
            raise SystemExit(f"{' '.join(cmd)} failed: {res.stderr[-1000:]}")
    return round(statistics.median(times), 3)


def served(home: Path, queries: list[str], cold_repeat: int, vault: Path) -> dict:
    env = common.bench_env(home)
    port = common.free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(WRAPPER + ["serve", "--http", "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out: dict = {}
    try:
        common.wait_healthy(url)
        common.post(url + "/api/search", {"query": "warm up the model", "top_k": 5})
        for name, args in MODES.items():
            args = concrete(args, vault)
            for q in queries[:5]:
                common.post(url + "/api/search", {"query": q, "top_k": 8, **args})
            times, answered = [], 0
            for q in queries:
                t = time.perf_counter()
                answer = common.post(url + "/api/search", {"query": q, "top_k": 8, **args})
                answered += bool(common.answer_passages(answer))
                times.append(time.perf_counter() - t)
            out[name] = {**common.summary_ms(times), "answered": answered}
        out["server_rss_mb"] = round(common.rss_mb(server.pid), 1)
        out["server_peak_rss_mb"] = round(common.hwm_mb(server.pid), 1)
        q = queries[0]
        out["cold_cli_hybrid_via_server_s"] = cold(HYBRID + ["query", q, "--json"], env, cold_repeat)
        out["cold_cli_lexical_via_server_s"] = cold(HYBRID + ["query", q, "--mode", "lexical", "--json"], env,
                                                    cold_repeat)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return out


def cold_local(home: Path, query: str, repeat: int) -> dict:
    env = common.bench_env(home)
    return {
        "cold_cli_lexical_local_s": cold(HYBRID + ["query", query, "--mode", "lexical", "--local", "--json"],
                                         env, repeat),
        "cold_cli_hybrid_local_s": cold(WRAPPER + ["query", query, "--local", "--json"], env, max(1, repeat // 2)),
        "cold_cli_vector_local_s": cold(WRAPPER + ["query", query, "--mode", "vector", "--local", "--json"],
                                        env, max(1, repeat // 2)),
    }


def run(sizes: list[int], queries: int, out_dir: Path, work: Path, repeat: int = 5,
        log=print, reuse: bool = False) -> list[dict]:
    """``reuse``: keep an index a previous run built for the same size (its full-index figures
    are read back) and measure everything else again."""
    common.install()
    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for notes in sizes:
        vault = vault_for(notes, work)
        home = work / f"home-{notes}"
        saved = home / "bench-index.json"
        if reuse and saved.exists():
            log(f"[scale] {notes} notes: reusing the index built earlier ({saved})")
            rec = {"vault_notes": notes, **json.loads(saved.read_text())}
        else:
            log(f"[scale] {notes} notes: full index")
            rec = {"vault_notes": notes, **full_index(home, vault)}
            saved.write_text(json.dumps({k: v for k, v in rec.items() if k != "vault_notes"}))
        log(f"[scale]   {rec['chunks']} chunks in {rec['wall_s']} s; re-index")
        rec["reindex"] = reindex(home, vault, repeat)
        qs = queries_from(vault, queries)
        log("[scale]   warm queries in-process")
        rec["warm"] = warm_queries(home, qs)
        log("[scale]   cold CLI")
        rec["cold"] = cold_local(home, qs[0], repeat)
        log("[scale]   through the HTTP server")
        rec["http"] = served(home, qs, repeat, vault)
        import hybrid
        rec["vector_index"] = hybrid.open(home).status()[0].vector_index
        results.append(rec)
        (out_dir / "results.json").write_text(json.dumps(results, indent=2))
        log(f"[scale]   hybrid p50 {rec['warm']['hybrid']['p50']} ms warm, "
            f"{rec['http']['hybrid']['p50']} ms via HTTP")
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--notes", default="1500,15000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--work", type=Path, default=Path("/tmp/hybrid-bench"))
    ap.add_argument("--out", type=Path, default=common.SCRATCH / "scale")
    ap.add_argument("--reuse-index", action="store_true", help="keep indexes built by an earlier run")
    args = ap.parse_args()
    res = run([int(x) for x in args.notes.split(",")], args.queries, args.out, args.work, args.repeat,
              reuse=args.reuse_index)
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
