"""Text in pictures (issue #53): how well and how fast images and scanned PDFs are read, and
whether PDFs with text keep their headings.

Every input is made here, from the bundled sample vault's own text (written by us), so nothing
is downloaded and nothing is tuned to a public set:

1. **Character error rate.** Sentences of the sample notes drawn as images in three DejaVu faces
   (sans, serif, mono), at 14, 20 and 30 px, upright, tilted 3 degrees or turned 90, clean or with
   noise and blur; CER = edit distance / reference length, whitespace collapsed.
2. **Found by meaning.** The sample set's 70 labelled queries over its 60 notes served five ways:
   the markdown notes; one PDF with text per note (fpdf2), written two ways: as
   ``eval/bench/sources.py`` writes them (the title 16 pt, every other heading 13 pt: a level-2
   and a level-3 heading cannot be told apart) and with headings styled as LaTeX's article class
   sets them (17, 14 bold, 12 bold, 10 bold; body 10), with and without an outline; the styled
   PDFs as scans (each page rendered at 150 dpi, tilted up to 1 degree, with noise and blur, then
   put back into a PDF as a picture: no text layer); and the notes as images (one PNG per 60
   lines, a longer note's numbered as its pages, ``Lisbon trip-1.png``, ``Lisbon trip-2.png``,
   headings in the same styles). The real bundled model; nDCG@10 / answer@1.
3. **Cost.** Seconds per image and per scanned page (median), and the re-index of an unchanged
   vault of 1,000 image files (median of 5 runs).

    .venv/bin/python -m eval.bench ocr [--out eval/out/ocr.json] [--images 1000]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import common  # noqa: F401 - puts the checkout on sys.path
from sources import FONT, note_parts, score, write_pdf

import hybrid
from hybrid.embedders import make_embedder
from hybrid.eval.inputs import sample_set

FACES = {"sans": FONT, "serif": FONT.replace("DejaVuSans", "DejaVuSerif"),
         "mono": FONT.replace("DejaVuSans", "DejaVuSansMono")}
SIZES = (14, 20, 30)


BOLD = FONT.replace("DejaVuSans.ttf", "DejaVuSans-Bold.ttf")
# heading sizes as a document's styles set them (LaTeX's article class at 10 pt: title 17.28,
# section 14.4 bold, subsection 12 bold, subsubsection 10 bold)
STYLES = {1: (17.0, True), 2: (14.0, True), 3: (12.0, True), 4: (10.0, True)}


def write_styled_pdf(path: Path, parts: list[tuple[int, str]], title: str, outline: bool = False) -> int:
    """One PDF of a note, its headings set as LaTeX sets them (:data:`STYLES`), body 10 pt;
    ``outline``: with bookmarks for its headings, as LaTeX's hyperref writes them."""
    from fpdf import FPDF
    pdf = FPDF()
    pdf.add_font("dejavu", "", FONT)
    pdf.add_font("dejavu", "B", BOLD)
    pdf.set_title(title)
    pdf.add_page()
    depth = -1  # the outline's last level (fpdf2 takes one level deeper at most)
    for level, text in parts:
        size, bold = STYLES.get(min(level, 4), (10.0, False)) if level else (10.0, False)
        pdf.set_font("dejavu", "B" if bold else "", size=size)
        if level and outline and text.strip():
            depth = min(level - 1, depth + 1)
            pdf.start_section(text.strip()[:200], level=depth)
        pdf.multi_cell(0, 6 if not level else size * 0.55, text or " ", new_x="LMARGIN", new_y="NEXT")
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return pdf.page


def draw(lines: list[tuple[int, str]], face: str = FONT, size: int = 20, width: int = 1400):
    """Markdown-ish lines (heading level, text) drawn black on white, headings set as
    :data:`STYLES` sets them; long lines wrapped to ``width`` pixels."""
    from PIL import Image, ImageDraw, ImageFont
    fonts = {0: ImageFont.truetype(face, size)}
    for level, (pt, bold) in STYLES.items():
        fonts[level] = ImageFont.truetype(BOLD if bold and face == FONT else face, int(size * pt / 10))
    rows: list[tuple[object, str]] = []
    for level, text in lines:
        font = fonts[min(level, 4)]
        words, cur = text.split(), ""
        for w in words:
            if cur and font.getlength(cur + " " + w) > width - 80:
                rows.append((font, cur))
                cur = w
            else:
                cur = f"{cur} {w}".strip()
        rows.append((font, cur))
    step = int(size * 1.7)
    img = Image.new("L", (width, 80 + sum(step if f is fonts[0] else int(step * 1.5) for f, _ in rows)), 255)
    d = ImageDraw.Draw(img)
    y = 40
    for font, text in rows:
        d.text((40, y), text, font=font, fill=0)
        y += step if font is fonts[0] else int(step * 1.5)
    return img.crop((0, 0, width, min(img.height, y + 40)))


def degrade(img, rng: random.Random, tilt: float = 0.0, turn: int = 0, noise: bool = False):
    from PIL import Image, ImageFilter
    if tilt:
        img = img.rotate(tilt, expand=True, fillcolor=255, resample=Image.Resampling.BICUBIC)
    if turn:
        img = img.rotate(turn, expand=True, fillcolor=255)
    if noise:
        import numpy as np
        a = np.asarray(img, dtype=np.int16)
        a = a + np.random.default_rng(rng.randrange(1 << 30)).normal(0, 28, a.shape).astype(np.int16)
        img = Image.fromarray(np.clip(a, 0, 255).astype("uint8")).filter(ImageFilter.GaussianBlur(0.7))
    return img


def edit_distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def sentences(vault: Path, n: int, rng: random.Random) -> list[str]:
    out = []
    for md in sorted(vault.rglob("*.md")):
        _, parts = note_parts(md.read_text(encoding="utf-8"))
        out += [t.strip() for lvl, t in parts if not lvl and 40 <= len(t.strip()) <= 110
                and not t.strip().startswith(("|", "-", "*", "`", ">", "#"))]
    rng.shuffle(out)
    return out[:n]


def cer(tmp: Path, limits, limit: int | None = None) -> dict:
    from hybrid.sources.ocr import image_note
    from hybrid.sources.sandbox import ConvertError
    rng = random.Random(53)
    vault = sample_set()[0]
    cases = [(face, size, tilt, turn, noise) for face in FACES for size in SIZES
             for tilt, turn in ((0, 0), (3, 0), (0, 90)) for noise in (False, True)][:limit]
    texts = sentences(vault, len(cases) * 2, rng)
    rows, seconds = [], []
    for k, (face, size, tilt, turn, noise) in enumerate(cases):
        ref = [texts[2 * k], texts[2 * k + 1]]
        img = degrade(draw([(0, t) for t in ref], FACES[face], size, width=1600), rng, tilt, turn, noise)
        path = tmp / f"cer-{k}.png"
        img.save(path)
        t = time.perf_counter()
        try:
            got = " ".join(" ".join(image_note(path.name, str(path), limits).lines).split())
        except ConvertError:
            got = ""
        seconds.append(time.perf_counter() - t)
        want = " ".join(" ".join(ref).split())
        rows.append({"face": face, "size": size, "tilt": tilt, "turn": turn, "noise": noise,
                     "cer": round(edit_distance(want, got) / len(want), 4)})

    def mean(sel) -> float:
        got = [r["cer"] for r in rows if sel(r)]
        return round(statistics.mean(got), 4) if got else float("nan")
    return {"images": len(rows), "cer_mean": mean(lambda r: True),
            "cer_median": round(statistics.median(r["cer"] for r in rows), 4),
            "by_size": {s: mean(lambda r, s=s: r["size"] == s) for s in SIZES},
            "by_face": {f: mean(lambda r, f=f: r["face"] == f) for f in FACES},
            "upright": mean(lambda r: not r["tilt"] and not r["turn"]), "tilted_3": mean(lambda r: r["tilt"] == 3),
            "turned_90": mean(lambda r: r["turn"] == 90), "clean": mean(lambda r: not r["noise"]),
            "noisy": mean(lambda r: r["noise"]), "seconds_per_image_median": round(statistics.median(seconds), 3),
            "rows": rows}


def build(tmp: Path, vault: Path) -> dict[str, dict[str, str]]:
    """The four served forms of the sample notes (folder → {file: note})."""
    import pypdfium2 as pdfium
    from fpdf import FPDF
    rng = random.Random(7)
    forms: dict[str, dict[str, str]] = {"pdf-flat": {}, "pdf": {}, "pdf-outline": {}, "scan": {}, "image": {}}
    for md in sorted(vault.rglob("*.md")):
        rel = md.relative_to(vault).as_posix()
        title, parts = note_parts(md.read_text(encoding="utf-8"))
        title = title or md.stem
        write_pdf(tmp / "pdf-flat" / (rel[:-3] + ".pdf"), parts, title)  # as eval/bench/sources.py
        forms["pdf-flat"][rel[:-3] + ".pdf"] = rel
        pdf_path = tmp / "pdf" / (rel[:-3] + ".pdf")
        write_styled_pdf(pdf_path, parts, title)
        forms["pdf"][rel[:-3] + ".pdf"] = rel
        write_styled_pdf(tmp / "pdf-outline" / (rel[:-3] + ".pdf"), parts, title, outline=True)
        forms["pdf-outline"][rel[:-3] + ".pdf"] = rel
        # the scan: each page rendered at 150 dpi with noise, as a picture in a new PDF
        doc = pdfium.PdfDocument(str(pdf_path))
        scan = FPDF()
        for i in range(len(doc)):
            page = doc[i]
            img = page.render(scale=150 / 72, grayscale=True).to_pil().convert("L")
            page.close()
            img = degrade(img, rng, tilt=rng.choice((0, 0.5, 1.0)), noise=True)
            png = tmp / "scan-pages" / f"{rel.replace('/', '_')}-{i}.png"
            png.parent.mkdir(parents=True, exist_ok=True)
            img.save(png)
            scan.add_page()
            scan.image(str(png), x=0, y=0, w=210)
        doc.close()
        out = tmp / "scan" / (rel[:-3] + ".pdf")
        out.parent.mkdir(parents=True, exist_ok=True)
        scan.output(str(out))
        forms["scan"][rel[:-3] + ".pdf"] = rel
        # the images: one PNG per 60 lines
        lines = [(lvl, t) for lvl, t in parts if t.strip()]
        for k in range(0, max(1, len(lines)), 60):
            name = rel[:-3] + (f"-{k // 60 + 1}" if len(lines) > 60 else "") + ".png"
            p = tmp / "image" / name
            p.parent.mkdir(parents=True, exist_ok=True)
            draw(lines[k:k + 60] or [(1, title)], size=20).save(p)
            forms["image"][name] = rel
    return forms


def quality(tmp: Path, minilm) -> tuple[dict, dict]:
    vault, qpath, rpath = sample_set()
    queries = {json.loads(line)["qid"]: json.loads(line)["text"]
               for line in qpath.read_text(encoding="utf-8").splitlines() if line.strip()}
    qrels = json.loads(rpath.read_text(encoding="utf-8"))
    forms = build(tmp, vault)
    results, costs = {}, {}
    h = hybrid.open(tmp / "h-md", embedders=[minilm])
    h.add_vault(vault, "md")
    h.index()
    results["markdown notes"] = score(h, queries, qrels, lambda x: x.path)
    for form, label in (("pdf-flat", "one PDF per note, every heading below the title one size"),
                        ("pdf", "one PDF per note, headings styled as LaTeX sets them"),
                        ("pdf-outline", "the same PDFs with an outline (bookmarks)"),
                        ("scan", "one scanned PDF per note (the styled PDFs, scanned)"),
                        ("image", "the notes as images")):
        h = hybrid.open(tmp / f"h-{form}", embedders=[minilm])
        h.add_vault(tmp / form, form)
        t = time.perf_counter()
        report = h.index()[0]
        costs[form] = {"index_seconds": round(time.perf_counter() - t, 1), "files": len(forms[form]),
                       "skipped": report.skipped, "chunks": report.chunks,
                       "stage_seconds": report.stage_seconds}
        mapping = forms[form]
        results[label] = score(h, queries, qrels, lambda x, m=mapping: m[x.path])
    return results, costs


def scan_page_cost(tmp: Path, limits) -> float:
    """Median seconds to read one scanned page (the scans built for quality), cache off."""
    from dataclasses import replace

    from hybrid.sources.pdf import pdf_note
    files = sorted((tmp / "scan").rglob("*.pdf"))[:12]
    per_page = []
    for f in files:
        t = time.perf_counter()
        note = pdf_note(f.name, str(f), replace(limits, ocr_cache=None))
        per_page.append((time.perf_counter() - t) / max(1, note.properties["pages"]))
    return round(statistics.median(per_page), 3)


def unchanged_reindex(tmp: Path, n: int, minilm) -> dict:
    """``n`` image files (a fifth of them distinct pictures, each copied under five names),
    indexed once, then re-indexed unchanged five times: median seconds of those."""
    folder = tmp / "many"
    distinct = max(1, n // 5)
    for i in range(distinct):
        img = draw([(0, f"Receipt {i:04d} for garden supplies and tools")], size=20, width=700)
        data_path = folder / f"p{i:04d}-0.png"
        data_path.parent.mkdir(parents=True, exist_ok=True)
        img.save(data_path)
        for c in range(1, 5):
            (folder / f"p{i:04d}-{c}.png").write_bytes(data_path.read_bytes())
    h = hybrid.open(tmp / "h-many", embedders=[minilm])
    h.add_vault(folder, "many")
    t = time.perf_counter()
    first = h.index()[0]
    first_s = time.perf_counter() - t
    runs = []
    for _ in range(5):
        t = time.perf_counter()
        r = h.index()[0]
        runs.append(time.perf_counter() - t)
        assert r.added == r.updated == 0
    return {"files": n, "distinct": distinct, "first_index_seconds": round(first_s, 1),
            "first_added": first.added, "reindex_unchanged_median_s": round(statistics.median(runs), 3),
            "reindex_runs_s": [round(x, 3) for x in runs], "shown_in_notes": shown_in_notes(h, folder, n)}


def shown_in_notes(h, folder: Path, n: int, per_section: int = 50) -> dict:
    """A note that shows all ``n`` pictures, ``per_section`` to a section under a caption of its
    own (hybrid.indexing.context): what adding it, editing it away from the pictures, editing
    one caption and re-indexing unchanged cost, and whether a caption's words find its pictures."""
    places = ["Lisbon", "Porto", "Sintra", "Braga", "Faro", "Evora", "Coimbra", "Nazare", "Tavira",
              "Obidos", "Cascais", "Lagos", "Aveiro", "Viseu", "Guarda", "Beja", "Tomar", "Silves",
              "Leiria", "Elvas"]
    names = sorted(p.name for p in folder.glob("*.png"))
    sections = [names[i:i + per_section] for i in range(0, len(names), per_section)]

    def album(extra: str = "", caption0: str = "") -> str:
        parts = ["# Album\n"]
        for k, part in enumerate(sections):
            where = places[k % len(places)]
            words = caption0 if (k == 0 and caption0) else f"Hardware bought for the {where} allotment shed"
            parts.append(f"## {where}\n\n{words}:\n\n" + "\n".join(f"![[{x}]]" for x in part) + "\n")
        return "\n".join(parts) + extra

    def run() -> tuple[float, int]:
        t = time.perf_counter()
        r = h.index()[0]
        return time.perf_counter() - t, r.updated + r.added

    (folder / "album.md").write_text(album(), encoding="utf-8")
    add_s, add_n = run()
    hits = 0
    for k in range(min(len(sections), len(places))):
        got = h.search(f"{places[k]} allotment shed hardware", top_k=10, mode="hybrid")
        hits += any(x.path in sections[k] for x in got)
    (folder / "album.md").write_text(album("\n## Notes\n\nPrinted at the library on Tuesday.\n"), encoding="utf-8")
    far_s, far_n = run()
    (folder / "album.md").write_text(album("\n## Notes\n\nPrinted at the library on Tuesday.\n",
                                           "Hinges and screws for the Lisbon terrace gate"), encoding="utf-8")
    caption_s, caption_n = run()
    again = []
    for _ in range(3):
        t = time.perf_counter()
        h.index()
        again.append(time.perf_counter() - t)
    return {"pictures": len(names), "sections": len(sections),
            "add_note_seconds": round(add_s, 2), "add_note_files_read": add_n,
            "caption_finds_its_section": f"{hits}/{min(len(sections), len(places))}",
            "edit_away_seconds": round(far_s, 2), "edit_away_files_read": far_n,
            "edit_caption_seconds": round(caption_s, 2), "edit_caption_files_read": caption_n,
            "reindex_unchanged_median_s": round(statistics.median(again), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="eval/out/ocr.json")
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--parts", default="cer,quality,cost", help="which to run (a smoke test: cer,cost)")
    ap.add_argument("--cases", type=int, default=None, help="CER cases at most (all 54 by default)")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    from hybrid.sources.ocr import engine, plan_for, with_plan
    from hybrid.sources.sandbox import convert_limits
    minilm = make_embedder("minilm")
    got: dict = {"engine": engine()[0]}
    with tempfile.TemporaryDirectory(prefix="hybrid-ocr-") as d:
        tmp = Path(d)
        limits = with_plan(convert_limits(), plan_for(True, ("en",), [], None))
        if "cer" in parts:
            got["cer"] = cer(tmp, limits, args.cases)
            print(json.dumps({k: v for k, v in got["cer"].items() if k != "rows"}, indent=1), file=sys.stderr)
        if "quality" in parts:
            got["quality"], got["index_costs"] = quality(tmp, minilm)
            print(json.dumps(got["quality"], indent=1), file=sys.stderr)
            got["scan_seconds_per_page_median"] = scan_page_cost(tmp, limits)
        if "cost" in parts:
            got["unchanged_images"] = unchanged_reindex(tmp, args.images, minilm)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(got, indent=2), encoding="utf-8")
    json.dump({k: v for k, v in got.items() if k != "cer"}, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
