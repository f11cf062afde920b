"""Sources that are not folders of notes, end to end: a browser's bookmarks export (its pages
fetched once, on request, from a local HTTP server) and a Slack export, registered with
``add_source`` / ``hybrid source add``, indexed incrementally, searched with ``source``
filters, read back with ``get``, and removed without a trace."""
import json
import threading
import zipfile
from http.server import BaseHTTPRequestHandler

import pytest
from helpers import ALL_STORES, hybrid_cmd, local_server, write

import hybrid
from hybrid.core.errors import VaultError

STORES = ALL_STORES  # sources work on both stores (tests that use `open_h`)

ARTICLE = ("<html><head><title>Consensus</title></head><body><nav>Subscribe now</nav><article>"
           "<h1>Leader election</h1>" + "<p>Split brain happens when two nodes both believe they "
           "lead; a quorum of majority votes and monotonically increasing terms stop it.</p>" * 3
           + "</article></body></html>")


class Pages(BaseHTTPRequestHandler):
    hits: dict[str, int] = {}
    lock = threading.Lock()

    def do_GET(self):
        with self.lock:
            self.hits[self.path] = self.hits.get(self.path, 0) + 1
        if self.path == "/consensus":
            body = ARTICLE.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    def log_message(self, *args):
        pass


def bookmarks_html(base: str, extra: str = "") -> str:
    return f"""<!DOCTYPE NETSCAPE-Bookmark-file-1>
<META HTTP-EQUIV="Content-Type" CONTENT="text/html; charset=UTF-8">
<TITLE>Bookmarks</TITLE>
<H1>Bookmarks</H1>
<DL><p>
    <DT><H3>Reading</H3>
    <DL><p>
        <DT><H3>Distributed</H3>
        <DL><p>
            <DT><A HREF="{base}/consensus" ADD_DATE="1700000000" TAGS="raft,consensus">Raft notes</A>
            <DT><A HREF="{base}/gone" ADD_DATE="1700000100">Vector clocks primer</A>
        </DL><p>
    </DL><p>
    <DT><A HREF="{base}/recipes" ADD_DATE="1710000000">Sourdough starter guide</A>
    {extra}
</DL><p>
"""


@pytest.fixture
def server():
    Pages.hits = {}
    with local_server(Pages) as srv:
        yield srv


@pytest.fixture
def reading(tmp_path, server, open_h):
    export = write(tmp_path, "bookmarks.html", bookmarks_html(server.url))
    h = open_h(tmp_path / "home", embedder="hash:64", fetch_private=True)  # the server is on 127.0.0.1
    # the team default (the `store` setting) is for folders: a source goes to PostgreSQL when asked
    v = h.add_source("bookmarks", export, "reading", store=h.settings.store or None)
    assert (v.kind, v.name, v.store) == ("bookmarks", "reading", h.settings.store or None)
    return h, export


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_bookmarks_are_indexed_by_title_folder_tags_and_url_at_once(reading, server):
    h, export = reading
    report = h.index()[0]
    assert (report.added, report.skipped, report.fetched) == (3, 0, 0)
    assert Pages.hits == {}  # nothing goes online without --fetch
    top = h.search("raft", mode="lexical")[0]
    assert (top.source, top.title, top.url, top.uri) == ("bookmark", "Raft notes",
                                                          f"{server.url}/consensus", f"{server.url}/consensus")
    assert top.path == "Reading/Distributed/Raft notes.bookmark"
    assert top.tags == ["raft", "consensus"]
    assert h.search("distributed", mode="lexical", folders=["Reading"])[0].path.startswith("Reading/")
    assert {x.title for x in h.search("tag:consensus")} == {"Raft notes"}
    assert h.status()[0].sources == {"bookmark": 3} and h.status()[0].kind == "bookmarks"
    assert h.search("split brain quorum", mode="lexical") == []  # page text not fetched yet


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_fetch_once_on_request_failures_reported_and_kept_by_title(reading, server):
    h, export = reading
    h.index()
    report = h.index(fetch="new")[0]
    assert (report.fetched, report.fetch_failed, report.updated) == (1, 2, 1)
    failed = [w for w in report.warnings if "not fetched" in w]
    assert len(failed) == 2 and any(f"{server.url}/gone: not fetched (HTTP 404)" in w for w in failed)
    hit = h.search("split brain quorum majority", mode="lexical")[0]
    assert hit.title == "Raft notes" and hit.source == "bookmark"
    assert "Subscribe now" not in h.get(hit.citation).text  # main text only
    assert h.search("vector clocks", mode="lexical")[0].title == "Vector clocks primer"  # title-only entry
    assert Pages.hits["/consensus"] == 1
    # a fetched page is never fetched again unless asked; failed ones are tried again
    again = h.index(fetch="new")[0]
    assert Pages.hits["/consensus"] == 1 and Pages.hits["/gone"] == 2
    assert (again.fetched, again.fetch_failed, again.updated, again.unchanged) == (0, 2, 0, 3)
    plain = h.index()[0]
    assert plain.unchanged == 3 and Pages.hits["/gone"] == 2
    h.index(fetch="all")
    assert Pages.hits["/consensus"] == 2
    assert h.search("split brain", mode="lexical")[0].title == "Raft notes"  # kept through refetch


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_bookmark_removed_from_export_and_source_removed_leave_nothing(reading, server, tmp_path, store_kind):
    h, export = reading
    h.index(fetch="new")
    export.write_text(bookmarks_html(server.url).replace("Raft notes", "Raft paper"), encoding="utf-8")
    r = h.index()[0]
    assert (r.added, r.removed) == (1, 1)
    assert {x.title for x in h.search("raft", mode="lexical")} == {"Raft paper"}
    assert h.search("split brain", mode="lexical")[0].title == "Raft paper"  # its fetched text stays with the URL
    index_dir = h.config.vault("reading").index_dir
    assert index_dir.exists() == (store_kind != "postgresql")  # in PostgreSQL: nothing on this machine
    h.remove_vault("reading")
    assert not index_dir.exists() and export.exists()  # the export itself is never touched
    assert "reading" not in h.config.vaults


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_missing_or_emptied_export_keeps_the_index(reading, server):
    h, export = reading
    h.index()
    export.unlink()
    with pytest.raises(VaultError, match=r"bookmarks export .*bookmarks.html is missing; nothing was changed"):
        h.index()
    export.write_text("<!DOCTYPE NETSCAPE-Bookmark-file-1>\n<DL><p>\n</DL><p>\n", encoding="utf-8")
    with pytest.raises(VaultError, match="has no documents now, but the index has 3; nothing was removed"):
        h.index()
    export.write_text("not a bookmarks file", encoding="utf-8")
    with pytest.raises(VaultError, match="not a bookmarks export"):
        h.index()
    assert len(h.search("raft", mode="lexical")) == 1


def test_sources_are_checked_at_registration(tmp_path):
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    export = write(tmp_path, "b.html", bookmarks_html("http://127.0.0.1:9"))
    with pytest.raises(VaultError, match="does not exist"):
        h.add_source("slack", tmp_path / "nope.zip")
    with pytest.raises(VaultError, match="is not a file"):
        h.add_source("bookmarks", tmp_path)
    h.override(store="postgresql")  # the team-mode default applies to folders, not sources
    assert h.add_source("bookmarks", export).store is None


SLACK = {
    "users.json": [{"id": "U1", "name": "ana", "profile": {"display_name": "Ana"}},
                   {"id": "U2", "name": "bo", "profile": {"real_name": "Bo Lind"}}],
    "channels.json": [{"id": "C1", "name": "ops"}],
    "ops/2024-03-05.json": [
        {"type": "message", "user": "U1", "ts": "1709629200.000100", "thread_ts": "1709629200.000100",
         "reply_count": 1, "text": "Should we shard the orders table before Black Friday?"},
        {"type": "message", "user": "U2", "ts": "1709629500.000200", "thread_ts": "1709629200.000100",
         "text": "<@U1> yes, by customer id; hot partitions otherwise"},
    ],
    "ops/2024-03-06.json": [
        {"type": "message", "user": "U2", "ts": "1709715600.000100", "text": "Pager rotation moves to Bo"},
    ],
}


def write_slack(root, files=SLACK):
    for rel, content in files.items():
        write(root, rel, json.dumps(content))
    return root


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
@pytest.mark.parametrize("zipped", [False, True])
def test_slack_export_days_searchable_and_cited_by_channel_and_date(tmp_path, zipped, open_h):
    folder = write_slack(tmp_path / "export")
    path = folder
    if zipped:
        path = tmp_path / "acme.zip"
        with zipfile.ZipFile(path, "w") as z:
            for rel in SLACK:
                z.write(folder / rel, rel)
    h = open_h(tmp_path / "home", embedder="hash:64")
    assert h.add_source("slack", path, "acme", store=h.settings.store or None).store == (h.settings.store or None)
    r = h.index()[0]
    assert (r.added, r.skipped) == (2, 0)
    hit = h.search("shard orders customer", mode="lexical")[0]
    assert (hit.source, hit.path, hit.uri) == ("slack", "ops/2024-03-05.slack", "")
    assert hit.citation.startswith("acme:ops/2024-03-05.slack:")
    assert hit.title == "#ops 2024-03-05"
    text = h.get(hit.citation).text
    assert "Ana" in text and "Bo Lind" in text and "@Ana yes, by customer id" in text
    assert [x.path for x in h.search("pager", sources=["slack"], mode="lexical")] == ["ops/2024-03-06.slack"]
    assert h.search("since:2024-03-06 source:slack")[0].path == "ops/2024-03-06.slack"
    assert h.index()[0].unchanged == 2


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_slack_day_changed_reindexes_that_day_only(tmp_path, open_h):
    folder = write_slack(tmp_path / "export")
    h = open_h(tmp_path / "home", embedder="hash:64")
    h.add_source("slack", folder, "acme", store=h.settings.store or None)
    h.index()
    day = dict(SLACK)
    day["ops/2024-03-06.json"] = SLACK["ops/2024-03-06.json"] + [
        {"type": "message", "user": "U1", "ts": "1709719200.000100", "text": "Runbook for failover updated"}]
    write_slack(folder, {"ops/2024-03-06.json": day["ops/2024-03-06.json"]})
    r = h.index()[0]
    assert (r.updated, r.unchanged) == (1, 1)
    assert h.search("failover runbook", mode="lexical")[0].path == "ops/2024-03-06.slack"
    (folder / "ops/2024-03-05.json").write_text("{broken", encoding="utf-8")
    bad = h.index()[0]
    assert bad.skipped == 1 and any("ops/2024-03-05.slack" in w for w in bad.warnings)
    assert h.search("shard orders", mode="lexical")[0].path == "ops/2024-03-05.slack"  # kept


@pytest.mark.slow
def test_cli_source_add_index_fetch_and_query(tmp_path, server):
    home = tmp_path / "home"
    write(home, "config.toml", '[settings]\nembedder = "hash:64"\nfetch_private = true\n')
    export = write(tmp_path, "bookmarks.html", bookmarks_html(server.url))
    add = hybrid_cmd(home, "source", "add", "bookmarks", str(export), "--name", "reading")
    assert add.returncode == 0 and "registered bookmarks source 'reading'" in add.stderr
    idx = hybrid_cmd(home, "index", "--fetch")
    assert idx.returncode == 0, idx.stderr
    assert "reading: 3 added" in idx.stdout and "1 pages fetched, 2 failed" in idx.stdout
    q = hybrid_cmd(home, "query", "split brain quorum", "--source", "bookmark", "--json", "--local")
    hits = json.loads(q.stdout)[0]["passages"]
    assert hits[0]["url"] == f"{server.url}/consensus" and hits[0]["source"] == "bookmark"
    listed = hybrid_cmd(home, "source", "list")
    assert f"reading\tbookmarks\t{export}" in listed.stdout
    st = hybrid_cmd(home, "status")
    assert "reading: bookmarks source" in st.stdout and "documents: 3 bookmark" in st.stdout
    rm = hybrid_cmd(home, "source", "remove", "reading")
    assert rm.returncode == 0 and not (home / "data" / "vaults" / "reading").exists()
