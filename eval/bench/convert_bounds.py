"""One file must never stop indexing: PDFs and web pages are converted in a separate process
under a memory and time bound (``convert_max_memory_mb``, ``convert_timeout``). This bench
measures what that costs and what it stops.

Speed (``--speed``): conversion alone, the way the indexer calls it (``pdf_note`` /
``html_note``), median of 5 runs, in wall-clock seconds and in CPU seconds of this process and
its converter worker: 400 PDF pages (8 PDFs of 50 pages written with fpdf2, text
from the obsidian-help vault, as ``sources.py`` makes them), the bundled sample vault's 60
notes as saved web pages (with navigation and footer), and one 5 MB page.

The bomb (``--bomb``): a PDF of ~1.4 MB whose one FlateDecode content stream inflates to
400 MB of text operators (:func:`bomb_pdf`), in a vault with three notes, indexed by the real
CLI under ``prlimit --as=3000000000`` (``/usr/bin/time -v`` for the wall time and the largest
process's peak RSS; the converter's own peak is in the ``-vv`` log). Pass ``--embedder
minilm`` for the bundled model (default ``hash:64``: logic only).

    .venv/bin/python eval/bench/convert_bounds.py --speed --bomb [--out eval/out/convert_bounds.json]

``--address-space 0`` runs the index without the limit (the before figure: run it with
``PYTHONPATH=`` a checkout from before the worker, whose run takes the bomb's whole 4-6 GB).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import common

_WORDS = (b"lorem", b"ipsum", b"dolor", b"sit", b"amet", b"bomb", b"text", b"page")


def bomb_pdf(path: Path, inflated: int = 400_000_000, seed: int = 7) -> int:
    """Write a one-page PDF whose content stream (FlateDecode) inflates to ``inflated`` bytes
    of text operators: lines of ``0 1 Td (word) Tj`` and 16 ``q Q``, each line repeated 512
    times, so zlib packs it ~290:1 (400 MB → ~1.4 MB on disk). PDFium builds one text object
    per ``Tj``: ~12 bytes of memory per inflated byte (measured: 4.6 GB, 32 s for 400 MB).
    Returns the inflated size."""
    rng = random.Random(seed)
    co = zlib.compressobj(6)
    out = [co.compress(b"BT /F1 1 Tf\n")]
    n = 0
    while n < inflated:
        block = b"".join((b"0 1 Td (%s) Tj " % rng.choice(_WORDS) + b"q Q " * 16 + b"\n") * 512
                         for _ in range(64))
        out.append(co.compress(block))
        n += len(block)
    out += [co.compress(b"ET\n"), co.flush()]
    stream = b"".join(out)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    buf = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(buf))
        buf += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(buf)
    buf += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    buf += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    buf += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(buf))
    return n


def big_page(path: Path, size: int = 5_000_000) -> Path:
    """A saved page of ``size`` bytes: paragraphs of words with a heading now and then."""
    rng = random.Random(3)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    parts = ["<html><head><title>Big</title></head><body><nav>Home</nav><article><h1>Big page</h1>"]
    n = 0
    while n < size - 200:
        p = "<p>" + " ".join(rng.choice(words) for _ in range(80)) + "</p>\n"
        if rng.random() < 0.05:
            p = f"<h2>Section {n}</h2>\n" + p
        parts.append(p)
        n += len(p)
    parts.append("</article><footer>f</footer></body></html>")
    path.write_text("".join(parts), encoding="utf-8")
    return path


def _cpu() -> float:
    """CPU seconds used so far by this process and its running converter workers (the wall
    time of a shared two-core machine is noisy; CPU time much less so)."""
    total = time.process_time()
    try:
        from hybrid.sources.sandbox import running_pids
    except ImportError:  # conversion in-process (the code before the worker)
        return total
    tick = os.sysconf("SC_CLK_TCK")
    for pid in running_pids():
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def _median_seconds(fn, runs: int = 3) -> tuple[float, float]:
    """(median wall seconds, median CPU seconds) of ``runs`` calls of ``fn``."""
    times, cpus = [], []
    for _ in range(runs):
        t, c = time.perf_counter(), _cpu()
        fn()
        times.append(time.perf_counter() - t)
        cpus.append(_cpu() - c)
    return statistics.median(times), statistics.median(cpus)


def speed(tmp: Path) -> dict:
    import sources

    from hybrid.eval.inputs import sample_set
    from hybrid.sources.convert import html_note
    from hybrid.sources.pdf import pdf_note
    pdfs = sources.speed_pdfs(tmp / "pdf")
    _, _, _, web = sources.build(tmp / "sample", sample_set()[0])
    pages = sorted(web.rglob("*.html"))
    datas = [(p.relative_to(web).as_posix(), p.read_bytes()) for p in pages]
    big = big_page(tmp / "big.html").read_bytes()
    pdf_note(pdfs[0].name, str(pdfs[0]))  # first call: imports (and, bounded, the worker's start)
    html_note("warm.html", datas[0][1])
    pdf_s, pdf_cpu = _median_seconds(lambda: [pdf_note(f.name, str(f)) for f in pdfs], runs=5)
    web_s, web_cpu = _median_seconds(lambda: [html_note(name, data) for name, data in datas], runs=5)
    big_s, big_cpu = _median_seconds(lambda: html_note("big.html", big), runs=1)
    return {"pdf_pages": 400, "pdf_pages_per_s": round(400 / pdf_s, 1),
            "pdf_pages_per_cpu_s": round(400 / pdf_cpu, 1),
            "web_pages": len(datas), "web_pages_per_s": round(len(datas) / web_s, 1),
            "web_pages_per_cpu_s": round(len(datas) / web_cpu, 1),
            "big_page_mb": round(len(big) / 1e6, 1), "big_page_seconds": round(big_s, 2),
            "big_page_cpu_seconds": round(big_cpu, 2)}


def _hybrid_bin() -> str:
    return str(Path(sys.executable).with_name("hybrid"))


def bomb(tmp: Path, embedder: str, address_space: int = 3_000_000_000, inflated: int = 400_000_000) -> dict:
    """`hybrid index` of a vault holding the bomb (``inflated`` bytes of operators) and three
    notes, under ``prlimit --as``."""
    vault, home = tmp / "vault", tmp / "home"
    inflated = bomb_pdf(vault / "bomb.pdf", inflated)
    for i in range(3):
        (vault / f"note{i}.md").write_text(f"# Note {i}\n\nThe zebra{i} walks to the river.\n",
                                           encoding="utf-8")
    home.mkdir()
    (home / "config.toml").write_text(f'[settings]\nembedder = "{embedder}"\n', encoding="utf-8")
    env = {**os.environ, "HYBRID_HOME": str(home)}
    subprocess.run([_hybrid_bin(), "vault", "add", str(vault), "--name", "v"], env=env,
                   check=True, capture_output=True)
    cmd = ["/usr/bin/time", "-v", _hybrid_bin(), "-vv", "index"]
    if address_space:
        cmd = ["prlimit", f"--as={address_space}", *cmd]
    t = time.perf_counter()
    run = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", run.stderr)
    worker = re.findall(r"converter .*peak RSS ([\d,]+) MB", run.stderr)
    status = subprocess.run([_hybrid_bin(), "status", "--json"], env=env, capture_output=True,
                            text=True)
    return {"address_space_limit": address_space or None, "exit_code": run.returncode,
            "seconds": round(wall, 1),
            "bomb_bytes_on_disk": (vault / "bomb.pdf").stat().st_size, "bomb_inflated": inflated,
            "max_rss_mb_largest_process": round(int(rss.group(1)) / 1024) if rss else None,
            "converter_peak_rss_mb": worker,
            "warnings": [line for line in run.stderr.splitlines() if "bomb.pdf" in line],
            "indexed": {k: json.loads(status.stdout)[0][k] for k in ("notes", "chunks", "sources")}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--bomb", action="store_true")
    ap.add_argument("--embedder", default="hash:64")
    ap.add_argument("--address-space", type=int, default=3_000_000_000,
                    help="prlimit --as for the bomb's index run, in bytes (0: no limit)")
    ap.add_argument("--bomb-inflates", type=int, default=400_000_000,
                    help="bytes of text operators the bomb's stream inflates to (default: 400 MB)")
    ap.add_argument("--out", default=str(common.ROOT / "eval" / "out" / "convert_bounds.json"))
    args = ap.parse_args()
    got: dict = {}
    with tempfile.TemporaryDirectory(prefix="hybrid-convert-") as d:
        if args.speed:
            got["speed"] = speed(Path(d) / "speed")
        if args.bomb:
            got["bomb"] = bomb(Path(d) / "bomb", args.embedder, args.address_space, args.bomb_inflates)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(got, indent=2), encoding="utf-8")
    json.dump(got, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
