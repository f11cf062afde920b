"""Frontmatter properties as filters (issue #33), on both stores: `status:done` equals, a list
property contains, `rating>=4` and `due<2026-01-01` compare, quoted values, combined with the
other filters and with words, alone as a listing; a property no note has, a value no note has and
a comparison of the wrong kind say so in one line with what is near; URLs and times stay words;
agents neither match nor are told of hidden notes' properties or of secret values; every door."""
import json

import anyio
import pytest
from conftest import store_settings
from helpers import indexed_vault
from mcp import Client
from secrets_fixtures import fake_secrets

from hybrid.core.errors import QuerySyntaxError
from hybrid.faces.mcp import build_server
from hybrid.retrieval.filters import NoMatchingNotes
from hybrid.retrieval.limits import BadSearchArgs
from hybrid.retrieval.query import parse_query
from hybrid.store.props import PropFilter, parse_prop, prop_rows

TOKEN = next(c["secret"] for c in fake_secrets() if c["name"] == "github-pat")
NOTES = {
    "work/alpha.md": "---\nstatus: done\ntype: meeting\nrating: 5\ndue: 2025-12-01\ntags: [work]\n---\n"
                     "# Alpha\n\nquarterly planning meeting notes\n",
    "work/beta.md": "---\nStatus: In Progress\ntype: [Meeting, review]\nrating: 3\ndue: 2026-02-01T09:30:00\n---\n"
                    "# Beta\n\nreview meeting of the design\n",
    "garden/gamma.md": "---\nstatus: open\nrating: \"4.5\"\nproject: \"[[Gamma Project|G]]\"\ndone: true\n"
                       "due: not a date\n---\n# Gamma\n\nplanning the garden beds\n",
    "garden/delta.md": "# Delta\n\nno properties here; the meeting is at 10:30, see http://example.com/x\n",
    "bad/front.md": "---\nstatus: [unclosed\n---\n# Broken\n\nmeeting with a broken front block\n",
    "ops/deploy.md": f"---\ntoken: {TOKEN}\nstatus: done\n---\n# Deploy\n\nthe deploy meeting runbook\n",
    "private/secret.md": "---\nclearance: top\nstatus: classified\nrating: 9\n---\n# Secret\n\nmeeting in the vault\n",
}


@pytest.fixture(scope="module")
def h(tmp_path_factory, new_store):
    handle = indexed_vault(tmp_path_factory.mktemp("props"), NOTES, agent_exclude=["private"],
                           **store_settings(new_store()))
    yield handle
    handle.close()


def paths(h, query="", **options):
    return sorted(x.path for x in h.search(query, mode="lexical", top_k=20, **options))


@pytest.mark.parametrize("query, expected", [
    ("status:done", ["ops/deploy.md", "work/alpha.md"]),                # equals, any case
    ("STATUS:Done", ["ops/deploy.md", "work/alpha.md"]),
    ("type:meeting", ["work/alpha.md", "work/beta.md"]),                # a list property contains it
    ("type:review", ["work/beta.md"]),
    ("rating>=4", ["garden/gamma.md", "private/secret.md", "work/alpha.md"]),  # "4.5" is a number too
    ("rating>4.5", ["private/secret.md", "work/alpha.md"]),
    ("rating<=3", ["work/beta.md"]),
    ("rating:5", ["work/alpha.md"]),
    ("due<2026-01-01", ["work/alpha.md"]),                               # a date
    ("due>=2026-02-01", ["work/beta.md"]),                               # a date and time, by its day
    ("due:2026-02-01", ["work/beta.md"]),
    ('status:"in progress"', ["work/beta.md"]),                          # a quoted value
    ("done:true", ["garden/gamma.md"]),                                  # a checkbox
    ("project:gamma", []),                                               # equals, not contains
    ('project:"Gamma Project"', ["garden/gamma.md"]),                    # a link is matched by its target
    ("prop:status=done", ["ops/deploy.md", "work/alpha.md"]),
    ("status:done tag:work", ["work/alpha.md"]),                         # with the other filters
    ("type:meeting folder:work rating<4", ["work/beta.md"]),
    ("status:done since:2000-01-01", ["ops/deploy.md", "work/alpha.md"]),
])
def test_property_filters_alone_list_the_notes_passing_them(h, query, expected):
    if expected:
        assert paths(h, query) == expected
    else:
        with pytest.raises(NoMatchingNotes):
            paths(h, query)


def test_with_words_the_filter_applies_inside_both_arms(h):
    assert paths(h, "meeting status:done") == ["ops/deploy.md", "work/alpha.md"]
    hybrid = {x.path for x in h.search("meeting rating>=4", top_k=20)}  # the vector arm finds gamma too
    assert {"private/secret.md", "work/alpha.md"} <= hybrid <= {"private/secret.md", "work/alpha.md", "garden/gamma.md"}
    vector = sorted(x.path for x in h.search("planning", mode="vector", props=["rating>4"], top_k=20))
    assert vector == ["garden/gamma.md", "private/secret.md", "work/alpha.md"]
    assert paths(h, "garden", props=["type:meeting"]) == []  # the filter holds: no note passes both
    listed = h.search("status:done")
    assert listed.parsed.listing and listed.parsed.props == [PropFilter("status", ":", "done")]


def test_the_option_takes_the_same_syntax_and_refuses_bad_input(h):
    assert paths(h, "", props=["rating>=4", "status:open"]) == ["garden/gamma.md"]
    assert parse_prop("due date < 2026-01-01") == PropFilter("due date", "<", "2026-01-01")
    for bad, says in [(["rating>=abc"], "compares numbers or dates"), (["status"], "write KEY:VALUE"),
                      (["status:"], "give a value"), ("status:done", "must be a list")]:
        with pytest.raises(BadSearchArgs, match=says):
            h.search("x", props=bad)


@pytest.mark.parametrize("query, message", [
    ("prop:colour=red", "no note has property 'colour'"),
    ("stauts:done meeting", "no note has property 'stauts'; properties near it: status "
                            '(to search for the words, quote them: "stauts:done")'),
    ("status:don", "no note has status 'don'; values near it: done"),
    ("rating<2026-01-01", "property 'rating' holds numbers, not dates: compare it with a number (rating>=4)"),
    ("due>=2030-01-01", "no note has due>=2030-01-01 (its dates run from 2025-12-01 to 2026-02-01)"),
    ("rating>100", "no note has rating>100 (its numbers run from 3 to 9)"),
])
def test_a_property_filter_that_matches_nothing_says_what_is_near(h, query, message):
    with pytest.raises(NoMatchingNotes) as exc:
        h.search(query)
    assert str(exc.value) == message and "\n" not in str(exc.value)


def test_a_comparison_that_cannot_be_made_is_refused_in_one_line(h):
    with pytest.raises(QuerySyntaxError, match="rating>=abc: >= compares numbers or dates"):
        h.search("rating>=abc")


def test_urls_times_and_unknown_keys_stay_words(h):
    for word in ["http://example.com/x", "10:30", "foo::bar", "C:\\Users\\x", "rl:global:checkout",
                 "b2:dana-homelab-backups:/atlas", "obsidian://open", "Note:", "a<b"]:
        q = parse_query(f"meeting {word}")
        assert q.terms == ["meeting", word] and not q.maybe_props and not q.props, word
    assert paths(h, '"10:30"') == ["garden/delta.md"]
    assert h.search("meeting 10:30", mode="lexical")[0].path == "garden/delta.md"
    assert "garden/delta.md" in paths(h, "http://example.com/x")
    assert paths(h, "re:invent meeting")  # no property re, none near: words, searched as ever
    assert h.search("Vec<String> meeting", mode="lexical").parsed.props == []


def test_agents_neither_match_nor_hear_of_hidden_properties_or_secret_values(h):
    assert "private/secret.md" in paths(h, "clearance:top")  # the owner
    with pytest.raises(NoMatchingNotes) as exc:
        h.search("prop:clearance=top", agent=True)
    assert str(exc.value) == "no note has property 'clearance'"
    assert h.search("clearance:top", agent=True, mode="lexical") == []  # a word for agents: no such property
    with pytest.raises(NoMatchingNotes) as exc:
        h.search("status:classifed", agent=True)
    assert "classified" not in str(exc.value)
    with pytest.raises(NoMatchingNotes) as exc:
        h.search("rating>8", agent=True)
    assert "9" not in str(exc.value)  # the hidden note's rating is not the top of the range
    assert sorted(x.path for x in h.search("rating>=4", agent=True, mode="lexical", top_k=20)) == \
        ["garden/gamma.md", "work/alpha.md"]
    # a value that is a secret never matches for an agent, so no filter can guess it
    assert paths(h, f"prop:token={TOKEN}") == ["ops/deploy.md"]
    with pytest.raises(NoMatchingNotes) as exc:
        h.search(f"prop:token={TOKEN}", agent=True)
    assert TOKEN not in str(exc.value)
    assert sorted(x.path for x in h.search("meeting status:done", agent=True, top_k=20)) == \
        ["ops/deploy.md", "work/alpha.md"]  # the note itself is visible: its other properties match


def test_every_door_takes_them(h, monkeypatch):
    from click.testing import CliRunner

    from hybrid.faces.cli.main import main
    from hybrid.faces.http import api_search_call

    async def mcp():
        async with Client(build_server(h)) as c:
            a = await c.call_tool("search", {"query": "meeting status:done"})
            b = await c.call_tool("search", {"query": "meeting", "props": ["rating>=4"]})
            c_ = await c.call_tool("search", {"query": "stauts:done"})
            return a, b, c_
    a, b, c = anyio.run(mcp)
    assert "work/alpha.md" in a.content[0].text and "work/beta.md" not in a.content[0].text
    assert "work/alpha.md" in b.content[0].text and "work/beta.md" not in b.content[0].text
    assert c.is_error and "properties near it: status" in c.content[0].text

    status, data = api_search_call(h, json.dumps({"query": "type:meeting rating<4"}).encode(), None)
    assert status == 200 and [n["path"] for n in data["notes"]] == ["work/beta.md"]
    assert data["props"] == ["type:meeting", "rating<4"]
    status, data = api_search_call(h, json.dumps({"query": "x", "props": ["rating>=abc"]}).encode(), None)
    assert status == 400 and "compares numbers or dates" in data["error"]
    status, data = api_search_call(h, json.dumps({"query": "status:don"}).encode(), None)
    assert status == 422 and data["error"] == "no note has status 'don'; values near it: done"

    home = h.config.path.parent
    monkeypatch.setenv("HYBRID_HOME", str(home))
    cfg = home / "config.toml"
    if "[settings]" not in cfg.read_text():  # the CLI reads the file: give it the test's embedder
        cfg.write_text('[settings]\nembedder = "hash:64"\nagent_exclude = ["private"]\n\n' + cfg.read_text())
    run = CliRunner().invoke
    r = run(main, ["query", "status:done", "--json", "--local"])
    assert r.exit_code == 0, r.output
    assert sorted(x["path"] for x in json.loads(r.output)) == ["ops/deploy.md", "work/alpha.md"]
    r = run(main, ["query", "meeting", "--prop", "type:review", "--json", "--local"])
    assert r.exit_code == 0 and [x["path"] for x in json.loads(r.stdout)] == ["work/beta.md"]
    assert "the filters pass 1 note: it is shown" in r.stderr  # the property chose the answer
    r = run(main, ["query", "meeting rating>=4", "--explain", "--local"])
    assert r.exit_code == 0 and "property rating>=4" in r.output
    r = run(main, ["query", "status:don", "--local"])
    assert r.exit_code == 1 and "values near it: done" in r.stderr


def test_rows_of_every_property_type():
    rows = prop_rows({"Status": "Done", "tags": ["A", "b"], "rating": 4.0, "n": "12", "when": "2026-01-02T10:00:00",
                      "ok": False, "empty": None, "nested": {"x": 1}, "link": "[[Some Note#h|alias]]",
                      "hybrid:front_unreadable": "why", "bad": "2024-02-30"})
    assert rows == [("status", "done", None, None), ("tags", "a", None, None), ("tags", "b", None, None),
                    ("rating", "4", 4.0, None), ("n", "12", 12.0, None),
                    ("when", "2026-01-02t10:00:00", None, "2026-01-02"), ("ok", "false", None, None),
                    ("empty", "", None, None), ("nested", "", None, None), ("link", "some note", None, None),
                    ("bad", "2024-02-30", None, None)]
