import random

import pytest
from helpers import REPO

from hybrid.indexing.chunk import Chunker
from hybrid.sources.markdown import parse_note

NOTE = """---
title: Design
tags: [work]
---
# Design

Intro paragraph about the design.

## Proposal

The proposal text.

### Queue Design

We use a queue.

```python
def handler():

    return 1
```

## Rollout

Ship it.
"""


def chunker(counter, tokens=200, overlap=32, header=True):
    return Chunker(counter, 254, tokens, overlap, header)


def test_heading_paths_and_line_ranges(counter):
    note = parse_note("design.md", NOTE)
    chunks = chunker(counter).chunk(note)
    paths = [c.heading for c in chunks]
    assert paths == ["Design", "Design > Proposal", "Design > Proposal > Queue Design", "Design > Rollout"]
    lines = NOTE.split("\n")
    for c in chunks:
        # The line range points at exactly the chunk's text in the original file.
        assert "\n".join(lines[c.start_line - 1:c.end_line]).strip("\n") == c.text
    queue = chunks[2]
    assert queue.start_line == lines.index("### Queue Design") + 1
    assert "```python" in queue.text and queue.text.rstrip().endswith("```")


def test_contextual_header_names_title_and_path(counter):
    note = parse_note("design.md", NOTE)
    c = chunker(counter).chunk(note)[2]
    assert c.embed_text.startswith("Design > Proposal > Queue Design\n")
    assert chunker(counter, header=False).chunk(note)[2].embed_text == c.text


def test_contextual_header_carries_the_notes_aliases(counter):
    note = parse_note("Aliases.md", "---\naliases: [nickname, alternative name]\n---\n# Aliases\n\n"
                                    "Give a note other names.\n\n## Add an alias\n\nUse the property.\n")
    first, second = chunker(counter).chunk(note)
    assert first.embed_text.startswith("Aliases (nickname, alternative name)\n")
    assert second.embed_text.startswith("Aliases (nickname, alternative name) > Add an alias\n")
    assert "nickname" not in second.text  # the cited text stays the note's own


def _long_note(rng):
    parts = ["# Long\n"]
    for s in range(6):
        parts.append(f"## Section {s}\n")
        for _ in range(rng.randint(3, 12)):
            words = " ".join(rng.choice(["kafka", "consumer", "réplica", "10.0.0.0/24", "--flag",
                                         "idempotency", "日本語", "x" * rng.randint(1, 30)])
                             for _ in range(rng.randint(5, 120)))
            parts.append(words + "\n")
        if s % 2:
            parts.append("```bash\n" + "\n".join(f"echo line {i}" for i in range(rng.randint(3, 60))) + "\n```\n")
        parts.append("| a | b |\n|---|---|\n" + "".join(f"| {i} | v{i} |\n" for i in range(rng.randint(1, 40))))
    parts.append("one enormous line " + "supercalifragilistic " * 400 + "\n")
    return "\n".join(parts)


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_budget_never_exceeded_in_model_tokens(counter):
    rng = random.Random(7)
    for tokens in (64, 128, 200, 256, 1000):
        note = parse_note("long.md", _long_note(rng))
        chunks = chunker(counter, tokens).chunk(note)
        assert len(chunks) > 5
        counts = counter([c.embed_text for c in chunks])
        assert max(counts) <= 254, (tokens, max(counts))
        # every non-blank body line is covered by some chunk (a heading with no text of its
        # own lives on in its children's heading paths)
        covered = set()
        for c in chunks:
            covered.update(range(c.start_line, c.end_line + 1))
        for i, line in enumerate(note.lines, 1):
            if line.strip() and not line.startswith("#"):
                assert i in covered


def test_small_fences_and_tables_are_not_cut(counter):
    text = "# T\n\n" + "\n\n".join(
        f"Paragraph {i} " + "word " * 40 + f"\n\n```sql\nSELECT {i};\nSELECT 2;\n```\n\n| h |\n|---|\n| {i} |"
        for i in range(12))
    chunks = chunker(counter, 120, 16).chunk(parse_note("t.md", text))
    assert len(chunks) > 3
    for c in chunks:
        assert c.text.count("```") % 2 == 0, c.text
        for line in c.text.split("\n"):
            if line.startswith("| h"):
                assert "| ---" in c.text.replace("|---|", "| ---") or "|---|" in c.text


def test_overlap_repeats_trailing_block(counter):
    text = "# T\n\n" + "\n\n".join(f"Para {i}: " + "alpha beta " * 20 for i in range(10))
    chunks = chunker(counter, 120, 60).chunk(parse_note("t.md", text))
    assert len(chunks) >= 3
    assert any(a.end_line >= b.start_line for a, b in zip(chunks, chunks[1:]))
    none = chunker(counter, 120, 0).chunk(parse_note("t.md", text))
    assert all(a.end_line < b.start_line for a, b in zip(none, none[1:]))


def test_empty_and_heading_only_notes(counter):
    assert chunker(counter).chunk(parse_note("e.md", "")) == []
    assert chunker(counter).chunk(parse_note("e.md", "---\ntags: [a]\n---\n")) == []
    chunks = chunker(counter).chunk(parse_note("h.md", "# A\n## B\nbody under b\n"))
    assert [c.heading for c in chunks] == ["A > B"]


def test_a_heading_is_never_a_chunk_of_its_own(counter):
    """A heading whose first paragraph is over the budget goes with that paragraph: alone it
    is a bare heading as a whole hit (issue #49: short Hindi and Hebrew notes, whose words
    cost MiniLM many word pieces each, gave `# दाल मखनी की विधि` as their best passage)."""
    hindi = ("# दाल मखनी की विधि\n\n"
             "काली उड़द की दाल और राजमा को रात भर भिगो दें। सुबह प्रेशर कुकर में नमक डालकर पकाएं।\n"
             "मक्खन और क्रीम मिलाकर धीमी आंच पर दो घंटे तक पकाएं। टमाटर की प्यूरी और अदरक लहसुन डालें।\n")
    english = "# Setup\n\n" + "word " * 150 + "\n\n## Next\n\nshort text\n"
    for name, text in (("hindi.md", hindi), ("english.md", english)):
        chunks = chunker(counter, 128, 32).chunk(parse_note(name, text))
        lines = text.split("\n")
        for c in chunks:
            body = [ln for ln in lines[c.start_line - 1:c.end_line] if ln.strip() and not ln.startswith("#")]
            assert body, (name, c.start_line, c.end_line, c.text)
        assert chunks[0].start_line == 1  # the heading line is cited with its first paragraph
        assert max(counter([c.embed_text for c in chunks])) <= 254


def test_heading_inside_fence_is_not_a_heading(counter):
    text = "# Real\n\n```bash\n# not a heading\necho hi\n```\n"
    chunks = chunker(counter).chunk(parse_note("f.md", text))
    assert [c.heading for c in chunks] == ["Real"]
    assert "# not a heading" in chunks[0].text


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_token_estimates_are_exact_so_the_recount_can_be_skipped(counter):
    """The chunker re-counts only chunks whose estimate (header + blocks) nears the model's
    limit. That is safe only if the estimate equals the real count: check it on the sample
    vault and on generated notes with lists, fences, tables and wikilinks."""
    import sys
    from pathlib import Path

    import hybrid
    sys.path.insert(0, str(REPO / "eval" / "bench"))
    import genvault

    seen: list[tuple[str, int]] = []

    class Recording(Chunker):
        def _enforce_limit(self, chunks, estimates):
            seen.extend((c.embed_text, e) for c, e in zip(chunks, estimates))
            return super()._enforce_limit(chunks, estimates)

    ch = Recording(counter, 254, 128, 32, True)
    sample = Path(hybrid.__file__).parent / "sample_vault"
    for p in sorted(sample.rglob("*.md")):
        ch.chunk(parse_note(p.name, p.read_text(encoding="utf-8")))
    gen = genvault.Generator(60, seed=3)
    for i in range(60):
        rel, text = gen.note(i)
        ch.chunk(parse_note(rel, text))
    assert len(seen) > 300
    exact = counter([t for t, _ in seen])
    assert [e for _, e in seen] == exact
