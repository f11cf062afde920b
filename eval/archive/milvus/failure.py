"""Issue #52 feasibility, question 8 on milvus-lite: two processes on one .db; a process killed
mid-write; lite's own gRPC server shared by several processes; what the in-process server
exposes; connecting where nothing listens (exception, message, time, timeout); URIs and
credentials in error messages and logs; opening a path that is not a Milvus Lite database.

    .venv/bin/python eval/archive/milvus/failure.py       # ~1 min; JSON on stdout
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from _study import SCRATCH, Timer, client, dump, err, fresh, release
from pymilvus import DataType, MilvusClient

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable


def child(code: str, timeout: float = 60) -> dict:
    """Run ``code`` in a new Python process (this folder on the path); its last stdout line
    is JSON."""
    import json
    pre = f"import sys, json, time; sys.path.insert(0, {HERE!r})\nfrom _study import *\n"
    r = subprocess.run([PY, "-c", pre + code], capture_output=True, text=True, timeout=timeout)
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"returncode": r.returncode, "stderr tail": r.stderr.strip()[-400:]}


def small_collection(c, name="t"):
    s = c.create_schema(auto_id=False)
    s.add_field("id", DataType.INT64, is_primary=True)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=4)
    ip = c.prepare_index_params()
    ip.add_index("v", index_type="FLAT", metric_type="IP")
    c.create_collection(name, schema=s, index_params=ip)


def rows(start, n):
    return [{"id": i, "v": [1.0, 0.0, 0.0, float(i % 7)]} for i in range(start, start + n)]


OPEN_AND_COUNT = """
out = {{}}
t = time.perf_counter()
try:
    c = client({path!r})
    out["open"] = "ok"
    out["collections"] = c.list_collections()
    if "t" in out["collections"]:
        out["count(*)"] = c.query("t", filter="", output_fields=["count(*)"])[0]["count(*)"]
except Exception as exc:
    out["open"] = err(exc)
out["seconds"] = round(time.perf_counter() - t, 3)
print(json.dumps(out))
"""


def two_processes() -> dict:
    path = fresh("shared")
    out = {}
    c = client(path)
    small_collection(c)
    c.insert("t", rows(0, 1000))
    out["B opens the .db while A (this process) has it open"] = child(OPEN_AND_COUNT.format(path=path))
    release(path)
    out["B opens it after A released it (1,000 rows inserted by A, never flushed)"] = child(
        OPEN_AND_COUNT.format(path=path))
    # A killed mid-write: a child inserts 500 more rows, no flush, then SIGKILLs itself
    kill = f"""
c = client({path!r})
c.insert("t", [{{"id": i, "v": [1.0, 0.0, 0.0, 0.0]}} for i in range(1000, 1500)])
import os, signal
print(json.dumps({{"inserted": 500}}), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""
    child(kill)
    out["after a writer was SIGKILLed right after inserting 500 more rows (no flush)"] = child(
        OPEN_AND_COUNT.format(path=path))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shared_server() -> dict:
    """``python -m milvus_lite server`` on one data dir; a writer and a reader process."""
    path = fresh("served")
    port = free_port()
    srv = subprocess.Popen([PY, "-m", "milvus_lite", "server", "--data-dir", path, "--host", "127.0.0.1",
                            "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    helptext = subprocess.run([PY, "-m", "milvus_lite", "server", "--help"], capture_output=True, text=True).stdout
    out = {"command": f"python -m milvus_lite server --data-dir {path} --host 127.0.0.1 --port {port}",
           "default --host (help text)": helptext.split("  --host HOST")[1].split("\n")[0].strip()}
    uri = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            c = MilvusClient(uri, timeout=1)
            break
        except Exception:
            time.sleep(0.1)
    small_collection(c)
    writer = subprocess.Popen([PY, "-c", f"""
import sys, time; sys.path.insert(0, {HERE!r})
from _study import *
from pymilvus import MilvusClient
c = MilvusClient({uri!r})
for k in range(20):
    c.insert("t", [{{"id": k * 100 + i, "v": [1.0, 0.0, 0.0, 0.0]}} for i in range(100)])
    time.sleep(0.05)
"""])
    reader = child(f"""
from pymilvus import MilvusClient
c = MilvusClient({uri!r})
seen = []
t = time.perf_counter()
while time.perf_counter() - t < 3:
    seen.append(c.query("t", filter="", output_fields=["count(*)"])[0]["count(*)"])
    time.sleep(0.1)
print(json.dumps({{"counts seen by the reader": sorted(set(seen))}}))
""")
    writer.wait(timeout=60)
    out["a writer process inserts 20 x 100 rows while a reader process counts"] = reader
    out["count after the writer finished"] = c.query("t", filter="", output_fields=["count(*)"])[0]["count(*)"]
    out["a client with token 'nobody:wrong' can read"] = child(f"""
from pymilvus import MilvusClient
try:
    c = MilvusClient({uri!r}, token="nobody:wrong")
    print(json.dumps(c.query("t", filter="", output_fields=["count(*)"])[0]))
except Exception as exc:
    print(json.dumps(err(exc)))
""")
    out["a local .db client on the same dir while the server runs"] = child(OPEN_AND_COUNT.format(path=path))
    srv.send_signal(signal.SIGTERM)
    srv.wait(timeout=30)
    return out


def embedded_port_exposed() -> dict:
    """The .db URI starts a gRPC server on 127.0.0.1:<free port> inside this process: can
    another process read through it?"""
    path = fresh("exposed")
    c = client(path)
    small_collection(c)
    c.insert("t", rows(0, 10))
    from milvus_lite import server_manager_instance
    port = server_manager_instance._servers[os.path.abspath(path)][2]
    r = child(f"""
from pymilvus import MilvusClient
c = MilvusClient("http://127.0.0.1:{port}")
rows = c.query("t", filter="", output_fields=["count(*)"])[0]["count(*)"]
print(json.dumps({{"collections": c.list_collections(), "rows": rows}}))
""")
    release(path)
    return {"port": port, "another process connecting to http://127.0.0.1:<that port>": r}


CONNECT = """
from pymilvus import MilvusClient
records = []
class Capture(logging.Handler):
    def emit(self, record):
        records.append(self.format(record))
lg = logging.getLogger("pymilvus")
lg.addHandler(Capture(logging.DEBUG))
lg.setLevel(logging.DEBUG)
kw = {kw}
res = {{}}
t = time.perf_counter()
try:
    MilvusClient(**kw)
    res["result"] = "connected"
except BaseException as exc:
    chain, e = [], exc
    while e is not None and len(chain) < 5:
        chain.append(f"{{type(e).__module__}}.{{type(e).__name__}}: {{str(e)[:300]}}")
        e = e.__cause__ or e.__context__
    res["exception"] = chain[0].split(":")[0]
    res["message"] = str(exc)[:300]
    res["chain"] = chain
    res["'secret' in exception chain"] = any("secret" in x for x in chain)
res["seconds"] = round(time.perf_counter() - t, 2)
res["pymilvus log records"] = len(records)
res["'secret' in log records"] = any("secret" in x for x in records)
res["log records (first 2)"] = [r[:300] for r in records[:2]]
print(json.dumps(res))
"""


def silent_listener() -> tuple[socket.socket, int]:
    """A TCP port that accepts connections and never answers (a hung server)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    return s, s.getsockname()[1]


def unreachable() -> dict:
    """Each case in a fresh process, with pymilvus's log records captured at DEBUG."""
    sock, port = silent_listener()
    cases = {
        "http://127.0.0.1:1 (nothing listening; no timeout given)": 'dict(uri="http://127.0.0.1:1")',
        "http://127.0.0.1:1, timeout=2": 'dict(uri="http://127.0.0.1:1", timeout=2)',
        "http://user:secret@127.0.0.1:1, timeout=2": 'dict(uri="http://user:secret@127.0.0.1:1", timeout=2)',
        "user='user', password='secret', timeout=2":
            'dict(uri="http://127.0.0.1:1", user="user", password="secret", timeout=2)',
        "token='user:secret', timeout=2": 'dict(uri="http://127.0.0.1:1", token="user:secret", timeout=2)',
        "a port that accepts and never answers, timeout=3": f'dict(uri="http://127.0.0.1:{port}", timeout=3)',
        "the same with http://user:secret@, timeout=3": f'dict(uri="http://user:secret@127.0.0.1:{port}", timeout=3)',
        "the same, no timeout given": f'dict(uri="http://127.0.0.1:{port}")',
        "ftp://127.0.0.1:1": 'dict(uri="ftp://127.0.0.1:1", timeout=2)',
        "ftp://user:secret@127.0.0.1:1": 'dict(uri="ftp://user:secret@127.0.0.1:1", timeout=2)',
        "/nonexistent-dir/x.db": 'dict(uri="/nonexistent-dir/x.db")',
    }
    out = {}
    for label, kw in cases.items():
        t = time.perf_counter()
        try:
            out[label] = child(CONNECT.format(kw=kw), timeout=40)
        except subprocess.TimeoutExpired:
            out[label] = {"result": f"no answer after {time.perf_counter() - t:.0f} s (child killed)"}
        print(f"# {label}", file=sys.stderr)
    sock.close()
    return out


def not_milvus() -> dict:
    out = {}
    SCRATCH.mkdir(exist_ok=True)
    sq = SCRATCH / "catalog.db"  # a SQLite file, as hybrid's catalog is
    if sq.exists():
        sq.unlink()
    con = sqlite3.connect(sq)
    con.execute("create table t (x)")
    con.commit()
    con.close()
    junk = SCRATCH / "junk.db"
    junk.write_bytes(os.urandom(4096)) if not junk.is_dir() else None
    emptydir = Path(fresh("emptydir"))
    emptydir.mkdir()
    notes = Path(fresh("notes"))
    notes.mkdir()
    (notes / "note.md").write_text("# a note\n")
    for label, p in (("a SQLite file named catalog.db", sq), ("4 KB of random bytes (junk.db)", junk),
                     ("an empty directory (emptydir.db)", emptydir),
                     ("a directory holding note.md (notes.db)", notes)):
        before = sorted(x.name for x in p.iterdir()) if p.is_dir() else None
        size = p.stat().st_size if p.is_file() else None
        with Timer() as t:
            try:
                c = MilvusClient(str(p))
                res = {"open": "ok", "collections": c.list_collections()}
            except Exception as exc:
                res = {"open": err(exc)}
        res["seconds"] = round(t.s, 2)
        if p.is_dir():
            res["entries before"] = before
            res["entries after"] = sorted(x.name for x in p.iterdir())
        else:
            res["file unchanged"] = p.stat().st_size == size
        release(str(p))
        out[label] = res
    # a Milvus Lite dir whose collection manifest is garbage
    path = fresh("corrupt")
    c = client(path)
    small_collection(c)
    c.insert("t", rows(0, 10))
    c.flush("t")
    release(path)
    (Path(path) / "collections" / "t" / "manifest.json").write_text("{not json")
    out["a Milvus Lite dir with a garbled collection manifest.json"] = child(OPEN_AND_COUNT.format(path=path))
    for f in (Path(path) / "collections" / "t").glob("manifest.json*"):
        f.write_text("{not json")
    out["... and its manifest.json.prev garbled too"] = child(OPEN_AND_COUNT.format(path=path))
    return out


if __name__ == "__main__":
    result = {}
    for f in (two_processes, shared_server, embedded_port_exposed, unreachable, not_milvus):
        result[f.__name__] = f()
        print(f"# {f.__name__} done", file=sys.stderr)
    dump(result)
