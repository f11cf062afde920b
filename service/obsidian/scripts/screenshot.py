"""docs/obsidian-modal.png: the plugin's search modal as its own code draws it, in Chromium.

Indexes hybrid's sample vault into a scratch HYBRID_HOME (the fast hash embedder: BM25 carries
the ranking), starts ``hybrid serve --http`` on 127.0.0.1, bundles the plugin (src/main.ts) with
the obsidian stub for the browser (screenshot/), and opens it in Debian's Chromium through
Playwright. The page's requestUrl is answered here, by a real request to the server (Obsidian
makes it outside the page too). Run with the repo's Python: ``bash scripts/screenshot.sh``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent  # service/obsidian
ROOT = HERE.parent.parent
CHROMIUM = os.environ.get("HYBRID_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]
QUERY = "restic backup"
OUT = ROOT / "docs" / "obsidian-modal.png"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def forward(server: str, param: str) -> str:
    """One requestUrl call of the page, made to the server: {status, headers, text}."""
    p = json.loads(param)
    if not p["url"].startswith(server + "/"):
        raise ValueError(f"the page asked for {p['url']}, not the server")
    headers = dict(p.get("headers") or {})
    if p.get("contentType"):
        headers["Content-Type"] = p["contentType"]
    body = p["body"].encode() if p.get("body") is not None else None
    req = urllib.request.Request(p["url"], data=body, headers=headers, method=p.get("method") or "GET")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            status, text, hdrs = r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        status, text, hdrs = e.code, e.read().decode(), dict(e.headers)
    return json.dumps({"status": status, "headers": hdrs, "text": text})


def main() -> int:
    from playwright.sync_api import sync_playwright
    tmp = Path(tempfile.mkdtemp(prefix="hybrid-shot-"))
    vault = ROOT / "hybrid" / "sample_vault"
    home = tmp / "home"
    home.mkdir()
    (home / "config.toml").write_text('[settings]\nembedder = "hash:64"\n\n'
                                      f"[vaults.sample]\npath = {json.dumps(str(vault))}\n")
    env = {**os.environ, "HYBRID_HOME": str(home), "PYTHONPATH": str(ROOT)}
    env.pop("HYBRID_TOKEN", None)
    subprocess.run([sys.executable, "-m", "hybrid", "index"], env=env, check=True, capture_output=True)
    bundle = tmp / "page.js"
    subprocess.run(["npx", "esbuild", "screenshot/entry.ts", "--bundle", "--format=iife", "--platform=browser",
                    "--alias:obsidian=./screenshot/obsidian-browser.ts", f"--outfile={bundle}", "--log-level=warning"],
                   cwd=HERE, check=True)
    notes = sorted(str(p.relative_to(vault)) for p in vault.rglob("*.md"))
    port = free_port()
    server = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "hybrid", "serve", "--http", "--host", "127.0.0.1",
                             "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(server + "/health", timeout=1).close()
                break
            except OSError:
                time.sleep(0.25)
        else:
            raise SystemExit(f"hybrid serve did not answer at {server}")
        page_html = tmp / "page.html"
        css = (HERE / "screenshot" / "obsidian-theme.css").read_text() + (HERE / "styles.css").read_text()
        shot = {"server": server, "query": QUERY, "notes": notes, "vault": vault.name}
        page_html.write_text("<!doctype html><html><head><meta charset='utf-8'><style>" + css + "</style></head><body>"
                             f"<script>window.hybridShot = {json.dumps(shot)};</script>"
                             f"<script src='{bundle.name}'></script></body></html>")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 900, "height": 640}, device_scale_factor=1)
            page.expose_function("hybridRequest", lambda param: forward(server, param))
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_html.as_uri())
            page.wait_for_function("window.hybridReady === true", timeout=30_000)
            if errors or not page.query_selector(".hybrid-note"):
                raise SystemExit(f"the modal drew no results: {errors or page.inner_text('body')[:500]}")
            OUT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(OUT))
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{OUT} ({OUT.stat().st_size // 1024} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
