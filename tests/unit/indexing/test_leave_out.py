"""Leaving noisy sections out (hybrid.sources.sections, issue #33): by heading and by code block
language (settings `exclude_sections`, `exclude_blocks`, global and per vault), and by markers in
the note, before anything is chunked or embedded. What is left out is found by neither arm, is in
no snippet, context or agent `get_note`, nor in the text PostgreSQL keeps; what is kept is cited
at its true lines. Logic tests: the hash embedder stands in for the model, on both stores."""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

import anyio
import pytest
import tomlkit
from helpers import ALL_STORES, write
from mcp import Client
from mcp_types import Implementation

from hybrid.core.config import Vault, load_config
from hybrid.core.errors import ConfigError, PathRefused
from hybrid.core.settings import Settings, replace
from hybrid.faces.mcp import build_server
from hybrid.indexing.indexer import chunking_meta
from hybrid.sources.markdown import parse_note
from hybrid.sources.sections import NOTHING, LeaveOut, kept_text, leave_out, left_out

STORES = ALL_STORES

DAILY = """---
tags: [daily]
---
# 2025-03-04

Fixed the quokkafeeder valve today; it holds pressure now.

## Journal prompts

- What made you smile? zumbrafrage
- See [[Prompt ideas]]

### Gratitude

Three things: glimmerwort

## Work

Reviewed the pelargon rollout with Ana.

%% hybrid: skip %%
Boilerplate from the template: tessaract checklist
%% hybrid: end %%

```dataview
LIST FROM #project WHERE vortigram
```

Afterwards the pelargon canary was green.
"""

NOTES = {
    "daily/2025-03-04.md": DAILY,
    "daily/2025-03-05.md": "# 2025-03-05\n\n## Journal Prompts\n\nzumbrafrage again\n\n## Log\n\nquiet day, "
                           "farnwhistle\n\n## Template footer\n\nkrellbox footer\n",
    "prompt ideas.md": "# Prompt ideas\n\nA list of prompts.\n",
    "ops.md": "# Ops\n\nRunbook for the pelargon deploy.\n\n## Scratch\n%% hybrid: skip-section %%\n"
              "oxblenditch scratch notes\n\n### Deeper\n\nstill scratch: oxblenditch\n\n## Rollback\n\n"
              "Roll back with the pelargon lever.\n",
}
GONE = ("zumbrafrage", "glimmerwort", "tessaract", "vortigram", "krellbox", "oxblenditch")


def lines(text: str, first: int, last: int) -> str:
    return "\n".join(text.split("\n")[first - 1:last])


def kept_lines(got: str, text: str, first: int, last: int) -> bool:
    """Whether ``got`` is lines ``first``..``last`` of ``text`` with only lines left out blank."""
    want = lines(text, first, last).split("\n")
    return all(g in ("", w) for g, w in zip(got.split("\n"), want, strict=True))


def call(h, tool, args):
    async def main():
        async with Client(build_server(h), client_info=Implementation(name="probe", version="1")) as c:
            return await c.call_tool(tool, args)
    return anyio.run(main)


def vault_option(h, key, value):
    """Set vault `v`'s own ``key`` in the config file (the handle re-reads it)."""
    data = tomllib.loads(h.config.path.read_text())
    data["vaults"]["v"][key] = value
    h.config.path.write_text(tomlkit.dumps(data))
    h.refresh()


def chunk_texts(h) -> list[str]:
    store = h.session.store(h.config.vault("v"))
    rows = store.catalog.chunks(store.catalog.all_chunk_ids()).values()
    return [r.text for r in rows]


@pytest.fixture
def home(tmp_path, open_h):
    v = tmp_path / "vault"
    for rel, text in NOTES.items():
        write(v, rel, text)
    h = open_h(tmp_path / "home", embedder="hash:64", chunk_tokens=32, exclude_sections=["journal prompts"])
    h.add_vault(v, "v")
    vault_option(h, "exclude_sections", ["Template *"])   # the vault adds to the setting
    vault_option(h, "exclude_blocks", ["DATAVIEW*"])
    report = h.index()[0]
    yield h, v, report
    h.close()


# --- the rule, line by line -------------------------------------------------------------------
def gone(text: str, rule: LeaveOut = NOTHING, path: str = "n.md") -> tuple[list[int], list[str]]:
    """1-based lines ``rule`` and the markers leave out of ``text``, and the warnings."""
    ranges, warnings = left_out(text.split("\n"), parse_note(path, text).body_start, rule, path)
    return sorted({i + 1 for a, b in ranges for i in range(a, b)}), warnings


def test_a_heading_goes_with_its_subsections_up_to_the_next_of_its_level():
    text = "# T\nkeep\n## Journal   PROMPTS\na\n### Sub\nb\n#### Deeper\nc\n## Next\nkeep\n# Top\nkeep\n"
    assert gone(text, LeaveOut(("journal prompts",))) == ([3, 4, 5, 6, 7, 8], [])
    assert gone(text, LeaveOut(("journal*",))) == ([3, 4, 5, 6, 7, 8], [])
    assert gone(text, LeaveOut(("sub",))) == ([5, 6, 7, 8], [])  # any level; ends at a higher one
    assert gone(text, LeaveOut(("journal",))) == ([], [])     # the whole text, not a part of it
    assert gone(text, LeaveOut(("journal prompt?",))) == ([3, 4, 5, 6, 7, 8], [])
    # the last section runs to the end of the note; `# T` to the next `# ` heading
    assert gone(text, LeaveOut(("top",)))[0] == [11, 12, 13]
    assert gone(text, LeaveOut(("t",)))[0] == list(range(1, 11))


def test_headings_and_markers_inside_code_are_examples_and_the_front_block_is_kept():
    text = ("---\ntitle: Journal prompts\n---\n# Doc\n```md\n## Journal prompts\n%% hybrid: skip %%\n```\n"
            "kept\n~~~\n%% hybrid: skip-section %%\n~~~\n")
    assert gone(text, LeaveOut(("journal prompts", "doc2"))) == ([], [])


def test_blocks_go_by_language_fences_included_and_an_unclosed_one_to_the_end():
    text = "# D\n```dataview\nLIST\n```\n```python\nx = 1\n```\n```tasks\nnot done\n"
    assert gone(text, LeaveOut(blocks=("dataview", "Tasks")))[0] == [2, 3, 4, 8, 9, 10]
    assert gone(text, LeaveOut(blocks=("data*",)))[0] == [2, 3, 4]
    assert gone("````query  extra words\nx\n```\nstill in\n````\nout\n", LeaveOut(blocks=("query",)))[0] == \
        [1, 2, 3, 4, 5]


def test_blocks_in_a_callout_or_a_quote_go_too():
    """A dataview block in a callout (where Obsidian users keep them) or a block quote: fences
    prefixed by `>`; one closes with its fence or where its quote ends (second re-test of #47)."""
    text = ("# D\n> [!info] Tasks\n> ```dataview\n> LIST\n> ```\nkept\n\n> ```dataview\n> TABLE\n"
            "after the quote\n>> ~~~tasks\n>> not done\n>> ~~~\n> ```python\n> x = 1\n> ```\n")
    assert gone(text, LeaveOut(blocks=("dataview", "tasks")))[0] == [3, 4, 5, 8, 9, 11, 12, 13]
    assert gone(text, LeaveOut(blocks=("python",)))[0] == [14, 15, 16]
    assert gone(text)[0] == []


def test_markers_leave_out_a_region_or_the_section_they_are_in():
    text = ("lead\n%% hybrid: skip %%\nA\n%% Hybrid:SKIP-section %%\nB\n%%hybrid: end%%\n# H\nkeep\n## S\n"
            "   %% hybrid: skip-section %%\nC\n### SS\nD\n## S2\nkeep\n")
    # a skip-section inside a skipped region counts for nothing; one under `## S` takes S and SS
    assert gone(text) == ([2, 3, 4, 5, 6, 9, 10, 11, 12, 13], [])
    # above the first heading: the lines before it
    assert gone("intro\n%% hybrid: skip-section %%\nx\n# H\nkeep\n")[0] == [1, 2, 3]


def test_bad_markers_warn_naming_file_and_line_and_leak_nothing():
    got, warnings = gone("# N\nkeep\n%% hybrid: skip %%\nsecret\n## Later\nsecret too\n", path="d/n.md")
    assert got == [3, 4, 5, 6, 7]  # never closed: the rest of the note
    assert len(warnings) == 1 and warnings[0].startswith("d/n.md: line 3: ") and "never closed" in warnings[0]
    got, warnings = gone("# N\n%% hybrid: end %%\n%% hybrid: skp %%\nkept\n", path="n.md")
    assert got == []
    assert [w.split(":")[1] for w in warnings] == [" line 2", " line 3"]
    assert "with no `%% hybrid: skip %%`" in warnings[0] and "unknown marker" in warnings[1]


def test_a_note_keeps_its_lines_tags_and_privacy_and_drops_links_of_what_goes():
    text = "---\nprivate: false\n---\n# N\n[[Kept]]\n## Journal prompts\n#private [[Gone]]\nx\n"
    note = parse_note("n.md", text)
    out = leave_out(note, LeaveOut(("journal prompts",)))
    assert len(out.lines) == len(note.lines) and out.lines[:5] == note.lines[:5]
    assert out.lines[5:8] == ["", "", ""]
    assert out.links == ["Kept"] and note.links == ["Kept", "Gone"]
    assert "private" in out.tags  # read from the whole file: the note stays hidden from agents
    assert leave_out(note, NOTHING) is note
    pdf_like = parse_note("n.txt", text)
    assert leave_out(pdf_like, LeaveOut(("journal prompts",))) is pdf_like  # markdown notes only
    assert kept_text("n.md", text, LeaveOut(("journal prompts",))) == "\n".join(out.lines)
    assert kept_text("n.pdf", text, LeaveOut(("journal prompts",))) == text


def test_defaults_change_nothing(tmp_path):
    """No sample note has a marker: with the defaults every note is read as before, and the
    catalog records the chunking as it did, so no index is re-chunked by an upgrade."""
    from hybrid.sources.convert import to_note
    sample = Path(__file__).parents[3] / "hybrid" / "sample_vault"
    notes = sorted(sample.rglob("*.md"))
    assert len(notes) > 20
    for p in notes:
        note = to_note(p.relative_to(sample).as_posix(), p.read_bytes())
        assert leave_out(note, NOTHING) is note
    v = Vault("v", tmp_path, ["**/*.md"], [], "hash:64", tmp_path / "i")
    before = json.dumps({"tokens": 128, "overlap": 32, "header": True, "version": 15})
    assert chunking_meta(Settings()) == chunking_meta(Settings(), vault=v) == before
    v.exclude_sections = ["Journal  Prompts", "journal prompts"]
    assert json.loads(chunking_meta(Settings(), vault=v))["leave_out_sections"] == ["journal prompts"]


# --- settings: global and per vault, bad values ---------------------------------------------
def test_the_vault_adds_to_the_setting_and_bad_values_are_refused(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "config.toml").write_text(
        '[settings]\nexclude_sections = ["Journal prompts"]\nexclude_blocks = ["query"]\n\n'
        f'[vaults.n]\npath = "{tmp_path / "notes"}"\nexclude_sections = ["Template*"]\n')
    v = load_config(tmp_path).vault("n")
    assert (v.exclude_sections, v.exclude_blocks) == (["Journal prompts", "Template*"], ["query"])
    assert LeaveOut.of(v).heading("template footer") and LeaveOut.of(v).heading("JOURNAL PROMPTS")
    for bad in ('exclude_sections = "Journal prompts"', 'exclude_sections = [""]',
                'exclude_blocks = ["two words"]'):
        (tmp_path / "config.toml").write_text(f'[vaults.n]\npath = "{tmp_path / "notes"}"\n{bad}\n')
        with pytest.raises(ConfigError, match="vault 'n'.*exclude_"):
            load_config(tmp_path)
    with pytest.raises(ConfigError, match="exclude_sections"):
        replace(Settings(), exclude_sections=["ok", "  "])


# --- through the index, both stores ------------------------------------------------------------
def test_left_out_text_is_in_no_chunk_and_found_by_no_arm(home):
    h, _, report = home
    texts = chunk_texts(h)
    assert texts and not [w for w in GONE if any(w in t for t in texts)]
    for mode in ("lexical", "vector", "hybrid"):
        for word in GONE:
            for hit in h.search(word, mode=mode, top_k=20):
                assert word not in hit.text and word not in hit.snippet, (mode, word)
        assert not h.search(" ".join(GONE), mode="lexical")
        assert not h.search(" ".join(GONE), mode="lexical", agent=True)
        assert not [w for w in GONE for x in h.search(w, mode=mode, agent=True) if w in x.text]
    assert not report.warnings


def test_what_is_kept_is_found_and_cited_at_its_true_lines(home):
    h, v, _ = home
    for word, path in (("quokkafeeder", "daily/2025-03-04.md"), ("canary", "daily/2025-03-04.md"),
                       ("farnwhistle", "daily/2025-03-05.md"), ("lever", "ops.md")):
        hits = [x for x in h.search(word, mode="lexical") if x.path == path]
        assert hits, word
        text = (v / path).read_text()
        assert word in lines(text, hits[0].start_line, hits[0].end_line)
        assert kept_lines(hits[0].text, text, hits[0].start_line, hits[0].end_line)
    hit = h.search("canary", mode="lexical")[0]
    assert hit.heading_path[-1] == "Work"


def test_context_and_the_agents_get_note_leave_it_out_the_owners_get_does_not(home):
    h, v, _ = home
    r = h.search("pelargon", mode="lexical", context=2000, top_k=10)
    blocks = [b for n in r.context.notes for b in n.blocks]
    assert blocks and not [w for w in GONE if any(w in b.text for b in blocks)]
    for note in r.context.notes:
        text = (v / note.path).read_text()
        for b in note.blocks:  # blocks are their lines of the file, only what is left out blank
            assert kept_lines(b.text, text, b.start_line, b.end_line)
    for path in NOTES:
        text = (v / path).read_text()
        agent = h.get(path, "v", agent=True).text
        assert not [w for w in GONE if w in agent]
        assert kept_lines(agent, text, 1, len(text.rstrip("\n").split("\n")))  # at their own numbers
        assert h.get(path, "v").text == text.rstrip("\n")  # the owner's file, as it is
    got = h.get("daily/2025-03-04.md:6-6", "v", agent=True)
    assert "quokkafeeder" in got.text
    res = call(h, "get_note", {"path": "daily/2025-03-04.md"})
    assert not res.is_error and "quokkafeeder" in res.content[0].text
    assert not [w for w in GONE if w in res.content[0].text]
    with pytest.raises(PathRefused, match="no heading"):  # its section is not there for an agent
        h.get("[[2025-03-04#Journal prompts]]", "v", agent=True)
    assert "zumbrafrage" in h.get("[[2025-03-04#Journal prompts]]", "v").text


def test_a_link_in_a_left_out_section_is_no_backlink(home):
    h, _, _ = home
    assert h.get("Prompt ideas", "v").backlinks == []
    assert h.get("daily/2025-03-04.md", "v").links == []


def test_the_database_keeps_no_left_out_text(home, store_kind):
    h, v, _ = home
    store = h.session.store(h.config.vault("v"))
    if store_kind != "postgresql":
        assert not store.catalog.keeps_text
        return
    text = store.catalog.note_text("daily/2025-03-04.md")
    assert "quokkafeeder" in text and not [w for w in GONE if w in text]
    assert len(text.split("\n")) == len(DAILY.split("\n"))
    v.rename(v.with_name("elsewhere"))  # a reader without the folder reads the database's text
    for agent in (True, False):
        got = h.get("daily/2025-03-04.md", "v", agent=agent).text
        assert "quokkafeeder" in got and not [w for w in GONE if w in got]
        assert kept_lines(got, DAILY, 1, len(DAILY.rstrip("\n").split("\n")))


def test_changing_the_rule_rechunks_at_the_next_index(home):
    h, v, _ = home
    from hybrid.app.freshness import changes_on_disk
    assert h.index()[0].updated == 0
    h.override(exclude_sections=[])  # the vault's own `Template *` stays
    assert changes_on_disk(h.config.vault("v"), h.settings).changed == len(NOTES)
    report = h.index()[0]
    assert report.updated == len(NOTES)
    texts = chunk_texts(h)
    assert any("zumbrafrage" in t for t in texts) and not any("krellbox" in t for t in texts)
    vault_option(h, "exclude_blocks", [])
    assert h.index()[0].updated == len(NOTES)
    assert any("vortigram" in t for t in chunk_texts(h))
    assert h.index()[0].updated == 0


def test_an_unclosed_marker_warns_once_and_leaves_the_rest_out(home):
    h, v, _ = home
    write(v, "open.md", "# Open\n\nvisible sprocketry\n\n%% hybrid: skip %%\nhidden sprocketry\n\n## More\n"
                        "hidden glonkwise\n")
    report = h.index()[0]
    warned = [w for w in report.warnings if "open.md" in w]
    assert len(warned) == 1 and "open.md: line 5:" in warned[0] and "never closed" in warned[0]
    assert not h.search("glonkwise", mode="lexical")
    assert any("visible sprocketry" in x.text for x in h.search("sprocketry", mode="lexical"))
    assert not any("hidden" in x.text for x in h.search("sprocketry", mode="lexical"))
    assert "glonkwise" not in h.get("open.md", "v", agent=True).text
