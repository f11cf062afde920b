"""The Ollama backend against a small local server that speaks Ollama's /api/embed."""
import json

import pytest
from helpers import JsonHandler, free_port, local_server

import hybrid
from hybrid.core.errors import ModelUnavailable
from hybrid.embedders import HashEmbedder


class FakeOllama(JsonHandler):
    models = {"nomic-embed-text", "nomic-embed-text:latest"}
    seen: list = []
    inner = HashEmbedder(48)
    nan = False  # answer NaN in the vectors

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/api/embed":
            return self._send(404, {"error": "not found"})
        if body["model"] not in self.models:
            return self._send(404, {"error": f"model \"{body['model']}\" not found, try pulling it first"})
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        FakeOllama.seen.extend(texts)
        vecs = self.inner.embed_documents(texts).tolist()
        if FakeOllama.nan:
            vecs = [[float("nan")] + v[1:] for v in vecs]
        self._send(200, {"model": body["model"], "embeddings": vecs})


@pytest.fixture
def ollama_server():
    FakeOllama.seen, FakeOllama.nan = [], False
    with local_server(FakeOllama) as server:
        yield server.url


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_index_and_search_through_ollama(ollama_server, vault):
    h = hybrid.open(embedder="ollama:nomic-embed-text", ollama_host=ollama_server)
    h.add_vault(vault, "vault")
    r = h.index()[0]
    assert r.chunks_embedded == r.chunks > 0
    assert all(t.startswith("search_document: ") for t in FakeOllama.seen)
    hits = h.search("tomatoes sun", mode="vector")
    assert hits[0].path == "home/garden.md"
    assert FakeOllama.seen[-1] == "search_query: tomatoes sun"
    assert h.status()[0].embedder == "ollama:nomic-embed-text" and h.status()[0].dim == 48


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_missing_model_names_the_pull_command(ollama_server, vault):
    h = hybrid.open(embedder="ollama:mxbai-embed-large", ollama_host=ollama_server)
    h.add_vault(vault, "vault")
    with pytest.raises(ModelUnavailable, match="ollama pull mxbai-embed-large"):
        h.index()


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_unreachable_server_is_one_line_and_loses_nothing(ollama_server, vault):
    h = hybrid.open(embedder="ollama:nomic-embed-text", ollama_host=ollama_server)
    h.add_vault(vault, "vault")
    h.index()
    (vault / "new.md").write_text("# New\n\nfresh words\n")
    down = hybrid.open(embedder="ollama:nomic-embed-text", ollama_host=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(ModelUnavailable, match="cannot reach Ollama") as err:
        down.index()
    assert "\n" not in str(err.value)
    assert [x.path for x in down.search("tomatoes", mode="lexical")] == ["home/garden.md"]
    assert h.index()[0].added == 1


@pytest.mark.slow  # a server
def test_vectors_that_are_not_finite_are_refused(ollama_server, vault):
    """A server answering NaN: one line, not vectors that nothing ever finds (re-test of #47)."""
    FakeOllama.nan = True
    h = hybrid.open(embedder="ollama:nomic-embed-text", ollama_host=ollama_server)
    h.add_vault(vault, "vault")
    with pytest.raises(ModelUnavailable, match="not finite") as err:
        h.index()
    assert "\n" not in str(err.value)
