"""Helpers shared by the Milvus feasibility scripts (issue #52): scratch folders under
/tmp/milvus-study, opening and releasing a milvus-lite database, token encoding, the
obsidian-help paragraph corpus, timing. Not a test; nothing here touches hybrid's own code."""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import resource
import shutil
import statistics
import time
from pathlib import Path

SCRATCH = Path("/tmp/milvus-study")
ROOT = Path(__file__).resolve().parents[3]
VAULT = ROOT.parent / "shared" / "vaults" / "obsidian-help"
WORD = re.compile(r"\w+")

# pymilvus logs every failed RPC with a traceback on stderr; the scripts print what they see
logging.getLogger("pymilvus").setLevel(logging.CRITICAL)
logging.getLogger("milvus_lite").setLevel(logging.CRITICAL)


def fresh(name: str) -> str:
    """A new, empty milvus-lite location /tmp/milvus-study/NAME.db (the old one removed)."""
    SCRATCH.mkdir(parents=True, exist_ok=True)
    path = SCRATCH / f"{name}.db"
    release(str(path))
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    return str(path)


def client(path: str):
    from pymilvus import MilvusClient
    return MilvusClient(path)


def release(path: str) -> None:
    """Stop milvus-lite's in-process server for ``path`` (closes the data dir, drops the LOCK)."""
    from milvus_lite import server_manager_instance
    server_manager_instance.release_server(path)


def hexy(token: str) -> str:
    """A token as lowercase hex of its UTF-8: only [0-9a-f], which the standard analyzer
    (``\\w+`` + lowercase) keeps whole and never changes."""
    return token.encode("utf-8").hex()


def b32(token: str) -> str:
    """A token as lowercase unpadded base32 of its UTF-8: [a-z2-7], 1.6 chars a byte (hex: 2)."""
    return base64.b32encode(token.encode("utf-8")).decode("ascii").rstrip("=").lower()


def encode(tokens, enc=hexy) -> str:
    return " ".join(enc(t) for t in tokens)


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def paragraphs(limit: int | None = None, min_words: int = 5) -> list[dict]:
    """obsidian-help's English markdown split at blank lines: dicts with id, path, title (the
    file name), headings (the heading path above the paragraph) and body; code fences and
    front matter are kept as text. Deterministic order (sorted paths)."""
    out = []
    for path in sorted((VAULT / "en").rglob("*.md")):
        rel = path.relative_to(VAULT / "en").as_posix()
        heads: list[str] = []
        for block in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
            block = block.strip()
            m = re.match(r"^(#{1,6})\s+(.*)", block)
            if m and "\n" not in block:
                level = len(m.group(1))
                heads = heads[:level - 1] + [m.group(2)]
                continue
            if len(words(block)) < min_words:
                continue
            out.append({"id": len(out), "path": rel, "title": path.stem,
                        "headings": " / ".join(heads), "body": block})
            if limit and len(out) >= limit:
                return out
    return out


def queries(n: int = 50) -> list[str]:
    """The project's labelled obsidian-help queries (qrels/obsidian-help.queries.jsonl)."""
    rows = [json.loads(x) for x in (ROOT / "qrels" / "obsidian-help.queries.jsonl").read_text().splitlines() if x]
    return [r["text"] for r in rows][:n]


class Timer:
    def __enter__(self):
        self.t = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.s = time.perf_counter() - self.t


def pct(values: list[float]) -> dict:
    """p50/p95/max of seconds, in milliseconds."""
    v = sorted(values)
    return {"p50_ms": round(statistics.median(v) * 1e3, 2),
            "p95_ms": round(v[min(len(v) - 1, int(round(0.95 * (len(v) - 1))))] * 1e3, 2),
            "max_ms": round(v[-1] * 1e3, 2), "n": len(v)}


def rss_mb() -> dict:
    """Current and peak resident memory of this process (milvus-lite runs inside it)."""
    with open("/proc/self/status") as f:
        cur = next(int(x.split()[1]) for x in f if x.startswith("VmRSS"))
    return {"rss_mb": cur // 1024, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}


def err(exc: BaseException) -> str:
    """An exception as ``Type: first line`` (at most 300 chars)."""
    if hasattr(exc, "code") and hasattr(exc, "details") and callable(exc.details):  # a gRPC error
        return f"{type(exc).__name__}: {exc.code()} {exc.details()}"[:300]
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {msg}"[:300]


def dump(obj) -> None:
    print(json.dumps(obj, indent=1, ensure_ascii=False, default=str))


os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
