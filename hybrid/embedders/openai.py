"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint (spec ``openai:<model>``):
OpenAI itself, or a model server a team runs (vLLM, llama.cpp's server, LM Studio, Hugging Face
TEI, Ollama's ``/v1``). Base URL and key: :mod:`hybrid.embedders.remote` (settings
``openai_base_url`` and ``openai_api_key_env``, else ``$OPENAI_BASE_URL`` / ``$OPENAI_API_KEY``,
the variables OpenAI's SDKs read). Text bound for another machine is redacted first.

Every answer is checked before a vector is kept: one embedding per text (by ``index``), all of
one dimension, the dimension of the first answer; anything else is a one-line ModelUnavailable,
and the index run that asked stops with what it had indexed before intact.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hybrid.core.errors import ModelUnavailable
from hybrid.embedders.base import normalize
from hybrid.embedders.registry import Options
from hybrid.embedders.remote import Endpoint, ServedEmbedder, openai_url, outbound

if TYPE_CHECKING:
    import numpy as np

MAX_TOKENS = 512  # what hybrid sends at most per text; every common embedding model reads this many


class OpenAIEmbedder(ServedEmbedder):
    """The Embedder protocol over ``POST {base}/embeddings``."""

    def __init__(self, model: str, options: Options):
        super().__init__()
        self.model_name = model
        self.id = f"openai:{model}"
        self.options = options
        self.base_url = openai_url(options)
        self.endpoint = Endpoint(self.base_url, options.openai_api_key_env, options.remote_timeout,
                                 options.remote_retries, f"embeddings {self.id}", role="embedding")
        self.batch_size = max(1, options.batch_size)
        self.max_tokens = MAX_TOKENS

    def _batch(self, texts: list[str]) -> list[list[float]]:
        doc = self.endpoint.post("/embeddings", {"model": self.model_name, "input": texts,
                                                 "encoding_format": "float"})
        data = doc.get("data") if isinstance(doc, dict) else None
        if not isinstance(data, list):
            raise self._bad("an answer without a `data` list")
        if len(data) != len(texts):
            raise self._bad(f"{len(data)} embeddings for {len(texts)} texts")
        try:
            rows = sorted(data, key=lambda d: int(d.get("index", 0)))
            vectors = [[float(x) for x in row["embedding"]] for row in rows]
        except (TypeError, ValueError, KeyError, AttributeError):
            raise self._bad("embeddings that are not lists of numbers") from None
        if sorted(int(d.get("index", i)) for i, d in enumerate(data)) != list(range(len(texts))):
            raise self._bad("embeddings whose `index` values do not number the texts 0..n-1")
        return vectors

    def _bad(self, what: str) -> ModelUnavailable:
        return self.endpoint.bad_answer("/embeddings", what)

    def _embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np
        sent = outbound(texts, self.base_url, self.options)
        out: list[list[float]] = []
        for i in range(0, len(sent), self.batch_size):
            out.extend(self._batch(sent[i:i + self.batch_size]))
        dims = {len(v) for v in out}
        if len(dims) > 1 or 0 in dims:
            raise self._bad(f"vectors of different dimensions ({', '.join(map(str, sorted(dims)))})")
        dim = dims.pop() if dims else self._dim
        if self._dim is not None and dim != self._dim:
            raise self._bad(f"{dim}-dimensional vectors where it returned {self._dim} before")
        raw = np.asarray(out, dtype=np.float32).reshape(len(out), dim or 0)
        if not np.isfinite(raw).all():  # a vector with NaN would be found by nothing, unnoticed
            raise self._bad("vectors whose values are not finite (NaN or infinity)")
        arr = normalize(raw)
        self._dim = dim
        return arr

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(list(texts))

    def embed_query(self, text: str, reach: bool = False) -> np.ndarray:
        return self._embed([text])[0]


def build(arg: str, options: Options) -> OpenAIEmbedder:
    from hybrid.embedders.registry import UnknownSpec
    if not arg.strip():
        raise UnknownSpec
    return OpenAIEmbedder(arg.strip(), options)
