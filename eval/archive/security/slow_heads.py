"""Does ``hybrid serve --http`` keep answering while clients hold connections with half-sent
request heads (issue #47)? Starts the server on 127.0.0.1 (a temporary home, the hash
embedder, one tiny note, a token, a connection cap of ``--cap``), opens ``--heads`` connections
that each send the start of a request head and never finish it (each sent again on a new
connection after ``--renew`` seconds, and at once when the server sheds it, so the flood stays
topped up and young), and meanwhile asks ``/health`` and a search with the
right token every ``--every`` seconds for ``--seconds`` seconds.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/security/slow_heads.py [--heads 1100] [--seconds 10] \\
        [--renew 0.8] [--cap 1000]

Prints JSON: the statuses ``/health`` and the searches got (0: no answer within 5 s), the
slowest answer, and how many half heads were open at the end. Run it with ``PYTHONPATH=`` an
older checkout for the figure before.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from pathlib import Path

from common import free_port, wait_healthy
from token_guessing import make_home

TOKEN = "right-token-for-the-bench"
HALF_HEAD = b"POST /api/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


def flood(port: int, want: int, renew: float, stop: threading.Event, open_now: list[int]) -> None:
    """Keep ``want`` connections open with half a head each, each closed and opened again after
    ``renew`` seconds (so none has waited long: a server that sheds only connections idle for a
    while sheds none), and those the server closes opened again at once."""
    conns: deque[tuple[float, socket.socket]] = deque()
    while not stop.is_set():
        now = time.monotonic()
        kept: deque[tuple[float, socket.socket]] = deque()
        for born, s in conns:
            gone = now - born > renew
            if not gone:
                try:  # closed, or answered (408, 503): the server let go of it
                    s.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK)
                    gone = True
                except BlockingIOError:
                    pass
                except OSError:
                    gone = True
            if gone:
                s.close()
            else:
                kept.append((born, s))
        conns = kept
        while len(conns) < want and not stop.is_set():
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=2)
                s.sendall(HALF_HEAD)
                conns.append((time.monotonic(), s))
            except OSError:
                break
        open_now[0] = len(conns)
        stop.wait(0.05)
    for _, s in conns:
        s.close()


def ask(port: int, path: str, token: str | None) -> tuple[int, float]:
    t = time.perf_counter()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        headers = {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        body = b'{"query": "note"}' if path != "/health" else None
        conn.request("POST" if body else "GET", path, body, headers)
        status = conn.getresponse().status
        conn.close()
    except (OSError, http.client.HTTPException):
        status = 0
    return status, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heads", type=int, default=1100)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--every", type=float, default=0.3)
    ap.add_argument("--renew", type=float, default=0.8, help="seconds a half head is kept before it is sent again")
    ap.add_argument("--cap", type=int, default=1000, help="the server's connection cap (its open-file limit / 2)")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.heads + 500)), hard))
    tmp = Path(tempfile.mkdtemp(prefix="hybrid-bench-heads-"))
    home, _ = make_home(tmp)
    env = {k: v for k, v in os.environ.items() if k not in ("HYBRID_TOKEN", "HYBRID_ALLOWED_HOSTS")}
    env["HYBRID_HOME"] = str(home)
    port = free_port()
    # the server's cap is half its open-file limit, at most 1,000 (hybrid.faces.http_guard.connection_cap)
    limit = f"ulimit -n {2 * args.cap + 64}; exec {sys.executable} -m hybrid serve --http --port {port} --token {TOKEN}"
    server = subprocess.Popen(["sh", "-c", limit], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", timeout=120)
        stop, open_now = threading.Event(), [0]
        flooder = threading.Thread(target=flood, args=(port, args.heads, args.renew, stop, open_now))
        flooder.start()
        time.sleep(2)  # let the flood fill up
        health: Counter = Counter()
        search: Counter = Counter()
        slowest = 0.0
        deadline = time.perf_counter() + args.seconds
        while time.perf_counter() < deadline:
            for path, token, counts in (("/health", None, health), ("/api/search", TOKEN, search)):
                status, took = ask(port, path, token)
                counts[status] += 1
                slowest = max(slowest, took)
            time.sleep(args.every)
        held = open_now[0]
        stop.set()
        flooder.join()
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(json.dumps({"half_heads_wanted": args.heads, "half_heads_open_at_end": held, "seconds": args.seconds,
                      "health": {str(k): v for k, v in sorted(health.items())},
                      "search_with_token": {str(k): v for k, v in sorted(search.items())},
                      "slowest_answer_s": round(slowest, 2)}, indent=2))


if __name__ == "__main__":
    main()
