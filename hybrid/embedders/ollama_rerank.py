"""An LLM as reranker (``rerank_model = "ollama:<model>"``): a model served by a local Ollama is
asked, for each (query, passage), whether the passage answers the query. It goes through the
``ollama`` client (``/api/generate``), like the Ollama embedder, and the client is imported on
the first scoring.

How an answer becomes a logit for ``hybrid.retrieval.rerank.blend``:

- **logprobs** (Ollama >= 0.12.11): one token is generated, with ``logprobs`` and
  ``top_logprobs``. The logit is ``log P(yes) - log P(no)``, summed over spellings such as
  "Yes" and " yes". That is the model's log-odds that the passage answers the query. When only
  one of the two words is among the top tokens, the other gets the lowest listed logprob. That
  is an upper bound, so the logit is an underestimate of how sure the model is.
- **JSON score** (older servers, whose answers carry no logprobs): the model returns
  ``{"score": 0..10}``, constrained by a JSON-schema ``format``. The logit is ``score - 5``,
  which lies in [-5, 5]. The first answer without logprobs switches the reranker to this mode
  for the rest of the process.

Requests are deterministic: temperature 0 and a fixed seed. Thinking is off (``think: false``),
unless the server rejects the field. Up to :data:`WORKERS` requests run at once. Each call to
``scores`` has one overall deadline (:data:`TIMEOUT`). Ollama serves
``OLLAMA_NUM_PARALLEL`` requests at a time and queues the rest, so more workers gain nothing.

No real model's speed was measured: Ollama cannot be installed on the machine the figures come
from. Against a stand-in server that answers at once, the reranker's own cost for 30 passages
is ~45 ms: prompts, HTTP through the pool, and parsing (``eval/archive/models/rerank_latency.py
--fake-ollama``). An LLM reads a prompt per passage, so on a CPU expect far more than the
300 ms that ``late`` fits in. This reranker suits an Ollama with a GPU, or users who accept
the wait.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

from hybrid.core.errors import ModelUnavailable
from hybrid.embedders.ollama_api import client, generate, not_pulled
from hybrid.embedders.registry import Options
from hybrid.embedders.remote import outbound

log = logging.getLogger("hybrid")

WORKERS = 4
TIMEOUT = 60.0  # seconds for all passages of one call
TOP_LOGPROBS = 10
MAX_PASSAGE_CHARS = 1_500  # ~350 tokens: a chunk (<= 254 word pieces) with its heading line
MAX_QUERY_CHARS = 500

PROMPT = ("Query: {query}\n\nPassage: {passage}\n\n"
          "Does the passage answer the query? Answer with one word: yes or no.")
SCORE_PROMPT = ("Query: {query}\n\nPassage: {passage}\n\n"
                "How well does the passage answer the query, from 0 (not at all) to 10 (fully)? "
                "Answer as JSON: {{\"score\": <integer 0-10>}}.")
SCORE_FORMAT = {"type": "object", "required": ["score"],
                "properties": {"score": {"type": "integer", "minimum": 0, "maximum": 10}}}
OPTIONS = {"temperature": 0, "seed": 0}


def yes_no_logit(top: Sequence[tuple[str, float]]) -> float | None:
    """``log P(yes) - log P(no)`` from the (token, logprob) pairs of the first generated token;
    None when neither word is among them."""
    yes = [lp for tok, lp in top if tok.strip().lower() == "yes"]
    no = [lp for tok, lp in top if tok.strip().lower() == "no"]
    if not yes and not no:
        return None
    floor = min(lp for _, lp in top)  # an absent word is at most as likely as the last listed one

    def logsumexp(xs: list[float]) -> float:
        if not xs:
            return floor
        m = max(xs)
        return m + math.log(sum(math.exp(x - m) for x in xs))

    return logsumexp(yes) - logsumexp(no)


def score_logit(text: str) -> float | None:
    """``score - 5`` from a ``{"score": n}`` answer (n clamped to 0..10); None when unreadable."""
    try:
        value = json.loads(text)["score"]
        return float(min(10.0, max(0.0, float(value)))) - 5.0
    except (ValueError, TypeError, KeyError):
        return None


class OllamaReranker:
    """Relevance judgements from an LLM on a local Ollama (the Reranker protocol of
    ``hybrid.embedders``). Nothing is contacted before the first scoring."""

    def __init__(self, model: str, host: str, *, workers: int = WORKERS, timeout: float = TIMEOUT,
                 max_chars: int = MAX_PASSAGE_CHARS, options: Options | None = None):
        self.model_name = model
        self.options = options or Options(ollama_host=host)  # its redactor, for a host elsewhere
        self.host = host
        self.id = f"ollama:{model}"
        self.workers = max(1, int(workers))
        self.timeout = float(timeout)
        self.max_chars = int(max_chars)
        self.mode = "logprobs"  # becomes "score" when the server's answers carry no logprobs
        self.think: bool | None = False  # None once the server refused the field
        self._client: Any = None
        self._lock = threading.Lock()

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = client(self.host, self.timeout, "the Ollama reranker needs")
            return self._client

    # --- one passage --------------------------------------------------------------------
    def _generate(self, prompt: str, **fields: Any) -> Any:
        """One non-streaming /api/generate call (without ``think`` once the server refused it)."""
        return generate(self, self._get_client(), prompt, **fields)

    def _one(self, query: str, passage: str) -> float:
        passage = passage[:self.max_chars]
        if self.mode == "logprobs":
            resp = self._generate(PROMPT.format(query=query, passage=passage),
                                  options={**OPTIONS, "num_predict": 1},
                                  logprobs=True, top_logprobs=TOP_LOGPROBS)
            first = (getattr(resp, "logprobs", None) or [None])[0]
            if first is not None:
                top = [(t.token, t.logprob) for t in (first.top_logprobs or [])] or [(first.token, first.logprob)]
                logit = yes_no_logit(top)
                if logit is not None:
                    return logit
                log.debug("%s: first token %r is neither yes nor no; asking for a score", self.id, first.token)
            else:
                log.info("Ollama at %s returns no logprobs (older than 0.12.11?): %s scores passages "
                         "0-10 instead", self.host, self.id)
                self.mode = "score"
        resp = self._generate(SCORE_PROMPT.format(query=query, passage=passage),
                              options={**OPTIONS, "num_predict": 16}, format=SCORE_FORMAT)
        logit = score_logit(resp.response or "")
        if logit is None:
            log.debug("%s: unreadable score %r; neutral", self.id, resp.response)
            return 0.0
        return logit

    # --- the protocol ---------------------------------------------------------------------
    def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        query, *passages = outbound([query[:MAX_QUERY_CHARS], *(p[:self.max_chars] for p in passages)],
                                    self.host, self.options)
        deadline = time.monotonic() + self.timeout
        pool = ThreadPoolExecutor(max_workers=min(self.workers, len(passages)),
                                  thread_name_prefix="hybrid-ollama-rerank")
        try:
            futures = [pool.submit(self._one, query, p) for p in passages]
            done, pending = wait(futures, timeout=max(0.0, deadline - time.monotonic()),
                                 return_when=FIRST_EXCEPTION)
            failed = next((f for f in done if f.exception() is not None), None)
            if failed is not None:
                raise self._unavailable(failed.exception()) from None
            if pending:
                raise ModelUnavailable(
                    f"Ollama at {self.host} did not score {len(passages)} passages with "
                    f"{self.model_name!r} within {self.timeout:g} s: use a smaller model or a "
                    f"lower `rerank_top_n`")
            return [f.result() for f in futures]
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _unavailable(self, exc: BaseException | None) -> BaseException:
        """ModelUnavailable, with the fix, for what a request raised (other errors unchanged)."""
        import ollama
        if isinstance(exc, ollama.ResponseError):
            if exc.status_code == 404:
                return not_pulled(self.host, self.model_name)
            detail = " ".join(str(exc.error).split())[:200]
            return ModelUnavailable(f"Ollama at {self.host} failed to rerank with {self.model_name!r}: {detail}")
        name = exc.__class__.__name__ if exc is not None else "error"
        module = exc.__class__.__module__ if exc is not None else ""
        if "Timeout" in name:
            return ModelUnavailable(f"Ollama at {self.host} did not answer within {self.timeout:g} s "
                                    f"(model {self.model_name!r}): use a smaller model or a lower "
                                    f"`rerank_top_n`")
        if isinstance(exc, (ConnectionError, OSError)) or module.startswith(("httpx", "httpcore")):
            return ModelUnavailable(f"cannot reach Ollama at {self.host} ({name}) to rerank with "
                                    f"{self.model_name!r}: start it with `ollama serve` (then "
                                    f"`ollama pull {self.model_name}`) or set `ollama_host`")
        return exc if exc is not None else ModelUnavailable(f"Ollama at {self.host} failed")
