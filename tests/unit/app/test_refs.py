"""References that round-trip: every citation, URI, title, path without .md and Obsidian link a
user or agent has in hand reads the note (``hybrid get``, ``Hybrid.get``, MCP ``get_note``)."""
import anyio
import pytest
from click.testing import CliRunner
from conftest import store_settings
from helpers import indexed_vault
from mcp import Client

import hybrid
from hybrid.app.refs import Ref, block_lines, parse_ref, section_lines
from hybrid.core.errors import PathRefused, VaultError
from hybrid.faces.cli.main import main
from hybrid.faces.mcp import build_server

NET = """---
aliases: [LAN setup]
---
# Home network

Intro about the zebra router.

## Tailscale

The subnet router advertises 10.0.0.0/24.

### Exit node

Exit through the pi.

## DNS

```
## not a heading: inside a fence
```

| host | ip |
|---|---|
| pi | 10.0.0.2 |
^dns-table

Pi-hole answers every query. ^pihole
"""
NOTES = {
    "home-lab/networking.md": NET,
    "home-lab/backups.md": "# Backups\n\nRestic to the NAS every night, zebra.\n",
    "work/Backups.md": "# Backups\n\nWork backups go to S3.\n",
    "journal/secret day.md": "---\nprivate: true\n---\n# Secret day\n\nzebra at the clinic\n",
    "journal/Quiet.md": "# Quiet\n\nnothing private here, zebra\n",
}


@pytest.fixture(scope="module")
def h(tmp_path_factory, new_store):
    handle = indexed_vault(tmp_path_factory.mktemp("refs"), NOTES, "home", **store_settings(new_store()))
    yield handle
    handle.close()


def lines_of(rel, a, b):
    return "\n".join(NOTES[rel].split("\n")[a - 1:b])


@pytest.mark.parametrize("text, want", [
    ("a/b.md", Ref("a/b.md")),
    ("a/b.md:12-40", Ref("a/b.md", start=12, end=40)),
    ("a/b.md:7", Ref("a/b.md", start=7, end=7)),
    ("home:a/b.md:12-40", Ref("a/b.md", vault="home", start=12, end=40)),
    ("other:a/b.md", Ref("other:a/b.md")),  # not a registered vault: part of the path
    ("[[Home network#Tailscale]]", Ref("Home network", heading=["Tailscale"])),
    ("![[Home network#Tailscale#Exit node|exits]]", Ref("Home network", heading=["Tailscale", "Exit node"])),
    ("networking#^pihole", Ref("networking", block="pihole")),
    ("obsidian://open?vault=vault&file=home-lab%2Fnetworking", Ref("home-lab/networking", vault_folder="vault")),
])
def test_parse_ref(text, want):
    assert parse_ref(text, {"home"}) == want


def test_sections_and_blocks_are_found_in_the_text():
    lines = NET.split("\n")
    assert section_lines(lines, ["tailscale"]) == (8, 15)         # down to the next ## heading
    assert section_lines(lines, ["Tailscale", "Exit node"]) == (12, 15)
    assert section_lines(lines, ["not a heading: inside a fence"]) is None
    assert block_lines(lines, "dns-table") == (22, 25)             # the table above the id line
    assert block_lines(lines, "pihole") == (27, 27)


def test_every_search_hit_round_trips(h):
    hits = h.search("zebra router backups", top_k=10)
    assert len(hits) >= 3
    for hit in hits:
        for ref in (hit.citation, hit.uri, f"{hit.path}:{hit.start_line}-{hit.end_line}"):
            note = h.get(ref)
            assert note.path == hit.path, ref
            if ref != hit.uri:
                assert (note.start_line, note.end_line) == (hit.start_line, hit.end_line), ref
                assert note.text == lines_of(hit.path, hit.start_line, hit.end_line)


@pytest.mark.parametrize("ref, path, span", [
    ("home-lab/networking", "home-lab/networking.md", None),
    ("Home network", "home-lab/networking.md", None),                 # the title
    ("networking", "home-lab/networking.md", None),                   # the file name
    ("lan setup", "home-lab/networking.md", None),                    # an alias, any case
    ("home-lab/Backups", "home-lab/backups.md", None),                # a path, case-insensitively matched
    ("[[Home network#Tailscale]]", "home-lab/networking.md", (8, 15)),
    ("networking#DNS", "home-lab/networking.md", (16, 27)),
    ("[[networking#^pihole]]", "home-lab/networking.md", (27, 27)),
    ("home:networking#Tailscale#Exit node", "home-lab/networking.md", (12, 15)),
])
def test_titles_paths_and_links_resolve(h, ref, path, span):
    note = h.get(ref)
    assert note.path == path
    if span:
        assert (note.start_line, note.end_line) == span
        assert note.text == lines_of(path, *span)


def test_ambiguous_and_missing_names_say_what_to_do(h):
    with pytest.raises(PathRefused, match="names 2 notes.*home-lab/backups.md, work/Backups.md"):
        h.get("Backups")
    with pytest.raises(PathRefused, match="no heading 'Firewall'.*its headings: Home network, Tailscale"):
        h.get("networking#Firewall")
    with pytest.raises(PathRefused, match="home:nope.md|'nope.md'"):
        h.get("home:nope.md")


def test_agents_resolve_only_what_they_may_see(h):
    missing = str(pytest.raises(PathRefused, h.get, "No such title", agent=True).value)
    for ref in ("Secret day", "secret day", "journal/secret day", "[[Secret day#Secret day]]"):
        refused = str(pytest.raises(PathRefused, h.get, ref, agent=True).value)
        assert refused.replace(repr(ref.strip("[]").split("#")[0]), "X") \
            == missing.replace(repr("No such title"), "X"), ref
    assert h.get("Secret day").path == "journal/secret day.md"   # the owner
    assert h.get("Quiet", agent=True).path == "journal/Quiet.md"


def test_cli_get_takes_the_citation_query_prints(h, monkeypatch):
    monkeypatch.setenv("HYBRID_HOME", str(h.config.path.parent))
    hit = h.search("subnet router advertises", top_k=1)[0]
    out = CliRunner().invoke(main, ["get", hit.citation])
    assert out.exit_code == 0, out.output
    assert out.output.rstrip("\n") == lines_of(hit.path, hit.start_line, hit.end_line)
    out = CliRunner().invoke(main, ["get", "[[Home network#Exit node]]"])
    assert out.exit_code == 0 and out.output.startswith("### Exit node")


def test_mcp_get_note_takes_citations_and_links_and_names_its_own_arguments(h, tmp_path):
    hit = h.search("subnet router advertises", top_k=1)[0]

    async def call(handle, args):
        async with Client(build_server(handle)) as c:
            return await c.call_tool("get_note", args)
    res = anyio.run(call, h, {"path": hit.citation})
    assert not res.is_error and res.structured_content["start_line"] == hit.start_line
    res = anyio.run(call, h, {"path": "[[Home network#DNS]]"})
    assert res.structured_content["start_line"] == 16
    # two vaults and none named: the error names the MCP argument, the CLI's its flag
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.md").write_text("# X\n")
    h2 = hybrid.open(h.config.path.parent, embedder="hash:64")
    h2.add_vault(other, "other")
    try:
        res = anyio.run(call, h2, {"path": "networking"})
        assert res.is_error and "the `vault` argument" in res.content[0].text and "--vault" not in res.content[0].text
        with pytest.raises(VaultError, match="--vault"):
            h2.get("networking")
        assert h2.get("home:networking").path == "home-lab/networking.md"  # the citation names it
    finally:
        h2.remove_vault("other")
        h2.close()


def test_a_heading_padded_with_spaces_is_read_as_the_chunker_reads_it():
    """refs reads headings with the chunker's rule (chunk.HEADING_RE + notes.heading_text): a
    heading line padded with thousands of spaces is parsed in linear time (the lazy regex it
    replaced backtracked cubically on it: ~1 min at 4,000 spaces), closing #s dropped."""
    from hybrid.app.refs import heading_of
    padded = "# a" + " " * 20_000 + "x"
    lines = [padded, "body", "## Sub ##", "text", "```", "## in a fence", "```"]
    assert heading_of(padded) == (1, "a" + " " * 20_000 + "x")
    assert heading_of("## Sub ##") == (2, "Sub") and heading_of("#nospace") is None
    assert section_lines(lines, ["Sub"]) == (3, 7)
    assert section_lines(lines, ["in a fence"]) is None
