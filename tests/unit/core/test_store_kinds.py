"""The registry of store kinds (hybrid.core.store_url): a vault's ``store`` value names its
backend by the URL's scheme, built-in kinds and those other packages declare through the
``hybrid.stores`` entry-point group alike."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from hybrid.core import store_url
from hybrid.core.config import Vault
from hybrid.core.errors import StoreUnavailable
from hybrid.core.store_url import (
    LOCAL,
    MILVUS,
    POSTGRESQL,
    StoreKind,
    check_store_value,
    is_store_value,
    kind_of,
    store_kinds,
)
from hybrid.store import backend


@pytest.mark.parametrize("value, kind", [
    (None, LOCAL), ("", LOCAL), ("file://", LOCAL), ("FILE://", LOCAL),
    ("postgresql", POSTGRESQL), ("env", POSTGRESQL), ("postgresql://me@db/notes", POSTGRESQL),
    ("postgres://db/notes", POSTGRESQL), ("PostgreSQL://db/notes", POSTGRESQL),
    ("milvus://milvus.internal:19530/notes", MILVUS), ("milvus:///srv/index.db", MILVUS),
])
def test_a_store_value_names_its_kind_by_scheme(value, kind):
    assert kind_of(value) is kind


def test_an_unknown_scheme_is_refused_naming_the_kinds_known():
    with pytest.raises(StoreUnavailable) as err:
        kind_of("mongodb://db/notes")
    assert "'mongodb://db/notes'" in str(err.value) and "postgresql://USER@HOST/DB" in str(err.value)
    assert not is_store_value("mongodb://db/notes") and not is_store_value("/var/index")
    with pytest.raises(StoreUnavailable, match="no store hybrid knows"):
        check_store_value("sqlite:///x.db")


def test_a_refusal_never_shows_a_password():
    with pytest.raises(StoreUnavailable) as err:
        kind_of("mongodb://me:hunter2@db/notes")
    assert "hunter2" not in str(err.value) and "***" in str(err.value)


def test_file_url_is_the_local_store_and_is_kept_as_none():
    assert check_store_value("file://") == "" and check_store_value(" ") == ""
    with pytest.raises(StoreUnavailable, match="a local store has no address"):
        check_store_value("file:///srv/index")


def test_words_are_kept_in_their_first_form_and_passwords_refused():
    assert check_store_value("env") == "postgresql"
    assert check_store_value("postgres://db/notes") == "postgres://db/notes"
    with pytest.raises(StoreUnavailable, match="holds a password"):
        check_store_value("postgresql://me:pw@db/notes")


def test_a_vault_opens_on_its_kinds_backend():
    def vault(store):
        return Vault("v", Path("/nowhere"), [], [], "hash:8", Path("/nowhere-idx"), store=store)
    assert backend(vault(None)).name == "local"
    assert backend(vault("file://")).name == "local"
    assert backend(vault("postgresql://db/x")).name == "postgresql"
    assert backend(vault("milvus:///tmp/x.db")).name == "milvus"


# --- a store kind another package declares --------------------------------------------------
TOY = '''
from hybrid.core.store_url import StoreKind

class ToyBackend:
    name = "toy"
    def explain(self, exc):
        return None

BACKEND = ToyBackend()
KIND = StoreKind("toy", ("toy",), "toy_store:BACKEND", "toy://HOST/DB", shared=True)
CLASH = StoreKind("pg-again", ("postgres",), "toy_store:BACKEND", "postgres://x")
NOT_A_KIND = 42
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """An installed distribution (a dist-info folder on sys.path) declaring store kinds."""
    (tmp_path / "toy_store.py").write_text(TOY, encoding="utf-8")
    info = tmp_path / "toy_store-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-store\nVersion: 1.0\n",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "[hybrid.stores]\ntoy = toy_store:KIND\nclash = toy_store:CLASH\n"
        "broken = toy_store_missing:KIND\nodd = toy_store:NOT_A_KIND\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    store_kinds.cache_clear()
    yield
    store_kinds.cache_clear()
    sys.modules.pop("toy_store", None)


def test_a_package_adds_a_kind_through_the_entry_point_group(plugin, caplog):
    with caplog.at_level(logging.WARNING, logger="hybrid"):
        kinds = store_kinds()
    names = [k.name for k in kinds]
    assert names[:3] == ["local", "postgresql", "milvus"] and "toy" in names
    toy = kind_of("toy://db.example/notes")
    assert isinstance(toy, StoreKind) and toy.name == "toy" and toy.shared
    vault = Vault("v", Path("/nowhere"), [], [], "hash:8", Path("/x"), store="toy://db.example/notes")
    assert backend(vault).name == "toy"
    assert check_store_value("toy://db.example/notes") == "toy://db.example/notes"
    # a broken declaration, a non-kind and a scheme already taken: each skipped with a line
    logged = caplog.text
    assert "'broken'" in logged and "'odd'" in logged and "'pg-again'" in logged
    assert kind_of("postgres://db/x") is POSTGRESQL  # the built-in keeps its scheme
    assert "pg-again" not in names


def test_without_the_package_its_scheme_is_unknown():
    store_kinds.cache_clear()
    with pytest.raises(StoreUnavailable):
        kind_of("toy://db.example/notes")
    assert store_url.ENTRY_POINT_GROUP == "hybrid.stores"


def test_redact_keeps_a_url_without_a_password_as_written():
    assert store_url.redact("milvus:///srv/index.db") == "milvus:///srv/index.db"
    assert store_url.redact("postgresql://me:pw@db/x") == "postgresql://me:***@db/x"
    assert store_url.redact("postgresql://db/x?password=pw&sslmode=require") == \
        "postgresql://db/x?password=***&sslmode=require"
