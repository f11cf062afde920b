"""Each note's links are recorded in the ledger on every backend and follow its edits and
deletion (issue #30: the link graph). Hash embedder (logic), real tantivy / FAISS / PostgreSQL."""

from __future__ import annotations

from helpers import ALL_STORES, write
from helpers import link_graph as graph

STORES = ALL_STORES


def test_links_follow_the_notes(open_h, tmp_path):
    vault = tmp_path / "vault"
    write(vault, "index.md", "# Index\n\nStart at [[Garden]] and [bikes](work/Bikes.md).\n")
    write(vault, "garden.md", "---\nup: \"[[index]]\"\n---\n# Garden\n\nTomatoes. See [[Bikes#Chains]].\n")
    write(vault, "work/Bikes.md", "# Bikes\n\nOil the chain.\n")
    h = open_h(tmp_path / "home", embedder="hash:32")
    h.add_vault(vault, "v")
    assert h.index()[0].error is None
    g, ids = graph(h)
    assert [g.notes[i].path for i in g.outlinks(ids["index.md"])] == ["garden.md", "work/Bikes.md"]
    assert [g.notes[i].path for i in g.backlinks(ids["work/Bikes.md"])] == ["garden.md", "index.md"]
    assert g.backlinks(ids["index.md"]) == [ids["garden.md"]]  # the front block's link
    write(vault, "garden.md", "# Garden\n\nTomatoes only.\n")  # its links removed
    (vault / "index.md").unlink()
    assert h.index()[0].error is None
    g, ids = graph(h)
    assert set(ids) == {"garden.md", "work/Bikes.md"} and not g.out and not g.back
    h.close()
