"""Server benchmark (issue #4 figures). Not run by pytest; medians/percentiles over repeats.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/speed/server.py [--vault ../shared/vaults/obsidian-help]

On a copy of the vault in a temp dir, with `hybrid serve --http --watch` running:
- MCP `search` round-trip over Streamable HTTP (a real ClientSession), hybrid, no rerank;
- save-to-searchable latency with the watcher (append a unique word, poll until found);
- `hybrid query` wall time through the running server vs in-process (cold processes);
- server RSS with the vault loaded.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import OBSIDIAN_HELP, REPORTS, answer_passages, free_port, heading_queries, pct, post, rss_mb, wait_healthy


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vault", type=Path, default=OBSIDIAN_HELP)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--saves", type=int, default=20)
    ap.add_argument("--out", type=Path, default=REPORTS / "speed" / "server.md")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hybrid-bench-srv-"))
    vault = tmp / "vault"
    shutil.copytree(args.vault, vault)
    env = dict(os.environ, HYBRID_HOME=str(tmp / "home"))
    env.pop("HYBRID_TOKEN", None)
    exe = [sys.executable, "-m", "hybrid"]
    subprocess.run(exe + ["index", str(vault), "--name", "bench"], env=env, check=True, capture_output=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(exe + ["serve", "--http", "--port", str(port), "--watch"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    res: dict = {"vault": str(args.vault)}
    try:
        wait_healthy(url, timeout=120)
        qs = heading_queries(vault, args.queries)
        post(url + "/api/search", {"query": "warm up the model", "top_k": 5})

        # --- MCP round trip ---------------------------------------------------------------
        import anyio
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        async def mcp_latencies():
            out = []
            async with streamable_http_client(url + "/mcp") as (r, w):
                async with ClientSession(r, w) as s:
                    await s.initialize()
                    await s.call_tool("search", {"query": qs[0], "top_k": 8})
                    for q in qs:
                        t0 = time.perf_counter()
                        result = await s.call_tool("search", {"query": q, "top_k": 8})
                        out.append((time.perf_counter() - t0) * 1000)
                        assert not result.is_error
            return out

        lat = anyio.run(mcp_latencies)
        res["mcp_search_ms_p50"] = round(pct(lat, 50), 1)
        res["mcp_search_ms_p95"] = round(pct(lat, 95), 1)

        # --- save to searchable -------------------------------------------------------------
        notes = sorted(vault.rglob("*.md"))
        save = []
        for i in range(args.saves):
            # random tokens: no two within one edit, so typo repair cannot match an earlier one
            word = "zq" + secrets.token_hex(6)
            target = notes[(i * 37) % len(notes)]
            rel = target.relative_to(vault).as_posix()
            with open(target, "a", encoding="utf-8") as fh:
                fh.write(f"\n\nAdded {word} for the benchmark.\n")
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 30:
                hits = answer_passages(post(url + "/api/search", {"query": word, "mode": "lexical", "top_k": 1}))
                if hits and hits[0]["path"] == rel:
                    break
                time.sleep(0.02)
            save.append(time.perf_counter() - t0)
            time.sleep(0.3)
        res["save_to_searchable_s_p50"] = round(pct(save, 50), 3)
        res["save_to_searchable_s_p95"] = round(pct(save, 95), 3)

        # --- cold CLI: via server vs in-process ------------------------------------------
        def cold(extra):
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                subprocess.run(exe + ["query", "how do I sync notes between devices", "-n", "5", "--json", *extra],
                               env=env, check=True, capture_output=True)
                times.append(time.perf_counter() - t0)
            return round(statistics.median(times), 3)

        res["cli_hybrid_query_via_server_s"] = cold([])
        res["cli_hybrid_query_in_process_s"] = cold(["--local"])
        res["server_rss_mb"] = round(rss_mb(server.pid), 1)
        res["queries"] = len(qs)
    finally:
        server.terminate()
        server.wait(timeout=20)
        shutil.rmtree(tmp, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# Server benchmark", "",
             f"Command: `PYTHONPATH=eval/bench .venv/bin/python eval/archive/speed/server.py --vault {args.vault}`", "",
             f"Run: {time.strftime('%Y-%m-%d %H:%M')}", "", "| figure | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in res.items() if k != "vault"]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
