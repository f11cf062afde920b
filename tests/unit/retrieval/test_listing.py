"""A query of filters alone (`tag:recipes`, `folder:work`) lists the notes passing them, newest
modified first, one hit per note; through the CLI, the API, the agent view and MCP."""
import datetime as dt
import json
import os

import anyio
import pytest
from click.testing import CliRunner
from helpers import ALL_STORES, write
from mcp import Client
from mcp_types import Implementation

from hybrid.core.errors import QuerySyntaxError
from hybrid.faces.cli.main import main
from hybrid.faces.mcp import build_server
from hybrid.retrieval.filters import NoMatchingNotes

STORES = ALL_STORES  # tests that use `store_kind` run against both stores

DAY = 86400
NOTES = {
    "recipes/pasta.md": ("---\ntags: [recipes]\n---\n# Pasta\n\nBoil the water.\n\n## Sauce\n\nTomatoes.\n", 5),
    "recipes/soup.md": ("---\ntags: [recipes/soup]\n---\n# Soup\n\nA nested tag counts.\n", 1),
    "journal/monday.md": ("# Monday\n\nCooked something #recipes today.\n", 3),
    "travel.md": ("---\ntags: [travel]\n---\n# Travel\n\nTrains.\n", 0),
    "recipes/secret.md": ("---\ntags: [recipes]\nprivate: true\n---\n# Family secret\n\nGrandma's way.\n", 2),
    "recipes/empty.md": ("---\ntags: [recipes]\n---\n", 4),  # nothing to index: nothing to cite
}


def make_vault(root, notes=NOTES, now=1_750_000_000):
    for rel, (text, age_days) in notes.items():
        p = write(root, rel, text)
        os.utime(p, (now - age_days * DAY, now - age_days * DAY))
    return root


@pytest.fixture
def home(tmp_path, monkeypatch, open_h):
    make_vault(tmp_path / "vault")
    h = open_h(tmp_path / "home", embedder="hash:64")
    h.add_vault(tmp_path / "vault", "v")
    h.index()
    monkeypatch.setenv("HYBRID_HOME", str(tmp_path / "home"))
    (tmp_path / "home" / "config.toml").write_text(
        '[settings]\nembedder = "hash:64"\n\n' + (tmp_path / "home" / "config.toml").read_text())
    yield h
    h.close()


def cli(*args):
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_tag_alone_lists_the_notes_carrying_it_newest_first(home):
    notes = json.loads(cli("query", "tag:recipes", "--json"))
    assert all(len(n["passages"]) == 1 for n in notes)  # a listing: one passage per note, the whole note
    hits = [n["passages"][0] for n in notes]
    assert [h["path"] for h in hits] == ["recipes/soup.md", "recipes/secret.md", "journal/monday.md",
                                         "recipes/pasta.md"]
    pasta = hits[-1]
    assert pasta["title"] == "Pasta" and pasta["tags"] == ["recipes"] and pasta["heading_path"] == []
    assert pasta["citation"] == f"v:recipes/pasta.md:{pasta['start_line']}-{pasta['end_line']}"
    assert pasta["end_line"] >= 9  # the whole note, not its first chunk only
    when = dt.datetime.fromtimestamp(1_750_000_000 - 5 * DAY).isoformat(timespec="seconds")
    assert pasta["modified"] == when  # the file's mtime (no frontmatter date)
    out = cli("query", "tag:recipes", "-n", "2")
    assert "v:recipes/soup.md:" in out and "v:recipes/secret.md:" in out and "pasta" not in out
    # the note's text reads back by its citation
    assert "Tomatoes" in home.get(pasta["citation"]).text


def test_folder_alone_and_combined_filters(home):
    assert [h.path for h in home.search("folder:recipes")] == ["recipes/soup.md", "recipes/secret.md",
                                                               "recipes/pasta.md"]
    assert [h.path for h in home.search("tag:recipes folder:journal")] == ["journal/monday.md"]
    assert [h.path for h in home.search("tag:recipes", exclude_folders=["recipes"])] == ["journal/monday.md"]
    # request filters with no text at all (`--tag` with no words, the API's tags=)
    assert [h.path for h in home.search("", tags=["recipes/soup"])] == ["recipes/soup.md"]
    assert [h.path for h in home.search("  ", folders=["journal"])] == ["journal/monday.md"]
    with pytest.raises(NoMatchingNotes, match="no note carries tag 'recipe'.*recipes"):
        home.search("tag:recipe")


def test_agents_never_see_a_hidden_note_listed(home, tmp_path):
    paths = [h.path for h in home.search("tag:recipes", agent=True, top_k=50)]
    assert paths == ["recipes/soup.md", "journal/monday.md", "recipes/pasta.md"]

    def call(args):
        async def run():
            async with Client(build_server(home), client_info=Implementation(name="t", version="1")) as c:
                return await c.call_tool("search", args)
        return anyio.run(run)

    for args in ({"query": "tag:recipes"}, {"query": "", "tags": ["recipes"]}):
        res = call(args)
        assert not res.is_error, res.content
        assert [x["path"] for x in res.structured_content["notes"]] == paths
        assert "secret" not in json.dumps(res.structured_content).lower() and "Grandma" not in res.content[0].text
    assert call({"query": "  "}).is_error  # no words and no filter: still an error


def test_exclusions_alone_are_still_an_error(home):
    for q in ("-pasta", "-pasta tag:recipes"):
        with pytest.raises(QuerySyntaxError, match="only exclusions"):
            home.search(q)
    result = CliRunner().invoke(main, ["query", "--", "-pasta", "tag:recipes"])
    assert result.exit_code == 1 and "only exclusions" in result.output


def test_listing_spans_vaults(home, tmp_path):
    other = make_vault(tmp_path / "other", {"cake.md": ("---\ntags: [recipes]\n---\n# Cake\n\nFlour.\n", 2.5)})
    home.add_vault(other, "o")
    home.index(["o"])
    hits = home.search("tag:recipes")
    assert [(h.vault, h.path) for h in hits] == [("v", "recipes/soup.md"), ("v", "recipes/secret.md"),
                                                 ("o", "cake.md"), ("v", "journal/monday.md"),
                                                 ("v", "recipes/pasta.md")]
    assert [h.path for h in home.search("tag:recipes", vaults=["o"])] == ["cake.md"]
