"""Beyond markdown inside a vault: PDFs (text per page, page citations, bad PDFs skipped), plain
text and saved web pages; the ``source`` filter in every door (API, inline syntax, CLI, MCP,
eval) and the per-kind counts of ``hybrid status``. Real PDFs written by fpdf2, real tantivy
and FAISS indexes, the hash embedder (logic) or the bundled model (meaning)."""
import json

import anyio
import pytest
from helpers import ALL_STORES, hybrid_cmd, write, write_pdf
from mcp import Client

import hybrid
from hybrid.core.errors import PathRefused
from hybrid.faces.mcp import build_server
from hybrid.retrieval.filters import NoMatchingNotes
from hybrid.retrieval.limits import BadSearchArgs
from hybrid.retrieval.result import answer_passages

STORES = ALL_STORES

PAGES = [
    "Autovacuum runs in the background. The vacuum freeze threshold decides when old tuples "
    "are frozen, which prevents transaction ID wraparound.",
    "Index bloat grows with updates; REINDEX CONCURRENTLY rebuilds an index without locking "
    "writes.",
    "# not a heading\n~~~\nCheckpoints flush dirty buffers; WAL segments are recycled after them.",
]
HTML = ("<html><head><title>Race conditions explained</title></head><body>"
        "<nav>Home | Pricing | Login | Newsletter signup</nav><article><h1>Handling race conditions</h1>"
        + "<p>In distributed systems a race condition appears when two nodes update shared state "
          "without coordination; fencing tokens and leases prevent stale writers.</p>" * 3
        + "<h2>Leases</h2><p>A lease expires unless renewed, so a paused node loses it.</p>"
          "</article><footer>Copyright 2024 Example Corp. All rights reserved.</footer></body></html>")


@pytest.fixture
def mixed(tmp_path):
    root = tmp_path / "vault"
    write(root, "notes/groceries.md", "# Groceries\n\nBuy milk, eggs and flour.\n")
    write_pdf(root / "papers/pg-maintenance.pdf", PAGES, title="Postgres Maintenance Guide")
    write(root, "checklist.txt", "Deployment checklist\n\nDrain the node before the kernel upgrade.\n"
          "# this hash line is plain text\n")
    write(root, "saved/race.html", HTML)
    return root


@pytest.fixture
def h(mixed, open_h):
    h = open_h(embedder="hash:64")
    h.add_vault(mixed, "v")
    report = h.index()[0]
    assert report.added == 4 and report.skipped == 0, report.warnings
    return h


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_pdf_hits_carry_their_page_and_cite_it(h):
    hits = h.search("vacuum freeze threshold wraparound", sources=["pdf"], mode="lexical")
    assert hits and {x.path for x in hits} == {"papers/pg-maintenance.pdf"}
    top = hits[0]
    assert (top.source, top.page, top.title) == ("pdf", 1, "Postgres Maintenance Guide")
    assert top.citation == "v:papers/pg-maintenance.pdf#page=1"
    data = top.to_dict()
    assert data["page"] == 1 and data["source"] == "pdf" and data["citation"].endswith("#page=1")
    third = h.search("checkpoints dirty buffers", sources=["pdf"], mode="lexical")[0]
    assert third.page == 3 and third.heading_path == ["Page 3"]
    assert "\\# not a heading" in third.text  # the PDF's own '#' line stays text, not a section


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_get_reads_a_pdf_page_range(h):
    one = h.get("v:papers/pg-maintenance.pdf#page=2")
    assert one.text.startswith("# Page 2") and "REINDEX CONCURRENTLY" in one.text
    assert "Autovacuum" not in one.text and "Checkpoints" not in one.text
    two = h.get("papers/pg-maintenance.pdf#page=2-3")
    assert "REINDEX" in two.text and "Checkpoints" in two.text and "Autovacuum" not in two.text
    assert two.end_line == two.total_lines
    whole = h.get("papers/pg-maintenance.pdf")
    assert whole.text.count("# Page ") == 3
    with pytest.raises(PathRefused, match=r"no page 9 with text \(pages with text: 1-3\)"):
        h.get("papers/pg-maintenance.pdf#page=9")
    # a hit's citation reads back as the passage it cites
    hit = h.search("index bloat", sources=["pdf"], mode="lexical")[0]
    assert "bloat" in h.get(hit.citation).text


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_text_and_web_pages(h):
    txt = h.search("kernel upgrade drain", sources=["text"], mode="lexical")
    assert [x.path for x in txt] == ["checklist.txt"] and txt[0].title == "checklist"
    assert txt[0].start_line == 1  # lines of the file itself
    web = h.search("fencing tokens leases", sources=["web"], mode="lexical")
    assert web[0].path == "saved/race.html"
    assert web[0].title == "Handling race conditions"  # the headline trafilatura finds
    page = h.get("saved/race.html").text
    assert "fencing tokens" in page and "## Leases" in page
    assert "Newsletter" not in page and "All rights reserved" not in page  # boilerplate left out
    assert h.search("newsletter signup pricing", mode="lexical") == []


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_source_filter_in_every_arm_and_inline(h):
    for mode in ("lexical", "vector", "hybrid"):
        for kind in ("note", "pdf", "text", "web"):
            hits = h.search("milk vacuum kernel fencing", sources=[kind], mode=mode, top_k=20)
            assert hits and {x.source for x in hits} == {kind}, (mode, kind)
    both = h.search("milk vacuum kernel fencing", sources=["pdf", "note"], top_k=20)
    assert {x.source for x in both} == {"pdf", "note"}
    inline = h.search("vacuum source:pdf", top_k=20)
    assert inline and {x.source for x in inline} == {"pdf"}
    listing = h.search("source:text")
    assert [x.path for x in listing] == ["checklist.txt"]
    with pytest.raises(BadSearchArgs, match="unknown source kind 'spreadsheet'"):
        h.search("milk", sources=["spreadsheet"])
    with pytest.raises(NoMatchingNotes, match=r"no slack document is indexed .*they hold: note, pdf, text, web"):
        h.search("milk", sources=["slack"])


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_status_counts_documents_per_kind(h):
    st = h.status()[0]
    assert st.sources == {"note": 1, "pdf": 1, "text": 1, "web": 1} and st.notes == 4


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.local_only
def test_bad_pdfs_are_skipped_one_warning_each_and_the_rest_indexed(h, mixed):
    write_pdf(mixed / "locked.pdf", ["Quarterly salary figures"], password="s3cret")
    write_pdf(mixed / "scan.pdf", ["", ""], images_only=True)
    (mixed / "broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog >>\nendobj\ntrailer garbage")
    write(mixed, "late.md", "# Late note\n\nWritten after the bad PDFs.\n")
    report = h.index()[0]
    assert report.added == 1 and report.skipped == 3
    warned = "\n".join(report.warnings)
    assert "locked.pdf: encrypted PDF (needs a password); skipped" in warned
    # OCR read the scan's blank pages and found nothing (tests/unit/sources/test_ocr.py reads text)
    assert "scan.pdf: no text layer in 2 page(s), and OCR recognised no text; skipped" in warned
    assert "broken.pdf: damaged or not a PDF" in warned
    assert len(report.warnings) == 3
    assert h.search("written after", mode="lexical")[0].path == "late.md"
    # a PDF indexed before keeps its chunks when it turns unreadable
    (mixed / "papers/pg-maintenance.pdf").write_bytes(b"%PDF-1.4 truncated")
    again = h.index()[0]
    assert again.skipped == 4 and again.removed == 0
    assert any("pg-maintenance.pdf: damaged or not a PDF" in w for w in again.warnings)
    assert h.search("vacuum freeze", sources=["pdf"], mode="lexical")[0].page == 1


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_pdfs_are_incremental_and_leave_nothing_when_removed(h, mixed):
    again = h.index()[0]
    assert (again.added, again.updated, again.unchanged, again.chunks_embedded) == (0, 0, 4, 0)
    pdf = mixed / "papers/pg-maintenance.pdf"
    data = pdf.read_bytes()
    pdf.write_bytes(data)  # same bytes, new mtime: hashed, not re-read
    assert h.index()[0].unchanged == 4
    write_pdf(pdf, PAGES[:1] + ["Replaced page two about TOAST compression."], title="Postgres Maintenance Guide")
    changed = h.index()[0]
    assert changed.updated == 1 and changed.chunks_embedded >= 1
    assert h.search("TOAST compression", mode="lexical")[0].page == 2
    assert h.search("REINDEX CONCURRENTLY", mode="lexical") == []
    pdf.unlink()
    removed = h.index()[0]
    assert removed.removed == 1
    assert h.status()[0].sources == {"note": 1, "text": 1, "web": 1}
    with pytest.raises(NoMatchingNotes):
        h.search("vacuum", sources=["pdf"])


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.local_only
def test_large_pdf_limit_is_its_own_setting(tmp_path):
    root = tmp_path / "vault"
    write_pdf(root / "big.pdf", ["x " * 3000] * 3)
    write(root, "a.md", "# A\n\nalpha\n")
    size = (root / "big.pdf").stat().st_size
    h = hybrid.open(tmp_path / "home", embedder="hash:64", max_file_bytes=10, max_pdf_bytes=size - 1)
    h.add_vault(root, "v")
    report = h.index()[0]
    assert f"big.pdf: {size:,} bytes is over max_pdf_bytes ({size - 1:,}); skipped" in report.warnings
    h.override(max_pdf_bytes=size)
    assert h.index()[0].added == 1  # max_file_bytes (10) does not apply to PDFs


def mcp_call(h, tool, args):
    async def main():
        async with Client(build_server(h)) as c:
            return await c.call_tool(tool, args)
    return anyio.run(main)


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.local_only
def test_mcp_search_by_source_and_read_a_page(h):
    res = mcp_call(h, "search", {"query": "vacuum freeze threshold", "source": ["pdf"], "passages": True})
    hits = answer_passages(res.structured_content)
    assert hits and {x["source"] for x in hits} == {"pdf"}
    assert hits[0]["page"] == 1 and hits[0]["citation"] == "v:papers/pg-maintenance.pdf#page=1"
    page = mcp_call(h, "get_note", {"path": hits[0]["citation"]})
    assert "Autovacuum" in page.content[0].text and "REINDEX" not in page.content[0].text
    bad = mcp_call(h, "search", {"query": "x", "source": ["spreadsheet"]})
    assert bad.is_error


@pytest.mark.slow
@pytest.mark.local_only
def test_cli_query_source_and_status(mixed, tmp_path):
    home = tmp_path / "clihome"
    write(home, "config.toml", '[settings]\nembedder = "hash:64"\n')
    out = hybrid_cmd(home, "index", str(mixed), "--name", "v")
    assert out.returncode == 0, out.stderr
    q = hybrid_cmd(home, "query", "vacuum freeze", "--source", "pdf", "--json", "--local")
    assert q.returncode == 0, q.stderr
    hits = json.loads(q.stdout)
    assert hits[0]["citation"] == "v:papers/pg-maintenance.pdf#page=1"
    text = hybrid_cmd(home, "query", "vacuum freeze", "--source", "pdf", "--local")
    assert "v:papers/pg-maintenance.pdf#page=1" in text.stdout
    st = hybrid_cmd(home, "status")
    assert "documents: 1 note, 1 pdf, 1 text, 1 web" in st.stdout
    bad = hybrid_cmd(home, "query", "x", "--source", "spreadsheet")
    assert bad.returncode == 2 and "spreadsheet" in bad.stderr


@pytest.mark.slow
@pytest.mark.local_only
def test_pdf_and_web_content_found_by_meaning(tmp_path, default_mix):
    """Paraphrased questions (no shared keywords with the title) find the PDF page and the
    saved page with the real model."""
    root = tmp_path / "vault"
    write_pdf(root / "manual.pdf", [
        "Chapter 1. Unpacking. Remove the espresso machine from the box and keep the foam.",
        "Chapter 2. Descaling. Every three months run a citric acid solution through the boiler "
        "so mineral deposits from hard water do not clog the heating element.",
    ])
    write(root, "web/sleep.html", "<html><head><title>Article</title></head><body><article><p>"
          + "Keeping a fixed wake-up time, avoiding screens late in the evening and a cool dark "
            "bedroom improve how quickly people fall asleep. " * 3 + "</p></article></body></html>")
    write(root, "misc.md", "# Bike\n\nThe chain needs oil every few hundred kilometres.\n")
    h = hybrid.open(tmp_path / "home", embedders=[default_mix])
    h.add_vault(root, "v")
    h.index()
    top = h.search("how do I remove limescale from my coffee maker", mode="vector")[0]
    assert (top.path, top.page) == ("manual.pdf", 2)
    assert h.search("tips for insomnia", mode="vector")[0].path == "web/sleep.html"
