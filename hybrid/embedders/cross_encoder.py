"""Cross-encoder rerankers (setting ``rerank_model``): sentence-transformers ``CrossEncoder``
models from a local directory or from a model name already in the local Hugging Face cache;
nothing downloads. torch loads on the first scoring, never at import time.

How the scores are blended with the fusion order lives in ``hybrid.retrieval.rerank``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from hybrid.core.errors import ModelUnavailable
from hybrid.embedders.base import offline_hf


def resolve_model(spec: str) -> Path:
    """A local directory, or a model name already in the Hugging Face cache."""
    if not spec:
        raise ModelUnavailable("no reranker configured: set `rerank_model` under [settings] in "
                               "config.toml (`late` works offline with the bundled model; or a "
                               "cross-encoder directory, or `ollama:<model>`), or pass --rerank-model")
    path = Path(spec).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise ModelUnavailable(f"{path} holds no cross-encoder (no config.json); point "
                                   f"`rerank_model` at a folder saved with CrossEncoder.save()")
        return path
    try:
        from huggingface_hub import snapshot_download
        return Path(snapshot_download(spec, local_files_only=True))
    except Exception:
        raise ModelUnavailable(f"cross-encoder {spec!r} is neither a local directory nor in the local "
                               f"Hugging Face cache; set `rerank_model` to a model directory on disk") from None


class CrossEncoderReranker:
    """A sentence-transformers cross-encoder (the Reranker protocol of ``hybrid.embedders``).
    The path is resolved at construction, so a bad setting fails before any model loads."""

    def __init__(self, spec: str, batch_size: int = 16):
        self.path = resolve_model(spec)
        self.id = spec
        self.batch_size = batch_size
        self._model = None
        self._lock = threading.Lock()

    @property
    def model(self):
        with self._lock:
            if self._model is None:
                offline_hf()
                from sentence_transformers import CrossEncoder
                try:
                    self._model = CrossEncoder(str(self.path), device="cpu", local_files_only=True)
                except Exception as exc:
                    raise ModelUnavailable(f"cannot load cross-encoder from {self.path}: {exc}") from None
            return self._model

    def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        out = self.model.predict([(query, p) for p in passages], batch_size=self.batch_size,
                                 show_progress_bar=False, convert_to_numpy=True)
        return [float(x) for x in out.reshape(len(passages), -1)[:, -1]]
