"""A folder, tag or date filter that matches no note says so, with the names near it, instead
of returning nothing; suggestions never name what an agent may not see."""
import json

import anyio
import pytest
from conftest import store_settings
from helpers import indexed_vault
from mcp import Client

from hybrid.faces.mcp import build_server
from hybrid.retrieval.filters import NoMatchingNotes

NOTES = {
    "en/Obsidian Publish/Custom domains.md": "# Custom domains\n\n#publish\n\nPoint a CNAME at publish.\n",
    "en/Obsidian Sync/Selective sync.md": "# Selective sync\n\n#sync\n\nChoose the folders to sync.\n",
    "home-lab/networking.md": "# Networking\n\n#home-lab/networking\n\nTailscale subnet router.\n",
    "journal/2026-01-03.md": "# Jan 3\n\n#diary\n\nA quiet day.\n",
}


@pytest.fixture(scope="module")
def h(tmp_path_factory, new_store):
    handle = indexed_vault(tmp_path_factory.mktemp("filters"), NOTES, agent_exclude=["journal"],
                           **store_settings(new_store()))
    yield handle
    handle.close()


@pytest.mark.parametrize("options, message", [
    ({"folders": ["Publish"]}, "no note is in folder 'Publish'; folders near it: en/Obsidian Publish"),
    ({"folders": ["en/Obsidian Pubilsh"]},
     "no note is in folder 'en/Obsidian Pubilsh'; folders near it: en/Obsidian Publish"),
    ({"tags": ["netwrking"]}, "no note carries tag 'netwrking'; tags near it: home-lab/networking"),
    ({"since": "2099-01-01"}, "no note was modified since 2099-01-01 (the newest was modified"),
    ({"folders": ["home-lab"], "tags": ["publish"]}, "no note matches all of: folder home-lab; tag publish"),
])
def test_a_filter_that_matches_nothing_says_what_is_near(h, options, message):
    with pytest.raises(NoMatchingNotes) as exc:
        h.search("anything", **options)
    assert str(exc.value).startswith(message)


def test_filters_that_match_search_as_before(h):
    hits = h.search("subnet router", folders=["home-lab"], mode="lexical")
    assert [x.path for x in hits] == ["home-lab/networking.md"]
    assert h.search("zzzz-nothing-has-this", folders=["home-lab"], mode="lexical") == []  # matches notes, no hit


def test_agents_are_not_told_about_hidden_folders_or_tags(h):
    with pytest.raises(NoMatchingNotes) as exc:
        h.search("day", folders=["jounral"], agent=True)
    assert "journal" not in str(exc.value)
    with pytest.raises(NoMatchingNotes) as exc:
        h.search("day", folders=["journal"], agent=True)  # exists, but not for an agent
    assert str(exc.value).startswith("no note is in folder 'journal'") and "journal/" not in str(exc.value)
    with pytest.raises(NoMatchingNotes) as exc:
        h.search("day", tags=["diar"], agent=True)
    assert "diary" not in str(exc.value)
    assert "journal" in str(pytest.raises(NoMatchingNotes, h.search, "day", folders=["jounral"]).value)  # owner


def test_mcp_search_says_so_too(h):
    async def main():
        async with Client(build_server(h)) as c:
            return await c.call_tool("search", {"query": "domains", "folder": "Publish"})
    res = anyio.run(main)
    assert res.is_error and "folders near it: en/Obsidian Publish" in res.content[0].text


def test_cli_search_alias_exclude_and_the_slow_query_hint(h, monkeypatch):
    from click.testing import CliRunner

    from hybrid.faces.cli import support as cli_support
    from hybrid.faces.cli.main import main
    home = h.config.path.parent
    monkeypatch.setenv("HYBRID_HOME", str(home))
    cfg = home / "config.toml"
    if "[settings]" not in cfg.read_text():  # the CLI reads the file: give it the test's embedder
        cfg.write_text('[settings]\nembedder = "hash:64"\nagent_exclude = ["journal"]\n\n' + cfg.read_text())
    run = CliRunner().invoke
    a = run(main, ["query", "sync folders domains", "--json", "-n", "5"])
    b = run(main, ["search", "sync folders domains", "--json", "-n", "5"])
    assert a.exit_code == 0 and json.loads(a.output) == json.loads(b.output)  # an alias
    c = run(main, ["search", "sync folders domains", "--json", "-n", "5", "--exclude", "en/Obsidian Sync"])
    assert json.loads(c.output) and not any(x["path"].startswith("en/Obsidian Sync/") for x in json.loads(c.output))
    monkeypatch.setattr(cli_support, "SLOW_QUERY_S", 0.0)  # every query counts as slow
    first = run(main, ["search", "sync", "--local"])
    again = run(main, ["search", "sync", "--local"])
    assert "hybrid serve --http --watch" in first.stderr and "hint:" not in again.stderr  # said once
    bad = run(main, ["search", "x", "--folder", "Publish"])
    assert bad.exit_code == 1 and "folders near it: en/Obsidian Publish" in bad.stderr
