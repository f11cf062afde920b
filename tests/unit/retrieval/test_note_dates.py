"""A note's own date (frontmatter ``updated``/``modified``/``lastmod``, else ``date``/``created``)
rules ``since``, the recency prior and "newest first"; the file's mtime only where it has none.
After a clone every file shares one mtime: the tests give two notes the same one."""
import datetime as dt
import json
import os
import time

import pytest
from click.testing import CliRunner
from helpers import ALL_STORES, set_chunking_version, write

from hybrid.core.dates import date_source, note_date, note_date_value
from hybrid.faces.cli.main import main

STORES = ALL_STORES  # tests that use `store_kind` run against both stores

CLONED = 1_700_000_000  # 2023-11-14: the moment a clone gave both dated notes


def local(day: str) -> float:
    return dt.datetime.fromisoformat(day).timestamp()


def make_vault(root):
    a = write(root, "a.md", "---\ncreated: 2020-01-15\n---\n# Alpha\n\nsourdough starter notes\n")
    b = write(root, "b.md", "---\ndate: 2024-06-01 09:30\n---\n# Beta\n\nsourdough loaf notes\n")
    c = write(root, "c.md", "---\ncreated: '{{date}}'\n---\n# Gamma\n\nsourdough crumb notes\n")
    for p in (a, b):
        os.utime(p, (CLONED, CLONED))
    os.utime(c, (local("2022-03-01"), local("2022-03-01")))
    return root


@pytest.fixture
def home(tmp_path, open_h, monkeypatch):
    make_vault(tmp_path / "vault")
    h = open_h(tmp_path / "home", embedder="hash:64")
    h.add_vault(tmp_path / "vault", "v")
    report = h.index()[0]
    assert report.added == 3 and not report.error
    yield h
    h.close()


def test_newest_first_follows_the_frontmatter_then_the_mtime(home):
    out = home.search("since:2000-01-01")  # filters alone: the notes passing them, newest first
    assert [h.path for h in out] == ["b.md", "c.md", "a.md"]  # 2024, 2022 (mtime), 2020
    got = {h.path: (h.modified[:10], h.date_source) for h in out}
    assert got == {"a.md": ("2020-01-15", "frontmatter:created"),
                   "b.md": ("2024-06-01", "frontmatter:date"),
                   "c.md": ("2022-03-01", "mtime")}  # a template placeholder is no date


@pytest.mark.parametrize("mode", ["lexical", "vector", "hybrid"])
def test_since_filters_by_the_notes_own_date_in_every_arm(home, mode):
    hits = home.search("sourdough notes", mode=mode, since=local("2021-01-01"), top_k=10)
    assert {h.path for h in hits} == {"b.md", "c.md"}  # a.md's mtime passes, its created does not
    hits = home.search("sourdough notes", mode=mode, since=local("2023-01-01"), top_k=10)
    assert {h.path for h in hits} == {"b.md"}  # c.md falls back to its mtime (2022)


def test_recency_prior_reads_the_notes_own_date(tmp_path, open_h):
    root = tmp_path / "vault"
    recent = (dt.date.today() - dt.timedelta(days=10)).isoformat()
    write(root, "old.md", "---\ncreated: 2019-05-01\n---\n# Old\n\ncompost compost bins\n")
    write(root, "new.md", f"---\ndate: {recent}\n---\n# New\n\ncompost bins\n")
    h = open_h(tmp_path / "home", embedder="hash:64")
    h.add_vault(root, "v")
    h.index()
    assert h.search("compost", mode="lexical")[0].path == "old.md"  # more mentions
    h2 = open_h(tmp_path / "home", embedder="hash:64", recency_months=12, recency_penalty=0.5)
    hits = h2.search("compost", mode="lexical")
    assert hits[0].path == "new.md"  # both files are fresh on disk: the frontmatter decides
    assert {x.path: x.recency_penalty for x in hits} == {"new.md": None, "old.md": 0.5}


def test_json_and_explain_say_where_the_date_came_from(home, tmp_path, monkeypatch):
    monkeypatch.setenv("HYBRID_HOME", str(tmp_path / "home"))
    config = tmp_path / "home" / "config.toml"
    config.write_text('[settings]\nembedder = "hash:64"\n\n' + config.read_text())
    runner = CliRunner()
    out = runner.invoke(main, ["query", "sourdough", "--json", "--passages", "--local"])
    assert out.exit_code == 0, out.output
    sources = {h["path"]: h["date_source"] for h in json.loads(out.output)}
    assert sources == {"a.md": "frontmatter:created", "b.md": "frontmatter:date", "c.md": "mtime"}
    out = runner.invoke(main, ["query", "sourdough", "--explain", "--local", "--passages"])
    assert out.exit_code == 0, out.output
    assert "dated 2020-01-15 (frontmatter created)" in out.output
    assert "dated 2022-03-01 (file mtime)" in out.output


# --- the parsing, pure ---------------------------------------------------------------------
def test_common_forms_parse_and_bad_ones_are_passed_over():
    midnight = local("2024-03-05")
    for text in ("2024-03-05", "2024/03/05", "2024.3.5", " 2024-03-05 "):
        assert note_date_value(text) == midnight, text
    assert note_date_value("2024-03-05 14:30") == local("2024-03-05T14:30")
    utc = dt.datetime(2024, 3, 5, 14, 30, tzinfo=dt.UTC)
    assert note_date_value("2024-03-05T14:30:00Z") == utc.timestamp()
    assert note_date_value(dt.date(2024, 3, 5)) == midnight
    for bad in ("{{date}}", "0000-00-00", "2024-02-30", "soon", "", 20240305, None, "2024-03-05Tlater"):
        assert note_date_value(bad) is None, bad
    bad: list[str] = []
    assert note_date({"Updated": "soon", "created": "2024-03-05"}, bad) == (midnight, "created")
    assert bad == ["updated"]
    # "last changed" comes before "written"
    assert note_date({"created": "2020-01-01", "modified": "2024-03-05"}) == (midnight, "modified")
    assert note_date({"title": "x"}) is None


def test_date_source_names_mtime_when_the_stored_date_is_not_the_frontmatters():
    props = {"created": "2024-03-05"}
    assert date_source(props, local("2024-03-05")) == "frontmatter:created"
    assert date_source(props, time.time()) == "mtime"  # indexed before `created` was read
    assert date_source({}, time.time()) == "mtime"


def test_an_index_of_the_previous_version_is_read_again_without_re_embedding(home):
    """Indexes made before the note dates (chunking version 4) re-read each note once on the
    next run to pick them up; no text is embedded again."""
    set_chunking_version(home.config.vault("v"), 4)
    assert home.status()[0].changes.changed == 3  # what the next run will do
    report = home.index()[0]
    assert (report.updated, report.chunks_embedded) == (3, 0)
    assert [h.path for h in home.search("since:2000-01-01")] == ["b.md", "c.md", "a.md"]
