"""The living benchmarks (eval/bench, ``python -m eval.bench NAME``), each run through the entry
point on a tiny input: it runs to the end and its output is well-formed. Correctness only, never
timings (the machine is shared and noisy): the real sizes run on demand."""

import json
import os
import subprocess
import sys

import pytest
from helpers import REPO, write

BENCH = REPO / "eval" / "bench"
TINY_QUERIES = [{"qid": "t1", "text": "tailscale routes"}, {"qid": "t2", "text": "sourdough starter"}]


def bench(name: str, *args, tmp_path, timeout: float = 300, **env) -> subprocess.CompletedProcess:
    """``python -m eval.bench NAME ARGS`` from the checkout, in a home of its own; fails the test
    unless it exits 0."""
    r = subprocess.run([sys.executable, "-m", "eval.bench", name, *map(str, args)], cwd=REPO,
                       capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, "HYBRID_HOME": str(tmp_path / "bench-home"), **env})
    assert r.returncode == 0, f"{name} exited {r.returncode}:\n{r.stderr[-3000:]}"
    return r


def tiny_vault(tmp_path):
    root = tmp_path / "vault"
    write(root, "net.md", "# Network\n\nRun tailscale up to advertise the home routes.\n")
    write(root, "bread.md", "# Bread\n\nA sourdough starter is fed flour and water daily.\n")
    return root


def test_every_bench_is_listed_and_every_script_is_a_bench_or_a_part(tmp_path):
    from importlib.util import module_from_spec, spec_from_file_location
    spec = spec_from_file_location("bench_entry", BENCH / "__main__.py")
    entry = module_from_spec(spec)
    spec.loader.exec_module(entry)
    scripts = {p.name for p in BENCH.iterdir() if p.suffix in (".py", ".sh")}
    named = {script for script, _ in entry.BENCHES.values()}
    assert named <= scripts
    assert scripts == named | set(entry.PARTS), "a script in eval/bench that is neither a bench nor a part: " \
        "register it in eval/bench/__main__.py, or archive it (eval/archive/)"
    r = bench("list", tmp_path=tmp_path)
    lines = [line for line in r.stdout.splitlines() if line.startswith("  ")]
    assert [line.split()[0] for line in lines] == list(entry.BENCHES)
    tested = {name for name in entry.BENCHES if f"def test_{name.replace('-', '_')}(" in
              (REPO / "tests/unit/eval/test_benches.py").read_text()}
    assert tested == set(entry.BENCHES), f"benches without a smoke test: {set(entry.BENCHES) - tested}"
    r = subprocess.run([sys.executable, "-m", "eval.bench", "nope"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 2 and "no bench 'nope'" in r.stderr


@pytest.mark.slow
@pytest.mark.milvus
@pytest.mark.postgres
def test_stores(tmp_path):
    """Every store kind indexes the same vault and answers every mode; the report has a row each."""
    bench("stores", "--notes", 60, "--queries", 4, "--work", tmp_path, "--out", tmp_path / "out", tmp_path=tmp_path)
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [r["store"] for r in results] == ["local", "postgresql", "milvus"]
    assert len({r["chunks"] for r in results}) == 1 and results[0]["chunks"] > 60
    for r in results:
        assert all(w["answered"] == 4 for m, w in r["warm"].items() if "narrow" not in m), r["store"]
        assert r["chunks_per_s"] > 0 and r["bytes_per_chunk"] > 0
    report = (tmp_path / "out" / "report.md").read_text()
    assert report.count("| milvus |") == 2 and report.count("| postgresql |") == 2


@pytest.mark.slow  # subprocesses: two sides index a one-note vault and run every timed row once
def test_perf_ab(tmp_path):
    vault, queries = tiny_vault(tmp_path), tmp_path / "q.jsonl"
    queries.write_text("".join(json.dumps(q) + "\n" for q in TINY_QUERIES))
    config = write(tmp_path, "config.toml", '[settings]\nembedder = "hash:64"\n')
    r = bench("perf-ab", "--a", REPO, "--b", REPO, "--vault", vault, "--query", "tailscale", "--queries", queries,
              "--rounds", "1", "--warm-repeat", "1", "--rows", "help", "warm", "--config", config, "--no-write",
              tmp_path=tmp_path)
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1:] for line in r.stdout.splitlines()
            if line.startswith("| ") and "---" not in line}
    assert set(rows) == {"path", "index the vault, default models", "`hybrid --help`",
                         *(f"warm {m}, in-process, p50 (p95)" for m in ("lexical", "vector", "hybrid",
                                                                         "hybrid as agent"))}
    for path, (a, b, ratio, pairs) in rows.items():
        if path != "path":
            assert "—" not in (a, b, ratio) and pairs.rstrip(" |") == "1", (path, a, b, ratio)
    assert "default model hash:64" in r.stdout


@pytest.mark.slow  # a generated vault through the whole scale bench (index, re-index, warm, server, cold CLI)
def test_scale(tmp_path):
    """Every stage runs, counts agree, every query mode answers."""
    import hybrid
    bench("scale", "--notes", 120, "--queries", 6, "--repeat", 1, "--work", tmp_path, "--out", tmp_path / "out",
          tmp_path=tmp_path)
    (r,) = json.loads((tmp_path / "out" / "results.json").read_text())
    assert r["notes"] == 120 and r["chunks"] > 120
    h = hybrid.open(tmp_path / "home-120")
    st = h.status()[0]
    assert st.notes == 120 and st.chunks == r["chunks"] and st.pending == 0
    store = h.session.store(h.vaults[0])
    assert store.lexical.count() == store.vector.count() == r["chunks"]
    for where in ("warm", "http"):
        for mode in ("lexical", "vector", "hybrid", "hybrid+filters"):
            assert r[where][mode]["answered"] == 6, (where, mode)
    assert set(r["stage_seconds"]) >= {"discover", "read_parse", "chunk", "embed", "catalog", "tantivy", "faiss"}
    assert r["reindex"]["noop_s"] > 0 and r["bytes_per_chunk"] > 0
    h.close()


@pytest.mark.slow  # builds FAISS indexes of 20,000 vectors and runs queries in worker processes
def test_vectors(tmp_path):
    out = tmp_path / "out"
    bench("vectors", "--sizes", 20_000, "--dists", "clustered", "--layouts", "flat-float32,ivf-float32,ivf-float16",
          "--queries", 40, "--out", out, "--tmp", tmp_path, tmp_path=tmp_path)
    res = json.loads((out / "results.json").read_text())["results"]
    by = {r["layout"]: r for r in res}
    assert set(by) == {"flat-float32", "ivf-float32", "ivf-float16"}
    assert not [r for r in res if "error" in r], [r.get("error") for r in res]
    assert by["flat-float32"]["kind"] == "flat" and by["flat-float32"]["unfiltered"]["recall10"] == 1.0
    for name in ("ivf-float32", "ivf-float16"):
        r = by[name]
        assert r["kind"] == "ivf" and r["nprobe"] < r["nlist"]
        for mode in ("unfiltered", "allowed10", "banned1"):
            assert r[mode]["recall10"] >= 0.98, (name, mode, r[mode])
            assert r[mode]["short_queries"] == 0
    assert by["ivf-float16"]["bytes_per_vector"] * 1.9 <= by["ivf-float32"]["bytes_per_vector"]


@pytest.mark.slow  # indexes the sample vault and 12 notes (hash embedder) and scores 20 queries
def test_mixed_languages(tmp_path):
    r = bench("mixed-languages", "--embedder", "hash:64", "--modes", "lexical", "--no-report", "--json",
              tmp_path=tmp_path)
    result = json.loads(r.stdout)
    assert result["queries"] == 20 and [c["mode"] for c in result["configs"]] == ["lexical"]
    assert 0 < result["configs"][0]["metrics"]["ndcg@10"] <= 1


@pytest.mark.slow  # indexes the sample vault (hash embedder) and runs every labelled typo query
def test_spelling(tmp_path):
    r = bench("spelling", "--obsidian-help", tmp_path / "absent", tmp_path=tmp_path)
    assert "skipped: vault obsidian-help not found" in r.stdout
    counts = [line for line in r.stdout.splitlines() if " queries, " in line]
    assert [line.split(":")[0] for line in counts] == ["spelled right, own vault", "spelled right, all vaults",
                                                       "typo, own vault", "typo, all vaults"]
    assert all("rewritten" in line and "median search" in line for line in counts)


@pytest.mark.slow  # the secret rules (kingfisher), from the tests' compiled-rule cache
def test_redact_speed(tmp_path, kingfisher_cache):
    vault = tiny_vault(tmp_path)
    write(vault, "keys.md", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n")
    got = json.loads(bench("redact-speed", "--vault", vault, "--cache", kingfisher_cache, tmp_path=tmp_path).stdout)
    assert got["notes"] == 3 and 0 <= got["notes_with_a_redaction"] <= 3
    assert got["us_per_note_median"] > 0 and got["rules_from_cache_s"] >= 0


@pytest.mark.slow  # the redactor over the labelled secrets and two small vaults' lines
def test_redact_recall(tmp_path, kingfisher_cache):
    out = tmp_path / "recall.json"
    bench("redact-recall", "--seeds", 47, "--no-time", "--cache", kingfisher_cache, "--vault", tmp_path / "absent",
          "--json", out, tmp_path=tmp_path)
    got = json.loads(out.read_text())
    assert got["seeds"] == [47] and got["negatives"] > 0
    for hit, total in [*got["recall_by_class"].values(), *got["recall_by_lang"].values()]:
        assert 0 <= hit <= total
    assert set(got["prose"]) == {"sample vault", "multilingual vault"}


@pytest.mark.slow  # chunks two 200 KB lines with the real tokenizer, indexes the sample vault
def test_bad_input(tmp_path):
    r = bench("bad-input", tmp_path=tmp_path)
    lines = r.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "chunk one 200 KB line of words", "chunk one 200 KB line of base64",
        "4,000-character query, top_k 1000, lexical", "4,000-character query, top_k 1000, hybrid"]
    assert all(line.endswith(")") and " s (median of " in line for line in lines)


@pytest.mark.slow  # reads a hostile canvas and indexes it beside three notes, twice
def test_hostile_readers(tmp_path):
    out = tmp_path / "hostile.json"
    r = bench("hostile-readers", "--only", "blank_card", "--out", out, tmp_path=tmp_path)
    got = json.loads(out.read_text())
    assert json.loads(r.stdout.splitlines()[-1]) == {"blank_card": got["blank_card"]}
    row = got["blank_card"]
    assert row["bytes"] > 0 and [run["added"] for run in row["index"]["runs"]] == [4, 0]


@pytest.mark.slow  # a small PDF bomb indexed by the real CLI under an address-space limit
def test_convert_bounds(tmp_path):
    """A bomb of 20 MB inflated: the run, its report and the three notes beside it (the bound
    itself, at full size: tests/unit/sources/test_convert_bounds.py)."""
    out = tmp_path / "convert.json"
    bench("convert-bounds", "--bomb", "--bomb-inflates", 20_000_000, "--out", out, tmp_path=tmp_path)
    got = json.loads(out.read_text())["bomb"]
    assert got["exit_code"] == 0 and got["bomb_inflated"] >= 20_000_000 and got["seconds"] > 0, got
    assert got["indexed"]["notes"] >= 3, got


@pytest.mark.slow
def test_ocr(tmp_path):
    """Four pictures read for their character error rate, and ten image files indexed and then
    re-indexed unchanged (the quality part, the whole sample set with the model, is run by hand)."""
    out = tmp_path / "ocr.json"
    bench("ocr", "--parts", "cer,cost", "--cases", 4, "--images", 10, "--out", out, tmp_path=tmp_path)
    got = json.loads(out.read_text())
    assert got["engine"].startswith("tesseract") and got["cer"]["images"] == 4
    assert 0 <= got["cer"]["cer_mean"] < 0.2, got["cer"]  # upright, clean and noisy sans at 14 px
    many = got["unchanged_images"]
    assert many["files"] == 10 and many["first_added"] == 10 and many["reindex_unchanged_median_s"] > 0
    shown = many["shown_in_notes"]  # a note showing the ten: each read again only when its words change
    assert (shown["add_note_files_read"], shown["edit_away_files_read"], shown["edit_caption_files_read"]) \
        == (11, 1, 11), shown
    assert shown["caption_finds_its_section"] == "1/1", shown


def test_bench_notes_keep_code_comments_out_of_their_headings(monkeypatch):
    """The notes the sources and OCR benches serve as PDFs, scans and images have the headings
    markdown gives them: a `# comment` inside a code block is a line of code, not a heading."""
    monkeypatch.syspath_prepend(str(BENCH))
    from sources import note_parts
    title, parts = note_parts("---\ntags: [x]\n---\n# Title\n\n```ini\n# /etc/nut/upsmon.conf\n"
                              "MINSUPPLIES 1\n```\n## After\n~~~~\n# inside\n```\n# still inside\n~~~~\n")
    assert title == "Title"
    assert [t for level, t in parts if level] == ["Title", "After"]
    assert (0, "# /etc/nut/upsmon.conf") in parts and (0, "# still inside") in parts
