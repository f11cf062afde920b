"""A note's tags are indexed up to a bound (hybrid.store.base.MAX_NOTE_TAGS tags and parent
tags, each tag at most MAX_TAG_CHARS): every chunk's index entries carry them, so without it one
note of n tags cost n² to index (issue #47). Past it the note keeps its first tags, says so in
one warning, and is hidden from agents: a private tag may be among those left out."""

from __future__ import annotations

import pytest
from helpers import write

import hybrid
from hybrid.retrieval.filters import NoMatchingNotes
from hybrid.sources.markdown import TAGS_CUT
from hybrid.store import open_store
from hybrid.store.base import MAX_NOTE_TAGS, MAX_TAG_CHARS, bounded_tags, tag_set


def test_the_first_tags_are_kept_while_they_and_their_parents_fit():
    tags = [f"t{i}/a/b" for i in range(MAX_NOTE_TAGS)]  # three tags in the tag set each
    kept, left_out = bounded_tags(tags)
    assert kept == tags[:MAX_NOTE_TAGS // 3] and left_out == len(tags) - MAX_NOTE_TAGS // 3
    assert len(tag_set(kept)) <= MAX_NOTE_TAGS
    # shared parents count once
    siblings = [f"a/{i}" for i in range(MAX_NOTE_TAGS - 1)]
    assert bounded_tags(siblings) == (siblings, 0)
    assert bounded_tags(["x", "y"]) == (["x", "y"], 0)


def test_a_long_tag_is_cut_and_keeps_its_parents():
    deep = "private/" + "a/" * 10_000 + "z"
    kept, left_out = bounded_tags([deep, "ok"])
    assert left_out == 0 and kept[1] == "ok"
    assert len(kept[0]) <= MAX_TAG_CHARS and kept[0].startswith("private/a/")
    assert "private" in tag_set(kept)


@pytest.fixture
def wall(tmp_path):
    """A handle on a vault with a note of more tags than are indexed, a private one last."""
    n = MAX_NOTE_TAGS // 3 + 10
    text = "# Tag wall\n\nokapi " + " ".join(f"#t{i}/a/b" for i in range(n)) + " #private\n"
    write(tmp_path / "v", "wall.md", text)
    write(tmp_path / "v", "plain.md", "# Plain\n\nokapi #t0\n")
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    h.add_vault(tmp_path / "v", "v")
    yield h, n
    h.close()


def test_a_note_past_the_bound_keeps_its_first_tags_with_one_warning(wall):
    h, n = wall
    report = h.index()[0]
    assert report.added == 2 and not report.error
    said = [w for w in report.warnings if w.startswith("wall.md:")]
    assert len(said) == 1 and f"{n + 1 - MAX_NOTE_TAGS // 3:,} of its {n + 1:,} tags left out" in said[0]
    store = open_store(h.config.vault("v"))
    try:
        tags, props = store.catalog.file_fields("wall.md")
        assert tags == [f"t{i}/a/b" for i in range(MAX_NOTE_TAGS // 3)] and TAGS_CUT in props
    finally:
        store.close()
    found = lambda tag, **kw: {x.path for x in h.search("okapi", tags=[tag], **kw)}  # noqa: E731
    assert found("t0") == {"wall.md", "plain.md"}
    assert found(f"t{MAX_NOTE_TAGS // 3 - 1}/a") == {"wall.md"}
    with pytest.raises(NoMatchingNotes):  # left out: a word of the text, not a tag
        found(f"t{n - 1}")
    # the owner still finds the note by its text; an agent never sees it
    assert "wall.md" in {x.path for x in h.search("okapi")}
    assert {x.path for x in h.search("okapi", agent=True)} == {"plain.md"}
    again = h.index()[0]  # not read again, so not warned about again
    assert not [w for w in again.warnings if w.startswith("wall.md:")]


def test_a_note_cannot_mark_itself_as_cut(tmp_path):
    write(tmp_path / "v", "n.md", f"---\n{TAGS_CUT}: yes\n---\n# N\n\nokapi #x\n")
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    try:
        h.add_vault(tmp_path / "v", "v")
        h.index()
        assert {x.path for x in h.search("okapi", agent=True)} == {"n.md"}
    finally:
        h.close()


def test_a_ledger_written_before_the_bound_is_read_within_it():
    """A note of 200,000 tags indexed before the bound is read back bounded, once per note: a
    journal replaying its chunks no longer copies them into every chunk's index entry."""
    import json

    from hybrid.store.base import note_fields
    tags = [f"t{i}/a/b/c" for i in range(5 * MAX_NOTE_TAGS)]
    fid, note = note_fields((7, "Wall", json.dumps(tags), "[]", "{}"))
    assert fid == 7 and note.tags == bounded_tags(tags)[0] and len(tag_set(note.tags)) <= MAX_NOTE_TAGS


def test_a_note_of_many_aliases_keeps_its_first_with_one_warning(tmp_path):
    """Every chunk carries its note's aliases (fourth re-test of issue #47: 5,500 aliases over
    3,000 sections took 114 s): past the bound a note keeps its first, and says so once."""
    from hybrid.store.base import MAX_NOTE_ALIASES, bounded_aliases
    n = MAX_NOTE_ALIASES + 50
    aliases = "".join(f"  - alias{i}\n" for i in range(n))
    write(tmp_path / "v", "many.md", f"---\naliases:\n{aliases}---\n# Many\n\nokapi\n\n## Two\n\nokapi again\n")
    h = hybrid.open(tmp_path / "home", embedder="hash:64")
    try:
        h.add_vault(tmp_path / "v", "v")
        report = h.index()[0]
        said = [w for w in report.warnings if w.startswith("many.md:")]
        assert len(said) == 1 and f"50 of its {n:,} aliases left out" in said[0]
        store = open_store(h.config.vault("v"))
        try:
            rows = [r for batch in store.catalog.iter_chunks() for r in batch]
            assert rows and all(r.aliases == [f"alias{i}" for i in range(MAX_NOTE_ALIASES)] for r in rows)
        finally:
            store.close()
        assert not [w for w in h.index()[0].warnings if w.startswith("many.md:")]
    finally:
        h.close()
    assert bounded_aliases(["x" * 3000, "y" * 1500, "z"]) == (["x" * 3000], 2)  # characters bound too
