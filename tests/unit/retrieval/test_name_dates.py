"""A note without a frontmatter date takes the date its file name holds (a daily note's
``2025-01-03.md``, or the format the vault's daily-notes or Periodic Notes plugin is set to) for
``since``, the recency prior and "newest first"; frontmatter still wins, and names that only look
like dates (``1984.md``, ``2023 goals.md``) keep the mtime. Real files, real indexes, both stores."""
import datetime as dt
import json
import os

import pytest
from click.testing import CliRunner
from helpers import ALL_STORES, set_chunking_version, write

from hybrid.core.dates import NameDates, date_source, name_pattern
from hybrid.faces.cli.main import main
from hybrid.sources.daily import name_dates

STORES = ALL_STORES

CLONED = 1_700_000_000  # 2023-11-14: a clone gave every file this mtime


def local(day: str) -> float:
    return dt.datetime.fromisoformat(day).timestamp()


def make_vault(root):
    write(root, "daily/2021-03-04.md", "# Thursday\n\nplanted the basil seedlings\n")
    write(root, "journal/2022_05_06.md", "# Log\n\nwatered the basil\n")
    write(root, "2020-01-02 Thursday.md", "basil pesto recipe\n")
    write(root, "dated/2019-07-08.md", "---\ncreated: 2024-02-01\n---\nbasil harvest\n")  # frontmatter wins
    write(root, "1984.md", "# Orwell\n\nbasil in the ministry garden\n")
    write(root, "2023 goals.md", "# Goals\n\ngrow more basil\n")
    write(root, "2021-02-30.md", "basil on a day that never was\n")
    write(root, "de/05.06.2018.md", "basil in German\n")  # the vault's own format (set below)
    for p in root.rglob("*.md"):
        os.utime(p, (CLONED, CLONED))
    return root


@pytest.fixture
def home(tmp_path, open_h):
    make_vault(tmp_path / "vault")
    h = open_h(tmp_path / "home", embedder="hash:64")
    h.add_vault(tmp_path / "vault", "v")
    report = h.index()[0]
    assert report.added == 8 and not report.error and not report.warnings
    yield h
    h.close()


def dates(h) -> dict[str, tuple[str, str]]:
    return {x.path: (x.modified[:10], x.date_source) for x in h.search("since:1900-01-01", top_k=50)}


CLONED_DAY = dt.datetime.fromtimestamp(CLONED).date().isoformat()
EXPECTED = {
    "dated/2019-07-08.md": ("2024-02-01", "frontmatter:created"),
    "daily/2021-03-04.md": ("2021-03-04", "name"),
    "journal/2022_05_06.md": ("2022-05-06", "name"),
    "2020-01-02 Thursday.md": ("2020-01-02", "name"),
    "1984.md": (CLONED_DAY, "mtime"),
    "2023 goals.md": (CLONED_DAY, "mtime"),
    "2021-02-30.md": (CLONED_DAY, "mtime"),
    "de/05.06.2018.md": (CLONED_DAY, "mtime"),  # not the vault's format yet
}


def test_newest_first_and_since_read_the_names_date(home, store_kind):
    out = home.search("since:1900-01-01", top_k=50)
    assert {x.path: (x.modified[:10], x.date_source) for x in out} == EXPECTED
    assert [x.path for x in out][:1] == ["dated/2019-07-08.md"]  # 2024 (its frontmatter)
    order = [x.path for x in out if x.date_source == "name"]
    assert order == ["journal/2022_05_06.md", "daily/2021-03-04.md", "2020-01-02 Thursday.md"]
    for mode in ("lexical", "vector", "hybrid"):
        hits = home.search("basil", mode=mode, since=local("2021-01-01"), top_k=50)
        got = {x.path for x in hits}
        assert {"daily/2021-03-04.md", "journal/2022_05_06.md", "dated/2019-07-08.md"} <= got, mode
        assert "2020-01-02 Thursday.md" not in got, mode
        hits = home.search("basil", mode=mode, since=local("2024-01-01"), top_k=50)
        assert "daily/2021-03-04.md" not in {x.path for x in hits}, mode


def test_the_vaults_daily_notes_format_counts_and_changing_it_re_reads(home, tmp_path):
    vault = tmp_path / "vault"
    write(vault, ".obsidian/daily-notes.json", json.dumps({"format": "DD.MM.YYYY", "folder": "de"}))
    assert home.status()[0].changes.changed == 8  # the next run reads every note again
    report = home.index()[0]
    assert (report.updated, report.chunks_embedded) == (8, 0)
    assert dates(home) == {**EXPECTED, "de/05.06.2018.md": ("2018-06-05", "name")}
    assert home.status()[0].changes.up_to_date


def test_periodic_notes_daily_format_counts(tmp_path, open_h):
    root = tmp_path / "vault"
    write(root, "Journal/2024/March/Friday, March 1st 2024.md", "basil\n")
    write(root, ".obsidian/plugins/periodic-notes/data.json", json.dumps(
        {"daily": {"enabled": True, "format": "YYYY/MMMM/dddd, MMMM Do YYYY", "folder": "Journal"},
         "weekly": {"enabled": True, "format": "gggg-[W]ww"}}))
    h = open_h(tmp_path / "home", embedder="hash:64")
    h.add_vault(root, "v")
    h.index()
    assert dates(h) == {"Journal/2024/March/Friday, March 1st 2024.md": ("2024-03-01", "name")}
    h.close()


def test_an_index_built_before_picks_the_name_dates_up_on_the_next_run(home, tmp_path):
    """An index of chunking version 8 (before name dates) stored the mtime: the next run
    reads each note again (nothing embedded) and stores the name's date."""
    vault = home.config.vault("v")
    set_chunking_version(vault, 8)
    assert home.status()[0].changes.changed == 8
    report = home.index()[0]
    assert (report.updated, report.chunks_embedded) == (8, 0)
    assert dates(home) == EXPECTED


def test_explain_and_json_say_the_date_came_from_the_name(home, tmp_path, monkeypatch, store_kind):
    monkeypatch.setenv("HYBRID_HOME", str(tmp_path / "home"))
    config = tmp_path / "home" / "config.toml"
    config.write_text('[settings]\nembedder = "hash:64"\n\n' + config.read_text())
    out = CliRunner().invoke(main, ["query", "seedlings", "--json", "--passages", "--local"])
    assert out.exit_code == 0, out.output
    assert {h["path"]: h["date_source"] for h in json.loads(out.output)}["daily/2021-03-04.md"] == "name"
    out = CliRunner().invoke(main, ["query", "seedlings", "--explain", "--local", "--passages"])
    assert "dated 2021-03-04 (file name)" in out.output, out.output


# --- the parsing, pure ---------------------------------------------------------------------
def test_default_names_are_strict():
    n = NameDates()
    day = local("2025-01-03")
    for good in ("2025-01-03.md", "a/b/2025-01-03.md", "2025-01-03 Friday.md", "2025-01-03, fri.md",
                 "2025_01_03.md", "2025-01-03.MD"):
        assert n.date(good) == day, good
    for bad in ("1984.md", "2023 goals.md", "2025-01-03 Meeting.md", "2025-01-03.txt", "2025-1-3.md",
                "20250103.md", "2025-13-01.md", "2025-02-29.md", "x2025-01-03.md", "2025-01-03x.md",
                "2025-W01.md", "2025-01.md", "9999-12-31 Friday night.md", "0000-01-03.md"):
        assert n.date(bad) is None, bad


def test_moment_formats():
    day = local("2025-01-03")
    cases = {"DD.MM.YYYY": "03.01.2025", "YYYY/MM/DD": "2025/01/03", "D MMM YY": "3 Jan 25",
             "dddd, MMMM Do YYYY": "Freitag, January 3rd 2025", "[Daily] YYYY-MM-DD": "Daily 2025-01-03",
             "YYYY/MM-MMMM/YYYY-MM-DD-dddd": "2025/01-January/2025-01-03-Friday", "YYYYMMDD": "20250103"}
    for fmt, name in cases.items():
        assert NameDates((fmt,)).date(f"notes/{name}.md") == day, fmt
    # formats naming no day are no dates (a weekly note, a month), nor is a broken one
    for fmt in ("gggg-[W]ww", "YYYY-MM", "MMMM YYYY", "", "x" * 200, None):
        assert name_pattern(fmt) is None, fmt  # type: ignore[arg-type]
    assert NameDates(("gggg-[W]ww",)).fingerprint == []
    # a folder format needs its folders: a bare name is not enough
    assert NameDates(("YYYY/MM/DD",)).date("03.md") is None
    # month names in another language give no date (the number cannot be known)
    assert NameDates(("D MMMM YYYY",)).date("3 Januar 2025.md") is None


def test_date_source_names_the_name():
    n = NameDates()
    assert date_source({}, local("2025-01-03"), "2025-01-03.md", n) == "name"
    assert date_source({}, local("2025-01-04"), "2025-01-03.md", n) == "mtime"
    assert date_source({"created": "2024-01-01"}, local("2024-01-01"), "2025-01-03.md", n) == "frontmatter:created"


def test_plugin_settings_that_cannot_be_read_leave_the_defaults(tmp_path):
    write(tmp_path, ".obsidian/daily-notes.json", "{not json")
    write(tmp_path, ".obsidian/plugins/periodic-notes/data.json", json.dumps({"daily": {"enabled": False,
                                                                                       "format": "DD.MM.YYYY"}}))
    assert name_dates(tmp_path).formats == ()
    write(tmp_path, ".obsidian/daily-notes.json", json.dumps({"format": "DD.MM.YYYY"}))
    os.utime(tmp_path / ".obsidian/daily-notes.json", (CLONED + 5, CLONED + 5))
    assert name_dates(tmp_path).formats == ("DD.MM.YYYY",)
    write(tmp_path, ".obsidian/daily-notes.json", json.dumps({}))  # the plugin's default: YYYY-MM-DD
    assert name_dates(tmp_path).formats == ()
