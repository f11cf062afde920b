"""Backlinks and resolved links in ``get`` (hybrid.app.links): the Python API, ``hybrid get``
(text, --links, --json) and MCP ``get_note``, for the owner and for an agent, who must never
learn of a note it may not see, whichever way the link points. Real tantivy / FAISS / SQLite
(and PostgreSQL for the privacy test); the hash embedder stands in for the model."""

from __future__ import annotations

import json

import anyio
import pytest
from click.testing import CliRunner
from helpers import ALL_STORES, indexed_vault, write
from mcp import Client
from mcp_types import Implementation

from hybrid.core.errors import PathRefused
from hybrid.faces.mcp import build_server

STORES = ALL_STORES

NOTES = {
    "index.md": "# Index\n\n```\n[[Garden]]\n```\nStart at [[Garden]] and [[Missing note]].\nAlso [[index]] itself.\n",
    "garden.md": "# Garden\n\nTomatoes.\n\nBack to [[Index|the start]]; see [[Diary]] too.\n",
    "work/bikes.md": "---\nup: \"[[index]]\"\n---\n# Bikes\n\nOil the chain ([garden](../garden.md)).\n",
    "lonely.md": "# Lonely\n\nNo links here, only [[Nowhere]].\n",
    "private/diary.md": "---\nprivate: true\n---\n# Diary\n\nWorked in the [[Garden]] today.\n",
}


@pytest.fixture
def vault(tmp_path, open_h):
    h = indexed_vault(tmp_path, NOTES, opener=open_h)
    yield h, tmp_path / "vault"
    h.close()


def paths(notes):
    return [n.path for n in notes]


def call(h, tool, args):
    async def main():
        async with Client(build_server(h), client_info=Implementation(name="probe", version="1")) as c:
            return await c.call_tool(tool, args)
    return anyio.run(main)


@pytest.mark.local_only
def test_backlinks_with_their_line_and_links_resolved(vault):
    h, _ = vault
    note = h.get("Garden")
    # a cycle (index <-> garden) is listed both ways; a markdown link counts; by path
    assert paths(note.backlinks) == ["index.md", "private/diary.md", "work/bikes.md"]
    first = note.backlinks[0]
    # the first line holding a link, not the example in the code block above it
    assert (first.line, first.text) == (6, "Start at [[Garden]] and [[Missing note]].")
    assert note.backlinks[2].line == 6 and "../garden.md" in note.backlinks[2].text
    assert paths(note.links) == ["index.md", "private/diary.md"]  # [[Index|the start]] by its name
    assert (note.backlinks_total, note.links_total) == (3, 2)


@pytest.mark.local_only
def test_self_links_missing_targets_and_front_block_links(vault):
    h, _ = vault
    index = h.get("index.md")
    assert paths(index.links) == ["garden.md"]  # [[index]] (itself) and [[Missing note]] are not notes
    assert paths(index.backlinks) == ["garden.md", "work/bikes.md"]
    bikes = next(b for b in index.backlinks if b.path == "work/bikes.md")
    assert bikes.line == 2 and bikes.text == 'up: "[[index]]"'  # the link in its front block
    lonely = h.get("lonely")
    assert lonely.backlinks == [] and lonely.links == []
    assert (lonely.backlinks_total, lonely.links_total) == (0, 0)
    with pytest.raises(PathRefused):
        h.get("no such note")


@pytest.mark.local_only
def test_a_note_not_indexed_has_no_links_to_report(vault):
    h, root = vault
    write(root, "new.md", "# New\n\nSee [[Garden]].\n")
    note = h.get("new.md")
    assert note.backlinks is None and note.links is None
    assert "new.md" not in paths(h.get("garden.md").backlinks)  # nor is it a backlink yet
    assert h.get("garden.md", links=False).backlinks is None


def test_an_agent_sees_no_link_to_or_from_a_hidden_note(vault):
    h, root = vault
    garden = h.get("garden.md", agent=True)
    assert paths(garden.backlinks) == ["index.md", "work/bikes.md"]  # not the private diary
    assert paths(garden.links) == ["index.md"]  # nor that it links there
    assert (garden.backlinks_total, garden.links_total) == (2, 1)
    # a note made private on disk since it was indexed is left out before the next index run
    write(root, "index.md", "---\nprivate: true\n---\n" + NOTES["index.md"])
    garden = h.get("garden.md", agent=True)
    assert paths(garden.backlinks) == ["work/bikes.md"] and garden.links == []
    assert paths(h.get("garden.md").backlinks) == ["index.md", "private/diary.md", "work/bikes.md"]
    res = call(h, "get_note", {"path": "garden.md"})
    assert not res.is_error
    shown = res.content[-1].text  # the links part (the note's own text says [[Diary]])
    assert shown == "linked from 1 note:\n  work/bikes.md:6  Oil the chain ([garden](../garden.md)).\nlinks to no note"
    assert [b["path"] for b in res.structured_content["backlinks"]] == ["work/bikes.md"]


@pytest.mark.local_only
def test_get_note_lists_the_links_for_an_agent(vault):
    h, _ = vault
    res = call(h, "get_note", {"path": "index.md"})
    assert not res.is_error
    data = res.structured_content
    assert [b["path"] for b in data["backlinks"]] == ["garden.md", "work/bikes.md"]
    assert data["backlinks"][0]["line"] == 5 and [n["path"] for n in data["links"]] == ["garden.md"]
    assert "linked from 2 notes:" in res.content[-1].text and "garden.md:5" in res.content[-1].text


@pytest.mark.local_only
def test_cli_get_prints_the_links_on_request_and_the_note_alone_otherwise(vault, monkeypatch):
    from hybrid.faces.cli.main import main
    h, _ = vault
    monkeypatch.setenv("HYBRID_HOME", str(h.config.path.parent))
    run = CliRunner().invoke(main, ["get", "garden.md"])
    assert run.exit_code == 0, run.output
    assert run.output == NOTES["garden.md"]  # the note alone, as before
    run = CliRunner().invoke(main, ["get", "garden.md", "--links"])
    assert run.exit_code == 0, run.output
    assert run.stdout.splitlines()[:2] == ["linked from 3 notes:",
                                           "  index.md:6  Start at [[Garden]] and [[Missing note]]."]
    assert "links to 2 notes:" in run.stdout and "  private/diary.md" in run.stdout
    run = CliRunner().invoke(main, ["get", "lonely.md", "--links"])
    assert run.stdout == "linked from no note\nlinks to no note\n"
    data = json.loads(CliRunner().invoke(main, ["get", "garden.md", "--json", "--as-agent"]).stdout)
    assert [b["path"] for b in data["backlinks"]] == ["index.md", "work/bikes.md"]
    assert data["backlinks"][0] == {"path": "index.md", "title": "Index", "line": 6,
                                    "text": "Start at [[Garden]] and [[Missing note]]."}
