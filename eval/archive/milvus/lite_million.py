"""The stores bench's Milvus Lite run at 150,000 notes (about 1M chunks), as run for
eval/reports/milvus/stores.md (issue #52): the Lite folder served by a process of its own
(``python -m milvus_lite server``) so its memory and row counts can be watched from outside, the
full index, then, once the file WORK/go exists (start the queries on a quiet machine), the warm
queries of every mode.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/milvus/lite_million.py [NOTES] [QUERIES] [WORK]

On this 24 GB machine the index finished its owner's indexes and the first search's load ran out
of memory (the report's table); expect to stop it by hand."""
import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import common  # noqa: E402
import scale  # noqa: E402
import stores  # noqa: E402

notes = int(sys.argv[1]) if len(sys.argv) > 1 else 150_000
queries = int(sys.argv[2]) if len(sys.argv) > 2 else 20
work = Path(sys.argv[3] if len(sys.argv) > 3 else "/tmp/hybrid-bench-stores")
out = work / "million"
out.mkdir(parents=True, exist_ok=True)
common.install()
t = time.time()
vault = scale.vault_for(notes, work)
print(f"[big] vault ready in {time.time() - t:.0f} s", flush=True)
qs = scale.queries_from(vault, queries)
data = work / f"milvus-{notes}"
shutil.rmtree(data, ignore_errors=True)
data.mkdir(parents=True)
with socket.socket() as sock:
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
server = subprocess.Popen([sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(data),
                           "--host", "127.0.0.1", "--port", str(port)],
                          stdout=subprocess.DEVNULL, stderr=open(out / "server.log", "ab"))
(out / "server.pid").write_text(str(server.pid))
time.sleep(8)
url = f"milvus://127.0.0.1:{port}/default"
home = work / f"stores-home-{notes}-milvus"
print(f"[big] full index into {url}", flush=True)
rec = {"vault_notes": notes, "store": "milvus", **stores.full_index(home, vault, url)}
(out / "index.json").write_text(json.dumps(rec, indent=2))
print(f"[big] {rec['chunks']} chunks in {rec['wall_s']} s ({rec['chunks_per_s']}/s), peak RSS {rec['peak_rss_mb']} MB",
      flush=True)
while not (work / "go").exists():
    time.sleep(10)
print("[big] warm queries", flush=True)
rec["warm"] = scale.warm_queries(home, qs, modes=stores.QUERY_MODES)
rec["bytes_per_chunk"] = round((common.dir_bytes(home / "data") + common.dir_bytes(work / f"milvus-{notes}"))
                               / max(1, rec["chunks"]))
import hybrid  # noqa: E402, I001

h = hybrid.open(home)
rec["vector_index"] = h.status()[0].vector_index
h.close()
(out / "results.json").write_text(json.dumps([rec], indent=2))
server.kill()
print(stores.report([rec]), flush=True)
