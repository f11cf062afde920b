"""Text in pictures (issue #53): images and scanned PDF pages read by the real Tesseract
(scripts/ocr.sh installs it; .ci/run runs it first), PDF headings from type and outline, the OCR
cache, OCR off or missing, and bad pictures. Real files on disk, real tantivy and FAISS indexes
with the hash embedder (these tests are about reading, not meaning)."""
import json
import shutil
import struct
import zlib
from pathlib import Path

import pytest
from helpers import text_image, write

from hybrid.sources import ocr as ocr_mod
from hybrid.sources.ocr import BOXES_PROPERTY, ENABLE, box_of, image_note, plan_for, with_plan
from hybrid.sources.pdf import pdf_note
from hybrid.sources.sandbox import ConvertError, convert_limits

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
pytestmark = [pytest.mark.slow,  # starts converter processes and Tesseract
              pytest.mark.skipif(shutil.which("tesseract") is None and not __import__("os").environ.get("CI"),
                                 reason="Tesseract is not installed (bash scripts/ocr.sh)")]


def scanned_pdf(path: Path, pages: list[list[str]], tmp: Path) -> Path:
    """A PDF whose pages are pictures of ``pages``' lines (no text layer: a scan)."""
    from fpdf import FPDF
    pdf = FPDF()
    for i, lines in enumerate(pages):
        png = text_image(tmp / f"scan-page-{i}.png", lines, size=40)
        pdf.add_page()
        pdf.image(str(png), x=10, y=10, w=190)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def limits(tmp_path: Path, languages=()):
    return with_plan(convert_limits(), plan_for(True, languages, [], tmp_path / "ocr-cache"))


RECEIPT = ["Hardware store receipt 4471", "Galvanised garden hinges x4", "Paid by card on Saturday"]


def test_an_image_is_read_line_by_line_with_boxes(tmp_path):
    path = text_image(tmp_path / "receipt.png", RECEIPT)
    note = image_note("scans/receipt.png", str(path), limits(tmp_path))
    text = "\n".join(note.lines).lower()
    assert "galvanised garden hinges" in text and "4471" in text
    assert note.title == "receipt"
    boxes = note.properties[BOXES_PROPERTY]
    assert len(boxes) == len(note.lines)
    w, h = note.properties["hybrid:image"]
    first = next(i for i, line in enumerate(note.lines, 1) if "Hardware" in line)
    x0, y0, x1, y1 = box_of(note.properties, first)
    # the first line sits at the top left, where it was drawn (30 px in), inside the image
    assert 20 <= x0 <= 40 and 20 <= y0 <= 45 and x1 < w and y1 < h / 3
    # a box over several lines holds each of theirs
    last = len(note.lines)
    assert box_of(note.properties, first, last)[3] >= box_of(note.properties, last)[3]


def test_a_turned_image_and_other_formats_are_read(tmp_path):
    turned = text_image(tmp_path / "turned.jpg", RECEIPT, rotate=90, fmt="JPEG")
    note = image_note("turned.jpg", str(turned), limits(tmp_path))
    assert "garden hinges" in "\n".join(note.lines).lower()
    # tilted 3 degrees: its long lines would run into each other unless straightened first
    wide = ["Galvanised garden hinges, four of them, for the shed door at the back",
            "Paid by card on Saturday morning at the hardware store"]
    tilted = text_image(tmp_path / "tilted.png", wide, rotate=3)
    from PIL import Image

    from hybrid.sources.ocr_ops import skew
    assert skew(Image.open(tilted).convert("L")) == -3.0
    assert "four of them, for the shed door" in "\n".join(image_note("t.png", str(tilted), limits(tmp_path)).lines)
    for fmt, suffix in (("WEBP", "webp"), ("GIF", "gif"), ("TIFF", "tiff"), ("BMP", "bmp")):
        p = text_image(tmp_path / f"r.{suffix}", RECEIPT, fmt=fmt)
        assert "garden hinges" in "\n".join(image_note(f"r.{suffix}", str(p), limits(tmp_path)).lines).lower(), fmt


def test_a_heic_photo_is_read_where_pillow_heif_is_installed(tmp_path):
    import pillow_heif  # hybrid[heic]; in the dev extras, so the tests always have it
    from PIL import Image
    pillow_heif.register_heif_opener()
    Image.open(text_image(tmp_path / "w.png", RECEIPT)).convert("RGB").save(tmp_path / "whiteboard.heic")
    note = image_note("whiteboard.heic", str(tmp_path / "whiteboard.heic"), limits(tmp_path))
    assert "garden hinges" in "\n".join(note.lines).lower()


def test_recognised_once_by_content(tmp_path, monkeypatch):
    path = text_image(tmp_path / "a.png", RECEIPT)
    lim = limits(tmp_path)
    first = image_note("a.png", str(path), lim)
    calls = []
    real = ocr_mod.convert
    monkeypatch.setattr(ocr_mod, "convert", lambda *a, **k: calls.append(a) or real(*a, **k))
    copy = tmp_path / "elsewhere" / "b.png"
    copy.parent.mkdir()
    copy.write_bytes(path.read_bytes())
    again = image_note("elsewhere/b.png", str(copy), lim)  # another name, the same picture
    assert calls == [] and again.lines == first.lines
    other = limits(tmp_path, ("de",))  # other languages: read again
    image_note("a.png", str(path), other)
    assert len(calls) == 1


def bomb_png(path: Path, side: int = 50_000) -> Path:
    """A valid PNG header claiming ``side`` × ``side`` pixels, with a few bytes of data."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = zlib.compress(b"\x00" * 1000)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0))
                     + chunk(b"IDAT", raw) + chunk(b"IEND", b""))
    return path


def test_bad_pictures_are_refused_with_a_reason(tmp_path):
    lim = limits(tmp_path)
    with pytest.raises(ConvertError, match=r"50,000 × 50,000 pixels is over"):
        image_note("bomb.png", str(bomb_png(tmp_path / "bomb.png")), lim)
    good = text_image(tmp_path / "good.png", RECEIPT).read_bytes()
    (tmp_path / "cut.png").write_bytes(good[: len(good) // 2])
    with pytest.raises(ConvertError, match="not a readable image"):
        image_note("cut.png", str(tmp_path / "cut.png"), lim)
    (tmp_path / "notes.png").write_text("# this is markdown, not a picture\n")
    with pytest.raises(ConvertError, match="not a readable image"):
        image_note("notes.png", str(tmp_path / "notes.png"), lim)
    from PIL import Image
    Image.new("RGB", (400, 300), (120, 160, 200)).save(tmp_path / "sky.png")
    with pytest.raises(ConvertError, match="no text recognised"):
        image_note("sky.png", str(tmp_path / "sky.png"), lim)


def test_a_tiff_of_thousands_of_pages_costs_its_first_page(tmp_path):
    from PIL import Image
    first = Image.open(text_image(tmp_path / "p.png", RECEIPT)).convert("L")
    blank = Image.new("L", (40, 40), 255)
    first.save(tmp_path / "fax.tiff", save_all=True, append_images=[blank] * 3000, compression="tiff_deflate")
    note = image_note("fax.tiff", str(tmp_path / "fax.tiff"), limits(tmp_path))
    assert "garden hinges" in "\n".join(note.lines).lower()  # its first page, the others never walked
    assert note.warnings == ["fax.tiff: a TIFF of several pages: only its first page is read"]
    again = image_note("fax.tiff", str(tmp_path / "fax.tiff"), limits(tmp_path))  # from the cache: the same
    assert again.warnings == note.warnings and again.lines == note.lines
    first.save(tmp_path / "one.tiff")
    assert image_note("one.tiff", str(tmp_path / "one.tiff"), limits(tmp_path)).warnings == []


def test_without_tesseract_an_image_says_how_to_enable_it(tmp_path, monkeypatch):
    monkeypatch.setattr(ocr_mod, "engine", lambda: ("", ()))
    plan = plan_for(True, (), [], None)
    assert plan.languages == "" and plan.off == ENABLE
    with pytest.raises(ConvertError, match="scripts/ocr.sh"):
        image_note("a.png", str(text_image(tmp_path / "a.png", RECEIPT)), with_plan(convert_limits(), plan))
    off = plan_for(False, (), [], None)
    assert "ocr = false" in off.off


def test_languages_default_to_the_vaults_and_a_missing_one_is_named(monkeypatch):
    monkeypatch.setattr(ocr_mod, "engine", lambda: ("tesseract 5.3.0", ("deu", "eng", "fra")))
    assert plan_for(True, (), ["de", "nl"], None).languages == "eng+deu"
    plan = plan_for(True, ("fr", "ita"), [], None)
    assert plan.languages == "fra" and "ita" in plan.warnings[0] and "tesseract-ocr-ita" in plan.warnings[0]


def test_a_scanned_pdf_is_read_page_by_page(tmp_path):
    path = scanned_pdf(tmp_path / "letter.pdf", [["Dear tenant, the boiler service", "is booked for Tuesday."],
                                                   ["Second page: meter reading 88231"]], tmp_path)
    note = pdf_note("letter.pdf", str(path), limits(tmp_path))
    text = "\n".join(note.lines)
    assert "# Page 1" in text and "# Page 2" in text and "boiler service" in text.lower()
    assert "88231" in text.split("# Page 2")[1]
    assert note.properties["hybrid:ocr_pages"] == [1, 2]
    # without OCR, the same scan is refused, saying how to enable it
    with pytest.raises(ConvertError, match="no text layer in 2 page"):
        pdf_note("letter.pdf", str(path), convert_limits())


def test_pdf_headings_from_type_and_from_the_outline(tmp_path):
    from fpdf import FPDF
    pdf = FPDF()
    pdf.add_font("dejavu", "", FONT)
    pdf.add_page()
    for size, text in ((20, "Boiler Handbook"), (10, "How the house is heated."), (14, "Servicing"),
                       (10, "Book a service every autumn before the first frost."), (14, "Pressure"),
                       (10, "Keep the gauge between one and two bar.")):
        pdf.set_font("dejavu", size=size)
        pdf.multi_cell(0, 8, text, new_x="LMARGIN", new_y="NEXT")
    pdf.add_page()
    pdf.set_font("dejavu", size=10)
    pdf.multi_cell(0, 8, "Topping up: open the filling loop slowly.", new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(tmp_path / "typed.pdf"))
    note = pdf_note("typed.pdf", str(tmp_path / "typed.pdf"), convert_limits())
    lines = note.lines
    assert "## Boiler Handbook" in lines and "### Servicing" in lines and "### Pressure" in lines
    # the section running on over the page break has its headings again on the next page
    page2 = lines[lines.index("# Page 2"):]
    assert page2[:6] == ["# Page 2", "", "## Boiler Handbook", "", "### Pressure", ""]

    outlined = FPDF()
    outlined.set_font("helvetica", size=11)
    outlined.add_page()
    outlined.start_section("Chapter One")
    outlined.multi_cell(0, 6, "Chapter One\nThe opening text.", new_x="LMARGIN", new_y="NEXT")
    outlined.start_section("A part", level=1)
    outlined.multi_cell(0, 6, "A part\nMore text here.", new_x="LMARGIN", new_y="NEXT")
    outlined.output(str(tmp_path / "outlined.pdf"))
    lines = pdf_note("outlined.pdf", str(tmp_path / "outlined.pdf"), convert_limits()).lines
    assert "## Chapter One" in lines and "### A part" in lines


def test_a_vault_of_pictures_indexes_searches_and_cites_them(tmp_path, open_h, monkeypatch):
    root = tmp_path / "vault"
    write(root, "home.md", "# Home\n\nThe shed receipt is below.\n\n![[receipt.png]]\n")
    text_image(root / "receipt.png", RECEIPT)
    bomb_png(root / "bomb.png")
    (root / "fake.jpg").write_text("not a picture")
    scanned_pdf(root / "letter.pdf", [["The boiler service is booked for Tuesday."]], tmp_path)
    h = open_h(embedder="hash:64")
    h.add_vault(root, "v")
    report = h.index()[0]
    assert report.added == 3 and report.skipped == 2, report.warnings
    warned = "\n".join(report.warnings)
    assert "bomb.png: 50,000 × 50,000 pixels" in warned and "fake.jpg: not a readable image" in warned
    hits = h.search("galvanised hinges", mode="lexical")
    assert hits[0].path == "receipt.png" and hits[0].source == "image"
    assert hits[0].box is not None and hits[0].to_dict()["box"] == hits[0].box
    assert hits[0].embedded_in == ["home.md"]  # the note that shows it
    hits = h.search("boiler service tuesday", mode="lexical", sources=["pdf"])
    assert hits[0].path == "letter.pdf" and hits[0].page == 1
    got = h.get("v:receipt.png")
    assert "Galvanised" in got.text or "galvanised" in got.text.lower()
    # an unchanged vault: nothing read again, the skipped files not tried again
    again = h.index()[0]
    assert (again.added, again.updated, again.skipped, again.warnings) == (0, 0, 2, [])
    assert any((tmp_path / "home").rglob("ocr/*/*.json")) or any(Path(h.config.data).rglob("ocr/*/*.json"))


def test_vacuum_drops_the_ocr_results_no_picture_uses_and_keeps_the_rest(tmp_path, open_h, monkeypatch):
    root = tmp_path / "vault"
    text_image(root / "receipt.png", RECEIPT)
    text_image(root / "gone.png", ["A picture deleted since it was read"])
    scanned_pdf(root / "letter.pdf", [["The boiler service is booked for Tuesday."]], tmp_path)
    h = open_h(embedder="hash:64")
    h.add_vault(root, "v")
    h.index()
    cache = next(p for p in Path(h.config.data).rglob("ocr") if p.is_dir())
    entries = lambda: sorted(p.name for p in cache.rglob("*") if p.is_file())  # noqa: E731
    assert len(entries()) == 3  # two pictures and the letter's page
    (root / "gone.png").unlink()
    h.index()
    kept = entries()
    receipt = next(n for n in kept if n.endswith("-image-" + n.rsplit("-", 1)[-1]) and "gone" not in n)
    shelf = cache / receipt[:2]
    (shelf / receipt.replace(receipt.rsplit("-", 1)[-1], "0123456789ab.json")).write_text("{}")  # another plan's
    (shelf / (receipt + ".77.tmp")).write_text("{")  # a write cut short
    report = h.vacuum()[0]
    assert report.ocr_removed == 3, entries()  # the deleted picture's, the other plan's, the half-written
    assert len(entries()) == 2
    # what is kept is what the vault uses: a forced re-index reads no picture again
    calls = []
    real = ocr_mod.convert
    monkeypatch.setattr(ocr_mod, "convert", lambda *a, **k: calls.append(a) or real(*a, **k))
    h.index(reembed=True)
    assert calls == [] and h.search("galvanised hinges", mode="lexical")[0].path == "receipt.png"
    assert h.vacuum()[0].ocr_removed == 0


def test_ocr_off_per_vault_leaves_pictures_out_and_missing_tesseract_retries_later(tmp_path, open_h, monkeypatch):
    root = tmp_path / "vault"
    write(root, "a.md", "# A\n\nplain note\n")
    text_image(root / "receipt.png", RECEIPT)
    h = open_h(embedder="hash:64")
    h.add_vault(root, "v")
    monkeypatch.setattr(ocr_mod, "engine", lambda: ("", ()))
    report = h.index()[0]
    assert report.added == 1 and report.skipped == 1
    assert any("receipt.png" in w and "scripts/ocr.sh" in w for w in report.warnings)
    monkeypatch.undo()  # Tesseract "installed": the picture is tried again and read
    report = h.index()[0]
    assert report.added == 1 and report.skipped == 0, report.warnings
    cfg = h.config
    cfg.vaults["v"]["ocr"] = False
    assert all(not p.endswith(".png") for p in h.config.vault("v").include) or \
        "**/*.png" in h.config.vault("v").exclude
    report = h.index()[0]
    assert report.removed == 1 and not h.search("galvanised hinges", mode="lexical")


def test_agents_see_recognised_text_redacted_and_no_hidden_note_that_embeds_it(tmp_path, open_h):
    import anyio
    from mcp import Client
    from mcp_types import Implementation

    from hybrid.faces.mcp import build_server
    from hybrid.retrieval.result import answer_passages
    root = tmp_path / "vault"
    text_image(root / "router.png", ["The router admin login.", "password: falconorbit77", "Change it yearly."])
    write(root, "home.md", "# Home\n\nThe router card:\n\n![[router.png]]\n")
    write(root, "private/diary.md", "# Diary\n\nPhotographed the router card today.\n\n![[router.png]]\n")
    text_image(root / "private/wifi.png", ["Guest network key: marmalade crossing"])
    h = open_h(embedder="hash:64", agent_exclude=["private/**"])
    h.add_vault(root, "v")
    assert h.index()[0].added == 4
    owner = [x for x in h.search("router admin login", mode="lexical") if x.path == "router.png"][0]
    assert owner.embedded_in == ["home.md", "private/diary.md"]

    def call(tool, args):
        async def main():
            async with Client(build_server(h), client_info=Implementation(name="probe", version="1")) as c:
                return await c.call_tool(tool, args)
        return anyio.run(main)
    res = call("search", {"query": "router admin login", "top_k": 10, "passages": True})
    rows = answer_passages(res.structured_content)
    shown = next(x for x in rows if x["path"] == "router.png")
    assert shown["embedded_in"] == ["home.md"] and "falconorbit77" not in json.dumps(rows)
    got = call("get_note", {"path": "router.png"}).structured_content["text"]
    assert "falconorbit77" not in got and "[redacted secret]" in got and "router admin login" in got
    hidden = answer_passages(call("search", {"query": "guest network key marmalade", "top_k": 10}).structured_content)
    assert all(x["path"] != "private/wifi.png" for x in hidden)


def test_headings_are_read_from_the_height_of_recognised_lines(tmp_path):
    """A picture's (or a scan's) lines set in larger type are headings, as a PDF's are."""
    from PIL import Image, ImageDraw, ImageFont
    img = Image.new("L", (1400, 520), 255)
    d = ImageDraw.Draw(img)
    d.text((30, 20), "Boiler Handbook", font=ImageFont.truetype(FONT, 46), fill=0)
    body = ImageFont.truetype(FONT, 24)
    for i, line in enumerate(["Book a service every autumn before the first frost arrives,",
                              "and keep the pressure gauge between one and two bar always.",
                              "Bleed the radiators upstairs first, then the ones downstairs."]):
        d.text((30, 110 + 44 * i), line, font=body, fill=0)
    d.text((30, 280), "Topping up", font=ImageFont.truetype(FONT, 36), fill=0)
    d.text((30, 350), "Open the filling loop slowly until the needle reaches one and a half.", font=body, fill=0)
    # a heading in bold at the body's size: its strokes are thicker (hybrid.sources.ocr_ops.bold_lines)
    d.text((30, 410), "Pressure relief valve", font=ImageFont.truetype(FONT.replace("Sans.", "Sans-Bold."), 24), fill=0)
    d.text((30, 460), "Replace the valve when it drips after the pressure has settled.", font=body, fill=0)
    img.save(tmp_path / "handbook.png")
    lines = image_note("handbook.png", str(tmp_path / "handbook.png"), limits(tmp_path)).lines
    heads = [x for x in lines if x.startswith("#")]
    assert heads == ["# Boiler Handbook", "## Topping up", "### Pressure relief valve"], lines
    scan = tmp_path / "handbook.pdf"
    from fpdf import FPDF
    pdf = FPDF()
    pdf.add_page()
    pdf.image(str(tmp_path / "handbook.png"), x=5, y=5, w=200)
    pdf.output(str(scan))
    note = pdf_note("handbook.pdf", str(scan), limits(tmp_path))
    assert "## Boiler Handbook" in note.lines and "### Topping up" in note.lines, note.lines
    assert "#### Pressure relief valve" in note.lines, note.lines



def notes(root: Path, title: str, texts: list[str]) -> None:
    """One note a text, ``{title} N.md`` titled ``{title} N``."""
    for i, text in enumerate(texts):
        write(root, f"{title.lower()}-{i}.md", f"# {title} {i}\n\n{text}\n")


def test_a_first_index_reads_pictures_in_the_languages_of_the_notes(tmp_path, open_h):
    """No ledger records the vault's languages yet: they are told from a sample of its notes
    before the first picture is read (English data alone reads `Straße` as `StraBe`)."""
    assert "deu" in ocr_mod.engine()[1], "German data missing: bash scripts/ocr.sh"
    root = tmp_path / "vault"
    notes(root, "Notiz", [
        "Wir haben die Straße vor dem Haus neu gepflastert, und die Nachbarn waren sehr zufrieden damit.",
        "Der Garten braucht im Frühling mehr Wasser, weil die Erde schnell austrocknet und die Pflanzen leiden.",
        "Die Rechnung für die Reparatur der Heizung kam gestern, sie war höher als wir erwartet hatten."])
    text_image(root / "schild.png", ["Die Größe der Straße ist übermäßig groß", "Bitte schließen Sie die Tür leise"])
    h = open_h(embedder="hash:64")
    h.add_vault(root, "v")
    assert h.index()[0].added == 4
    hit = next(x for x in h.search("Größe Straße Tür", mode="lexical", top_k=10) if x.path == "schild.png")
    assert "Straße" in hit.text and "schließen" in hit.text, hit.text  # as the index holds it


def test_pictures_are_read_in_the_languages_chosen_first_and_shown_as_indexed(tmp_path, open_h, monkeypatch):
    """The languages the vault's notes are in change after its pictures were read (notes in
    French come): the pictures are still read in the languages chosen at first, new ones too, and
    `get` shows a picture's text as its index read it, from the OCR cache, never read again."""
    root = tmp_path / "vault"
    write(root, "home.md", "# Home\n\nThe shed needs new hinges before the winter comes.\n")
    text_image(root / "sign.png", ["Please close the gate quietly", "Dogs on a lead"])
    h = open_h(embedder="hash:64")
    h.add_vault(root, "v")
    h.index()

    def meta(key):
        return h.catalog_or_none(h.vault_for("v")).get_meta(key)
    assert meta(ocr_mod.PLAN_META) == "eng"
    notes(root, "Note", [
        "Nous avons repeint la porte du garage avec les voisins pendant tout le week-end dernier.",
        "Le jardin a besoin de beaucoup plus d'eau au printemps parce que la terre sèche très vite.",
        "La facture de la réparation du chauffage est arrivée hier et elle était bien trop chère."])
    text_image(root / "board.png", ["Meeting moved to Thursday", "Bring the quotes"])
    h.index()
    assert "fr" in meta("languages")  # the notes are in French now
    assert meta(ocr_mod.PLAN_META) == "eng"  # the pictures are read as before
    calls = []
    real = ocr_mod.convert
    monkeypatch.setattr(ocr_mod, "convert", lambda *a, **k: calls.append(a) or real(*a, **k))
    got = h.get("v:sign.png").text
    assert "close the gate" in got and calls == []  # from the cache: as indexed
