"""The search page (issue #16): how long from the last keystroke to results on screen, and the
screenshots the README shows.

The bundled sample vault, indexed with the real bundled model, behind ``hybrid serve --http``'s
app on 127.0.0.1; Debian's Chromium (``scripts/browser.sh``) driven by Playwright. For each of
the sample set's labelled queries (ours, 70) the page is cleared, the query typed, and the time
from the last keystroke until the results for it are rendered is read in the page
(``performance.now()``; it includes the page's 180 ms debounce). Also the server's own time per
search (``took_ms``). Medians and 90th percentiles over the queries, after one warm-up query.

    PYTHONPATH=eval/bench .venv/bin/python eval/archive/speed/ui.py [--shots docs] [--out eval/out/ui.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import common  # noqa: F401 - puts the checkout on sys.path

import hybrid
from hybrid.eval.inputs import sample_set
from hybrid.faces.http import build_app
from hybrid.faces.ui.launch import sign_in_url

CHROMIUM = os.environ.get("HYBRID_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]
SAMPLE = Path(hybrid.__file__).parent / "sample_vault"
OWNER = "bench-owner"

# runs in the page: type nothing, set the query, fire the input event, wait for the answer
TIMED = """async (q) => {
  const box = document.querySelector('#q');
  box.value = '';
  box.dispatchEvent(new Event('input'));
  await new Promise(r => setTimeout(r, 250));
  const t0 = performance.now();
  box.value = q;
  box.dispatchEvent(new Event('input'));
  while (document.querySelector('#results').dataset.answered !== q) {
    await new Promise(r => requestAnimationFrame(r));
  }
  return performance.now() - t0;
}"""


def serve(h, port: int):
    import uvicorn
    server = uvicorn.Server(uvicorn.Config(build_app(h, "127.0.0.1", port, owner_key=OWNER),
                                           host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return server


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shots", default="docs", help="folder for the screenshots ('' for none)")
    ap.add_argument("--out", default="eval/out/ui.json")
    ap.add_argument("--port", type=int, default=8791)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    home = Path(tempfile.mkdtemp(prefix="hybrid-ui-bench-"))
    h = hybrid.open(home)
    h.add_vault(SAMPLE, "sample")
    h.index()
    lines = sample_set()[1].read_text(encoding="utf-8").splitlines()
    queries = [json.loads(line)["text"] for line in lines if line.strip()]
    url = f"http://127.0.0.1:{args.port}"
    server = serve(h, args.port)
    page_ms, server_ms = [], []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1100, "height": 1000})
            page.goto(sign_in_url({"url": url, "owner_key": OWNER}))
            page.wait_for_selector("#search-view:not([hidden])")
            page.on("response", lambda r: server_ms.append(r.json()["took_ms"])
                    if r.url.endswith("/ui/api/search") and r.ok else None)
            page.evaluate(TIMED, "warm up the model")
            server_ms.clear()
            for q in queries:
                page_ms.append(page.evaluate(TIMED, q))
            if args.shots:
                shots = Path(args.shots)
                shots.mkdir(parents=True, exist_ok=True)
                page.evaluate(TIMED, "kafka consumer rebalance loop")
                page.click("#hit-0-title")
                page.wait_for_selector("#hit-0-body pre")
                page.screenshot(path=str(shots / "search-page.png"))
                phone = browser.new_page(viewport={"width": 390, "height": 844}, is_mobile=True)
                phone.goto(sign_in_url({"url": url, "owner_key": OWNER}))
                phone.wait_for_selector("#search-view:not([hidden])")
                phone.evaluate(TIMED, "sourdough starter feeding")
                phone.screenshot(path=str(shots / "search-page-phone.png"))
            browser.close()
    finally:
        server.should_exit = True
    result = {"queries": len(queries),
              "page_ms": {"median": round(statistics.median(page_ms), 1), "p90": round(pct(page_ms, 0.9), 1)},
              "server_ms": {"median": round(statistics.median(server_ms), 1), "p90": round(pct(server_ms, 0.9), 1)},
              "debounce_ms": 180}
    print(json.dumps(result, indent=2))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
