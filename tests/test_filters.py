"""A folder, tag or date filter that matches no note says so, with the names near it, instead
of returning nothing; suggestions never name what an agent may not see."""
import anyio
import pytest
from helpers import indexed_vault
from mcp import Client

from hybrid.filters import NoMatchingNotes
from hybrid.mcp_server import build_server

NOTES = {
    "en/Obsidian Publish/Custom domains.md": "# Custom domains\n\n#publish\n\nPoint a CNAME at publish.\n",
    "en/Obsidian Sync/Selective sync.md": "# Selective sync\n\n#sync\n\nChoose the folders to sync.\n",
    "home-lab/networking.md": "# Networking\n\n#home-lab/networking\n\nTailscale subnet router.\n",
    "journal/2026-01-03.md": "# Jan 3\n\n#diary\n\nA quiet day.\n",
}


@pytest.fixture(scope="module")
def h(tmp_path_factory):
    handle = indexed_vault(tmp_path_factory.mktemp("filters"), NOTES, agent_exclude=["journal"])
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
