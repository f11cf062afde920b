"""sentence-transformers models from a local directory (specs ``minilm`` and ``st:<dir>``).

torch and sentence-transformers are imported on the first embedding, never at import time.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hybrid.core.errors import ModelUnavailable
from hybrid.embedders.base import WordPieceCounter, normalize, offline_hf

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("hybrid")


class SentenceTransformerEmbedder:
    """A sentence-transformers model in a local directory, loaded lazily and only offline."""

    def __init__(self, directory: Path, model_id: str | None = None, batch_size: int = 32,
                 query_prefix: str = "", document_prefix: str = ""):
        directory = Path(directory).expanduser()
        if not (directory / "config.json").exists() and not (directory / "modules.json").exists():
            raise ModelUnavailable(
                f"no sentence-transformers model in {directory}: point `embedder = \"st:<dir>\"` at "
                f"a folder saved with SentenceTransformer.save(), or use the default `minilm`")
        self.directory = directory
        self.id = model_id or f"st:{directory.resolve()}"
        self.batch_size = batch_size
        self.query_prefix, self.document_prefix = query_prefix, document_prefix
        self._model: Any = None
        self._lock = threading.Lock()
        seq = 256
        cfg = directory / "sentence_bert_config.json"
        if cfg.exists():
            seq = int(json.loads(cfg.read_text()).get("max_seq_length", seq))
        self.max_tokens = seq - 2  # [CLS] and [SEP]
        tok = directory / "tokenizer.json"
        self._counter = WordPieceCounter(tok) if tok.exists() else None
        if document_prefix:
            # Chunks are counted without the prefix but embedded with it: leave it room, so a
            # chunk at the limit is not truncated. Without a tokenizer.json, a token per
            # character (and one for the join) is an upper bound.
            self.max_tokens -= (self._counter([document_prefix])[0] if self._counter is not None
                                else len(document_prefix) + 1)
        self._dim = self._dim_from_files()

    def _dim_from_files(self) -> int | None:
        pooling = self.directory / "1_Pooling" / "config.json"
        has_dense = any(p.name.startswith("2_Dense") for p in self.directory.iterdir())
        if pooling.exists() and not has_dense:
            return int(json.loads(pooling.read_text())["word_embedding_dimension"])
        return None

    @property
    def model(self):
        with self._lock:
            if self._model is None:
                offline_hf()
                from sentence_transformers import SentenceTransformer
                log.debug("loading %s", self.directory)
                self._model = SentenceTransformer(str(self.directory), device="cpu",
                                                  local_files_only=True)
            return self._model

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.model.get_sentence_embedding_dimension())
        return self._dim

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        if self._counter is None:
            tok = self.model.tokenizer
            return [len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts]
        return self._counter(texts)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = [self.document_prefix + t for t in texts]
        vecs = self.model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True,
                                 normalize_embeddings=True, show_progress_bar=False)
        return normalize(vecs)

    def embed_query(self, text: str, reach: bool = False) -> np.ndarray:
        """One short text on one thread: on two cores a second thread's wake-ups cost more than
        it saves (15 vs 18–19 ms measured, and far worse when the machine is busy). The change
        is scoped to this call; threads that embed documents keep their own setting."""
        model = self.model
        import torch
        prev = torch.get_num_threads()
        if prev > 1:
            torch.set_num_threads(1)
        try:
            vec = model.encode([self.query_prefix + text], batch_size=1, convert_to_numpy=True,
                               normalize_embeddings=True, show_progress_bar=False)
        finally:
            if prev > 1:
                torch.set_num_threads(prev)
        return normalize(vec)[0]
