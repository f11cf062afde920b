"""One model, two runtimes: an index built with MiniLM on torch (`minilm-torch`) is searched and
updated by the default ONNX runtime (`minilm`) with no `--reembed`, and the other way round; a
catalog labelled by an older release (`…+onnx`) is relabelled, its cached vectors kept."""
import sqlite3

import numpy as np
import pytest
from helpers import write

import hybrid
from hybrid.embedders import MINILM_ID
from hybrid.store.local.catalog import Catalog

NOTES = {
    "net.md": "# Network\n\nAdvertise a subnet route with `tailscale up --advertise-routes`.\n",
    "garden.md": "# Garden\n\nTomatoes need six hours of sun and deep watering.\n",
    "bread.md": "# Bread\n\nSourdough at 75% hydration proofs overnight in the fridge.\n",
}
QUERIES = ["how do I route my home network through a vpn", "growing vegetables outside", "baking loaves"]


def _ranked(h):
    return [[(x.path, round(x.score, 4)) for x in h.search(q, mode="vector", top_k=3)] for q in QUERIES]


@pytest.mark.slow
@pytest.mark.parametrize("first,second", [("minilm-torch", "minilm"), ("minilm", "minilm-torch")])
def test_an_index_moves_between_runtimes_without_reembedding(tmp_path, minilm, minilm_torch, first, second):
    runtime = {"minilm": minilm, "minilm-torch": minilm_torch}
    root = tmp_path / "vault"
    for rel, text in NOTES.items():
        write(root, rel, text)
    h = hybrid.open(tmp_path / "home", embedder=first, embedders=[runtime[first]])
    h.add_vault(root, "v")
    (report,) = h.index()
    assert report.chunks_embedded == 3
    before = _ranked(h)
    h.close()

    h = hybrid.open(tmp_path / "home", embedder=second, embedders=[runtime[second]])
    try:
        assert _ranked(h) == before  # the other runtime's query vectors rank the same way
        write(root, "garden.md", NOTES["garden.md"] + "\nPeppers like it even warmer.\n")
        (report,) = h.index()
        assert report.error is None and report.updated == 1
        assert report.chunks_embedded == 1  # only the edited note: no re-embedding of the rest
        assert h.status()[0].embedder == MINILM_ID
    finally:
        h.close()


def test_a_catalog_labelled_by_an_older_release_is_relabelled(tmp_path):
    path = tmp_path / "catalog.sqlite"
    cat = Catalog(path)
    cat.set_meta("embedder", MINILM_ID + "+onnx")
    vec = np.ones(4, dtype=np.float32).tobytes()
    cat.put_embeddings(MINILM_ID + "+onnx", [("h1", vec), ("h2", vec)])
    cat.put_embeddings(MINILM_ID, [("h2", vec)])  # already under the new name: kept once
    cat.close()

    ro = Catalog(path, readonly=True)  # a reader changes nothing
    assert ro.get_meta("embedder") == MINILM_ID + "+onnx"
    ro.close()

    cat = Catalog(path)
    try:
        assert cat.get_meta("embedder") == MINILM_ID
        assert cat.cached_hashes(MINILM_ID, ["h1", "h2"]) == {"h1", "h2"}
    finally:
        cat.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM embeddings WHERE model LIKE '%+onnx'").fetchone() == (0,)
    db.close()


def test_a_store_reads_the_old_label_as_the_new_id(tmp_path):
    from helpers import indexed_vault

    from hybrid.store.local.store import VaultStore
    h = indexed_vault(tmp_path, {"a.md": "# A\n\nalpha\n"})
    index_dir = h.session.store(h.vaults[0]).directory
    h.close()
    cat = Catalog(index_dir / "catalog.sqlite")
    cat.set_meta("embedder", MINILM_ID + "+onnx")
    cat.close()
    store = VaultStore(index_dir, create=False)
    try:
        assert store.embedder_id == MINILM_ID
    finally:
        store.close()
