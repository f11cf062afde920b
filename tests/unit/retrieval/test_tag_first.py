"""Tag-first (hybrid/retrieval/tagged.py): a short query that names a tag gets the notes carrying
it first, under exact-first's pins; a longer query, or one naming no tag, is ranked as fusion
ranked it. Real tantivy and FAISS indexes, hash embedder."""
import pytest
from helpers import indexed_vault

from hybrid.retrieval.tagged import tag_first, tag_stems
from hybrid.store.base import ChunkRow
from hybrid.store.lexicon import stem_analyzer

STEM = stem_analyzer().analyze
NOTES = {
    # the help page talks about journals all along; the diary notes say "journal" only in a tag
    "help/Journaling.md": "# Journaling\n\nKeep a journal: journal prompts, a journal template, "
                          "journal apps and how to journal every day.\n",
    "diary/2025-06-02.md": "Rain all day. Fixed the bike's chain, then soup. #journal\n",
    "diary/2025-06-09.md": "---\ntags: [journal, health]\n---\nLong run, 14 km, knees fine.\n",
    "lab/network.md": "---\ntags: [home-lab/networking]\n---\n# Network\n\nThe VLAN for cameras and the "
                      "`FORGE-1533` firewall rule.\n",
    "lab/vlans.md": "# VLANs\n\nNetworking notes: trunk ports, networking gear, networking cables.\n",
    "work/kafka.md": "---\ntags: [kafka]\n---\n# Orders\n\nThe orders topic has 12 partitions.\n",
    "work/lag.md": "# Consumer lag\n\nKafka consumer lag alerts fire at 10k messages.\n",
}


@pytest.fixture(scope="module")
def h(tmp_path_factory):
    handle = indexed_vault(tmp_path_factory.mktemp("tags"), NOTES)
    yield handle
    handle.close()


def paths(hits):
    return list(dict.fromkeys(x.path for x in hits))


def test_a_query_naming_a_tag_gets_the_notes_carrying_it_first(h):
    got = h.search("journal", top_k=5)
    assert set(paths(got)[:2]) == {"diary/2025-06-02.md", "diary/2025-06-09.md"}, paths(got)
    assert all(x.pin == "tag" for x in got if x.path.startswith("diary/"))
    assert "help/Journaling.md" in paths(got)  # still found, below them
    # a stem of it, a segment of a nested tag, and a tag's words without its hyphen
    assert set(paths(h.search("journals", top_k=5))[:2]) == {"diary/2025-06-02.md", "diary/2025-06-09.md"}
    assert paths(h.search("networking", top_k=3))[0] == "lab/network.md"
    assert paths(h.search("home lab", top_k=3))[0] == "lab/network.md"


def test_a_longer_query_or_an_identifier_is_not_overruled_by_a_tag(h):
    # "kafka consumer lag" asks about more than the kafka tag: no tag pin
    assert all(x.pin != "tag" for x in h.search("kafka consumer lag", top_k=5))
    # a named identifier stays first (exact-first), the tagged note next
    got = h.search("FORGE-1533 networking", top_k=5)
    assert got[0].path == "lab/network.md" and got[0].pin in ("literal", "verbatim")
    # lexical and vector modes rank as their arm ranked: tag-first is fusion's stage
    assert all(x.pin is None for x in h.search("journal", top_k=5, mode="lexical"))


def row(cid, tags):
    return ChunkRow(cid, f"n{cid}.md", "", "", 1, 1, "text", tags, [], 0.0, "")


def test_tag_first_keeps_fused_order_and_the_pins_above():
    rows = {1: row(1, ["x"]), 2: row(2, ["journal"]), 3: row(3, ["work/journal"]), 4: row(4, [])}
    fused = [(4, 1.2), (1, 0.3), (3, 0.2), (2, 0.1)]  # 4: pinned by exact-first
    out, lifted = tag_first(fused, rows, "journal", STEM)
    assert [k for k, _ in out] == [4, 3, 2, 1] and lifted == [3, 2]
    assert out[1][1] == pytest.approx(0.95)
    assert tag_first(fused, rows, "the", STEM) == (fused, [])  # no content word
    assert frozenset(STEM("work")) in tag_stems(rows[3], STEM)
