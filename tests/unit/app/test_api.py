import re

from helpers import REPO

import hybrid
from hybrid.core.config import SETTINGS

CONFIGURATION_DOC = REPO / "docs" / "configuration.md"


def test_exported_members():
    assert sorted(hybrid.__all__) == sorted(["open", "Hybrid", "Hit", "IndexReport", "NoteText",
                                             "VaultStatus", "HybridError", "SearchRequest",
                                             "Settings"])
    for name in hybrid.__all__:
        assert getattr(hybrid, name) is not None


def test_every_setting_is_documented_with_its_default():
    """docs/configuration.md's settings table names every setting and its default as the code
    has it (the table said `minilm` long after the default became the mix)."""
    import tomlkit
    text = CONFIGURATION_DOC.read_text(encoding="utf-8")
    table = text.split("| setting | default | meaning |", 1)[1].split("\n\n", 1)[0]
    rows = dict(re.findall(r"^\| `([a-z_]+)` \| ([^|]*?) \|", table, re.M))
    assert {s.name for s in SETTINGS} <= set(rows)
    for s in SETTINGS:
        default = list(s.default) if isinstance(s.default, tuple) else s.default
        want = "(empty)" if default == "" else default if isinstance(default, str) \
            else tomlkit.item(default).as_string()
        assert rows[s.name].replace("`", "") == want, s.name


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


def test_vector_arm_embeds_the_typo_corrected_query(fake, vault, monkeypatch):
    """The spell repair applies to both arms: the model must read `tomatoes`, not `tomatoez`
    (before, the vector arm embedded the raw text). (`tomatos` is no typo: the stemmed fields
    find `tomatoes` by it.) The embedding runs on a worker thread."""
    import threading
    fake.add_vault(vault, "v")
    fake.index()
    emb = fake.embedder("hash:64")
    seen = []
    real = emb.embed_query

    def recording(text):
        seen.append((text, threading.current_thread().name))
        return real(text)

    monkeypatch.setattr(emb, "embed_query", recording)
    hits = fake.search("tomatoez sunlight", mode="hybrid")
    assert hits and hits[0].path == "home/garden.md"
    assert seen and "tomatoes" in seen[0][0] and "tomatoez" not in seen[0][0]
    assert seen[0][1].startswith("hybrid-query-embed")
    seen.clear()
    fake.search("garden", mode="lexical")
    assert seen == []  # the lexical mode never embeds


def test_identifiers_are_not_spell_corrected(fake, vault, monkeypatch):
    """`gardn42` is an identifier, not a misspelling: neither arm may rewrite its letters."""
    fake.add_vault(vault, "v")
    fake.index()
    emb = fake.embedder("hash:64")
    seen = []
    real = emb.embed_query
    monkeypatch.setattr(emb, "embed_query", lambda text: seen.append(text) or real(text))
    fake.search("gardn42 tomatoez", mode="vector")
    assert seen == ["gardn42 tomatoes"]
