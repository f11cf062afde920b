"""The MCP tools as a client sees them, through a real MCP client session (in memory): the
server's version, each tool's annotations, numeric bounds in the schemas taken from the search
request's definition, and get_note's cut: the lines actually returned and where to read on."""
import anyio
import pytest
from helpers import write
from mcp import Client

import hybrid
from hybrid.core.version import version
from hybrid.faces.mcp import MAX_NOTE_CHARS, build_server
from hybrid.retrieval.request import OPTIONS

LINES = ["# Long note", ""] + [f"line {i:02d} of the long note, some words to fill it" for i in range(3, 61)]


@pytest.fixture(scope="module")
def h(tmp_path_factory):
    root = tmp_path_factory.mktemp("mcp-tools")
    write(root / "v", "long.md", "\n".join(LINES) + "\n")
    write(root / "v", "wide.md", "# Wide\n\n" + "w" * 500 + "\nafter\n")
    write(root / "home", "config.toml", '[settings]\nembedder = "hash:64"\nproposals_folder = "inbox"\n')
    handle = hybrid.open(root / "home")
    handle.add_vault(root / "v", "v")
    handle.index()
    yield handle
    handle.close()


def session(h, work):
    async def main():
        async with Client(build_server(h)) as c:
            return await work(c)
    return anyio.run(main)


def test_server_version_annotations_and_bounds(h):
    async def work(c):
        return c.server_info, {t.name: t for t in (await c.list_tools()).tools}
    info, tools = session(h, work)
    assert info.name == "hybrid" and info.version == version()
    for name in ("search", "get_note", "list_vaults"):
        a = tools[name].annotations
        assert a.read_only_hint is True and a.idempotent_hint is True and a.open_world_hint is False, name
    a = tools["propose_note"].annotations  # writes a new file into the vault on every call
    assert a.read_only_hint is False and a.destructive_hint is False and a.idempotent_hint is False
    props = tools["search"].input_schema["properties"]
    for opt in OPTIONS:
        if opt.agent and opt.low is not None:
            assert props[opt.agent]["minimum"] == opt.low
            assert props[opt.agent]["maximum"] == (opt.agent_high or opt.high)
    assert (props["top_k"]["minimum"], props["top_k"]["maximum"]) == (1, 50)
    assert (props["min_score"]["minimum"], props["min_score"]["maximum"]) == (0, 1)
    note = tools["get_note"].input_schema["properties"]
    assert note["max_chars"]["maximum"] == MAX_NOTE_CHARS and note["start_line"]["minimum"] == 1


def test_the_readme_and_agents_doc_name_every_tool(h):
    """The README's "Agents get N tools: ..." and docs/agents.md's list are the server's tools
    (the README said four while there were six)."""
    import re

    from helpers import REPO

    async def work(c):
        return {t.name for t in (await c.list_tools()).tools}
    tools = session(h, work)
    readme = (REPO / "README.md").read_text()
    m = re.search(r"Agents get (\w+) tools:(.*?)\.\s", readme, re.S)
    assert m, "README: the sentence 'Agents get N tools: ...' is gone"
    words = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}
    assert m.group(1) == words[len(tools)] and set(re.findall(r"`(\w+)`", m.group(2))) == tools
    agents = (REPO / "docs" / "agents.md").read_text()
    assert all(f"- `{t}(" in agents for t in tools), [t for t in tools if f"- `{t}(" not in agents]


def test_out_of_range_values_are_refused_naming_the_fix(h):
    async def work(c):
        return (await c.call_tool("search", {"query": "long", "top_k": 51}),
                await c.call_tool("get_note", {"path": "long.md", "max_chars": 0}))
    top_k, max_chars = session(h, work)
    assert top_k.is_error and "top_k must be between 1 and 50 (got 51)" in top_k.content[0].text
    assert max_chars.is_error and f"max_chars must be between 1 and {MAX_NOTE_CHARS}" in max_chars.content[0].text


def test_get_note_reports_the_lines_it_returned_and_how_to_read_on(h):
    async def work(c):
        first = await c.call_tool("get_note", {"path": "long.md", "max_chars": 300})
        rest = [first]
        while rest[-1].structured_content["next"]:
            rest.append(await c.call_tool("get_note", {"path": rest[-1].structured_content["next"],
                                                       "max_chars": 300}))
        return rest
    parts = session(h, work)
    first = parts[0].structured_content
    shown = first["text"].split("\n")
    assert len(first["text"]) <= 300 and first["truncated"] and first["start_line"] == 1
    assert shown == LINES[:first["end_line"]]  # whole lines, and the range says which
    assert first["citation"] == f"v:long.md:1-{first['end_line']}"
    assert first["next"] == f"v:long.md:{first['end_line'] + 1}-{len(LINES)}"
    header = parts[0].content[0].text.split("\n")[0]
    assert header.startswith(f"v:long.md:1-{first['end_line']} (of {len(LINES)} lines)")
    assert f"read on with path 'v:long.md:{first['end_line'] + 1}-{len(LINES)}'" in header
    # reading on part by part returns the note whole, each line once
    assert sum((p.structured_content["text"].split("\n") for p in parts), []) == LINES
    assert not parts[-1].structured_content["next"] and parts[-1].structured_content["end_line"] == len(LINES)


def test_a_range_asked_for_is_read_on_within_it_and_a_long_line_is_said_to_be_cut(h):
    async def work(c):
        return (await c.call_tool("get_note", {"path": "long.md", "start_line": 10, "end_line": 20,
                                               "max_chars": 120}),
                await c.call_tool("get_note", {"path": "wide.md", "max_chars": 100}),
                await c.call_tool("get_note", {"path": "long.md", "start_line": 5, "end_line": 6}))
    ranged, wide, whole = session(h, work)
    r = ranged.structured_content
    assert r["start_line"] == 10 and r["end_line"] == 11 and r["next"] == "v:long.md:12-20"
    w = wide.structured_content  # the lines before the long one
    assert w["text"] == "# Wide\n" and w["end_line"] == 2 and w["next"] == "v:wide.md:3-4"
    # not even the first line fits: it is cut, and that is said
    w = session(h, lambda c: c.call_tool("get_note", {"path": "wide.md:3", "max_chars": 100})).structured_content
    assert w["line_cut"] and w["text"] == "w" * 100 and (w["start_line"], w["end_line"]) == (3, 3)
    assert whole.structured_content["truncated"] is False and whole.structured_content["next"] is None


LONE = "\ud800"  # an unpaired surrogate: what JSON's "\ud800" decodes to, and no UTF-8 text holds


@pytest.mark.parametrize("tool,args,name", [
    ("search", {"query": LONE}, "query"), ("search", {"query": "long", "folder": "x" + LONE}, "folder"),
    ("get_note", {"path": LONE}, "path"), ("get_note", {"path": f"[[{LONE}]]"}, "path"),
    ("get_note", {"path": "long", "vault": LONE}, "vault"), ("related", {"note": LONE}, "note"),
    ("propose_tags", {"path": "long", "tags": ["ok", LONE]}, "tags[1]"),
    ("propose_tags", {"path": LONE, "tags": ["ok"]}, "path")])
def test_an_unpaired_surrogate_is_a_tool_error_naming_the_argument(h, tool, args, name):
    async def work(c):
        return await c.call_tool(tool, args)
    res = session(h, work)
    assert res.is_error
    text = res.content[0].text
    assert f"{name} is not valid text" in text and "internal error" not in text and "\n" not in text


@pytest.mark.parametrize("exc", ["store", "remote", "model"])
def test_errors_naming_a_server_tell_agents_one_plain_line(exc):
    """A store that is down and a model server nobody confirmed name their host in the owner's
    line; an agent is told that something is unavailable, never where (issue #47)."""
    from hybrid.app.remote import RemoteNotConfirmed
    from hybrid.core.errors import ModelUnavailable, StoreUnavailable
    from hybrid.faces.mcp import told_agent
    err = {"store": StoreUnavailable("cannot reach the PostgreSQL server at db.internal:5432 (user kb)"),
           "remote": RemoteNotConfirmed("text would be sent to http://10.1.2.3:8000/v1 (embeddings), which "
                                        "you have not confirmed"),
           "model": ModelUnavailable("ollama at http://10.1.2.3:11434 answered 500")}[exc]
    line = told_agent(err, "test")
    assert "10.1.2.3" not in line and "db.internal" not in line and "unavailable" in line


def test_the_python_api_refuses_a_reference_that_is_not_text(tmp_path):
    """``h.get`` and ``h.related`` of a lone surrogate: one line, not a UnicodeEncodeError."""
    from helpers import indexed_vault

    from hybrid.retrieval.limits import BadSearchArgs
    h = indexed_vault(tmp_path, {"a.md": "# A\n\ntext\n"})
    try:
        for call in (lambda: h.get("\ud800"), lambda: h.related("a\udc80")):
            with pytest.raises(BadSearchArgs, match="the note reference is not valid text"):
                call()
    finally:
        h.close()
