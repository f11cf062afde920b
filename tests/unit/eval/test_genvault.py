"""Smoke test of the synthetic vault generator used by the scale benchmarks (eval/bench)."""
import importlib.util

import pytest
from helpers import REPO

import hybrid

GEN = REPO / "eval" / "bench" / "genvault.py"


def load():
    spec = importlib.util.spec_from_file_location("genvault", GEN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_generated_vault_is_deterministic_and_indexable(tmp_path):
    gen = load()
    a, b = tmp_path / "a", tmp_path / "b"
    assert gen.generate(a, 40, seed=3) == gen.generate(b, 40, seed=3)
    files = sorted(p.relative_to(a) for p in a.rglob("*.md"))
    assert len(files) == 40
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    text = "\n".join((a / f).read_text() for f in files)
    assert "```" in text and "[[" in text and "tags:" in text and "\n## " in text

    h = hybrid.open(embedder="hash:64")
    h.add_vault(a, "gen")
    r = h.index()[0]
    assert r.added == 40 and r.chunks >= 40 and r.skipped == 0
    title = files[0].stem
    assert h.search(f'"{title}"', mode="lexical", top_k=1)[0].path == files[0].as_posix()
