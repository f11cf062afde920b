import os

import pytest
from helpers import write

from hybrid.sources.markdown import BinaryFile, decode, parse_note
from hybrid.sources.walk import discover, glob_to_regex


def test_frontmatter_forms_and_inline_tags():
    note = parse_note("a/b.md", "---\ntitle: Real Title\ntags: Work, kafka\naliases: [Orders]\n"
                      "created: 2024-11-02\nupdated: 2025-06-30\nowner: dana\n---\n"
                      "# H1 ignored for title\n\nSee #area/sub and #Home-Lab but not #123 or `x#y`.\n"
                      "```\n#notatag\n```\n[[Other Note#Heading|alias]] ![[embed.png]]\n")
    assert note.title == "Real Title"
    assert note.tags == ["work", "kafka", "area/sub", "home-lab"]
    assert note.aliases == ["Orders"]
    assert note.created == "2024-11-02" and note.updated == "2025-06-30"
    assert note.properties["owner"] == "dana"
    assert note.links == ["Other Note", "embed.png"]
    assert note.body_start == 9


def test_title_from_h1_then_filename():
    assert parse_note("x/My File.md", "intro\n# The Heading\n").title == "The Heading"
    assert parse_note("x/My File.md", "no heading here\n").title == "My File"
    assert parse_note("x.md", "---\ntags:\n  - a\n  - b/c\n---\ntext").tags == ["a", "b/c"]


def test_malformed_frontmatter_warns_and_keeps_text():
    note = parse_note("bad.md", "---\ntags: [unclosed\n  : :\n---\n# Title\nbody text\n")
    assert note.warnings and "malformed frontmatter" in note.warnings[0]
    assert note.title == "Title"
    assert note.body_start == 5


def test_decode_invalid_utf8_and_binary():
    text, warnings = decode(b"caf\xe9 ok\r\nline2", "x.md")
    assert text == "caf\ufffd ok\nline2" and "invalid UTF-8" in warnings[0]
    with pytest.raises(BinaryFile):
        decode(b"\x89PNG\x00\x00data", "img.md")


def test_glob():
    r = glob_to_regex("**/*.md")
    assert r.match("a.md") and r.match("x/y/a.md") and not r.match("a.mdx")
    assert glob_to_regex("archive/**").match("archive/old/a.md")
    assert not glob_to_regex("*.md").match("x/a.md")


def test_discover_skips_hidden_and_survives_symlink_loops(tmp_path):
    root = tmp_path / "v"
    write(root, "a.md", "a")
    write(root, "sub/b.md", "b")
    write(root, "sub/c.txt", "c")
    write(root, ".obsidian/workspace.md", "x")
    write(root, ".trash/old.md", "x")
    write(root, "archive/skip.md", "x")
    write(tmp_path / "outside", "secret.md", "x")
    os.symlink(root / "sub", root / "sub" / "loop")          # loop back into itself
    os.symlink(root, root / "sub" / "up")                     # loop to the root
    os.symlink(tmp_path / "outside", root / "out")            # leads outside the vault
    os.mkfifo(root / "fifo.md")                               # not a regular file
    found = sorted(e.path for e in discover(root, ["**/*.md"], ["archive/**"]))
    assert found == ["a.md", "sub/b.md"]
