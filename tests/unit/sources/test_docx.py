"""Word files (``.docx``) indexed by heading: real documents written by python-docx, read in the
converter worker; hits cite their heading path and lines, tables and lists are text; a file that
is not a zip, a zip of something else and a zip bomb are one warning each and the rest of the
vault is indexed. Real tantivy and FAISS indexes, the hash embedder."""
import io
import zipfile

import docx
import pytest
from helpers import write

from hybrid.sources import kind_of
from hybrid.sources.convert import to_note
from hybrid.sources.sandbox import ConvertError, Limits


def review_docx(path, title: str = "") -> None:
    """An incident review as Word would hold it: Title, headings, text, lists, a table."""
    d = docx.Document()
    d.core_properties.title = title
    d.add_paragraph("Incident review", style="Title")
    d.add_paragraph("Written after the outage of the billing cluster.")
    d.add_heading("Timeline", level=1)
    d.add_paragraph("At 09:14 the primary database ran out of disk.\nPaging started at 09:20.")
    d.add_heading("Root cause", level=2)
    d.add_paragraph("WAL archiving had silently failed for three days.")
    d.add_paragraph("Fix the archive command", style="List Bullet")
    d.add_paragraph("Alert on archive lag", style="List Bullet 2")
    d.add_paragraph("# not a heading, a hash line")
    table = d.add_table(rows=3, cols=2)
    for r, (a, b) in enumerate([("Owner", "Action"), ("Dana", "Rotate the capybara disk"),
                                ("Lee", "Page on archive_failed")]):
        table.cell(r, 0).text, table.cell(r, 1).text = a, b
    d.add_heading("Follow-ups", level=1)
    d.add_paragraph("Quarterly restore drills with the narwhal team.")
    path.parent.mkdir(parents=True, exist_ok=True)
    d.save(str(path))


@pytest.mark.slow  # starts a converter process
def test_a_word_document_becomes_markdown_by_heading(tmp_path):
    review_docx(tmp_path / "review.docx")
    note = to_note("docs/review.docx", (tmp_path / "review.docx").read_bytes())
    assert note.title == "Incident review" and note.tags == [] and note.properties == {}
    text = "\n".join(note.lines)
    assert [x for x in note.lines if x.startswith("#")] == ["# Incident review", "# Timeline", "## Root cause",
                                                             "# Follow-ups"]
    assert "At 09:14 the primary database ran out of disk.\nPaging started at 09:20." in text
    assert "- Fix the archive command\n  - Alert on archive lag" in text  # one list, nested
    assert "\\# not a heading, a hash line" in text
    assert "| Owner | Action |\n| --- | --- |\n| Dana | Rotate the capybara disk |" in text
    review_docx(tmp_path / "titled.docx", title="Billing outage 2024-03")
    assert to_note("titled.docx", (tmp_path / "titled.docx").read_bytes()).title == "Billing outage 2024-03"
    plain = docx.Document()
    plain.add_paragraph("Just one line.")
    buf = io.BytesIO()
    plain.save(buf)
    assert to_note("memo.docx", buf.getvalue()).title == "memo"  # no title of its own: the file name
    assert kind_of("Docs/Memo.DOCX") == "docx"


def zip_of(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return buf.getvalue()


@pytest.mark.slow  # starts a converter process
def test_files_that_are_no_word_document_are_refused_with_a_reason(tmp_path):
    for data, why in ((b"just some text, saved as .docx", "not a zip file"),
                      (zip_of({"mimetype": "application/epub+zip", "OEBPS/a.xhtml": "<p>x</p>"}),
                       "a zip of something else"),
                      (zip_of({"[Content_Types].xml": "<Types/>", "word/document.xml": "<broken"}), "")):
        with pytest.raises(ConvertError, match=rf"^x\.docx: not a Word document \({why}"):
            to_note("x.docx", data)


@pytest.mark.slow  # starts a converter process
def test_a_docx_bomb_is_stopped_by_the_memory_bound(tmp_path):
    review_docx(tmp_path / "ok.docx")
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO((tmp_path / "ok.docx").read_bytes())) as src, \
            zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as out:
        for item in src.infolist():
            if item.filename != "word/document.xml":
                out.writestr(item, src.read(item))
        with out.open("word/document.xml", "w") as part:  # ~300 KB packed, 300 MB inflated
            part.write(b'<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/'
                       b'wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>')
            block = b"A" * (1 << 20)
            for _ in range(300):
                part.write(block)
            part.write(b"</w:t></w:r></w:p></w:body></w:document>")
    with pytest.raises(ConvertError, match=r"needed more than 256 MB of memory \(convert_max_memory_mb\)"):
        to_note("bomb.docx", buf.getvalue(), limits=Limits(256, 60))


@pytest.fixture
def office(tmp_path, fake):
    root = tmp_path / "vault"
    review_docx(root / "reviews/Billing outage.docx")
    write(root, "notes/plain.md", "# Plain\n\nA markdown note about lemurs.\n")
    (root / "reviews/fake.docx").write_bytes(b"PK\x03\x04 but not really a zip")
    (root / "reviews/epub.docx").write_bytes(zip_of({"mimetype": "application/epub+zip"}))
    fake.add_vault(root, "v")
    return fake, root, fake.index()[0]


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_docx_hits_cite_their_heading_path(office):
    h, root, report = office
    assert report.added == 2 and report.skipped == 2
    assert sorted(report.warnings) == [
        "reviews/epub.docx: not a Word document (a zip of something else); skipped",
        "reviews/fake.docx: not a Word document (not a zip file); skipped"]
    hit = h.search("WAL archiving silently failed", mode="lexical")[0]
    assert (hit.path, hit.source, hit.title) == ("reviews/Billing outage.docx", "docx", "Incident review")
    assert hit.heading_path == ["Timeline", "Root cause"]
    assert hit.citation == f"v:reviews/Billing outage.docx:{hit.start_line}-{hit.end_line}"
    assert "WAL archiving" in h.get(hit.citation).text  # the citation reads back as the passage
    assert hit.uri == f"obsidian://open?vault={root.name}&file=reviews%2FBilling%20outage.docx"
    assert h.search("capybara disk", mode="lexical")[0].heading_path == ["Timeline", "Root cause"]  # a table row
    assert h.search("narwhal restore drills", mode="hybrid")[0].heading_path == ["Follow-ups"]
    assert {x.source for x in h.search("outage", sources=["docx"], mode="vector")} == {"docx"}
    assert h.status()[0].sources == {"note": 1, "docx": 1}
    assert h.search("lemurs", mode="lexical")[0].path == "notes/plain.md"
    # skipped files are remembered: not tried again, nor warned about, while they stay the same
    assert h.index()[0].warnings == []


@pytest.mark.slow  # starts a converter process
def test_a_docx_in_an_agent_excluded_folder_is_hidden(office):
    h, _, _ = office
    assert h.search("WAL archiving", agent=True, mode="lexical")
    h.override(agent_exclude=["reviews/**"])
    assert h.search("WAL archiving", agent=True, mode="lexical") == []
    assert h.search("WAL archiving", mode="lexical")[0].source == "docx"  # the owner still finds it


@pytest.mark.slow  # starts a converter process
def test_merged_cells_outline_levels_and_numbered_items_are_read():
    """A cell merged across columns comes once per row; a paragraph whose outline level Word set
    directly (no heading style) is a heading; a numbered item (w:numPr) is a list item at its level."""
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn
    d = docx.Document()
    d.add_paragraph("Plan")
    outlined = d.add_paragraph("Budget lines")
    ppr = outlined.paragraph_format.element.get_or_add_pPr()
    lvl = OxmlElement("w:outlineLvl")
    lvl.set(qn("w:val"), "1")
    ppr.append(lvl)
    item = d.add_paragraph("Count the otters")
    num = OxmlElement("w:numPr")
    ilvl = OxmlElement("w:ilvl")
    ilvl.set(qn("w:val"), "1")
    num.append(ilvl)
    item.paragraph_format.element.get_or_add_pPr().append(num)
    table = d.add_table(rows=2, cols=3)
    for r, row in enumerate([("Quarter", "", "Total"), ("Q1", "Q1b", "12")]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    table.cell(0, 0).merge(table.cell(0, 1))
    buf = io.BytesIO()
    d.save(buf)
    lines = to_note("plan.docx", buf.getvalue()).lines
    assert "## Budget lines" in lines
    assert "  - Count the otters" in lines
    assert any(x.startswith("| Quarter") and x.count("Quarter") == 1 and x.count("|") == 3 for x in lines), lines
