"""Snippets as readable text and the words each hit marks (hybrid/retrieval/excerpt.py): whole
words, matched as written or by stem, never function words, never a query word the hit lacks;
the same in every door (the engine's hits, the CLI's colour, MCP's text)."""
import re

import anyio
import pytest
from click.testing import CliRunner
from helpers import hash_home, write
from mcp import Client

import hybrid
from hybrid.faces.cli.main import main
from hybrid.faces.mcp import build_server
from hybrid.retrieval.excerpt import Marker, mark_spans, readable, words_by_start
from hybrid.retrieval.result import answer_passages
from hybrid.store.lexicon import stem_analyzer

STEM = stem_analyzer().analyze


@pytest.mark.parametrize("markdown, shown", [
    ("# Orders pipeline\n\nThe `orders-created` topic", "Orders pipeline\n\nThe orders-created topic"),
    ("```md\n**raw** in code\n```\nafter", "**raw** in code\nafter"),  # fence lines go, code stays
    ("~~~\n__init__\n~~~", "__init__"),
    ("**bold**, __strong__, *em*, _em_, ~~gone~~ and ==marked==", "bold, strong, em, em, gone and marked"),
    ("see [[Kafka#Consumers|the consumers]] and [[Kafka#Retention]]", "see the consumers and Kafka › Retention"),
    ("[[Note]] ![[diagram.png]] [[#^block1]]", "Note diagram.png block1"),
    ("read [the docs](https://x.org/a_(b) \"Docs\") and ![alt](img.png)", "read the docs and alt"),
    ("> [!note] Careful\n> quoted line", "Careful\nquoted line"),
    ("| a | b |\n|---|:--:|\n| 1 | 2 |", "a · b\n1 · 2"),
    # a table row shows its cells, empty ones left out; an escaped pipe (a link's alias) is no border
    ("| code | where | count | |\n| --- | --- | --- | --- |\n| `E42` | [[networking#Subnet router\\|router]] |  | x |",
     "code · where · count\nE42 · router · x"),
    # HTML as rendered: tags and comments go, what is between them stays; <br> is a space
    ('Use <span class="icon-app icon-notion"></span> Notion, <b>bold</b><br>next <!-- note --> end',
     "Use  Notion, bold next  end"),
    ("a < b and c > d; `<div>` in code", "a < b and c > d; <div> in code"),
    # a line repeating the heading right above it (a canvas text card's first line) shows once
    ("# Plan\nPlan\n\nCall the plumber", "Plan\n\nCall the plumber"),
    ("# Buy milk\n- Buy milk", "Buy milk"),
    ("# Plan\n\nPlan", "Plan\n\nPlan"),  # not right below: a line of its own
    # a wikilink whose heading holds code is a link (the plugin's picture showed it raw); in code, code
    ("See [[networking#`pi-parents` always going through DERP]] for why",
     "See networking › pi-parents always going through DERP for why"),
    ("`[[x]]` stays and [[y]]", "[[x]] stays and y"),
    ("snake_case and a*b*c and `__init__` and 2*3 = 6", "snake_case and a*b*c and __init__ and 2*3 = 6"),
])
def test_readable_renders_markdown_as_text(markdown, shown):
    assert readable(markdown) == shown


@pytest.mark.parametrize("query, text, marked", [
    # function words never mark, and never the start of another word
    ("what is in the top drawer", "Internal top drawer in the topic", ["drawer", "top"]),
    # a word of the query, as written or by stem (tomato marks tomatoes); not a word it begins
    ("tomato", "Tomatoes and tomato soup, tomatoland", ["tomato", "tomatoes"]),
    ("growing", "grow, grows, growth", ["grow", "grows"]),
    # identifiers whole, and their parts as words
    ("--advertise-routes", "tailscale up --advertise-routes=10.0.0.0/24",
     ["advertise", "advertise-routes", "routes"]),
    ("10.0.0.0/24", "route 10.0.0.0/24 and 10.0.0.0/16", ["10.0.0.0/24"]),
    # a query word the text does not hold marks nothing
    ("kubernetes tomato", "Tomatoes need sun", ["tomatoes"]),
    ("the of and", "the end of it", []),
    # CJK by bigrams: the longest stretch the query's bigrams cover, inside the run; words of
    # spaced scripts glued to CJK whole; stretches of Hiragana alone (particles) never
    ("OneDrive 保管庫はどこ", "保管庫をOneDriveに置いている", ["onedrive", "保管庫"]),
    ("文件同步", "我们每天晚上把文件同步到服务器", ["文件同步"]),
    ("同步到哪里", "把文件同步到服务器，同样", ["同步到"]),
    ("どこにいる", "ここにいる", []),
    ("庫", "保管庫", []),  # a single character, as a single letter, marks nothing
])
def test_marker_marks_whole_words_of_the_query(query, text, marked):
    assert Marker(query, STEM)(text) == marked
    # a hit's words kept by their starts (looked up, not scanned for) mark the same
    assert Marker(query, STEM).marks(text.lower(), words_by_start(text.lower())) == marked


def test_looked_up_words_mark_what_the_scan_marks():
    """Random passages of words, identifiers, accents, digits and underscores: the words a
    marker looks up among a passage's kept words are exactly the words its pattern finds."""
    import random
    rng = random.Random(5)
    vocab = ["tomato", "Tomatoes", "grow", "growth", "x", "a1", "_id", "user_id", "10.0.0.0/24", "é",
             "Ünïcode", "ünicode", "top", "topic", "in", "--flag", "advertise-routes", "²", "t", "to"]
    for _ in range(200):
        text = rng.choice([" ", ", ", "-", "\n"]).join(rng.choice(vocab) for _ in range(rng.randint(0, 40)))
        query = " ".join(rng.sample(vocab, rng.randint(1, 5)))
        m = Marker(query, STEM)
        assert m.marks(text.lower(), words_by_start(text.lower())) == m(text), (query, text)


def test_mark_spans_are_whole_words_longest_first():
    line = "Internal: Tomatoes in orders-created, orders."
    assert [line[a:b] for a, b in mark_spans(line, ["in", "tomatoes", "orders", "orders-created"])] == \
        ["Tomatoes", "in", "orders-created", "orders"]
    assert mark_spans(line, []) == []
    line = "保管庫をOneDriveに置いている, OneDrives"  # a CJK neighbour is a word boundary
    assert [line[a:b] for a, b in mark_spans(line, ["onedrive", "保管庫", "いる"])] == \
        ["保管庫", "OneDrive", "いる"]


NOTES = {
    "garden.md": "# Garden\n\n**Tomatoes** need six hours of sun. See [[Sun chart|the chart]].\n\n"
                 "```md\n# not a heading\n```\n",
    "internal.md": "# Internal\n\nInternal tooling sits at the top of the stack, a topic of its own.\n",
}


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    root = tmp_path_factory.mktemp("excerpt")
    for rel, text in NOTES.items():
        write(root / "notes", rel, text)
    return hash_home(root / "home", root / "notes")


@pytest.fixture
def h(home, monkeypatch):
    monkeypatch.setenv("HYBRID_HOME", str(home))
    handle = hybrid.open(home)
    yield handle
    handle.close()


def test_hits_carry_readable_snippets_and_their_own_marks(h):
    hits = {x.path: x for x in h.search("what about the tomato in the garden", top_k=5)}
    garden = hits["garden.md"]
    assert garden.snippet == "Garden Tomatoes need six hours of sun. See the chart. # not a heading"
    assert garden.marks == ["garden", "tomatoes"]
    if "internal.md" in hits:  # found by the vector arm: it holds no word of the query
        assert hits["internal.md"].marks == []
    listed = {x.path: x for x in h.search("since:2000-01-01", top_k=5)}  # a listing: no query words
    assert listed["garden.md"].snippet == garden.snippet and listed["garden.md"].marks == []


def test_the_cli_highlights_only_the_hits_own_whole_words(home, monkeypatch):
    monkeypatch.setenv("HYBRID_HOME", str(home))
    monkeypatch.setitem(main.context_settings, "color", True)  # as on a terminal
    out = CliRunner().invoke(main, ["query", "what was in this top tomato", "--local", "--mode", "lexical",
                                    "--passages"], color=True, env={"NO_COLOR": None, "TERM": "xterm"})
    assert out.exit_code == 0, out.output
    marked = re.findall(r"\x1b\[33m\x1b\[1m(.*?)\x1b\[0m", out.stdout)
    # not In(ternal), nor topic (a word "top" only begins), nor the function words
    assert set(marked) == {"Tomatoes", "top"}
    assert "**" not in out.stdout and "[[" not in out.stdout


def test_mcp_search_shows_readable_snippets(h):
    async def go():
        async with Client(build_server(h)) as c:
            return await c.call_tool("search", {"query": "tomato garden", "top_k": 3})
    res = anyio.run(go)
    assert not res.is_error
    text = res.content[0].text
    assert "Tomatoes need six hours of sun. See the chart." in text and "**" not in text and "```" not in text
    assert answer_passages(res.structured_content)[0]["marks"] == ["garden", "tomatoes"]
