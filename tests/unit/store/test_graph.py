"""The link graph (hybrid.store.graph): how targets resolve, both directions, hidden notes
taken out; and the links a note records (hybrid.sources.markdown.note_links)."""

from __future__ import annotations

from hybrid.sources.markdown import parse_note
from hybrid.store.base import NoteMeta
from hybrid.store.graph import LinkGraph, link_key


def note(fid, path, links=(), title=None, aliases=()):
    stem = path.rsplit("/", 1)[-1].removesuffix(".md")
    return NoteMeta(fid, path, title or stem, [], list(aliases), 0.0, list(links))


def test_links_are_read_from_the_body_the_front_block_and_markdown_links():
    n = parse_note("a.md", "---\nup: \"[[Projects]]\"\nrelated:\n  - \"[[Roadmap#Q3]]\"\n---\n"
                   "# A\n\nSee [[Home network#Tailscale|the router]] and ![[diagram.png]].\n"
                   "Also [notes](Other%20note.md#Part) and [site](https://example.org/x.md), "
                   "and [[Home network]] again.\n")
    assert n.links == ["Home network", "diagram.png", "Other note.md", "Projects", "Roadmap"]


def test_a_line_of_unclosed_brackets_stays_cheap_and_finds_nothing():
    n = parse_note("a.md", "[[" * 20000 + "\n" + "](" * 20000)
    assert n.links == []


def test_targets_resolve_by_path_name_shortest_path_then_title_or_alias():
    g = LinkGraph.build([
        note(1, "Projects/Roadmap.md"),
        note(2, "Archive/2023/Roadmap.md"),
        note(3, "home/networking.md", title="Home network", aliases=["LAN"]),
        note(4, "index.md", links=["roadmap", "Archive/2023/Roadmap", "2023/roadmap.md", "home network",
                                   "lan", "Missing note", "index", "diagram.png"]),
        note(5, "papers/paper.pdf"),
        note(6, "reading.md", links=["paper.pdf", "papers/paper.pdf"]),
    ])
    assert g.outlinks(4) == [1, 2, 3]  # each note once, in order; itself left out
    assert g.unresolved[4] == ["Missing note", "diagram.png"]
    assert g.backlinks(2) == [4] and g.backlinks(3) == [4]
    assert g.outlinks(6) == [5]
    assert g.neighbours(1) == {4}


def test_a_title_shared_by_two_notes_resolves_to_neither():
    g = LinkGraph.build([note(1, "a.md", title="Plan"), note(2, "b.md", title="Plan"),
                         note(3, "c.md", links=["Plan"])])
    assert g.outlinks(3) == [] and g.unresolved[3] == ["Plan"]


def test_hidden_notes_leave_no_trace_in_either_direction():
    g = LinkGraph.build([note(1, "private/diary.md", links=["public"]), note(2, "public.md", links=["diary"]),
                         note(3, "other.md", links=["public", "diary"])])
    seen = g.without({1})
    assert 1 not in seen.notes and seen.backlinks(2) == [3] and seen.outlinks(2) == []
    assert seen.outlinks(3) == [2] and g.backlinks(1) == [3, 2]  # by path; the owner's graph is untouched


def test_link_key_ignores_case_spaces_and_the_extension():
    assert link_key("  Home   Network.MD ") == "home network"
    assert link_key("folder\\Note") == "folder/note"


def test_links_inside_code_are_examples_not_links():
    n = parse_note("a.md", "# A\n\nWrite `[[Note]]` to link, or ``[[Other]]``.\n\n```md\n[[Fenced]]\n```\n\n"
                   "But [[Real]] is a link.\n")
    assert n.links == ["Real"]


def test_relative_markdown_links_resolve_from_the_linking_note_folder():
    g = LinkGraph.build([note(1, "garden.md"), note(2, "work/bikes.md", links=["../garden.md", "./parts/chain.md"]),
                         note(3, "work/parts/chain.md", links=["../../garden.md", "../../../outside.md"])])
    assert g.outlinks(2) == [1, 3] and g.outlinks(3) == [1]
    assert g.unresolved[3] == ["../../../outside.md"]  # above the vault's root: names no note
    assert g.resolve("../garden.md", "work/bikes.md") == 1 and g.resolve("../garden.md") is None


def test_markdown_links_to_pictures_are_links_and_resolve_to_the_picture():
    n = parse_note("a.md", "# A\n\n![the plan](scans/Plan%201.PNG) and [see](https://x.org/a.png) "
                   "and [doc](notes.md) and [sheet](data.csv)\n")
    assert n.links == ["scans/Plan 1.PNG", "notes.md"]  # a URL and a file no kind reads are not
    g = LinkGraph.build([note(1, "a.md", links=n.links), note(2, "scans/Plan 1.PNG", title="Plan 1")])
    assert g.outlinks(1) == [2]

