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
