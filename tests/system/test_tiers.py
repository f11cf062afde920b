"""The fast tier (``pytest -m "not slow"``) cannot silently rot: the slow marker is registered,
and a test that uses the real model without the marker fails instead of slowing the tier."""
import sys
from types import SimpleNamespace

import conftest
import pytest


def test_slow_marker_is_registered(pytestconfig):
    assert any(line.startswith("slow:") for line in pytestconfig.getini("markers"))


def stub_item(fixtures, slow=False):
    marker = pytest.mark.slow.mark if slow else None
    return SimpleNamespace(nodeid="tests/test_x.py::test_x", fixturenames=list(fixtures),
                           get_closest_marker=lambda name: marker if name == "slow" else None,
                           stash=pytest.Stash())


@pytest.mark.parametrize("fixtures", [["minilm"], ["sample", "sample_home", "minilm"],
                                      ["serve", "home"], ["tiny_cross_encoder"]],
                         ids=["minilm", "through-sample", "server", "cross-encoder"])
def test_unmarked_test_with_a_slow_fixture_fails(fixtures):
    with pytest.raises(pytest.fail.Exception, match="not marked slow"):
        conftest.pytest_runtest_setup(stub_item(fixtures))


@pytest.mark.parametrize("fixtures, slow", [(["minilm"], True), (["fake", "vault"], False)],
                         ids=["marked", "fast-fixtures"])
def test_marked_or_fast_tests_pass_the_guard(fixtures, slow):
    conftest.pytest_runtest_setup(stub_item(fixtures, slow))


def test_unmarked_test_that_imports_a_model_runtime_fails(monkeypatch):
    item = stub_item(["fake"])
    monkeypatch.delitem(sys.modules, "onnxruntime", raising=False)
    conftest.pytest_runtest_setup(item)
    monkeypatch.setitem(sys.modules, "onnxruntime", object())  # as if the test had imported it
    teardown = conftest.pytest_runtest_teardown(item, None)
    next(teardown)
    with pytest.raises(pytest.fail.Exception, match="imported onnxruntime"):
        teardown.send(None)


@pytest.mark.parametrize("fixtures, marked", [(["pg_url"], True), (["fake", "pg_server"], True),
                                              (["sample_pg"], True), (["fake", "vault"], False)],
                         ids=["pg_url", "pg_server", "sample_pg", "no-server"])
def test_a_test_that_starts_postgresql_is_marked_slow_and_postgres(fixtures, marked):
    """The fast tier needs no server: a test whose fixtures start PostgreSQL is marked at
    collection, whatever its author wrote."""
    added: list[str] = []
    item = SimpleNamespace(fixturenames=fixtures, add_marker=lambda m: added.append(m.name))
    conftest.pytest_collection_modifyitems([item])
    assert sorted(added) == (["postgres", "slow"] if marked else [])


def test_store_params_for_postgresql_carry_its_markers():
    pg = conftest.store_param("postgresql")
    assert {m.name for m in pg.marks} == {"slow", "postgres"}
    assert conftest.store_param("local") == "local"
