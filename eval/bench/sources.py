"""Beyond markdown (issue #15): is content found by meaning when it lives in PDFs or behind
bookmarks, and how fast are PDFs indexed?

Quality: the bundled sample vault's 60 notes and 70 labelled queries (written by us), served
three ways: as the markdown notes themselves, as one PDF per note (written with fpdf2, DejaVu
Sans, headings as larger lines), and as a bookmarks export whose pages (one HTML page per note,
with navigation and footer boilerplate) are fetched with ``hybrid index --fetch`` from a local
HTTP server. Each corpus is indexed with the real bundled model and every query is run in each
mode; nDCG@10 and answer@1 are computed on the notes the judgements name (a PDF or bookmark
stands for its note).

Speed: PDF text extraction alone (pages/s, median of 3) and ``hybrid index`` of a folder of
PDFs end to end with the bundled model (pages/s, one run: the embedding dominates).

    .venv/bin/python eval/bench/sources.py [--pages 400] [--out eval/out/sources.json]
"""

from __future__ import annotations

import argparse
import html
import json
import statistics
import sys
import tempfile
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import common  # also puts the checkout on sys.path

import hybrid
from hybrid.embedders import make_embedder
from hybrid.eval.inputs import sample_set
from hybrid.eval.run import aggregate
from hybrid.sources.markdown import FENCE_RE

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
MODES = ("lexical", "vector", "hybrid")


def note_parts(md: str) -> tuple[str, list[tuple[int, str]]]:
    """(title, [(heading level or 0, line)]) of a markdown note, frontmatter dropped."""
    lines = md.split("\n")
    if lines and lines[0].strip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), 0)
        lines = lines[end + 1:]
    out, title, fence = [], "", ""
    for line in lines:
        mark = FENCE_RE.match(line)
        if mark and not fence:
            fence = mark.group(1)  # a `# comment` inside a code block is no heading
        elif mark and mark.group(1)[0] == fence[0] and len(mark.group(1)) >= len(fence) \
                and not line.strip()[len(mark.group(1)):].strip():
            fence = ""
        level = len(line) - len(line.lstrip("#")) \
            if not fence and line.startswith("#") and line.lstrip("#").startswith(" ") else 0
        text = line.lstrip("#").strip() if level else line
        title = title or (text if level == 1 else "")
        out.append((level, text))
    return title, out


def write_pdf(path: Path, parts: list[tuple[int, str]], title: str) -> int:
    from fpdf import FPDF
    pdf = FPDF()
    pdf.add_font("dejavu", "", FONT)
    pdf.set_title(title)
    pdf.add_page()
    for level, text in parts:
        pdf.set_font("dejavu", size=16 if level == 1 else 13 if level else 10)
        pdf.multi_cell(0, 6 if not level else 8, text or " ", new_x="LMARGIN", new_y="NEXT")
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return pdf.page


def write_page(path: Path, parts: list[tuple[int, str]], title: str) -> None:
    body = []
    for level, text in parts:
        if level:
            body.append(f"<h{level}>{html.escape(text)}</h{level}>")
        elif text.strip():
            body.append(f"<p>{html.escape(text)}</p>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"<html><head><title>{html.escape(title)}</title></head><body>"
                    "<nav>Home · Archive · Subscribe · Log in</nav><article>" + "\n".join(body)
                    + "</article><footer>© 2025 Example blog · Privacy · Terms</footer></body></html>",
                    encoding="utf-8")


def build(root: Path, vault: Path) -> tuple[dict[str, str], dict[str, str], Path, Path]:
    """PDF folder, web folder and the path maps back to the notes."""
    pdfs, web = root / "pdf", root / "web"
    to_note_pdf, to_note_web = {}, {}
    for md in sorted(vault.rglob("*.md")):
        rel = md.relative_to(vault).as_posix()
        title, parts = note_parts(md.read_text(encoding="utf-8"))
        title = title or md.stem
        write_pdf(pdfs / (rel[:-3] + ".pdf"), parts, title)
        to_note_pdf[rel[:-3] + ".pdf"] = rel
        write_page(web / (rel[:-3] + ".html"), parts, title)
        to_note_web[rel[:-3] + ".html"] = rel
    return to_note_pdf, to_note_web, pdfs, web


def bookmarks_export(path: Path, base: str, to_note_web: dict[str, str], vault: Path) -> None:
    rows = []
    for page, note in to_note_web.items():
        title, _ = note_parts((vault / note).read_text(encoding="utf-8"))
        rows.append(f'<DT><A HREF="{base}/{page}" ADD_DATE="1700000000">{html.escape(title or Path(note).stem)}</A>')
    path.write_text("<!DOCTYPE NETSCAPE-Bookmark-file-1>\n<DL><p>\n" + "\n".join(rows) + "\n</DL><p>\n",
                    encoding="utf-8")


def score(h, queries: dict[str, str], qrels: dict[str, dict[str, int]], back) -> dict:
    from ranx import Qrels, Run, evaluate
    out = {}
    for mode in MODES:
        run = {}
        hit1 = 0
        for qid, text in queries.items():
            hits = h.search(text, top_k=100, mode=mode)
            for x in hits:
                x.path = back(x)
            ranked = aggregate(hits, qrels[qid]) or {"none": 0.0}
            run[qid] = ranked
            best = max(ranked, key=ranked.get)
            hit1 += qrels[qid].get(best, 0) == max(qrels[qid].values())
        ndcg = evaluate(Qrels(qrels), Run(run), "ndcg@10")
        out[mode] = {"ndcg@10": round(float(ndcg), 4), "answer@1": round(hit1 / len(queries), 4)}
        # the queries judged by note and those judged by section (a hit counts only under the
        # judged heading path), apart: each query's own nDCG (ranx's per-query list misorders them)
        for label, keep in (("by_note", False), ("by_section", True)):
            ids = [q for q in queries if any("#" in d for d in qrels[q]) == keep]
            if ids:
                each = [float(evaluate(Qrels({q: qrels[q]}), Run({q: run[q]}), "ndcg@10")) for q in ids]
                out[mode][f"ndcg@10_{label}"] = round(sum(each) / len(each), 4)
                out[mode][f"queries_{label}"] = len(ids)
    return out


def quality(tmp: Path, minilm) -> dict:
    vault, qpath, rpath = sample_set()
    queries = {json.loads(line)["qid"]: json.loads(line)["text"]
               for line in qpath.read_text(encoding="utf-8").splitlines() if line.strip()}
    qrels = json.loads(rpath.read_text(encoding="utf-8"))
    to_pdf, to_web, pdfs, web = build(tmp, vault)
    results = {}

    h = hybrid.open(tmp / "h-md", embedders=[minilm])
    h.add_vault(vault, "md")
    h.index()
    results["markdown notes"] = score(h, queries, qrels, lambda x: x.path)

    h = hybrid.open(tmp / "h-pdf", embedders=[minilm])
    h.add_vault(pdfs, "pdf")
    r = h.index()[0]
    assert r.skipped == 0, r.warnings
    results["one PDF per note"] = score(h, queries, qrels, lambda x: to_pdf[x.path])

    handler = partial(_Quiet, directory=str(web))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        export = tmp / "bookmarks.html"
        bookmarks_export(export, base, to_web, vault)
        by_url = {f"{base}/{page}": note for page, note in to_web.items()}
        h = hybrid.open(tmp / "h-bm", embedders=[minilm], fetch_private=True)  # pages served on 127.0.0.1
        h.add_source("bookmarks", export, "reading")
        titles_only = score_after(h, queries, qrels, by_url, fetch=None)
        fetched = score_after(h, queries, qrels, by_url, fetch="new")
    finally:
        server.shutdown()
        server.server_close()
    results["bookmarks, titles only"] = titles_only
    results["bookmarks, pages fetched"] = fetched
    return results


def score_after(h, queries, qrels, by_url, fetch):
    r = h.index(fetch=fetch)[0]
    assert not r.fetch_failed, r.warnings
    return score(h, queries, qrels, lambda x: by_url[x.url])


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def speed_pdfs(folder: Path, pages: int = 400, per_pdf: int = 50) -> list[Path]:
    """PDFs of ``per_pdf`` pages of obsidian-help paragraphs (the sample vault's without it)."""
    from fpdf import FPDF
    oh = common.OBSIDIAN_HELP if common.OBSIDIAN_HELP.is_dir() else sample_set()[0]
    text = [p.read_text(encoding="utf-8") for p in sorted(oh.rglob("*.md"))]
    paras = [t for doc in text for t in doc.split("\n\n") if len(t) > 80]
    folder.mkdir(parents=True, exist_ok=True)
    i = 0
    for n in range(pages // per_pdf):
        pdf = FPDF()
        pdf.add_font("dejavu", "", FONT)
        pdf.set_font("dejavu", size=10)
        for _ in range(per_pdf):
            pdf.add_page()
            pdf.multi_cell(0, 5, "\n\n".join(paras[(i + k) % len(paras)] for k in range(6))[:3000])
            i += 6
        pdf.output(str(folder / f"doc-{n:03d}.pdf"))
    return sorted(folder.glob("*.pdf"))


def speed(tmp: Path, pages: int, minilm) -> dict:
    from hybrid.sources.pdf import pdf_note
    per_pdf = 50
    folder = tmp / "speed"
    files = speed_pdfs(folder, pages, per_pdf)
    made = len(files) * per_pdf
    extract = []
    for _ in range(3):
        t = time.perf_counter()
        for f in files:
            pdf_note(f.name, str(f))
        extract.append(time.perf_counter() - t)
    mb = sum(f.stat().st_size for f in files) / 1e6
    h = hybrid.open(tmp / "h-speed", embedders=[minilm])
    h.add_vault(folder, "speed")
    t = time.perf_counter()
    report = h.index()[0]
    total = time.perf_counter() - t
    return {"pages": made, "pdfs": len(files), "megabytes": round(mb, 1),
            "extract_pages_per_s": round(made / statistics.median(extract), 1),
            "index_pages_per_s": round(made / total, 2), "index_seconds": round(total, 1),
            "chunks": report.chunks, "stage_seconds": report.stage_seconds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=400)
    ap.add_argument("--out", default="eval/out/sources.json")
    args = ap.parse_args()
    minilm = make_embedder("minilm")
    with tempfile.TemporaryDirectory(prefix="hybrid-sources-") as d:
        tmp = Path(d)
        got = {"quality": quality(tmp, minilm), "speed": speed(tmp, args.pages, minilm)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(got, indent=2), encoding="utf-8")
    json.dump(got, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
