"""The typed settings object: one table, frozen values, one checked path for overrides."""
import dataclasses

import pytest
from helpers import write

import hybrid
from hybrid.core.config import load_config
from hybrid.core.errors import ConfigError, StoreUnavailable
from hybrid.core.settings import SETTINGS, Settings, replace


def test_the_table_and_the_object_agree():
    s = Settings()
    assert [row.name for row in SETTINGS] == [f.name for f in dataclasses.fields(Settings)]
    for row in SETTINGS:
        value = getattr(s, row.name)
        assert (list(value) if isinstance(value, tuple) else value) == row.default
        assert row.help.strip()


def test_settings_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Settings().rrf_k = 3  # type: ignore[misc]


@pytest.mark.parametrize("changes, message", [
    ({"rrf_k": -1}, "setting 'rrf_k' must be like 10 (a number, 0 or more), got -1"),
    ({"fuzzy": "yes"}, "setting 'fuzzy' must be like True"),
    ({"chunk_tokens": 12.5}, "setting 'chunk_tokens' must be like 128"),
    ({"vector_storage": "int4"}, "must be one of float32, float16, sq8"),
    ({"ann_recall": 1.5}, "setting 'ann_recall' must be like 0.99"),
    ({"include": "**/*.md"}, "setting 'include' must be like ['**/*.md', '**/*.pdf'"),
    ({"embedder": ""}, "setting 'embedder' must be like 'mix:minilm,use-multilingual'"),
    ({"chunk_size": 3}, "unknown setting 'chunk_size'"),
], ids=lambda v: str(v)[:30])
def test_replace_checks_every_value(changes, message):
    with pytest.raises(ConfigError, match="^override: ") as exc:
        replace(Settings(), **changes)
    assert message in str(exc.value)


def test_dataclasses_replace_runs_the_same_checks():
    with pytest.raises(ConfigError, match="rrf_k"):
        dataclasses.replace(Settings(), rrf_k=-2)


def test_replace_returns_a_new_object_and_normalises():
    base = Settings()
    s = replace(base, rrf_k=60, include=["notes/**/*.md"], chunk_tokens=256.0, rerank_model="")
    assert base.rrf_k == 10 and s.rrf_k == 60
    assert s.include == ("notes/**/*.md",)  # lists become tuples: the object stays immutable
    assert s.chunk_tokens == 256 and isinstance(s.chunk_tokens, int)
    assert s.changed() == {"rrf_k": 60, "include": ["notes/**/*.md"], "chunk_tokens": 256}


def test_config_file_errors_name_the_file(hybrid_home):
    write(hybrid_home, "config.toml", "[settings]\nrrf_k = 'big'\n")
    with pytest.raises(ConfigError, match=r"config\.toml: setting 'rrf_k' must be like 10"):
        load_config()
    write(hybrid_home, "config.toml", "settings = 3\n")
    with pytest.raises(ConfigError, match=r"\[settings\] must be a table"):
        load_config()


def test_handle_override_is_checked_and_survives_a_config_reload(hybrid_home, vault):
    h = hybrid.open(embedder="hash:16")
    h.add_vault(vault, "v")  # writes config.toml: the handle re-reads it on the next call
    h.override(rrf_k=3)
    with pytest.raises(ConfigError):
        h.override(rrf_k=-3)
    assert h.settings.rrf_k == 3
    write(hybrid_home, "config.toml", load_config().path.read_text() + "\n[settings]\nsnippet_chars = 99\n")
    h.refresh()
    assert (h.settings.rrf_k, h.settings.snippet_chars, h.settings.embedder) == (3, 99, "hash:16")
    assert load_config().settings.rrf_k == 10  # never written to the file


@pytest.mark.parametrize("value", ["", "postgresql", "postgres", "env", "postgresql://me@db/notes",
                                   "postgres://db/notes"])
def test_the_store_setting_takes_what_vault_add_store_takes(hybrid_home, value):
    """One rule for a store value (hybrid.core.store_url), the settings table's and `vault add
    --store`'s: `env` was refused by a copy of it here. The password rule is the writer's: a URL
    with one is refused when it would be written, not when a file holding it is read."""
    assert Settings(store=value).store == value
    cfg = load_config()
    cfg.set_setting("store", value)
    assert cfg.settings.store == ("postgresql" if value in ("postgres", "env") else value)
    with pytest.raises(ConfigError, match="must be empty, `postgresql`, or a postgresql:// or milvus:// URL"):
        Settings(store=" postgresql")
    assert Settings(store="postgresql://me:pw@db/notes").store  # read as it stands
    with pytest.raises(StoreUnavailable, match="holds a password"):
        cfg.set_setting("store", "postgresql://me:pw@db/notes")
