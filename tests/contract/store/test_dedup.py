"""Identical sections are embedded once and stored once, on every backend, and every copy stays
citable (hybrid.indexing.shared): a copy deleted, the first copy deleted, a copy edited, a note
that is a copy of another whole, empty sections. Hash embedder (this is about logic), real
tantivy / FAISS / PostgreSQL."""

from __future__ import annotations

import re

from helpers import ALL_STORES, CountingEmbedder, write

from hybrid.store import open_store

STORES = ALL_STORES

SETUP = ("## Setup\n\nInstall the plugin from the community list, restart the application and "
         "enable the sync toggle in the settings pane.\n")
NOTES = {
    "alpha.md": "# Alpha\n\nAlpha is about gardening tools and compost.\n\n" + SETUP,
    "beta.md": "# Beta\n\nBeta covers bicycle repair and tyre pressure.\n\n" + SETUP,
    # the same section re-wrapped: identical once whitespace is normalised
    "gamma.md": "# Gamma\n\nGamma lists bread recipes.\n\n" + SETUP.replace(" restart", "\n   restart"),
}


def _open(open_h, tmp_path, notes=NOTES):
    vault = tmp_path / "vault"
    for rel, text in notes.items():
        write(vault, rel, text)
    emb = CountingEmbedder("hash:64")
    h = open_h(tmp_path / "home", embedders=[emb], embedder="hash:64")
    h.add_vault(vault, "v")
    return h, vault, emb


def _vectors(h) -> dict[str, bytes]:
    """Each live chunk's vector by "path:first line", as the vector arm's ledger holds it."""
    store = open_store(h.config.vault("v"))
    try:
        rows = {r.id: r for batch in store.catalog.iter_chunks() for r in batch}
        got = dict(store.catalog.vectors(store.embedder_id, list(rows)))
        return {f"{rows[i].path}:{rows[i].start_line}": got[i] for i in rows if i in got}
    finally:
        store.close()


def _setup_hits(h) -> list:
    """The passages a search for the copied section finds (top 5)."""
    return h.search("install plugin community list sync toggle", top_k=5, passages=True)


def test_identical_sections_cost_one_embedding_and_one_cached_vector(open_h, tmp_path):
    h, _, emb = _open(open_h, tmp_path)
    try:
        report = h.index()[0]
        # 3 intros + 3 copies of one section: 4 texts embedded, 2 chunks took the first copy's vector
        assert report.chunks == 6 and report.chunks_embedded == 4 and report.chunks_shared == 2
        assert emb.texts == 4
        vecs = _vectors(h)
        assert len(vecs) == 6  # every copy keeps its own entry in the vector arm
        assert vecs["alpha.md:5"] == vecs["beta.md:5"] == vecs["gamma.md:5"]
        st = h.status()[0]
        assert (st.shared_chunks, st.shared_texts, st.embeddings_saved) == (3, 1, 2)
        assert st.to_dict()["embeddings_saved"] == 2
        # a no-op run embeds nothing, shares nothing anew
        again = h.index()[0]
        assert again.chunks_embedded == 0 and again.unchanged == 3
    finally:
        h.close()


def test_the_copies_fold_into_one_hit_citing_the_others(open_h, tmp_path):
    h, _, _ = _open(open_h, tmp_path)
    try:
        h.index()
        setup = [x for x in _setup_hits(h) if "sync toggle" in x.text]
        assert len(setup) == 1  # three copies, one answer
        others = {c.split(":")[1] for c in setup[0].also_in}
        assert others == {"alpha.md", "beta.md", "gamma.md"} - {setup[0].path}
        assert all(re.fullmatch(r"v:(alpha|beta|gamma)\.md:5-[78]", c) for c in setup[0].also_in)  # citations
        h.override(duplicate_similarity=0)  # off: every copy is a hit of its own
        assert sum("sync toggle" in x.text for x in _setup_hits(h)) == 3
    finally:
        h.close()


def test_deleting_a_copy_or_the_first_one_leaves_the_others_their_vector_and_hit(open_h, tmp_path):
    h, vault, emb = _open(open_h, tmp_path)
    try:
        h.index()
        before = _vectors(h)["gamma.md:5"]
        (vault / "alpha.md").unlink()  # the copy whose vector the others took
        report = h.index()[0]
        assert report.removed == 1 and report.chunks_embedded == 0
        h.vacuum()  # reclaiming every unused cached vector keeps the shared one
        vecs = _vectors(h)
        assert vecs["beta.md:5"] == vecs["gamma.md:5"] == before
        hits = _setup_hits(h)
        assert hits and "sync toggle" in hits[0].text and hits[0].path in ("beta.md", "gamma.md")
        assert not any(c.split(":")[1] == "alpha.md" for x in hits for c in x.also_in)
        (vault / "gamma.md").unlink()
        h.index()
        hits = _setup_hits(h)
        assert hits[0].path == "beta.md" and hits[0].also_in == []
        st = h.status()[0]
        assert (st.shared_chunks, st.shared_texts) == (0, 0)
    finally:
        h.close()


def test_a_copy_edited_apart_is_embedded_for_itself(open_h, tmp_path):
    h, vault, emb = _open(open_h, tmp_path)
    try:
        h.index()
        write(vault, "beta.md", NOTES["beta.md"].replace(
            "enable the sync toggle in the settings pane",
            "then open the vault switcher and pick the folder to keep in sync across devices"))
        report = h.index()[0]
        assert report.chunks_embedded == 1 and report.chunks_shared == 0  # the edited section alone
        vecs = _vectors(h)
        assert vecs["beta.md:5"] != vecs["alpha.md:5"] == vecs["gamma.md:5"]
        st = h.status()[0]
        assert (st.shared_chunks, st.shared_texts) == (2, 1)
        hits = h.search("install plugin community list", top_k=5, passages=True)
        assert {x.path for x in hits if "Install the plugin" in x.text} >= {"beta.md"}  # its own hit now
    finally:
        h.close()


def test_a_note_that_is_a_copy_of_another_whole_and_empty_sections(open_h, tmp_path):
    notes = {**NOTES, "alpha 1.md": NOTES["alpha.md"],
             "empty.md": "# Empty\n\n## Nothing here\n\n## Nor here\n\n   \n",
             "blank.md": "   \n\n"}
    h, _, emb = _open(open_h, tmp_path, notes)
    try:
        report = h.index()[0]
        assert not report.error and report.chunks == 8  # the empty notes have no chunk
        assert report.chunks_embedded == 4 and report.chunks_shared == 4
        vecs = _vectors(h)
        assert vecs["alpha 1.md:1"] == vecs["alpha.md:1"] and vecs["alpha 1.md:5"] == vecs["alpha.md:5"]
        st = h.status()[0]
        assert (st.shared_chunks, st.shared_texts, st.embeddings_saved) == (6, 2, 4)
        hits = h.search("gardening tools compost", top_k=5)  # notes: the twin folds into the first
        garden = [x for x in hits if "compost" in x.text]
        assert len(garden) == 1 and len(garden[0].also_in) == 1
        assert {garden[0].path, garden[0].also_in[0].split(":")[1]} == {"alpha.md", "alpha 1.md"}
    finally:
        h.close()
