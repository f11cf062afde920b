"""Optional cross-encoder rerank of the top fused candidates.

The model comes from a local directory or from a model name already in the local Hugging Face
cache (setting ``rerank_model``); nothing downloads. The cross-encoder's judgement is blended
with the fusion order instead of replacing it (see :func:`blend`), so that a confident exact
match that fusion put first is not pushed down by a model that has never seen the identifier.
"""

from __future__ import annotations

import logging
import math
import threading
from pathlib import Path
from typing import Sequence

from .errors import ModelUnavailable

log = logging.getLogger("hybrid")

# Weight kept by the fusion order at a given fused rank (1-based). The top of the fused list
# is usually right already; the cross-encoder gets more say further down.
FUSION_WEIGHT = ((3, 0.75), (10, 0.6), (10**9, 0.4))


def fusion_weight(rank: int) -> float:
    return next(w for limit, w in FUSION_WEIGHT if rank <= limit)


def blend(ce_scores: Sequence[float], depth: int = 30) -> list[float]:
    """Blend cross-encoder logits with fused positions. The candidate at fused rank r gets
    ``w(r) * max(0, 1 - (r - 1) / depth) + (1 - w(r)) * sigmoid(logit)``; both terms lie in
    [0, 1]; ``w`` is 0.75 for ranks 1–3, 0.6 for 4–10 and 0.4 below."""
    out = []
    for i, logit in enumerate(ce_scores):
        r = i + 1
        w = fusion_weight(r)
        prob = 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, float(logit)))))
        out.append(w * max(0.0, 1.0 - (r - 1) / max(depth, 1)) + (1.0 - w) * prob)
    return out


def pinned(query_literals: Sequence[str], texts: Sequence[str]) -> int:
    """How many leading candidates to keep in place: the fused top hit stays first when the
    query has literals (identifiers with inner punctuation, quoted phrases) and that hit
    contains every one of them verbatim. A cross-encoder has rarely seen an identifier like
    ``orders-created``; the lexical arm matched it exactly."""
    if not query_literals or not texts:
        return 0
    top = texts[0].lower()
    return 1 if all(lit.lower() in top for lit in query_literals) else 0


def resolve_model(spec: str) -> Path:
    """A local directory, or a model name already in the Hugging Face cache."""
    if not spec:
        raise ModelUnavailable("no cross-encoder configured: set `rerank_model` under [settings] in "
                               "config.toml (a local directory or a cached model name), or pass --rerank-model")
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


class Reranker:
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
                from .embed import offline_hf
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
