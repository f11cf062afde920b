"""`rerank:<model>` against servers on 127.0.0.1 that speak the two `/rerank` shapes: Cohere's
(Jina, vLLM) and TEI's; requests checked, wrong answers refused in one line."""
import json
import math

import pytest
from helpers import JsonHandler, local_server

from hybrid.core.errors import ConfigError, ModelUnavailable
from hybrid.embedders import make_reranker
from hybrid.embedders import remote as remote_mod
from hybrid.embedders.registry import Options


def relevance(query: str, doc: str) -> float:
    """A stand-in model: the share of the query's words in the document."""
    words = query.lower().split()
    return sum(w in doc.lower() for w in words) / max(1, len(words))


class FakeCohere(JsonHandler):
    seen: list = []
    auth: list = []
    drop = False
    down = ""  # set: every request gets a 500 whose message is this

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeCohere.seen.append(body)
        FakeCohere.auth.append(self.headers.get("Authorization"))
        if FakeCohere.down:
            return self._send(500, {"message": FakeCohere.down})
        if self.path != "/v1/rerank":
            return self._send(404, {"message": "not found"})
        docs = body["documents"]
        results = [{"index": i, "relevance_score": relevance(body["query"], d)} for i, d in enumerate(docs)]
        results.sort(key=lambda r: -r["relevance_score"])  # best first, as the APIs answer
        if FakeCohere.drop:
            results = results[:-1]
        self._send(200, {"id": "x", "results": results[:body["top_n"]]})


class FakeTEI(JsonHandler):
    seen: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeTEI.seen.append(body)
        if "texts" not in body:  # what axum answers for a missing field
            return self._send(422, {"error": "Failed to deserialize the JSON body: missing field `texts`",
                                    "error_type": "validation"})
        assert body["raw_scores"] is True
        self._send(200, [{"index": i, "score": 8 * relevance(body["query"], t) - 4}
                         for i, t in enumerate(body["texts"])])


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    monkeypatch.setattr(remote_mod, "BACKOFF", 0.01)
    FakeCohere.seen, FakeCohere.auth, FakeCohere.drop, FakeTEI.seen = [], [], False, []
    FakeCohere.down = ""


PASSAGES = ["tomatoes need sun", "routers and networks", "sun and tomatoes and basil"]


def test_cohere_shape(monkeypatch):
    monkeypatch.setenv("JINA_KEY", "jina-secret-1")
    with local_server(FakeCohere) as s:
        r = make_reranker("rerank:bge-reranker", options=Options(rerank_base_url=s.url + "/v1",
                                                                  rerank_api_key_env="JINA_KEY"))
        scores = r.scores("tomatoes sun", PASSAGES)
    body = FakeCohere.seen[0]
    assert body == {"model": "bge-reranker", "query": "tomatoes sun", "documents": PASSAGES,
                    "top_n": 3, "return_documents": False}
    assert FakeCohere.auth == ["Bearer jina-secret-1"]
    # probabilities become logits, in the passages' order, whatever order the answer had
    assert scores[1] < scores[0] == scores[2] and scores[0] == pytest.approx(math.log(1e9 - 1), rel=1e-3)


def test_tei_shape_after_its_422():
    with local_server(FakeTEI) as s:
        r = make_reranker("rerank:bge", options=Options(rerank_base_url=s.url))
        first = r.scores("tomatoes sun", PASSAGES)
        second = r.scores("routers", PASSAGES)
    assert first == [4.0, -4.0, 4.0] and second == [-4.0, 4.0, -4.0]  # raw scores, kept as logits
    assert len(FakeTEI.seen) == 3  # the 422 once, then TEI's shape at once
    assert FakeTEI.seen[1] == {"query": "tomatoes sun", "texts": PASSAGES, "raw_scores": True}


def test_too_few_scores_are_refused():
    FakeCohere.drop = True
    with local_server(FakeCohere) as s:
        r = make_reranker("rerank:bge", options=Options(rerank_base_url=s.url + "/v1"))
        with pytest.raises(ModelUnavailable, match="scores for 2 of 3 passages") as err:
            r.scores("tomatoes", PASSAGES)
    assert "\n" not in str(err.value) and s.url in str(err.value)


def test_needs_a_base_url(monkeypatch):
    monkeypatch.delenv("RERANK_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="rerank_base_url"):
        make_reranker("rerank:bge", options=Options())
    with pytest.raises(ConfigError, match="names no model"):
        make_reranker("rerank:", options=Options())


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_search_reranks_through_the_api(fake, vault):
    fake.add_vault(vault, "vault")
    fake.index()
    with local_server(FakeCohere) as s:
        fake.override(rerank_model="rerank:bge", rerank_base_url=s.url + "/v1")
        hits = fake.search("network routes", top_k=3, rerank=True)
        assert hits[0].path == "home/network.md" and hits[0].rerank_score is not None
        assert FakeCohere.seen and FakeCohere.seen[0]["query"] == "network routes"
        assert fake.status()[0].sends_to == [f"{s.url}/v1 (rerank (rerank:bge), this machine)"]


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_an_agent_asking_for_rerank_gets_one_plain_line_when_the_reranker_fails(fake, vault, monkeypatch):
    import anyio
    from mcp import Client

    from hybrid.faces.mcp import build_server
    monkeypatch.setenv("RERANK_API_KEY", "rk-live-Secret12345")
    fake.add_vault(vault, "vault")
    fake.index()
    with local_server(FakeCohere) as s:
        fake.override(rerank_model="rerank:bge", rerank_base_url=s.url + "/v1", remote_retries=0)
        FakeCohere.down = "CUDA out of memory for RK-LIVE-SECRET12345"

        async def search():
            async with Client(build_server(fake)) as c:
                return await c.call_tool("search", {"query": "network routes", "rerank": True})
        res = anyio.run(search)
        with pytest.raises(ModelUnavailable) as err:
            fake.search("network routes", rerank=True)  # the owner's line
    text = res.content[0].text
    assert res.is_error and text.endswith("the reranking server is unavailable; the owner can see details in "
                                          "the server's log")
    assert s.url not in text and "CUDA" not in text
    assert s.url in str(err.value) and "CUDA out of memory for [key]" in str(err.value)
