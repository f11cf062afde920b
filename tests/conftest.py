import os
import shutil
from pathlib import Path

import pytest

import hybrid
from hybrid.embed import minilm_path, make_embedder

SAMPLE_VAULT = Path(hybrid.__file__).parent / "sample_vault"
OBSIDIAN_HELP = Path(__file__).resolve().parents[2] / "shared" / "vaults" / "obsidian-help"


@pytest.fixture(autouse=True)
def hybrid_home(tmp_path, monkeypatch):
    """Every test gets its own config and index dir."""
    home = tmp_path / "hybrid-home"
    monkeypatch.setenv("HYBRID_HOME", str(home))
    monkeypatch.delenv("HYBRID_FAULT", raising=False)
    return home


@pytest.fixture(scope="session")
def minilm():
    """The real bundled model, loaded once per test session."""
    emb = make_embedder("minilm")
    emb.embed_query("warm up")
    return emb


@pytest.fixture(scope="session")
def counter():
    from hybrid.embed import WordPieceCounter
    return WordPieceCounter(minilm_path() / "tokenizer.json")


def write(root: Path, rel: str, text: str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


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
    h = hybrid.open(home)
    h._embedders[minilm.id] = minilm
    h.add_vault(SAMPLE_VAULT, "sample")
    h.index()
    return home


@pytest.fixture
def sample(sample_home, minilm):
    h = hybrid.open(sample_home)
    h._embedders[minilm.id] = minilm
    yield h
    h.close()


def fail_embedding_at(monkeypatch, embedder, call: int) -> dict:
    """Make ``embedder.embed_documents`` raise ModelUnavailable("model went away") on its
    ``call``-th call (a model that dies mid-run). Returns the call counter; undo with
    ``monkeypatch.undo()`` or by setting ``embed_documents`` back to ``counter["real"]``."""
    import hybrid.errors
    counter = {"n": 0, "real": embedder.embed_documents}

    def failing(texts):
        counter["n"] += 1
        if counter["n"] == call:
            raise hybrid.errors.ModelUnavailable("model went away")
        return counter["real"](texts)

    monkeypatch.setattr(embedder, "embed_documents", failing)
    return counter
