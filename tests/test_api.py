import re
from pathlib import Path

import hybrid
from hybrid.config import SETTINGS

README = Path(__file__).resolve().parents[1] / "README.md"


def test_exported_members():
    assert sorted(hybrid.__all__) == sorted(["open", "Hybrid", "Hit", "IndexReport", "NoteText",
                                             "VaultStatus", "HybridError"])
    for name in hybrid.__all__:
        assert getattr(hybrid, name) is not None


def test_every_setting_is_documented_in_the_readme():
    text = README.read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", text, re.M))
    assert {s.name for s in SETTINGS} <= documented


def test_open_with_overrides_and_home(tmp_path, vault):
    h = hybrid.open(tmp_path / "elsewhere", embedder="hash:16", chunk_tokens=64)
    h.add_vault(vault, "v")
    assert (tmp_path / "elsewhere" / "config.toml").exists()
    r = h.index()[0]
    assert (tmp_path / "elsewhere" / "data" / "vaults" / "v" / "catalog.sqlite").exists()
    assert r.chunks > 0 and h.status()[0].dim == 16
    hits = h.search("tomatoes")
    assert isinstance(hits[0], hybrid.Hit) and hits[0].citation.startswith("v:home/garden.md:")


def test_bad_setting_override_is_a_config_error(tmp_path):
    import pytest
    with pytest.raises(hybrid.HybridError, match="unknown setting"):
        hybrid.open(tmp_path, chunk_size=3)
    with pytest.raises(hybrid.HybridError, match="must be like"):
        hybrid.open(tmp_path, fuzzy="yes")
