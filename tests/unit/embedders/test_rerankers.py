"""The rerankers that work without a cross-encoder: an LLM on Ollama (against a small local
server that speaks Ollama's /api/generate) and late interaction over the bundled MiniLM."""
import json
import math
import threading
import time
from dataclasses import dataclass, field

import pytest
from helpers import JsonHandler, free_port, local_server

from hybrid.core.errors import ConfigError, ModelUnavailable
from hybrid.embedders import make_reranker
from hybrid.embedders.late import CENTERS, SCALE, LateInteractionReranker, center, to_logit
from hybrid.embedders.ollama_rerank import OllamaReranker, score_logit, yes_no_logit


@dataclass
class FakeModel:
    """What the fake server knows and what it saw. A passage containing a word of ``logits``
    gets that log-odds of "yes" over "no" (0 otherwise)."""
    models: set = field(default_factory=lambda: {"judge", "judge:latest"})
    logits: dict = field(default_factory=dict)
    logprobs: bool = True  # False: an Ollama older than 0.12.11 (no logprobs in answers)
    refuse_think: bool = False  # True: 400 for a request with "think", as for some models
    delay: float = 0.0
    requests: list = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class FakeOllama(JsonHandler):
    def do_POST(self):
        st: FakeModel = self.server.state
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with st.lock:
            st.requests.append(body)
            st.in_flight += 1
            st.max_in_flight = max(st.max_in_flight, st.in_flight)
        try:
            time.sleep(st.delay)
        finally:  # done before the answer is sent: the client's next request may arrive at once
            with st.lock:
                st.in_flight -= 1
        self._answer(st, body)

    def _answer(self, st: FakeModel, body: dict):
        model = body["model"]
        if self.path != "/api/generate":
            return self._send(404, {"error": "not found"})
        if model not in st.models:
            return self._send(404, {"error": f"model \"{model}\" not found, try pulling it first"})
        if st.refuse_think and "think" in body:
            return self._send(400, {"error": f"\"{model}\" does not support thinking"})
        x = next((v for word, v in st.logits.items() if word in body["prompt"]), 0.0)
        if body.get("format"):
            return self._send(200, {"model": model, "done": True,
                                    "response": json.dumps({"score": max(0, min(10, round(5 + x)))})})
        if not (st.logprobs and body.get("logprobs")):
            return self._send(200, {"model": model, "done": True, "response": "Yes"})
        yes, no = -math.log1p(math.exp(-x)), -math.log1p(math.exp(x))  # log-odds x, summing to 1
        top = sorted([{"token": "Yes", "logprob": yes}, {"token": "No", "logprob": no},
                      {"token": "Maybe", "logprob": min(yes, no) - 3}], key=lambda t: -t["logprob"])
        self._send(200, {"model": model, "done": True, "response": top[0]["token"],
                         "logprobs": [{**top[0], "top_logprobs": top[:body.get("top_logprobs", 1)]}]})


@pytest.fixture
def ollama():
    """A fake Ollama on 127.0.0.1 (its ``state`` is a FakeModel); stopped after the test."""
    with local_server(FakeOllama) as server:
        server.state = FakeModel()
        yield server


PASSAGES = ["Network > Tailscale\nRun `tailscale up --advertise-routes=10.0.0.0/24`.",
            "Garden\nTomatoes need six hours of sun.",
            "Sourdough\nA starter fed twice a day doubles in six hours.",
            "Orders\nThe `orders-created` topic has 12 partitions."]


# --- Ollama ------------------------------------------------------------------------------

@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_requests_carry_query_and_passage_and_scores_follow_the_model(ollama):
    ollama.state.logits = {"tailscale": 4.0, "Tomatoes": -3.0, "orders-created": 1.5}
    r = make_reranker("ollama:judge", ollama_host=ollama.url)
    assert r.id == "ollama:judge"
    s = r.scores("how do I advertise a subnet route", PASSAGES)
    assert s == pytest.approx([4.0, -3.0, 0.0, 1.5], abs=1e-6)  # log P(yes) - log P(no)
    assert sorted(range(4), key=lambda i: -s[i]) == [0, 3, 2, 1]
    assert len(ollama.state.requests) == len(PASSAGES)
    for body in ollama.state.requests:
        assert body["model"] == "judge" and body["stream"] is False
        assert "how do I advertise a subnet route" in body["prompt"]
        assert body["options"]["temperature"] == 0 and body["options"]["num_predict"] == 1
        assert body["logprobs"] is True and body["top_logprobs"] >= 2 and body["think"] is False
    prompts = sorted(b["prompt"] for b in ollama.state.requests)
    assert all(any(p in prompt for prompt in prompts) for p in PASSAGES)


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_long_passages_are_cut(ollama):
    r = OllamaReranker("judge", ollama.url, max_chars=200)
    r.scores("q", ["x" * 5000])
    (body,) = ollama.state.requests
    assert "x" * 200 in body["prompt"] and "x" * 201 not in body["prompt"]


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_concurrent_but_bounded(ollama):
    ollama.state.delay = 0.05
    r = OllamaReranker("judge", ollama.url, workers=3)
    assert len(r.scores("q", [f"passage {i}" for i in range(12)])) == 12
    assert 1 < ollama.state.max_in_flight <= 3


def test_server_down_is_one_line():
    host = f"http://127.0.0.1:{free_port()}"
    r = make_reranker("ollama:judge", ollama_host=host)  # nothing is contacted yet
    with pytest.raises(ModelUnavailable, match="cannot reach Ollama") as err:
        r.scores("q", PASSAGES)
    assert host in str(err.value) and "ollama serve" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_missing_model_names_the_pull_command(ollama):
    r = make_reranker("ollama:qwen2.5:0.5b", ollama_host=ollama.url)
    with pytest.raises(ModelUnavailable, match=r"run `ollama pull qwen2\.5:0\.5b`") as err:
        r.scores("q", PASSAGES)
    assert ollama.url in str(err.value) and "\n" not in str(err.value)


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_timeout_is_one_line(ollama):
    ollama.state.delay = 0.6
    r = OllamaReranker("judge", ollama.url, timeout=0.2)
    t0 = time.perf_counter()
    with pytest.raises(ModelUnavailable, match="within 0.2 s") as err:
        r.scores("q", PASSAGES)
    assert time.perf_counter() - t0 < 0.55  # the deadline, not the slowest request
    assert "rerank_top_n" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_server_without_logprobs_falls_back_to_a_json_score(ollama):
    ollama.state.logprobs = False
    ollama.state.logits = {"tailscale": 3.0, "Tomatoes": -4.0}
    r = OllamaReranker("judge", ollama.url, workers=1)
    assert r.scores("q", PASSAGES) == [3.0, -4.0, 0.0, 0.0]  # score - 5
    assert r.mode == "score"
    # one wasted request: the first answer showed the server has no logprobs
    assert len(ollama.state.requests) == len(PASSAGES) + 1
    assert all(b.get("format") for b in ollama.state.requests[1:])
    assert ollama.state.requests[1]["format"]["properties"]["score"]["maximum"] == 10


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_model_that_refuses_think_is_asked_without_it(ollama):
    ollama.state.refuse_think = True
    ollama.state.logits = {"tailscale": 2.0}
    r = OllamaReranker("judge", ollama.url, workers=1)
    assert r.scores("q", PASSAGES[:2]) == pytest.approx([2.0, 0.0], abs=1e-6)
    assert r.think is None
    assert [("think" in b) for b in ollama.state.requests] == [True, False, False]


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_search_reranks_through_ollama(fake, vault, ollama):
    """The engine builds the reranker from the settings, with the ollama_host setting."""
    ollama.state.logits = {"tailscale": 6.0}
    fake.add_vault(vault, "vault")
    fake.index()
    fake.override(rerank_model="ollama:judge", ollama_host=ollama.url)
    hits = fake.search("network routes", top_k=3, rerank=True)
    assert hits[0].path == "home/network.md" and hits[0].rerank_score == pytest.approx(6.0)
    assert ollama.state.requests and all(b["model"] == "judge" for b in ollama.state.requests)


def test_logit_helpers():
    assert yes_no_logit([("yes", math.log(0.8)), ("no", math.log(0.2))]) == pytest.approx(math.log(4))
    # spellings add up; a missing word counts as likely as the least likely token listed
    assert yes_no_logit([(" Yes", math.log(0.3)), ("yes", math.log(0.3)), ("No", math.log(0.2))]) \
        == pytest.approx(math.log(3))
    assert yes_no_logit([("Yes", -0.1), ("Sure", -2.5)]) == pytest.approx(2.4)
    assert yes_no_logit([("Maybe", -0.1)]) is None
    assert score_logit('{"score": 8}') == 3.0 and score_logit('{"score": 42}') == 5.0
    assert score_logit("eight") is None and score_logit('{"grade": 3}') is None


# --- specs -------------------------------------------------------------------------------

@pytest.mark.parametrize("spec, error, message", [
    ("ollama:", ConfigError, "names no model"),
    ("ollama: ", ConfigError, "names no model"),
    ("late:hash:64", ConfigError, "needs an embedder with token embeddings"),
    ("late:nonsense", ConfigError, "unknown embedder"),
    ("", ModelUnavailable, "set `rerank_model`"),
])
def test_odd_specs_fail_clearly(spec, error, message):
    with pytest.raises(error, match=message) as err:
        make_reranker(spec)
    assert "\n" not in str(err.value)


def test_late_logit_mapping():
    (t0, c0), (t1, c1) = CENTERS[:2]
    assert center(t0) == c0 and center(t1) == pytest.approx(c1) and center(1) == c0
    assert center(10_000) == CENTERS[-1][1]
    mid = center(round((t0 * t1) ** 0.5))  # log-linear between measured cuts
    assert min(c0, c1) < mid < max(c0, c1)
    assert to_logit(c0, t0) == 0.0 and to_logit(c0 + 0.25, t0) == pytest.approx(SCALE * 0.25)


def test_late_is_built_without_loading_anything():
    r = make_reranker("late")
    assert r.id == "late" and r.scores("anything", []) == []
    assert make_reranker("late:minilm").id == "late"


# --- late interaction with the real model ------------------------------------------------

@pytest.fixture(scope="module")
def late():
    return make_reranker("late")


@pytest.mark.slow
def test_late_prefers_the_relevant_passage(late):
    query = "how do I advertise a subnet route with tailscale"
    s = late.scores(query, PASSAGES)
    assert len(s) == len(PASSAGES) and all(isinstance(x, float) for x in s)
    assert s[0] == max(s) and s[0] > s[1] + 2  # the sigmoid in blend tells them apart
    raw = late.maxsims(query, PASSAGES)
    assert s == pytest.approx([to_logit(x, late.max_tokens) for x in raw])
    # the same passage in another batch: the same score, up to bfloat16 rounding (~0.001 MaxSim)
    assert late.scores(query, PASSAGES[:1]) == pytest.approx(s[:1], abs=0.05)
    assert late.scores(query, []) == []
    assert len(late.scores(query, ["", "x" * 10_000])) == 2


@pytest.mark.slow
def test_late_cuts_passages_to_its_token_budget(late):
    head = "Tailscale > Subnet routers\n" + "Advertise the route with tailscale up on the router. " * 10
    tail = " ".join(["sourdough"] * 400)
    query = "sourdough"
    # the query's word only after the first 64 word pieces: not seen
    assert late.maxsims(query, [head + tail])[0] < late.maxsims(query, [tail])[0] - 0.2


@pytest.mark.slow
def test_late_in_bfloat16_agrees_with_float32(late):
    """On torch (late:minilm-torch), bfloat16 where the CPU has it; the default `late` runs the
    same model on ONNX Runtime in fp32 and agrees with both."""
    query = "how do I advertise a subnet route with tailscale"
    fp32 = LateInteractionReranker("minilm-torch", bf16=False)
    bf16 = LateInteractionReranker("minilm-torch", bf16=True)  # emulated where the CPU lacks it: slower, same result
    want = fp32.maxsims(query, PASSAGES)
    assert (fp32.precision, bf16.maxsims(query, PASSAGES)) == ("fp32", pytest.approx(want, abs=0.01))
    assert bf16.precision == "bf16"
    assert late.maxsims(query, PASSAGES) == pytest.approx(want, abs=0.01)


@pytest.mark.slow
def test_search_with_late_rerank(fake, vault):
    fake.add_vault(vault, "vault")
    fake.index()
    fake.override(rerank_model="late")
    hits = fake.search("tomatoes sun", top_k=3, rerank=True)
    assert hits[0].path == "home/garden.md" and all(h.rerank_score is not None for h in hits)


@pytest.mark.slow
def test_late_on_onnx_runtime_matches_torch(tmp_path_factory):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from hybrid.embedders import OnnxEmbedder
    cache = tmp_path_factory.mktemp("onnx-late")
    fp32 = LateInteractionReranker("minilm-onnx", embedder=OnnxEmbedder("fp32", cache_dir=cache))
    int8 = LateInteractionReranker("minilm-int8", embedder=OnnxEmbedder("int8", cache_dir=cache))
    assert (fp32.id, int8.id) == ("late:minilm-onnx", "late:minilm-int8")
    query = "how do I advertise a subnet route with tailscale"
    want = LateInteractionReranker("minilm-torch", bf16=False).maxsims(query, PASSAGES)
    assert fp32.maxsims(query, PASSAGES) == pytest.approx(want, abs=1e-4)
    got = int8.maxsims(query, PASSAGES)
    assert got == pytest.approx(want, abs=0.03)
    assert max(range(4), key=lambda i: got[i]) == 0
