"""Upgrading an index of one embedder to a mix that contains it (issue #29: the multilingual
default over an index MiniLM built alone), on every backend: before the next index run the old
model answers; the run re-reads the notes and embeds only the other half; vectors, dimension and
search are then the mix's. Hash embedders (logic), real tantivy / FAISS / PostgreSQL."""

from __future__ import annotations

from helpers import ALL_STORES, CountingEmbedder, paths, write

from hybrid.embedders.mix import MixEmbedder

STORES = ALL_STORES




def test_an_index_of_one_part_upgrades_to_the_mix(open_h, tmp_path):
    write(tmp_path / "vault", "garden.md", "# Garden\n\nTomatoes need six hours of sun.\n")
    write(tmp_path / "vault", "bikes.md", "# Bikes\n\nPatch a flat tyre with a kit.\n\n## Chains\n\nOil the chain.\n")
    a, b = CountingEmbedder("hash:32"), CountingEmbedder("hash:16")
    h = open_h(tmp_path / "home", embedders=[a], embedder="hash:32")
    h.add_vault(tmp_path / "vault", "v")
    first = h.index()[0]
    h.close()
    a.texts = 0
    mix = MixEmbedder(a, b)
    h = open_h(tmp_path / "home", embedders=[mix], embedder="mix:hash:32,hash:16")
    try:
        assert paths(h.search("tomatoes sun", mode="vector"))[0] == "garden.md"  # the part answers
        report = h.index()[0]
        assert report.error is None and report.upgraded == mix.id
        assert (a.texts, b.texts, report.chunk_parts_reused) == (0, first.chunks, first.chunks)
        status = h.status()[0]
        assert status.embedder == mix.id and status.chunks == first.chunks
        assert paths(h.search("tomatoes sun", mode="vector"))[0] == "garden.md"
        assert paths(h.search("oil the chain", mode="hybrid"))[0] == "bikes.md"
        assert h.index()[0].chunks_embedded == 0
    finally:
        h.close()
