"""How fast can a client guess the server's token? Starts ``hybrid serve --http --token X`` on
127.0.0.1 (a temporary home, the hash embedder, one tiny note) and hammers it for a few seconds
with wrong ``Authorization: Bearer`` tokens from several keep-alive connections, spread over
``/api/search``, ``/ui/api/search`` and ``/mcp``; then asks with the right token at once (from
the guessing address it is refused unchecked too: a 200 there would tell right from wrong), with
the right token and the owner key of ``server.json`` (as ``hybrid query`` does: never
throttled), and with the right token again once the ``Retry-After`` has passed.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/security/token_guessing.py [--seconds 5] \\
        [--connections 8] [--rotate]

``--rotate`` sends every guess from a new connection and a new loopback source address
(127.x.y.z), as a guesser walking around a throttle keyed by address would (issue #47).

Prints JSON: requests sent, how many the server checked (401) and refused unchecked (429), the
checked guesses per second (what an attacker gets: a 429 tells them nothing about the token),
and the status the right token got at the end.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from common import free_port, wait_healthy

TOKEN = "right-" + secrets.token_hex(8)
ROUTES = [("POST", "/api/search", b'{"query": "x"}'), ("POST", "/ui/api/search", b'{"query": "x"}'),
          ("POST", "/mcp", b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}')]


def make_home(tmp: Path) -> tuple[Path, Path]:
    """(HYBRID_HOME, its data dir, where the server writes server.json)."""
    import hybrid
    home, vault = tmp / "home", tmp / "vault"
    vault.mkdir(parents=True)
    (vault / "note.md").write_text("# Note\n\nA tiny note.\n", encoding="utf-8")
    home.mkdir()
    (home / "config.toml").write_text('[settings]\nembedder = "hash:64"\n', encoding="utf-8")
    h = hybrid.open(home)
    h.add_vault(vault, "v")
    h.index()
    data = h.config.data
    h.close()
    return home, data


def ask(conn: http.client.HTTPConnection, port: int, method: str, path: str, body: bytes, token: str,
        owner_key: str = "") -> int:
    return ask_full(conn, port, method, path, body, token, owner_key)[0]


def ask_full(conn: http.client.HTTPConnection, port: int, method: str, path: str, body: bytes, token: str,
             owner_key: str = "") -> tuple[int, str | None]:
    """(status, Retry-After) of one request."""
    headers = {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
    if owner_key:
        headers["X-Hybrid-Owner"] = owner_key
    conn.request(method, path, body, headers)
    r = conn.getresponse()
    r.read()
    return r.status, r.getheader("Retry-After")


def source(worker: int, i: int) -> tuple[str, int]:
    """A loopback source address of its own for request ``i`` of ``worker`` (127.w.x.y)."""
    return (f"127.{1 + worker % 250}.{(i // 250) % 250 + 1}.{i % 250 + 1}", 0)


def hammer(port: int, seconds: float, counts: Counter, lock: threading.Lock, worker: int,
           rotate: bool = False) -> None:
    def connect(i: int) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", port, timeout=30,
                                          source_address=source(worker, i) if rotate else None)
    conn = connect(0)
    deadline, i = time.perf_counter() + seconds, worker
    mine: Counter = Counter()
    while time.perf_counter() < deadline:
        method, path, body = ROUTES[i % len(ROUTES)]
        i += 1
        if rotate:  # a new connection from a new address for every guess
            conn.close()
            conn = connect(i)
        try:
            mine[ask(conn, port, method, path, body, f"guess-{secrets.token_hex(8)}")] += 1
        except (OSError, http.client.HTTPException):
            mine["error"] += 1
            conn.close()
            conn = connect(i)
    conn.close()
    with lock:
        counts.update(mine)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--rotate", action="store_true",
                    help="every guess from a new connection and a new 127.x.y.z source address")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hybrid-bench-guess-"))
    home, data = make_home(tmp)
    env = {k: v for k, v in os.environ.items() if k not in ("HYBRID_TOKEN", "HYBRID_ALLOWED_HOSTS")}
    env["HYBRID_HOME"] = str(home)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "hybrid", "serve", "--http", "--port", str(port),
                               "--token", TOKEN], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", timeout=120)
        counts: Counter = Counter()
        lock = threading.Lock()
        threads = [threading.Thread(target=hammer, args=(port, args.seconds, counts, lock, n, args.rotate))
                   for n in range(args.connections)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.perf_counter() - t0
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        search = ("POST", "/api/search", b'{"query": "note"}')
        right, retry = ask_full(conn, port, *search, TOKEN)
        owner_key = json.loads((data / "server.json").read_text(encoding="utf-8"))["owner_key"]
        owner = ask(conn, port, *search, TOKEN, owner_key)
        conn.close()
        time.sleep(float(retry or 0) + 0.5)  # a new connection: an idle one is closed after 10 s
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        later = ask(conn, port, *search, TOKEN)
        conn.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    sent = sum(counts.values())
    print(json.dumps({"seconds": round(took, 2), "connections": args.connections, "rotate": args.rotate,
                      "requests": sent,
                      "requests_per_s": round(sent / took, 1), "checked_401": counts[401],
                      "refused_429": counts[429],
                      "other": {str(k): v for k, v in counts.items() if k not in (401, 429)},
                      "checked_guesses_per_s": round(counts[401] / took, 1),
                      "right_token_at_once": right, "retry_after_s": retry,
                      "right_token_with_owner_key_at_once": owner,
                      "right_token_after_retry_after": later}, indent=2))


if __name__ == "__main__":
    main()
