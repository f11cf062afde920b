"""A canvas is read in the indexing process, so its reader bounds itself (issue #47): placing
cards under groups costs box comparisons linear in the nodes (every group scanned for every node
made 20,000 groups take 44 s), a chain of 3,000 nested groups is read (it raised RecursionError,
and was retried on every run), and a canvas whose groups overlap past the bound is one warning,
skipped and remembered, with a version indexed before keeping its chunks. The nesting is still
the one its definition gives: checked against that definition, written naively here, on random
canvases. Real canvases on disk, real indexes on both stores, the hash embedder."""
import random
import sys

import pytest
from drawings import json_canvas
from helpers import ALL_STORES, REPO, write

from hybrid.sources import canvas
from hybrid.sources.canvas import CARDS_PROPERTY, canvas_note
from hybrid.sources.sandbox import ConvertError

STORES = ALL_STORES


def bench():
    """The bench's hostile canvases (eval/bench/hostile_readers.py)."""
    sys.path.insert(0, str(REPO / "eval" / "bench"))
    try:
        import hostile_readers
    finally:
        sys.path.remove(str(REPO / "eval" / "bench"))
    return hostile_readers


def naive_nest(path, nodes):
    """The definition, read as it is written: for each node, the smallest labelled group (the
    first in the file among equal ones) whose box holds its box, a group only in a larger one."""
    groups = sorted((n for n in nodes if n.type == "group" and n.label), key=lambda g: g.area)
    top = []
    for n in nodes:
        if n.type == "group" and not n.label:
            continue
        parent = next((g for g in groups if g is not n and g.holds(n)
                       and (g.area > n.area or n.type != "group")), None)
        (parent.children if parent is not None else top).append(n)
    for n in nodes:
        n.children.sort(key=canvas._reading_order)
    return sorted(top, key=canvas._reading_order)


def random_canvas(rng: random.Random) -> str:
    """Groups and cards on a coarse grid, so that boxes share edges, areas and whole boxes;
    groups that overlap without nesting, unlabelled groups, cards across group borders."""
    nodes = []
    for i in range(rng.randint(1, 70)):
        x, y = rng.randint(0, 12) * 10, rng.randint(0, 12) * 10
        w, h = rng.randint(0, 8) * 10, rng.randint(0, 8) * 10
        kind = rng.choice(["group", "group", "text", "text", "file", "link"])
        node = {"id": f"n{i}", "type": kind, "x": x, "y": y, "width": w, "height": h}
        if kind == "group":
            node["label"] = rng.choice(["", f"Group {i}", "Same label"])
        elif kind == "text":
            node["text"] = f"card {i}"
        elif kind == "file":
            node["file"] = f"notes/n{i}.md"
        else:
            node["url"] = f"https://example.org/{i}"
        nodes.append(node)
        if rng.random() < 0.15:  # the same box twice
            nodes.append({**node, "id": f"n{i}b"})
    return json_canvas(nodes)


def test_nesting_is_the_definitions_on_random_canvases(monkeypatch):
    rng = random.Random(47)
    for _ in range(80):
        data = random_canvas(rng).encode()
        got = canvas_note("r.canvas", data)
        with monkeypatch.context() as m:
            m.setattr(canvas, "_nest", naive_nest)
            want = canvas_note("r.canvas", data)
        assert (got.lines, got.properties) == (want.lines, want.properties)


def test_placing_cards_costs_box_comparisons_linear_in_the_nodes(monkeypatch):
    calls = 0
    holds = canvas._Node.holds

    def counted(self, other):
        nonlocal calls
        calls += 1
        return holds(self, other)

    monkeypatch.setattr(canvas._Node, "holds", counted)
    note = canvas_note("boards/Groups.canvas", bench().disjoint_groups(1_500).encode())
    assert calls <= 2 * 3_000  # read as defined: every group tried for every node, ~3.4 million
    assert note.lines[:3] == ["# Group 0", "", "## card 0 of the wombat board"]
    assert sum(1 for x in note.lines if x.startswith("## card ")) == 1_500


def test_a_chain_of_3000_nested_groups_is_read():
    note = canvas_note("boards/Chain.canvas", bench().group_chain(3_000).encode())
    headings = [x for x in note.lines if x.startswith("#")]
    assert len(headings) == 3_001
    assert headings[:6] == [f"{'#' * (i + 1)} Level {i}" for i in range(6)]
    assert headings[6:8] == ["###### Level 6", "###### Level 7"]  # deeper: the last heading level
    assert headings[-1] == "###### the okapi at the bottom"
    assert note.properties[CARDS_PROPERTY][-1][2] == "deepest"


def test_groups_overlapping_past_the_bound_raise_a_convert_error(monkeypatch):
    monkeypatch.setattr(canvas, "CHECK_FLOOR", 1_000)
    budget = canvas.check_budget(300)
    assert budget == 64 * 300
    with pytest.raises(ConvertError, match=f"its groups overlap too much to nest the cards "
                                           fr"\(over {budget:,} box comparisons\)"):
        canvas_note("x.canvas", bench().crossing_groups(150).encode())
    canvas_note("x.canvas", bench().crossing_groups(100).encode())  # 10,000: under the bound


def test_odd_numbers_in_boxes_hold_nothing_odd():
    nodes = [{"id": "g", "type": "group", "x": 0, "y": 0, "width": 100, "height": 100, "label": "Box"},
             {"id": "nan", "type": "text", "x": 10, "y": 10, "width": 10, "height": 10, "text": "nan card"},
             {"id": "neg", "type": "group", "x": 50, "y": 50, "width": -40, "height": -40, "label": "Backwards"}]
    text = json_canvas(nodes).replace('"x":10,', '"x":NaN,')  # JSON as Python reads it
    note = canvas_note("odd.canvas", text.encode())
    # NaN is read as 0 (inside the group); a negative size as none (a point inside it)
    assert [x for x in note.lines if x.startswith("#")] == ["# Box", "## nan card", "## Backwards"]


@pytest.mark.slow  # thousands of chunks on two index runs
def test_a_deep_chain_indexes_once_and_is_found_with_its_heading_path(tmp_path, fake):
    root = tmp_path / "vault"
    write(root, "boards/Chain.canvas", bench().group_chain(3_000))
    write(root, "a.md", "# A\n\nA note.\n")
    fake.add_vault(root, "v")
    report = fake.index()[0]
    assert (report.added, report.skipped, report.warnings) == (2, 0, [])
    hit = fake.search("okapi bottom", mode="lexical")[0]
    assert (hit.path, hit.card) == ("boards/Chain.canvas", "deepest")
    assert hit.heading_path[:2] == ["Level 0", "Level 1"] and hit.heading_path[-1] == "the okapi at the bottom"
    again = fake.index()[0]
    assert (again.unchanged, again.skipped, again.warnings) == (2, 0, [])


@pytest.mark.slow  # three index runs
def test_a_canvas_over_the_bound_is_skipped_remembered_and_keeps_its_chunks(tmp_path, fake, monkeypatch):
    monkeypatch.setattr(canvas, "CHECK_FLOOR", 1_000)
    root = tmp_path / "vault"
    write(root, "boards/Plan.canvas", json_canvas([{"id": "z", "type": "text", "x": 0, "y": 0,
                                                    "width": 100, "height": 50, "text": "zebra crossing plan"}]))
    write(root, "a.md", "# A\n\nA note.\n")
    fake.add_vault(root, "v")
    fake.index()
    write(root, "boards/Plan.canvas", bench().crossing_groups(150))
    report = fake.index()[0]
    assert report.skipped == 1 and report.warnings == [
        "boards/Plan.canvas: its groups overlap too much to nest the cards (over 19,200 box "
        "comparisons); skipped"]
    assert fake.search("zebra crossing", mode="lexical")[0].path == "boards/Plan.canvas"  # kept
    reads = []
    monkeypatch.setattr(canvas, "_nest", lambda path, nodes: reads.append(path) or [])
    again = fake.index()[0]
    assert (again.skipped, again.warnings, reads) == (1, [], [])  # remembered: not read again
    row = {r.path: r for r in fake.files("v")}["boards/Plan.canvas"]
    assert (row.state, row.why) == ("skipped", "too_complex")
    assert row.detail == "its groups overlap too much to nest the cards (over 19,200 box comparisons)"


HUGE = "9" * 5_000  # past Python's 4,300-digit limit on turning a string into an int


def test_a_huge_integer_is_read_as_an_odd_number():
    """Issue #47: an integer of 5,000 digits raised ValueError ('Exceeds the limit (4300 digits)
    for integer string conversion'): the canvas failed, and was warned about on every run."""
    nodes = [{"id": "g", "type": "group", "x": 0, "y": 0, "width": 100, "height": 100, "label": "Box"},
             {"id": "big", "type": "text", "x": 1, "y": 2, "width": 10, "height": 10, "text": "bigint card"},
             {"id": "neg", "type": "text", "x": 3, "y": 4, "width": 5, "height": 5, "text": "negative card"}]
    text = json_canvas(nodes).replace('"x":1,', f'"x":{HUGE},').replace('"y":4,', f'"y":-{HUGE},')
    note = canvas_note("huge.canvas", text.encode())
    # past any finite float: read as 0, as NaN is (so both cards lie in the group's box)
    assert [x for x in note.lines if x.startswith("#")] == ["# Box", "## negative card", "## bigint card"]
    odd = json_canvas(nodes).replace('"id":"big"', f'"id":"big","seen":{HUGE}')  # in any field
    assert "bigint card" in canvas_note("odd.canvas", odd.encode()).lines


@pytest.mark.slow  # two index runs
def test_a_canvas_with_a_huge_integer_is_indexed_once(tmp_path, fake):
    root = tmp_path / "vault"
    write(root, "boards/Int.canvas", json_canvas([{"id": "a", "type": "text", "x": 0, "y": 0, "width": 1,
                                                   "height": 1, "text": "bigint"}]).replace('"x":0,', f'"x":{HUGE},'))
    fake.add_vault(root, "v")
    report = fake.index()[0]
    assert (report.added, report.skipped, report.warnings) == (1, 0, [])
    assert fake.search("bigint", mode="lexical")[0].path == "boards/Int.canvas"
    again = fake.index()[0]
    assert (again.unchanged, again.warnings) == (1, [])
    assert {r.path: r.state for r in fake.files("v")}["boards/Int.canvas"] == "indexed"
