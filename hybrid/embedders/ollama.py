"""Embeddings from a local Ollama server (spec ``ollama:<model>``). The ``ollama`` client is
imported on the first embedding."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hybrid.core.errors import ModelUnavailable
from hybrid.embedders.base import normalize
from hybrid.embedders.ollama_api import client, not_pulled
from hybrid.embedders.registry import Options
from hybrid.embedders.remote import ServedEmbedder, outbound

if TYPE_CHECKING:
    import numpy as np


class OllamaEmbedder(ServedEmbedder):
    """Embeddings from a local Ollama server (``/api/embed``) through the ``ollama`` client."""

    PREFIXES = {"nomic-embed-text": ("search_query: ", "search_document: ")}

    def __init__(self, model: str, host: str, batch_size: int = 32, options: Options | None = None):
        super().__init__()  # nomic-embed-text and most Ollama embedders use BERT's uncased WordPiece
        self.model_name = model
        self.options = options or Options(ollama_host=host)  # its redactor, for a host elsewhere
        self.host = host
        self.id = f"ollama:{model}"
        self.batch_size = batch_size
        base = model.split(":")[0]
        self.query_prefix, self.document_prefix = self.PREFIXES.get(base, ("", ""))
        self.max_tokens = 2040
        self._client: Any = None

    def _embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np
        if self._client is None:
            self._client = client(self.host, 120, "the Ollama embedder needs")
        import ollama
        texts = outbound(texts, self.host, self.options)
        out = []
        for i in range(0, len(texts), self.batch_size):
            try:
                resp = self._client.embed(model=self.model_name, input=texts[i:i + self.batch_size])
            except ollama.ResponseError as exc:
                if exc.status_code == 404:
                    raise not_pulled(self.host, self.model_name) from None
                raise ModelUnavailable(f"Ollama at {self.host} failed: {exc.error}") from None
            except (ConnectionError, OSError) as exc:
                raise ModelUnavailable(f"cannot reach Ollama at {self.host} ({exc.__class__.__name__}): "
                                       f"start it with `ollama serve` or set `ollama_host`") from None
            except Exception as exc:  # httpx errors surface under several names
                if exc.__class__.__module__.startswith(("httpx", "httpcore")):
                    raise ModelUnavailable(f"cannot reach Ollama at {self.host}: start it with "
                                           f"`ollama serve` or set `ollama_host`") from None
                raise
            out.extend(resp.embeddings)
        raw = np.asarray(out, dtype=np.float32)
        if raw.size and not np.isfinite(raw).all():  # a vector with NaN would be found by nothing
            raise ModelUnavailable(f"Ollama at {self.host} returned vectors whose values are not finite "
                                   f"(NaN or infinity) for {self.model_name!r}")
        arr = normalize(raw)
        if arr.shape[0] != len(texts):
            raise ModelUnavailable(f"Ollama returned {arr.shape[0]} embeddings for {len(texts)} texts")
        self._dim = arr.shape[1]
        return arr

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed([self.document_prefix + t for t in texts])

    def embed_query(self, text: str, reach: bool = False) -> np.ndarray:
        return self._embed([self.query_prefix + text])[0]
