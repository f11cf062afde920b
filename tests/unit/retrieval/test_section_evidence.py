"""Issue #11: lexical evidence at the section level, query-aware fusion, and the verbatim tier of
exact-first. Real tantivy indexes on real files; the hash embedder where only logic is tested."""
import pytest
from helpers import consistent, write

import hybrid
from hybrid.retrieval import fuse
from hybrid.retrieval.arms import by_section
from hybrid.retrieval.exact import exact_first, strong_literals, verbatim_text
from hybrid.store.base import ChunkRow
from hybrid.store.lexicon import LexicalQuery, doc_fields, section_text
from hybrid.store.local.lexical import TantivyIndex
from hybrid.store.local.store import VaultStore


def indexed(tmp_path, vault, **settings):
    h = hybrid.open(tmp_path / "home", embedder="hash:64", **settings)
    h.add_vault(vault, "vault")
    h.index()
    return h


# --- section text -----------------------------------------------------------------------------

def test_section_text_drops_the_repeated_overlap_once():
    a = "alpha beta gamma delta epsilon zeta eta theta iota kappa"
    b = "zeta eta theta iota kappa lambda mu nu xi omicron pi rho"  # starts with a's last 5 words
    assert section_text([a, b]) == a + "\n lambda mu nu xi omicron pi rho"


@pytest.mark.parametrize("texts, expected", [
    ([], ""),
    (["only one chunk"], "only one chunk"),
    (["short", "short"], "short\nshort"),  # a start shorter than the probe is not an overlap
    (["the first part of a section", "a second part with nothing shared at all"],
     "the first part of a section\na second part with nothing shared at all"),
])
def test_section_text_cases(texts, expected):
    assert section_text(texts) == expected


# --- the index holds sections beside chunks ---------------------------------------------------

LONG = "# Sourdough\n\n## Bulk fermentation\n\n" + "\n\n".join(
    f"Paragraph {i}: the dough rises slowly while the starter works; " + "fold and wait. " * 12
    for i in range(6)) + "\n\nFinally the crumb is open and the loaf holds its shape.\n"


def test_sections_are_indexed_counted_apart_and_replaced_with_their_note(tmp_path):
    vault = tmp_path / "vault"
    write(vault, "bread.md", LONG)
    write(vault, "other.md", "# Other\n\nnothing about loaves here\n")
    h = indexed(tmp_path, vault)
    n = consistent(h)  # count() counts chunk documents only
    store = VaultStore(h.config.vault("vault").index_dir)
    try:
        ids = sorted(store.catalog.all_chunk_ids())
        bread = [i for i, r in store.catalog.chunks(ids).items() if r.path == "bread.md"]
        assert len(bread) > 2 and n == len(ids)
        assert store.lexical.section_count() == 2  # bread.md: "Bulk fermentation"; other.md
        sections = store.lexical.search_units(LexicalQuery(["crumb", "starter"]), 10, unit="section")
        # one section holds every chunk of "Bulk fermentation"; its words span several chunks
        assert sections and set(sections[0][0]) <= set(bread) and len(sections[0][0]) >= 2
        chunk_hits = store.lexical.search(LexicalQuery(["crumb", "starter"]), 10)
        assert all(len(str(c)) for c, _ in chunk_hits) and {c for c, _ in chunk_hits} <= set(ids)
    finally:
        store.close()
    write(vault, "bread.md", LONG.replace("crumb", "texture"))
    h.index()
    consistent(h)
    store = VaultStore(h.config.vault("vault").index_dir)
    try:
        assert store.lexical.search_units(LexicalQuery(["crumb"]), 10, unit="section") == []
        assert store.lexical.search_units(LexicalQuery(["texture"]), 10, unit="section")
        # a filter-only match never returns section documents as chunks
        assert all(i in set(store.catalog.all_chunk_ids())
                   for i in store.lexical.matching_ids(LexicalQuery(excludes=["zzz"])))
    finally:
        store.close()


def test_an_index_built_before_sections_gets_them_on_the_next_index_run(tmp_path):
    vault = tmp_path / "vault"
    write(vault, "a.md", "# A\n\nkafka consumer lag\n")
    h = indexed(tmp_path, vault)
    sections = h.config.vault("vault").index_dir / "lexical" / "sections"
    assert TantivyIndex.remove_files(sections) == [] and not sections.exists()
    h.index()
    consistent(h)
    store = VaultStore(h.config.vault("vault").index_dir)
    try:
        assert store.lexical.section_count() == 1
    finally:
        store.close()
    assert [x.path for x in h.search("kafka lag", mode="lexical")] == ["a.md"]


def camelids_and_zoo(vault, literal=""):
    """A long note whose three chunks each name one of alpaca, llama, vicuna (the last one also
    ``literal``), and a short note naming alpaca twice (and ``literal=300000``)."""
    parts = ["alpaca " + "filler text about nothing in particular. " * 30,
             "llama " + "more filler text about nothing in particular. " * 30,
             f"vicuna {literal} " + "still more filler text. " * 30]
    write(vault, "camelids.md", "# Camelids\n\n" + "\n\n".join(parts) + "\n")
    write(vault, "zoo.md", "# Zoo\n\nalpaca alpaca pen" + (f", {literal}=300000" if literal else "") + "\n")
    return vault


def test_section_units_rank_a_note_by_words_spread_over_its_chunks(tmp_path):
    """Each chunk of the long note names one of the query's words; a short note names one word
    twice. Chunk BM25 prefers the short note; section BM25 sees the whole section."""
    vault = camelids_and_zoo(tmp_path / "vault")
    h = indexed(tmp_path, vault, lexical_unit="chunk")
    assert h.search("alpaca llama vicuna", mode="lexical")[0].path == "zoo.md"
    h.override(lexical_unit="section")
    top = h.search("alpaca llama vicuna", mode="lexical")
    assert top[0].path == "camelids.md" and top[0].start_line >= 1  # cites a chunk of it
    h.override(lexical_unit="both")
    assert {n.best.path for n in h.search("alpaca llama vicuna", mode="lexical").notes[:2]} == {"camelids.md", "zoo.md"}


# --- by_section ------------------------------------------------------------------------------

def test_by_section_cites_each_sections_best_chunk_and_keeps_its_other_hits_behind_it():
    chunks = [(5, 9.0), (2, 7.0), (3, 6.0), (9, 3.0)]
    sections = [([1, 2, 3], 20.0), ([4, 5], 10.0), ([7, 8], 4.0)]
    out = by_section(chunks, sections, both=False)
    # 2 is section 1's best chunk, 3 its other hit; 7 stands for section 3 (no chunk hit)
    assert [c for c, _ in out] == [2, 3, 5, 7, 9]
    assert out[0][1] == 20.0 and out[1][1] < 20.0 and out[-1][1] < 4.0
    both = by_section(chunks, sections, both=True)
    assert [c for c, _ in both][:3] in ([2, 3, 5], [5, 2, 3])
    assert {c for c, _ in both} == {2, 3, 5, 7, 9}
    assert by_section([], [], both=True) == [] and by_section(chunks, [], both=False) == chunks


# --- query-aware fusion -------------------------------------------------------------------------

def test_coverage_and_weight():
    analyze = str.split
    want = fuse.content_stems("how do I keep my notes safe", lambda t: t.split())
    assert want == {"keep", "notes", "safe"}
    assert fuse.coverage(want, ["keep notes", "safe"], analyze) == pytest.approx(2 / 3)
    assert fuse.coverage(set(), ["x"], analyze) == 1.0
    assert fuse.coverage(want, [], analyze) == 0.0
    assert fuse.coverage_weight(1.0) == 1.0 and fuse.coverage_weight(0.6) == 1.0
    assert fuse.coverage_weight(0.0) == fuse.COVERAGE_FLOOR
    assert fuse.COVERAGE_FLOOR < fuse.coverage_weight(0.45) < 1.0


def test_a_paraphrase_lightens_bm25_and_a_keyword_query_does_not(tmp_path):
    from hybrid.retrieval.arms import Arms, lexical_arm
    from hybrid.retrieval.pipeline import fusion_weights, hydrate
    from hybrid.retrieval.request import SearchRequest
    vault = tmp_path / "vault"
    write(vault, "sync.md", "# Selective sync\n\nExclude a folder from Sync so large files stay on one device.\n")
    write(vault, "misc.md", "# Misc\n\nI keep one huge list of my other devices and a folder of PDFs.\n")
    h = indexed(tmp_path, vault)
    targets = [(v, h.session.store(v)) for v in h.config.select(None)]
    s = h.settings

    def weight(text):
        req = SearchRequest(text)
        arms = Arms(lexical=lexical_arm(targets, req.parsed, req.filters, 10, s),
                    vector=[(("vault", 1), 1.0)])
        rows = hydrate(targets, [k for k, _ in arms.lexical])
        return fusion_weights(targets, req.parsed, arms, rows, s)

    assert weight("selective sync exclude folder") == (s.weight_lexical, s.weight_vector)
    wl, wv = weight("stop copying my enormous scanned paperwork collection onto every device")
    assert wl < s.weight_lexical / 2 and wv == s.weight_vector
    h.override(adaptive_fusion=False)
    s = h.settings
    assert weight("stop copying my enormous scanned paperwork collection onto every device")[0] == s.weight_lexical


# --- strong literals and the verbatim tier ---------------------------------------------------------

@pytest.mark.parametrize("terms, expected", [
    (["pi-hole", "allowlist"], ["pi-hole"]),
    ("use my self-hosted apps while travelling".split(), []),
    ("why were pushes to FORGE-1533 slow today".split(), ["FORGE-1533"]),
    ("present my notes full-screen for a talk".split(), []),
])
def test_strong_literals(terms, expected):
    assert strong_literals(terms) == expected


def test_a_long_question_its_best_hits_barely_cover_mentions_its_literal_in_passing():
    terms = "keep the actions I use most at the top of the Ctrl+P list".split()
    assert strong_literals(terms, coverage=0.9) == ["Ctrl+P"]
    assert strong_literals(terms, coverage=0.3) == []
    assert strong_literals(["Ctrl+P", "palette"], coverage=0.0) == ["Ctrl+P"]  # short: a lookup


@pytest.mark.parametrize("terms, expected", [
    (["publish:", "false"], "publish: false"),
    (["Obsidian", "Desktop", "v1.1.10"], "obsidian desktop v1.1.10"),
    (["vim", "key", "bindings"], ""),
    (["this.file"], ""),  # one word: the literal tier covers it
])
def test_verbatim_text(terms, expected):
    from hybrid.core.tokens import literals
    assert verbatim_text(terms, literals(terms)) == expected


def row(cid, text):
    return ChunkRow(cid, f"n{cid}.md", "", "", 1, 1, text, [], [], 0.0, "")


def test_the_verbatim_tier_goes_above_the_literal_tier():
    rows = {1: row(1, "v1.1.10 released"), 2: row(2, "includes everything up to Obsidian  Desktop v1.1.10"),
            3: row(3, "unrelated")}
    fused = [(3, 0.5), (1, 0.4), (2, 0.3)]
    out = exact_first(fused, [1, 2], rows, ["v1.1.10"], False, "obsidian desktop v1.1.10")
    assert [k for k, _ in out] == [2, 1, 3]
    assert out[0][1] == pytest.approx(2.3) and out[1][1] == pytest.approx(1.4)


def test_a_query_of_punctuation_finds_the_notes_that_hold_it(tmp_path):
    vault = tmp_path / "vault"
    write(vault, "syntax.md", "# Comments\n\nWrap text in %%percent signs%% to hide it.\n")
    write(vault, "other.md", "# Other\n\nA note about percent and signs, with no comment syntax.\n")
    h = indexed(tmp_path, vault)
    assert [x.path for x in h.search("%%", top_k=3)][:1] == ["syntax.md"]
    assert [x.path for x in h.search("%%", mode="lexical", top_k=3)] == ["syntax.md"]


def test_a_lookup_ranks_by_chunks_whatever_the_unit(tmp_path):
    """A query of nothing but literals wants the chunk that names it: the lexical arm then
    ranks chunks even when sections are the unit; a query of words still ranks sections."""
    vault = camelids_and_zoo(tmp_path / "vault", literal="max.poll.interval.ms")
    h = indexed(tmp_path, vault, lexical_unit="section")

    def ranked(q):
        return [(x.path, x.start_line) for x in h.search(q, mode="lexical", top_k=5)]
    lookup, words = ranked("max.poll.interval.ms"), ranked("alpaca llama vicuna")
    h.override(lexical_unit="chunk")
    assert ranked("max.poll.interval.ms") == lookup
    assert ranked("alpaca llama vicuna") != words


# --- prose: the title counted once, field boosts that do not drown the body (issue #29) -------

def test_an_h1_repeating_the_title_is_not_counted_again_as_a_heading():
    row = ChunkRow(1, "paper.md", "Dendritic arbor geometry", "Dendritic Arbor Geometry > Methods", 1, 2,
                   "text", ["lab/notes"], [], 0.0, "")
    f = doc_fields(row)
    assert "Dendritic" in f.title and f.headings == "Methods lab/notes"
    other = ChunkRow(2, "x.md", "X", "Dendritic Arbor Geometry", 1, 2, "text", [], [], 0.0, "")
    assert doc_fields(other).headings == "Dendritic Arbor Geometry"  # another heading: kept


def test_a_long_query_ranks_the_body_that_holds_its_words_above_a_title_holding_two(tmp_path):
    vault = tmp_path / "vault"
    write(vault, "a.md", "# Alpha beta\n\nNothing else of the question is said in this note, only "
                         "unrelated words about weather and gardens.\n")
    write(vault, "b.md", "# Results\n\nWe measured alpha, beta, gamma and delta together with epsilon "
                         "in every sample of the study.\n")
    for n in range(6):  # background notes, so that the query's words are rare
        write(vault, f"n{n}.md", f"# Note {n}\n\nPlain words about cooking, bread number {n}.\n")
    h = indexed(tmp_path, vault)
    hits = h.search("alpha beta gamma delta epsilon measured", mode="lexical")
    assert [x.path for x in hits][:2] == ["b.md", "a.md"]


# --- a literal's note: named for it, whole, either spelling of a version -------------------------

@pytest.mark.parametrize("haystack, needle, found", [
    ("released 1.9.1 today", "1.9.1", True),
    ("v1.9.1", "1.9.1", True),            # a version's "v"
    ("(1.9.1),", "1.9.1", True),
    ("1.9.10", "1.9.1", False),           # a longer number
    ("11.9.1", "1.9.1", False),
    ("1.9.1.2", "1.9.1", False),
    ("0.1.9.1", "1.9.1", False),
    ("see 1.9.10 and 1.9.1", "1.9.1", True),  # a later occurrence stands whole
    ("forge-15330", "forge-1533", False),
    ("forge-1533: fixed", "forge-1533", True),
    ("big-orders-created", "orders-created", True),  # words: as before, anywhere
])
def test_a_literal_ending_in_a_digit_is_found_only_whole(haystack, needle, found):
    from hybrid.retrieval.exact import holds
    assert holds(haystack, needle) is found


def test_a_version_is_looked_up_by_either_spelling():
    from hybrid.core.tokens import query_idents
    assert query_idents("0.8.12") == ["0.8.12", "v0.8.12"]
    assert query_idents("Obsidian v1.6.0") == ["v1.6.0", "1.6.0"]
    assert query_idents("10.0.0.0/24") == ["10.0.0.0/24"]  # no version: no other spelling


def versioned(cid, path, text, title=""):
    return ChunkRow(cid, path, title, "", 1, 1, text, [], [], 0.0, "")


def test_the_note_named_for_a_literal_goes_first():
    """The release note named v0.8.12 (its file name: no text of it says 0.8.12) goes above
    a note that mentions 0.8.12, which fusion ranked higher; v0.8.15 and a note about 0.8.120
    are not lifted."""
    rows = {1: versioned(1, "Release notes/v0.8.12.md", "Released on 2020/09/07. Update Electron."),
            2: versioned(2, "en/Sync.md", "Sync needs Obsidian 0.8.12 or later."),
            3: versioned(3, "Release notes/v0.8.15.md", "Released on 2020/09/14."),
            4: versioned(4, "en/Other.md", "Fixed in 0.8.120.")}
    fused = [(3, 0.3), (2, 0.25), (4, 0.2), (1, 0.1)]
    out = exact_first(fused, [3, 2, 4, 1], rows, ["0.8.12"])
    assert [k for k, _ in out] == [1, 2, 3, 4]
    assert out[0][1] == pytest.approx(1.6) and out[1][1] == pytest.approx(1.25)
    # a title from the front matter names it too ("1.6.0" for the query's "v1.6.0")
    rows = {5: versioned(5, "Release notes/v1.6.0.md", "Shiny new things", title="1.6.0"),
            6: versioned(6, "en/Canvas.md", "Since v1.6.0, canvases open faster.")}
    out = exact_first([(6, 0.3), (5, 0.2)], [6, 5], rows, ["v1.6.0"])
    assert [k for k, _ in out] == [5, 6]


def test_the_note_more_of_whose_names_are_for_a_literal_goes_first():
    """Two release notes titled 1.5.11 (the public release, v1.5.md, and the insider build,
    v1.5.11.md): the one whose file name says it too goes first, though fusion ranked the other
    higher; a note one of whose names is for the literal still goes above a note that mentions it."""
    rows = {1: versioned(1, "Release notes/v1.5.md", "Tables: align columns.", title="1.5.11"),
            2: versioned(2, "Release notes/v1.5.11.md", "Tables: drag into cells.", title="1.5.11"),
            3: versioned(3, "en/Tables.md", "Since 1.5.11 cells take dragged content.")}
    out = exact_first([(3, 0.4), (1, 0.3), (2, 0.2)], [3, 1, 2], rows, ["1.5.11"])
    assert [k for k, _ in out] == [2, 1, 3]
    from hybrid.retrieval.exact import named_for
    assert (named_for(rows[2], ["1.5.11"]), named_for(rows[1], ["1.5.11"]), named_for(rows[3], ["1.5.11"])) == (2, 1, 0)
    # a title that repeats the file name is one name, not two
    assert named_for(versioned(4, "Release notes/v1.6.0.md", "", title="v1.6.0"), ["v1.6.0"]) == 1


def test_a_version_finds_its_release_note_by_either_spelling(tmp_path):
    """Real tantivy: a release note that says its version only in its file name (v0.8.12.md) or
    only in its front-matter title (1.6.0) is first for the version in the other spelling,
    above notes that mention the version and release notes of neighbouring versions; BM25
    alone has it among its first three."""
    vault = tmp_path / "vault"
    notes = {"Release notes/v0.8.12.md": "Released on 2020/09/07.\n\n## Shiny new things\n\n- Update Electron.\n",
             "Release notes/v0.8.15.md": "Released on 2020/09/14.\n\n## Changes\n\n- Faster 0.8 search, 12 fixes.\n",
             "Release notes/v1.6.0.md": "---\ntitle: \"1.6.0\"\n---\n\n## Shiny new things\n\n- Canvas improvements.\n",
             "Release notes/v1.6.1.md": "---\ntitle: \"1.6.1\"\n---\n\n## Fixes\n\n- Fixed a crash from 1.6.0.\n"}
    for rel, text in notes.items():
        write(vault, rel, text)
    write(vault, "en/Sync.md", "# Sync\n\nSync needs Obsidian 0.8.12 or later; since v1.6.0 it is faster.\n")
    h = indexed(tmp_path, vault)
    try:
        for q, want in [("0.8.12", "Release notes/v0.8.12.md"), ("v0.8.12", "Release notes/v0.8.12.md"),
                        ("v1.6.0", "Release notes/v1.6.0.md"), ("Obsidian 1.6.0", "Release notes/v1.6.0.md")]:
            assert h.search(q, top_k=3)[0].path == want, q  # hybrid: exact-first, named first
            assert want in [x.path for x in h.search(q, mode="lexical", top_k=3)], q  # BM25 finds it
    finally:
        h.close()


def test_a_title_that_mentions_a_literal_among_many_words_does_not_name_the_note():
    """A note is named for a literal when one of its names is little more than it: a release
    note, a ticket's post-mortem, "HTML content"; a paper's long title that mentions a gene is
    one paper of many on it (SciFact: the cited paper is rarely the one named so)."""
    from hybrid.retrieval.exact import named_for
    assert named_for(versioned(1, "Release notes/v0.8.12.md", ""), ["0.8.12"])
    assert named_for(versioned(2, "n.md", "", title="FORGE-1533 post-mortem"), ["forge-1533"])
    assert named_for(versioned(3, "en/HTML content.md", "", title="HTML content"), ["html"])
    paper = versioned(4, "13072113.md", "", title="Foxp3(+) T cells regulate immunoglobulin A selection")
    assert not named_for(paper, ["foxp3"])
    rows = {4: paper, 5: versioned(5, "2.md", "Foxp3 enables memory T cell development.", title="Memory T cells")}
    assert [k for k, _ in exact_first([(5, 0.3), (4, 0.2)], [5, 4], rows, ["Foxp3"])] == [5, 4]
