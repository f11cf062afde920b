"""`hybrid eval fit` (hybrid.eval.fit): the fusion parameters fitted per store kind, the rule
that keeps a fit, the file it writes and the shipped file that file must stay readable as."""

import json

import pytest
from click.testing import CliRunner
from helpers import write

from hybrid.core.files import package_data
from hybrid.core.settings import Settings
from hybrid.eval import fit
from hybrid.eval.sets import LabelledSet, load, open_indexed
from hybrid.retrieval import fitted


def figures(heldout: dict[str, tuple[float, float]]) -> fit.Figures:
    return {name: {"all": v, "tune": v, "heldout": v} for name, v in heldout.items()}


def test_a_fit_is_kept_only_when_no_held_out_figure_falls_and_one_rises():
    before = figures({"a": (0.70, 0.60), "b": (0.50, 0.40)})
    assert fit.verdict(before, figures({"a": (0.71, 0.60), "b": (0.50, 0.40)})) == (True, [])
    kept, why = fit.verdict(before, figures({"a": (0.75, 0.64), "b": (0.50, 0.36)}))
    assert not kept and why == ["b held out answer@1 0.400 -> 0.360"]
    assert fit.verdict(before, before) == (False, ["no held-out figure rose"])


def test_candidates_cover_the_grid_with_the_lexical_weight_fixed():
    grid = {"rrf_k": (5.0, 10.0), "weight_vector": (1.5,), "curve": ((0.6, 0.3, 0.1), (0.7, 0.4, 0.1))}
    got = list(fit.candidates(grid))
    assert len(got) == 2 * 1 * 2 and all(c["weight_lexical"] == 1.0 for c in got)
    assert got[1] == {"rrf_k": 5.0, "weight_lexical": 1.0, "weight_vector": 1.5,
                      "coverage_full": 0.7, "coverage_none": 0.4, "coverage_floor": 0.1}
    assert len(list(fit.candidates())) == 3 * 3 * 4


def test_the_file_lists_only_what_departs_from_the_shipped_defaults_and_reads_back():
    ship = fit.shipped_fusion()
    base = {"about": "x", "stores": {"local": {}, "postgresql": {"other": 1}}}
    params = {**ship, "rrf_k": ship["rrf_k"] + 5, "coverage_none": 0.25}
    data = fit.fitted_file(base, "postgresql", params)
    assert data == {"about": "x", "stores": {"local": {}, "postgresql": {
        "other": 1, "fusion": {"rrf_k": ship["rrf_k"] + 5, "coverage_none": 0.25}}}}
    assert base["stores"]["postgresql"] == {"other": 1}  # the base is not changed
    # the shipped defaults again: the kind's entry without a fusion
    assert fit.fitted_file(data, "postgresql", ship)["stores"]["postgresql"] == {"other": 1}
    # what the search makes of the file: the fitted values, a user's own setting winning
    with fit.trying("postgresql", data["stores"]["postgresql"]["fusion"]):
        got = fitted.fusion("postgresql", Settings())
        assert (got.rrf_k, got.coverage_none, got.weight_vector) == (ship["rrf_k"] + 5, 0.25, ship["weight_vector"])
        assert fitted.fusion("postgresql", Settings(rrf_k=42)).rrf_k == 42
    assert fitted.fusion("postgresql", Settings()).rrf_k == ship["rrf_k"]  # put back


def test_the_shipped_file_is_what_the_fitter_writes():
    """hybrid/data/fitted.json reads as the search reads it, for every kind it names, and is
    exactly what :func:`fit.fitted_file` and :func:`fit.write` make of each kind's fusion."""
    text = package_data("fitted.json")
    shipped = json.loads(text)
    assert set(shipped) == {"about", "stores"} and "local" in shipped["stores"]
    names = set(fit.shipped_fusion())
    for kind, entry in shipped["stores"].items():
        assert set(entry.get("fusion", {})) <= names, kind
        fusion = {**fit.shipped_fusion(), **entry.get("fusion", {})}
        assert fit.fitted_file(shipped, kind, fusion) == shipped
        got = fitted.fusion(kind, Settings())
        assert {n: getattr(got, n) for n in names} == fusion
    assert json.dumps(shipped, indent=1) + "\n" == text  # the writer's format


def labelled(tmp_path):
    """Six notes and six questions, two per split at least, one judged by section."""
    root = tmp_path / "vault"
    notes = {
        "kafka.md": "# Kafka\n\nThe orders-created topic has twelve partitions.\n\n## Consumers\n\nbilling reads it.\n",
        "network.md": "# Network\n\nRun tailscale up to advertise the home routes.\n",
        "garden.md": "# Garden\n\nTomatoes need six hours of sun and deep watering.\n",
        "bread.md": "# Bread\n\nA sourdough starter is fed flour and water daily.\n",
        "backup.md": "# Backups\n\nrestic copies the photo library to the NAS every night.\n",
        "bike.md": "# Bike\n\nOil the chain after riding in the rain.\n",
    }
    for rel, text in notes.items():
        write(root, rel, text)
    queries = [("q1", "how many partitions does the orders topic have"), ("q2", "tailscale routes"),
               ("q3", "tomato sunlight"), ("q4", "feeding a sourdough starter"),
               ("q5", "who reads orders"), ("q6", "photo backups at night")]
    qrels = {"q1": {"kafka.md": 2}, "q2": {"network.md": 2}, "q3": {"garden.md": 2}, "q4": {"bread.md": 2},
             "q5": {"kafka.md#Kafka > Consumers": 2}, "q6": {"backup.md": 2, "bike.md": 0}}
    qfile = write(tmp_path, "tiny.queries.jsonl", "".join(json.dumps({"qid": q, "text": t}) + "\n" for q, t in queries))
    rfile = write(tmp_path, "tiny.qrels.json", json.dumps(qrels))
    return LabelledSet(root, qfile, rfile)


@pytest.mark.slow  # indexes a vault and runs a grid of searches (tantivy, FAISS; the hash embedder)
def test_fit_on_a_tiny_vault(tmp_path):
    tiny = labelled(tmp_path)
    loaded = load(tiny)
    assert [q.split for q in loaded.queries] == ["tune", "heldout"] * 3
    h, names = open_indexed(tmp_path / "home", [tiny.vault], embedder="hash:64", duplicate_similarity=0)
    before_table = json.loads(json.dumps(fitted.table()))
    grid = {"rrf_k": (10.0, 60.0), "weight_vector": (1.5,), "curve": ((0.6, 0.3, 0.1),)}
    base = {"about": "test", "stores": {"local": {}, "postgresql": {}}}
    try:
        result = fit.fit(h, "local", [(names[tiny.vault.resolve()], loaded)], base, grid)
    finally:
        h.close()
    assert fitted.table() == before_table  # every candidate was put back
    assert set(result) == {"kind", "fitted", "kept", "why", "before", "after", "tried", "file"}
    assert [t["params"]["rrf_k"] for t in result["tried"]] == [10.0, 60.0]
    best = max(result["tried"], key=lambda t: t["objective"])
    assert result["fitted"] == best["params"]
    for t in result["tried"]:
        (n, a), = t["tune"].values()
        assert 0 <= n <= 1 and a in (0, 1 / 3, 2 / 3, 1) and t["objective"] == pytest.approx(n + a)
    # the tried point of the shipped defaults scores on the tune split what "before" says
    ship = next(t for t in result["tried"] if t["params"]["rrf_k"] == fit.shipped_fusion()["rrf_k"])
    assert ship["tune"]["tiny"] == pytest.approx(result["before"]["tiny"]["tune"])
    assert set(result["before"]["tiny"]) == {"all", "tune", "heldout"}
    kept = fit.verdict(result["before"], result["after"])[0]
    assert result["kept"] == kept
    fusion = result["file"]["stores"]["local"].get("fusion", {})
    assert fusion == (fit.departures(result["fitted"]) if kept else {})
    assert result["file"]["about"] == "test" and result["file"]["stores"]["postgresql"] == {}


@pytest.mark.slow  # the whole command: a grid of 36 over a tiny vault (hash embedder)
def test_cli_fit_writes_the_file_only_where_asked(tmp_path):
    from hybrid.faces.cli.main import main
    tiny = labelled(tmp_path)
    out = tmp_path / "fitted.json"
    args = ["eval", "fit", "--set", str(tiny.vault), str(tiny.queries), str(tiny.qrels), "--embedder", "hash:64"]
    r = CliRunner().invoke(main, [*args, "--json"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    assert result["kind"] == "local" and len(result["tried"]) == 36 and not out.exists()
    r = CliRunner().invoke(main, [*args, "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "| tiny | heldout |" in r.stdout
    written = json.loads(out.read_text())
    assert written["about"] == json.loads(package_data("fitted.json"))["about"]
    assert set(written["stores"]) == set(json.loads(package_data("fitted.json"))["stores"])
    assert out.read_text() == json.dumps(written, indent=1) + "\n"
    r = CliRunner().invoke(main, ["eval", "fit", "--set", str(tiny.vault), str(tiny.queries), "-"])
    assert r.exit_code == 2 and "every set needs its judgements" in r.output


def test_cli_fit_on_postgresql_fits_that_kind_and_leaves_nothing_in_the_database(tmp_path, pg_url):
    """--store: the sets are indexed into the database, the postgresql kind is fitted, and the
    scratch vaults are dropped from the database at the end (the scratch home goes too)."""
    import psycopg

    from hybrid.faces.cli.main import main
    tiny = labelled(tmp_path)
    r = CliRunner().invoke(main, ["eval", "fit", "--set", str(tiny.vault), str(tiny.queries), str(tiny.qrels),
                                  "--embedder", "hash:64", "--store", "postgresql", "--json"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    assert result["kind"] == "postgresql" and len(result["tried"]) == 36
    assert set(result["file"]["stores"]["postgresql"]) <= {"fusion"}
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM hybrid_vaults").fetchone() == (0,)


def test_without_ranx_fit_says_what_to_install_before_indexing(tmp_path, monkeypatch):
    """ranx is the eval extra's: `hybrid eval fit` stops with the one line that installs it."""
    import sys

    from hybrid.eval import sets
    from hybrid.faces.cli.main import main
    monkeypatch.setitem(sys.modules, "ranx", None)  # import ranx: ImportError
    monkeypatch.setattr(sets, "open_indexed", lambda *a, **kw: pytest.fail("indexed without ranx"))
    r = CliRunner().invoke(main, ["eval", "fit"])
    assert r.exit_code != 0 and "pip install" in r.output and "'eval' extra" in r.output, r.output


@pytest.mark.slow  # indexes a vault (tantivy, FAISS; the hash embedder)
def test_a_query_without_judgements_is_skipped_as_hybrid_eval_skips_it(tmp_path):
    """A labelled set may hold a question nobody judged yet: scoring leaves it out (it raised a
    KeyError, ending the fit)."""
    tiny = labelled(tmp_path)
    with open(tiny.queries, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"qid": "q7", "text": "who oils the bike chain"}) + "\n")
    loaded = load(tiny)
    h, names = open_indexed(tmp_path / "home", [tiny.vault], embedder="hash:64", duplicate_similarity=0)
    try:
        per = fit.score(h, names[tiny.vault.resolve()], loaded)
    finally:
        h.close()
    assert set(per) == {"q1", "q2", "q3", "q4", "q5", "q6"}
