"""A search answers from one state of the index, on every backend: an index run that commits
while a search is between its arms and the rows they name must not leave it with nothing (the
rows its arms found are gone by then); the arms run again over the new state. Seen in CI as
an empty answer mid-index on PostgreSQL
(tests/system/test_crash.py::test_queries_keep_working_while_an_index_runs). Hash embedder
(logic), real tantivy / FAISS / PostgreSQL."""

from __future__ import annotations

from helpers import ALL_STORES, paths, write

from hybrid.retrieval import pipeline

STORES = ALL_STORES

NOTES = {
    "networking.md": "# Networking\n\nThe tailscale subnet router joins the home LAN.\n",
    "garden.md": "# Garden\n\nTomatoes need six hours of sun.\n",
    "bikes.md": "# Bikes\n\nPatch a flat tyre with a kit.\n",
}


def test_a_commit_between_the_arms_and_the_rows_leaves_the_search_its_answer(open_h, tmp_path, monkeypatch):
    vault = tmp_path / "vault"
    for rel, text in NOTES.items():
        write(vault, rel, text)
    reader = open_h(tmp_path / "home", embedder="hash:64")
    reader.add_vault(vault, "v")
    assert reader.index()[0].error is None
    writer = open_h(tmp_path / "home", embedder="hash:64")
    hydrate, runs = pipeline.hydrate, []

    def index_then_hydrate(targets, keys):
        if not runs:  # every note re-chunked and committed after the arms ran
            for rel, text in NOTES.items():
                write(vault, rel, text + "\nappended line\n")
            runs.append(writer.index()[0])
        return hydrate(targets, keys)

    monkeypatch.setattr(pipeline, "hydrate", index_then_hydrate)
    try:
        hits = reader.search("tailscale subnet router", top_k=3)
        assert runs and runs[0].error is None and runs[0].updated == 3
        assert paths(hits)[:1] == ["networking.md"]
        assert "appended line" in hits[0].text  # the arms ran again, over the new state
    finally:
        writer.close()
        reader.close()
