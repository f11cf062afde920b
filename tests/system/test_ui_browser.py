"""The search page in a real browser: Debian's Chromium (``scripts/browser.sh`` installs it;
``.ci/run`` runs that) driven by Playwright, against ``hybrid serve --http``'s app on 127.0.0.1.

A missing browser fails these tests with the command that installs it: a test that skips
because its browser is absent proves nothing."""

from __future__ import annotations

import os
import re
import urllib.request
from pathlib import Path

import pytest
from helpers import SAMPLE_VAULT, app_server, write

import hybrid

pytestmark = [pytest.mark.slow, pytest.mark.browser]
CHROMIUM = os.environ.get("HYBRID_CHROMIUM", "/usr/bin/chromium")
OWNER = "OWNER-KEY"
# what this machine's closed network needs (Chromium otherwise keeps calling home at start)
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: run `bash scripts/browser.sh` (Debian's chromium), "
                    f"or set HYBRID_CHROMIUM")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


class Page:
    """A fresh browser context on a server, with every console error and page error kept."""

    def __init__(self, browser, url: str, **context):
        self.url = url
        self.context = browser.new_context(**context)
        self.page = self.context.new_page()
        self.page.set_default_timeout(20_000)
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.searches = 0
        self.page.on("request", self._count)

    def _count(self, request):
        if request.url.endswith("/ui/api/search"):
            self.searches += 1

    def sign_in(self):
        """Sign in as ``hybrid ui`` does: a one-time link got with the owner key."""
        from hybrid.faces.ui.launch import sign_in_url
        self.page.goto(sign_in_url({"url": self.url, "owner_key": OWNER}))
        self.page.wait_for_selector("#search-view:not([hidden])")
        return self.page

    def close(self):
        self.context.close()


@pytest.fixture
def sample_server(sample_home, default_mix):
    """The bundled sample vault, indexed with the real model, behind a running server."""
    h = hybrid.open(sample_home, embedders=[default_mix])
    with app_server(h, owner_key=OWNER) as url:
        yield url
    h.close()


@pytest.fixture
def open_page(browser):
    pages: list[Page] = []

    def make(url: str, **context) -> Page:
        pages.append(Page(browser, url, **context))
        return pages[-1]
    yield make
    for p in pages:
        p.close()


def search(page, text: str):
    page.fill("#q", text)
    page.wait_for_function("q => document.querySelector('#results').dataset.answered === q", arg=text)


def test_search_expand_follow_a_filter_and_the_score_breakdown(sample_server, open_page, tmp_path):
    p = open_page(sample_server, viewport={"width": 1100, "height": 900},
                  permissions=["clipboard-read", "clipboard-write"])
    page = p.sign_in()
    # every control of the search form has a label a screen reader reads out
    unlabelled = page.evaluate("""[...document.querySelectorAll('#search-form input, #search-form select')]
        .filter(e => !e.labels || !e.labels.length).map(e => e.id)""")
    assert unlabelled == []
    # a misspelled query: repaired, and the page says what it searched for
    search(page, "kafka rebalnce loop")
    titles = page.locator("#results .hit h3").all_inner_texts()
    assert any("Kafka consumer lag" in t for t in titles[:3]), titles
    assert "searched for “kafka rebalance loop”" in page.inner_text("#summary")
    search(page, "kafka consumer lag")
    first = page.locator("#hit-0")
    assert "Runbook: Kafka consumer lag" in first.locator("h3").inner_text()
    cite = first.locator(".cite code").inner_text()
    assert re.fullmatch(r"sample:work/runbooks/Kafka Consumer Lag\.md:\d+-\d+", cite)
    assert first.locator(".snippet mark").count() >= 2  # the query's words highlighted
    # one entry per note: its other passages are listed under it, and no note comes twice
    cites = page.locator("#results .hit").evaluate_all("hs => hs.map(h => h.dataset.citation.split(':')[1])")
    assert len(cites) == len(set(cites)) and page.locator("#results .hit").count() > 1
    assert first.locator(".more-passages li").count() >= 1
    assert page.locator("#verdict").is_hidden()
    assert re.match(r"\d+ notes? in ", page.inner_text("#summary"))
    # whole words only, the hit's own (hybrid.retrieval.excerpt.Marker): never the start of a word
    snippet_text = first.locator(".snippet").inner_text()
    for word in first.locator(".snippet mark").all_inner_texts():
        assert word.lower() in {"kafka", "consumer", "consumers", "lag", "lagging"}, word
        assert re.search(rf"(?<!\w){re.escape(word)}(?!\w)", snippet_text), word
    # the score breakdown: both arms' ranks and scores, the fused and the final score
    rows = dict(zip(first.locator(".breakdown dt").all_inner_texts(), first.locator(".breakdown dd").all_inner_texts()))
    assert re.fullmatch(r"#\d+ · [\d.]+", rows["BM25"]) and re.fullmatch(r"#\d+ · [\d.]+", rows["Vector"]), rows
    assert float(rows["Final"]) > 0 and "Fused" in rows
    widths = first.locator(".mix span").evaluate_all("s => s.map(x => parseFloat(x.style.width))")
    assert len(widths) == 2 and abs(sum(widths) - 100) < 1 and all(w > 0 for w in widths)
    # filters alone list notes newest first: the breakdown says so and gives the date, no scores
    search(page, "tag:journal")
    rows = dict(zip(page.locator("#hit-0 .breakdown dt").all_inner_texts(),
                    page.locator("#hit-0 .breakdown dd").all_inner_texts()))
    assert rows["Listed"] == "by the filters, newest first" and re.fullmatch(r"\d{4}-\d{2}-\d{2}", rows["Date"])
    assert "BM25" not in rows and "Final" not in rows
    dates = [d.strip(" ·") for d in page.locator("#results .hit .cite .date").all_inner_texts()]
    assert len(dates) >= 2 and dates == sorted(dates, reverse=True), dates
    # a query naming a tag puts the notes carrying it first, and the breakdown says why
    search(page, "journal")
    assert page.locator("#hit-0 .breakdown .pin dd").inner_text() == "tag first"
    # an identifier the query names verbatim is pinned by exact-first, and the breakdown says so
    search(page, "max.poll.interval.ms")
    assert "exact-first" in page.locator("#hit-0 .breakdown .pin dd").inner_text()
    search(page, "kafka consumer lag")
    # open in Obsidian, copy the citation
    href = first.locator("a.open-obsidian").get_attribute("href")
    assert href.startswith("obsidian://open?vault=sample_vault&file=work%2Frunbooks%2FKafka")
    citation = first.get_attribute("data-citation")
    first.locator("button.copy").click()
    page.wait_for_function("() => document.querySelector('#summary').textContent.startsWith('Copied')")
    assert page.evaluate("navigator.clipboard.readText()") == citation
    # expand: the section read from disk, the hit's own lines marked
    first.locator("h3 button").click()
    first.locator(".section pre").wait_for()
    assert first.locator("h3 button").get_attribute("aria-expanded") == "true"
    marked = first.locator(".section .line.in-hit").all_inner_texts()
    start, end = map(int, citation.rsplit(":", 1)[1].split("-"))
    disk = (SAMPLE_VAULT / "work/runbooks/Kafka Consumer Lag.md").read_text(encoding="utf-8").split("\n")
    assert len(marked) == end - start + 1
    assert [re.sub(r"^\d+", "", m, count=1).strip() for m in marked] == [x.strip() for x in disk[start - 1:end]]
    # follow a filter: the hit's tag chip narrows the search to that tag
    first.locator(".chips button[data-filter='tag'][data-value='kafka']").click()
    page.wait_for_function("() => new URLSearchParams(location.search).get('tag') === 'kafka'")
    page.wait_for_function("() => document.querySelectorAll('#results .hit').length > 0")
    assert page.input_value("#f-tag") == "kafka"
    page.wait_for_function("""() => [...document.querySelectorAll('#results .hit')].every(h =>
        [...h.querySelectorAll(".chips button[data-filter='tag']")].some(b => b.dataset.value === 'kafka'))""")
    page.screenshot(path=str(tmp_path / "search.png"))
    assert (tmp_path / "search.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [e for e in p.errors if "Content Security Policy" in e or "Refused" in e] == []
    assert p.errors == []


def test_related_notes_panel(sample_server, open_page):
    p = open_page(sample_server, viewport={"width": 1100, "height": 900})
    page = p.sign_in()
    search(page, "idempotency keys")
    first = page.locator("#hit-0")
    assert "Idempotency Keys" in first.locator("h3").inner_text()
    button = first.locator("button.related-toggle")
    assert button.get_attribute("aria-expanded") == "false" and first.locator(".related").is_hidden()
    button.click()
    first.locator(".related-list li").first.wait_for()
    assert button.get_attribute("aria-expanded") == "true"
    entries = first.locator(".related-list > li")
    assert entries.count() == 8  # top_k of the panel
    cites = entries.evaluate_all("es => es.map(e => e.dataset.citation)")
    assert all(c.startswith("sample:") and "Idempotency Keys.md" not in c for c in cites), cites
    whys = [t for e in entries.all() for t in e.locator(".why li").all_inner_texts()]
    assert any(w.startswith("similar in meaning (cosine ") for w in whys)
    assert any(w in ("the note links to it", "it links to the note", "linked both ways") for w in whys)
    button.click()
    assert first.locator(".related").is_hidden()
    assert p.errors == []


CONTRAST = """() => {
  const rgb = s => s.match(/[\\d.]+/g).map(Number);
  const lum = ([r, g, b]) => {
    const f = c => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const bg = e => {
    for (; e; e = e.parentElement) {
      const c = getComputedStyle(e).backgroundColor;
      if (c && !c.startsWith('rgba(0, 0, 0, 0)') && c !== 'transparent') return rgb(c);
    }
    return [255, 255, 255];
  };
  const out = [];
  const sel = '#q, .hint, label, #summary, #verdict, .hit h3 button, .where, .cite, .snippet, .more-snippet, ' +
              '.more-passages code, mark, .chips button, ' +
              '.breakdown dt, .breakdown dd, .actions a, .actions button, .conf, .bar button';
  for (const e of document.querySelectorAll(sel)) {
    if (!e.offsetParent) continue;
    const a = lum(rgb(getComputedStyle(e).color)), b = lum(bg(e));
    out.push([e.className || e.tagName, (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)]);
  }
  return out;
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_text_contrast_meets_wcag_aa(sample_server, open_page, scheme):
    page = open_page(sample_server, color_scheme=scheme).sign_in()
    search(page, "kafka consumer lag")
    ratios = page.evaluate(CONTRAST)
    assert len(ratios) > 30
    low = [(what, round(r, 2)) for what, r in ratios if r < 4.5]
    assert low == [], low


def test_keyboard_navigation(sample_server, open_page):
    page = open_page(sample_server).sign_in()
    page.locator("body").click(position={"x": 5, "y": 300})
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "q"
    page.keyboard.type("postgres vacuum")
    page.wait_for_function("() => document.querySelectorAll('#results .hit').length >= 3")
    focused = "document.activeElement.id"
    page.keyboard.press("ArrowDown")
    assert page.evaluate(focused) == "hit-0-title"
    page.keyboard.press("ArrowDown")
    assert page.evaluate(focused) == "hit-1-title"
    page.keyboard.press("ArrowUp")
    assert page.evaluate(focused) == "hit-0-title"
    page.keyboard.press("Enter")
    page.locator("#hit-0-body pre").wait_for()
    assert page.get_attribute("#hit-0-title", "aria-expanded") == "true"
    page.keyboard.press("Escape")
    assert page.get_attribute("#hit-0-title", "aria-expanded") == "false"
    assert page.is_hidden("#hit-0-body") and page.evaluate(focused) == "hit-0-title"
    page.keyboard.press("Escape")
    assert page.evaluate(focused) == "q"
    page.keyboard.press("Escape")
    assert page.input_value("#q") == ""
    page.wait_for_function("() => document.querySelectorAll('#results .hit').length === 0")


def test_typing_is_debounced_and_only_the_last_query_answers(sample_server, open_page):
    p = open_page(sample_server)
    page = p.sign_in()
    page.locator("#q").press_sequentially("tailscale subnet router", delay=15)
    page.wait_for_function("() => new URLSearchParams(location.search).get('q') === 'tailscale subnet router'"
                           " && document.querySelectorAll('#results .hit').length > 0")
    page.wait_for_timeout(400)  # let any late answer land: it must not replace the last one
    assert p.searches < len("tailscale subnet router") // 2
    assert "tailscale" in page.locator("#hit-0").inner_text().lower()
    # a query the engine refuses: its one-line reason, and no stale results under it
    page.fill("#q", 'tailscale "open quote')
    page.locator("#error", has_text="quote").wait_for()
    assert page.locator("#results .hit").count() == 0


def test_typing_before_the_filters_load_is_kept(sample_server, open_page):
    """The page shows its search box before the filters' options arrive; what is typed in that
    window stays, and is searched (once the options land, only the filters are read from the
    address again). CI met this: under load the options came late and the query was wiped."""
    p = open_page(sample_server)
    held = []
    p.page.route("**/ui/api/facets", lambda route: held.append(route))
    page = p.sign_in()
    while not held:
        page.wait_for_timeout(20)
    page.fill("#q", "kafka consumer lag")
    held[0].continue_()  # the options land inside the typing's debounce
    page.wait_for_function("() => document.querySelector('#f-mode').options.length > 1")
    assert page.input_value("#q") == "kafka consumer lag"
    page.wait_for_function("q => document.querySelector('#results').dataset.answered === q",
                           arg="kafka consumer lag")
    assert "Kafka consumer lag" in page.locator("#hit-0 h3").inner_text()


@pytest.fixture
def small(tmp_path, hybrid_home):
    """A two-note vault with the hash embedder (the page's logic, not ranking quality)."""
    root = tmp_path / "notes"
    write(root, "a.md", "# Alpha\n\nThe alpha note talks about gardening.\n")
    write(root, "b.md", "---\ntags: [kitchen]\n---\n# Bravo\n\nBravo is about bread baking.\n")
    h = hybrid.open(hybrid_home, embedder="hash:64")
    h.add_vault(root, "notes")
    h.index()
    yield h, root
    h.close()


def test_status_view_and_reindex_with_progress(small, open_page):
    h, root = small
    with app_server(h, owner_key=OWNER) as url:
        page = open_page(url).sign_in()
        page.click("#nav-status")
        card = page.locator(".vault[data-vault='notes']")
        card.wait_for()
        text = card.inner_text()
        assert "2 notes" in text and "hash:64" in text and "exact (flat" in text and "not watching" in text
        write(root, "c.md", "# Charlie\n\nCharlie keeps bees.\n")
        page.click("#nav-status")  # fresh status: the new file shows as a change on disk
        card.locator("text=1 new").wait_for()
        card.locator("button.reindex").click()
        card.locator(".job").locator("text=Re-indexed: 1 added").wait_for()
        card.locator("text=3 notes").wait_for()
        assert card.locator("button.reindex").is_enabled()
        page.click("#nav-search")
        search(page, "bees")
        assert "Charlie" in page.locator("#hit-0 h3").inner_text()


def test_status_view_lists_the_files_of_a_vault(small, open_page):
    h, root = small
    write(root, "c.md", "# Charlie\n\nCharlie keeps bees.\n")
    write(root, "photo.psd", "not a note")
    with app_server(h, owner_key=OWNER) as url:
        p = open_page(url)
        page = p.sign_in()
        page.click("#nav-status")
        card = page.locator(".vault[data-vault='notes']")
        card.locator("button.list-files").click()
        table = card.locator(".files table")
        table.wait_for()
        assert "4 files: 2 indexed, 1 pending, 0 skipped, 0 failed, 1 excluded" in card.locator(".files").inner_text()
        rows = {r.locator("td.path").inner_text(): r.locator("td").first.inner_text()
                for r in table.locator("tbody tr").all()}
        assert rows == {"a.md": "indexed", "b.md": "indexed", "c.md": "pending", "photo.psd": "excluded"}
        card.locator(".files select").select_option("pending")
        page.wait_for_function("() => document.querySelectorAll('.files tbody tr').length === 1")
        assert table.locator("td.path").inner_text() == "c.md"
        assert not p.errors


def test_token_sign_in_form_and_cookie(small, open_page):
    h, _ = small
    with app_server(h, token="tok-123", owner_key=OWNER) as url:
        p = open_page(url)
        page = p.page
        page.goto(url + "/")
        page.locator("#signin-form").wait_for()
        assert page.is_hidden("#search-view")
        page.fill("#token", "wrong")
        page.click("#signin-form button[type=submit]")
        page.locator("#signin-error", has_text="wrong token").wait_for()
        page.fill("#token", "tok-123")
        page.click("#signin-form button[type=submit]")
        page.wait_for_selector("#search-view:not([hidden])")
        cookie = next(c for c in p.context.cookies() if c["name"].startswith("hybrid_session_"))
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and "tok-123" not in cookie["value"]
        search(page, "bread")
        assert "Bravo" in page.locator("#hit-0 h3").inner_text()
        page.click("#signout")
        page.locator("#signin-form").wait_for()
        assert page.evaluate("fetch('/ui/api/status').then(r => r.status)") == 401


def test_a_used_sign_in_link_says_so(small, open_page):
    h, _ = small
    with app_server(h, owner_key=OWNER) as url:
        p = open_page(url)
        p.sign_in()
        link = p.page.url
        other = open_page(url).page
        other.goto(url + "/ui/login?ticket=used-or-made-up")
        other.locator("#signin-expired").wait_for()
        assert other.is_hidden("#search-view") and link.endswith("/")


def test_note_text_cannot_run_script(tmp_path, hybrid_home, open_page):
    """Titles, headings, text and tags are data: shown as text, never markup."""
    root = tmp_path / "notes"
    evil = '<img src=x onerror="window.pwned=1">'
    write(root, "evil.md", f"---\ntitle: '{evil}'\ntags: [x]\n---\n# {evil} heading\n\n"
          f"<script>window.pwned=2</script> payload words here\n")
    h = hybrid.open(hybrid_home, embedder="hash:64")
    h.add_vault(root, "notes")
    h.index()
    with app_server(h, owner_key=OWNER) as url:
        p = open_page(url)
        page = p.sign_in()
        search(page, "payload words")
        hit = page.locator("#hit-0")
        assert evil in hit.locator("h3").inner_text()
        hit.locator("h3 button").click()
        hit.locator(".section pre").wait_for()
        assert "<script>window.pwned=2</script>" in hit.locator(".section pre").inner_text()
        assert page.evaluate("typeof window.pwned") == "undefined"
        assert page.locator("#results img, #results script").count() == 0
    h.close()


def test_phone_width(sample_server, open_page):
    page = open_page(sample_server, viewport={"width": 375, "height": 780}, is_mobile=True, has_touch=True).sign_in()
    assert page.evaluate("document.querySelector('#filters-box').open") is False  # results first
    search(page, "sourdough starter")
    assert page.locator("#results .hit").count() > 0
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    box = page.locator("#hit-0").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 375
    page.locator("#filters-box summary").click()
    assert page.is_visible("#f-tag")


def test_pdf_hits_show_their_page(tmp_path, hybrid_home, open_page):
    from helpers import write_pdf
    root = tmp_path / "docs"
    root.mkdir()
    write_pdf(root / "manual.pdf", ["Intro page about nothing in particular.",
                                    "The calibration procedure needs the torque wrench."])
    write(root, "note.md", "# Note\n\nA markdown note about wrenches.\n")
    h = hybrid.open(hybrid_home, embedder="hash:64")
    h.add_vault(root, "docs")
    h.index()
    with app_server(h, owner_key=OWNER) as url:
        page = open_page(url).sign_in()
        page.select_option("#f-source", "pdf")
        search(page, "calibration torque")
        hit = page.locator("#hit-0")
        assert hit.locator(".cite code").inner_text() == "docs:manual.pdf#page=2"
        assert "pdf · p. 2" in hit.locator(".chips .kind").inner_text()
        kinds = page.locator("#results .hit .chips .kind").all_inner_texts()
        assert kinds and all(k.startswith("pdf") for k in kinds)  # the markdown note is filtered out
        hit.locator("h3 button").click()
        assert "torque wrench" in hit.locator(".section .in-hit").first.inner_text() or \
            "torque wrench" in hit.locator(".section pre").inner_text()
    h.close()


def test_search_page_works_offline_from_package_data(sample_server):
    """Everything the page loads comes from this server: no CDN, no other origin."""
    html = urllib.request.urlopen(sample_server + "/").read().decode()
    refs = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert refs and all(r.startswith("/ui/static/") or r.startswith("#") for r in refs), refs
    for name in ("app.js", "app.css", "icon.svg"):
        assert (Path(hybrid.__file__).parent / "faces" / "ui" / "static" / name).exists()
