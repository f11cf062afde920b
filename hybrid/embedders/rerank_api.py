"""A reranker behind the common ``/rerank`` API (``rerank_model = "rerank:<model>"``): Cohere's
shape, which Jina, vLLM and LocalAI speak too, and Hugging Face TEI's.

- **Cohere / Jina / vLLM**: ``POST {base}/rerank`` with ``{"model", "query", "documents",
  "top_n", "return_documents": false}``; the answer's ``results`` hold ``index`` and
  ``relevance_score`` (a probability in [0, 1] for the common cross-encoders).
- **TEI**: ``POST {base}/rerank`` with ``{"query", "texts", "raw_scores": true}``; the answer is
  a list of ``{"index", "score"}`` (raw logits). A server that answers the first shape with 422
  (TEI: a request without ``texts``) is asked in this one from then on.

Scores become logits for :func:`hybrid.retrieval.rerank.blend`: relevance scores that all lie
in [0, 1] are probabilities, mapped by ``log(p / (1 - p))``; anything else is taken as logits.
Base URL and key: settings ``rerank_base_url`` / ``rerank_api_key_env`` (else
``$RERANK_BASE_URL`` / ``$RERANK_API_KEY``). Passages bound for another machine are redacted
first (:mod:`hybrid.embedders.remote`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from hybrid.core.errors import ModelUnavailable
from hybrid.embedders.registry import Options
from hybrid.embedders.remote import Endpoint, EndpointError, outbound, rerank_url

MAX_PASSAGE_CHARS = 2_000  # a chunk with its heading line; servers truncate to their model anyway


class RerankAPIReranker:
    """The Reranker protocol over a ``/rerank`` endpoint."""

    def __init__(self, model: str, options: Options):
        self.model_name = model
        self.id = f"rerank:{model}"
        self.options = options
        self.base_url = rerank_url(options)
        self.endpoint = Endpoint(self.base_url, options.rerank_api_key_env, options.remote_timeout,
                                 options.remote_retries, f"reranker {self.id}", role="reranking")
        self.shape = "cohere"  # or "tei", once a server asked for it

    def _bad(self, what: str) -> ModelUnavailable:
        return self.endpoint.bad_answer("/rerank", what)

    def _ask(self, query: str, docs: list[str]) -> object:
        if self.shape == "cohere":
            try:
                return self.endpoint.post("/rerank", {"model": self.model_name, "query": query,
                                                      "documents": docs, "top_n": len(docs),
                                                      "return_documents": False})
            except EndpointError as exc:
                if exc.status != 422:
                    raise
                self.shape = "tei"
        return self.endpoint.post("/rerank", {"query": query, "texts": docs, "raw_scores": True})

    def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        sent = outbound([query, *(p[:MAX_PASSAGE_CHARS] for p in passages)], self.base_url, self.options)
        doc = self._ask(sent[0], sent[1:])
        rows = doc.get("results") if isinstance(doc, dict) else doc
        if not isinstance(rows, list):
            raise self._bad("an answer without a `results` list")
        found: dict[int, float] = {}
        try:
            for row in rows:
                value = row["relevance_score"] if "relevance_score" in row else row["score"]
                found[int(row["index"])] = float(value)
        except (TypeError, ValueError, KeyError):
            raise self._bad("results without a numeric `index` and score") from None
        if set(found) != set(range(len(passages))):
            raise self._bad(f"scores for {len(found)} of {len(passages)} passages")
        values = [found[i] for i in range(len(passages))]
        if self.shape == "cohere" and all(0.0 <= v <= 1.0 for v in values):
            return [_logit(v) for v in values]
        return values


def _logit(p: float) -> float:
    p = min(max(p, 1e-9), 1 - 1e-9)
    return math.log(p / (1 - p))


def build(arg: str, options: Options) -> RerankAPIReranker:
    return RerankAPIReranker(arg, options)
