"""Obsidian canvases (JSON Canvas 1.0) indexed card by card: each card a section under its
group's label, a hit carrying its card's id and opening the canvas in Obsidian, file cards as
links, labelled edges as text; a canvas that is not JSON is one warning and the rest of the vault
is indexed; agents see canvases under the same rules as notes. Real tantivy and FAISS indexes,
the hash embedder."""
import pytest
from drawings import json_canvas
from helpers import ALL_STORES, link_graph, write

from hybrid.sources import kind_of
from hybrid.sources.canvas import CARDS_PROPERTY, canvas_note, card_at

STORES = ALL_STORES

SHIP = "a3f9c2e17b04d5e8"
DOCS = "0c44e1aa96b3f270"
LINK = "5b7e2d09c1f4a836"
LOOSE = "e81d4c07f2a95b36"
GROUP = "9d2b71c0e5a84f13"
INNER = "44c0b9e2d17a3f58"
NODES = [  # as Obsidian saves them: groups first, then cards in the order they were made
    {"id": GROUP, "type": "group", "x": -600, "y": -400, "width": 1200, "height": 800, "label": "Sprint 12"},
    {"id": INNER, "type": "group", "x": -580, "y": 100, "width": 700, "height": 280, "label": "Stretch goals"},
    {"id": SHIP, "type": "text", "text": "# Ship the canvas importer\n\nRead **JSON Canvas** files so "
        "planning boards are searchable.\n## Acceptance\n- cards cite their id\n```\nunclosed fence",
        "x": -560, "y": -360, "width": 400, "height": 300},
    {"id": DOCS, "type": "file", "file": "Projects/Release checklist.md", "subpath": "#Docs",
        "x": 100, "y": -360, "width": 400, "height": 300, "color": "4"},
    {"id": LINK, "type": "link", "url": "https://jsoncanvas.org/spec/1.0/", "x": -560, "y": 140,
        "width": 300, "height": 200},
    {"id": LOOSE, "type": "text", "text": "Quarterly offsite in Lisbon, walrus-themed", "x": 800, "y": 500,
        "width": 250, "height": 60},
]
EDGES = [
    {"id": "f2c81a3e4b5d6079", "fromNode": SHIP, "fromSide": "right", "toNode": DOCS, "toSide": "left",
     "label": "blocks the marmoset release"},
    {"id": "1a2b3c4d5e6f7081", "fromNode": SHIP, "fromSide": "bottom", "toNode": LINK, "toSide": "top"},
]
PLAN = json_canvas(NODES, EDGES)


def test_a_canvas_becomes_one_section_per_card_under_its_groups():
    note = canvas_note("boards/Plan.canvas", PLAN.encode())
    assert note.title == "Plan" and note.tags == [] and note.body_start == 1
    text = "\n".join(note.lines)
    assert text.startswith("# Sprint 12\n")
    # reading order inside the group: the top row left to right, then the nested group
    order = [line for line in note.lines if line.startswith("#")]
    assert order == ["# Sprint 12", "## Ship the canvas importer", "## Release checklist#Docs",
                     "## Stretch goals", "### https://jsoncanvas.org/spec/1.0/",
                     "# Quarterly offsite in Lisbon, walrus-themed"]
    assert "**Acceptance**" in text  # the card's own heading stays inside the card
    assert text.count("```") == 2  # the fence the card left open is closed before the next card
    assert "Ship the canvas importer → Release checklist#Docs: blocks the marmoset release" in text
    assert "[[Projects/Release checklist#Docs]]" in text
    assert note.links == ["Projects/Release checklist"]  # the link graph sees the file card
    spans = note.properties[CARDS_PROPERTY]
    assert [s[2] for s in spans] == [GROUP, SHIP, DOCS, INNER, LINK, LOOSE]
    line = note.lines.index("- cards cite their id") + 1
    assert card_at(note.properties, line) == SHIP
    assert card_at(note.properties, len(note.lines)) == LOOSE
    assert card_at({}, 3) == "" and card_at({CARDS_PROPERTY: "junk"}, 3) == ""


def test_odd_canvases_are_read_as_far_as_they_go():
    assert canvas_note("e.canvas", b"{}").lines == []
    odd = json_canvas([{"type": "text", "text": "no id"}, {"id": "x", "type": "text", "text": "   "},
                       {"id": "y", "type": "file"}, {"id": "z", "type": "text", "text": "- [ ] buy rope\n",
                                                     "x": "left"}, "not a node"],  # type: ignore[list-item]
                      [{"fromNode": "nowhere", "toNode": "z", "label": "dangling"}])
    note = canvas_note("odd.canvas", odd.encode())
    assert note.lines == ["# buy rope", "- [ ] buy rope"]  # a list mark is no part of a heading
    assert kind_of("boards/Plan.canvas") == "canvas" and kind_of("a.CANVAS") == "canvas"


@pytest.fixture
def board(tmp_path, fake):
    root = tmp_path / "vault"
    write(root, "boards/Plan.canvas", PLAN)
    write(root, "Projects/Release checklist.md", "# Release checklist\n\n## Docs\n\nUpdate the changelog.\n")
    write(root, "boards/Broken.canvas", '{"nodes":[{"id":"1","type":"text","text":"half a card"')
    fake.add_vault(root, "v")
    report = fake.index()[0]
    return fake, root, report


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_canvas_hits_cite_their_card_and_open_the_canvas(board):
    h, root, report = board
    # the broken canvas: one warning naming where its JSON breaks; the rest indexed
    assert report.added == 2 and report.skipped == 1
    assert report.warnings == ["boards/Broken.canvas: not a canvas: invalid JSON at line 1 column 55 "
                               "(Expecting ',' delimiter); skipped"]
    hit = h.search("planning boards searchable", mode="lexical")[0]
    assert (hit.path, hit.source, hit.card, hit.title) == ("boards/Plan.canvas", "canvas", SHIP, "Plan")
    assert hit.heading_path == ["Sprint 12", "Ship the canvas importer"]
    assert hit.uri == f"obsidian://open?vault={root.name}&file=boards%2FPlan.canvas"
    assert hit.to_dict()["card"] == SHIP and "JSON Canvas" in hit.text
    assert "JSON Canvas" in h.get(hit.citation).text  # the citation reads back as the card
    nested = h.search("jsoncanvas spec", sources=["canvas"], mode="lexical")[0]
    assert nested.card == LINK and nested.heading_path[:2] == ["Sprint 12", "Stretch goals"]
    edge = h.search("marmoset", mode="lexical")[0]
    assert edge.card == SHIP  # an edge's label is text of the card it leaves
    loose = h.search("walrus offsite", mode="hybrid")[0]
    assert loose.card == LOOSE and loose.heading_path == ["Quarterly offsite in Lisbon, walrus-themed"]
    for mode in ("vector", "hybrid"):
        assert all(x.card for x in h.search("canvas importer", sources=["canvas"], mode=mode))
    assert all(x.card == "" for x in h.search("changelog", sources=["note"], mode="lexical"))
    assert h.status()[0].sources == {"note": 1, "canvas": 1}
    # the note a file card points at counts the canvas among its backlinks
    g, ids = link_graph(h)
    assert g.backlinks(ids["Projects/Release checklist.md"]) == [ids["boards/Plan.canvas"]]
    # fixed: indexed on the next run, the warning gone
    write(root, "boards/Broken.canvas", json_canvas([{"id": "b1", "type": "text", "text": "half a card"}]))
    again = h.index()[0]
    assert again.added == 1 and again.warnings == []
    assert h.search("half a card", mode="lexical")[0].card == "b1"


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_agents_see_canvases_under_the_same_rules(board):
    h, root, _ = board
    assert {x.path for x in h.search("canvas importer", agent=True, mode="lexical")} == {"boards/Plan.canvas"}
    h.override(agent_exclude=["boards/**"])
    assert h.search("canvas importer", agent=True, mode="lexical") == []
    assert h.search("canvas importer", mode="lexical")[0].path == "boards/Plan.canvas"  # the owner still does
    with pytest.raises(Exception, match="not a note you can read"):
        h.get("boards/Plan.canvas", agent=True)
