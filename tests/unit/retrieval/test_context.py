"""Context around the hits (hybrid.retrieval.context): the note's heading tree read from the
ledger, one token budget for the whole answer, nothing sent twice, exact line ranges; and the
one definition of the ``context`` option in every door. Hash embedder: these are logic tests."""
import json

import anyio
import pytest
from click.testing import CliRunner
from helpers import ALL_STORES, write
from mcp import Client
from mcp_types import Implementation

from hybrid.core.tokens import count_tokens
from hybrid.faces.cli.main import main
from hybrid.faces.mcp import build_server
from hybrid.retrieval.context import Layout
from hybrid.retrieval.context_blocks import Context
from hybrid.retrieval.limits import MAX_CONTEXT_TOKENS, BadSearchArgs
from hybrid.retrieval.request import SearchRequest
from hybrid.store.base import ChunkRow

STORES = ALL_STORES

GUIDE = """# Guide

The guide's intro says what the zorbulator is for.

## Install

Download the installer.

Run it twice.

## Configure

### Keys

The zorbulator key goes in settings.

### Colours

Pick a colour scheme.

## Uninstall

Drag it to the bin.
"""


def lines_of(text: str, first: int, last: int) -> str:
    return "\n".join(text.split("\n")[first - 1:last])


@pytest.fixture
def guide(tmp_path, open_h):
    v = tmp_path / "vault"
    write(v, "guide.md", GUIDE)
    write(v, "flat.md", "No headings at all, one short zorbulator remark.\n")
    write(v, "other.md", "# Other\n\nNothing about that here.\n")
    h = open_h(tmp_path / "home", embedder="hash:64", chunk_tokens=16)
    h.add_vault(v, "v")
    h.index()
    yield h, v
    h.close()


def test_the_hit_comes_with_its_section_and_parent_intro_cited_exactly(guide):
    h, v = guide
    r = h.search("zorbulator key settings", mode="lexical", context=400)
    assert r[0].path == "guide.md" and "key goes in settings" in r[0].text
    note = next(n for n in r.context.notes if n.path == "guide.md")
    text = "\n".join(b.text for b in note.blocks)
    assert "The guide's intro says" in text and "### Keys" in text  # the hit's section and the note's intro
    for b in note.blocks:  # every block is exactly its lines of the file, as indexed
        assert b.text == lines_of(GUIDE, b.start_line, b.end_line)
        assert b.tokens == sum(count_tokens(x) + 1 for x in b.text.split("\n"))
    assert r.context.used == sum(b.tokens for n in r.context.notes for b in n.blocks) <= 400


def test_nothing_is_sent_twice_and_the_budget_holds(guide):
    h, _ = guide
    for budget in (1, 10, 40, 120, 2000):
        r = h.search("zorbulator", mode="lexical", passages=True, top_k=10, context=budget)
        assert r.context.used <= budget
        for n in r.context.notes:
            spans = sorted((b.start_line, b.end_line) for b in n.blocks)
            assert all(a[1] + 1 < b[0] for a, b in zip(spans, spans[1:])), spans  # disjoint, not touching
        assert len({(n.vault, n.path) for n in r.context.notes}) == len(r.context.notes)


def test_a_big_budget_returns_whole_small_notes_and_hits_of_one_chunk_alone(guide):
    h, _ = guide
    r = h.search("zorbulator remark", mode="lexical", context=MAX_CONTEXT_TOKENS)
    flat = next(n for n in r.context.notes if n.path == "flat.md")
    assert [(b.start_line, b.end_line, b.heading_path) for b in flat.blocks] == [(1, 1, [])]
    assert flat.blocks[0].hits == [next(x.citation for x in r if x.path == "flat.md")]


def test_context_off_is_the_plain_answer(guide):
    h, _ = guide
    plain, off = h.search("zorbulator", mode="lexical"), h.search("zorbulator", mode="lexical", context=0)
    assert off.context is None and "context" not in off.to_json()
    assert [x.citation for x in plain] == [x.citation for x in off]


def test_a_note_changed_on_disk_since_indexing_is_marked_and_served_as_indexed(guide):
    h, v = guide
    write(v, "guide.md", "# Guide\n\nRewritten: nothing left.\n")
    r = h.search("zorbulator key settings", mode="lexical", context=400)
    note = next(n for n in r.context.notes if n.path == "guide.md")
    assert note.changed and "key goes in settings" in "\n".join(b.text for b in note.blocks)


@pytest.mark.parametrize("bad", [-1, MAX_CONTEXT_TOKENS + 1, 2.5, True, "600", None])
def test_a_bad_budget_is_one_clear_line_from_the_one_definition(bad):
    with pytest.raises(BadSearchArgs, match=r"^context must be a whole number of tokens from 0"):
        SearchRequest("x", context=bad)
    with pytest.raises(BadSearchArgs, match="context must"):
        SearchRequest.from_json(json.dumps({"query": "x", "context": bad}))


def test_the_cli_takes_context_and_refuses_a_negative_one(guide, hybrid_home):
    h, _ = guide
    runner = CliRunner()
    bad = runner.invoke(main, ["query", "zorbulator", "--context", "-3", "--local"],
                        env={"HYBRID_HOME": str(h.config.path.parent)})
    assert bad.exit_code == 2 and "--context" in bad.output
    ok = runner.invoke(main, ["query", "zorbulator", "--context", "300", "--local", "--mode", "lexical", "--json"],
                       env={"HYBRID_HOME": str(h.config.path.parent)})
    assert ok.exit_code == 0, ok.output
    data = json.loads(ok.stdout)
    assert data["context"]["used"] <= 300 and data["notes"][0]["path"] in {n["path"] for n in data["context"]["notes"]}
    text = runner.invoke(main, ["query", "zorbulator", "--context", "300", "--local", "--mode", "lexical"],
                         env={"HYBRID_HOME": str(h.config.path.parent)})
    assert "context:" in text.stdout and "v:guide.md:" in text.stdout


def test_a_server_answer_carries_the_context_back():
    ctx = Context.from_dict({"budget": 50, "used": 3, "notes": [
        {"vault": "v", "path": "a.md", "title": "A", "changed": False,
         "blocks": [{"start_line": 2, "end_line": 2, "heading_path": ["A"], "text": "x y", "tokens": 3,
                     "hits": ["v:a.md:2-2"]}]}]})
    assert ctx is not None and ctx.notes[0].citations() == ["v:a.md:2-2"] and ctx.used == 3
    assert Context.from_dict("nonsense") is None and Context.from_dict({"notes": [{"path": 1}]}) is None


# --- agents: the view and redaction apply to context exactly as to hits ----------------------
def mcp_search(h, args):
    async def run():
        async with Client(build_server(h), client_info=Implementation(name="probe", version="1")) as c:
            return await c.call_tool("search", args)
    return anyio.run(run)


SECRET = "password: falconorbit77"


def test_an_agent_never_gets_a_hidden_notes_text_or_a_secret_through_context(tmp_path, open_h):
    v = tmp_path / "vault"
    write(v, "router.md", f"# Router\n\nThe quokka router admin login.\n\n{SECRET}\n\n## Reset\n\n"
                          "Hold the quokka button.\n")
    write(v, "diary.md", "---\nprivate: true\n---\n# Diary\n\nquokka diary: the zyxwv plan.\n")
    h = open_h(tmp_path / "home", embedder="hash:64", chunk_tokens=16)
    h.add_vault(v, "v")
    h.index()
    owner = h.search("quokka", mode="lexical", context=2000)
    assert "falconorbit77" in owner.context.text and "zyxwv" in owner.context.text
    res = mcp_search(h, {"query": "quokka", "context": 2000})
    assert not res.is_error, res.content[0].text
    blob = json.dumps(res.structured_content) + res.content[0].text
    assert "falconorbit77" not in blob and "zyxwv" not in blob and "diary.md" not in blob
    ctx = res.structured_content["context"]
    sent = "\n".join(b["text"] for n in ctx["notes"] for b in n["blocks"])
    assert "Hold the quokka button" in sent and "[redacted secret]" in sent and ctx["used"] <= 2000
    assert {n["path"] for n in ctx["notes"]} == {"router.md"}
    bad = mcp_search(h, {"query": "quokka", "context": -1})
    assert bad.is_error
    h.close()


# --- the layout, on rows made by hand -------------------------------------------------------
def row(i, heading, first, last, text):
    return ChunkRow(i, "n.md", "N", heading, first, last, text, [], [], 0.0, "", file_id=1)


def test_steps_go_from_the_hit_to_its_neighbours_section_start_parent_and_siblings():
    rows = [row(1, "", 1, 3, "# N\n\nintro"),
            row(2, "N > A", 5, 7, "## A\n\na1"), row(3, "N > A", 9, 9, "a2"), row(4, "N > A", 11, 11, "a3"),
            row(5, "N > B", 13, 15, "## B\n\nb1")]
    layout = Layout(rows)
    steps = layout.steps(1, 2)  # a3, the third chunk of section A
    assert steps[0] == [11]
    assert steps[1] == [10, 9]          # the chunk above, nearest line first (the blank line between too)
    assert steps[2] == [5, 6, 7]        # the section's start (nothing below a3 in A)
    assert steps[3] == [1, 2, 3]        # the parent's intro
    assert [13, 14, 15] in steps[4:]    # the sibling section
    assert Layout.blocks(layout, {9, 10, 11, 5, 6, 7}) == [(5, 7), (9, 11)]


def test_a_line_the_chunker_cut_is_joined_back():
    layout = Layout([row(1, "", 1, 1, "first half"), row(2, "", 1, 1, "second half")])
    assert layout.lines[1] == "first half second half"
