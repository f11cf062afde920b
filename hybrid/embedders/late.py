"""Late-interaction reranking (``rerank_model = "late"`` or ``late:<embedder spec>``):
ColBERT-style MaxSim over an embedder's token embeddings. The default is the bundled MiniLM on
ONNX Runtime in fp32 (the default embedder), so it works offline right after install, with no
extra weights and no torch. ``late:minilm-int8`` runs it quantized; ``late:minilm-torch`` runs
it on torch (bfloat16 where the CPU has it, see below; the ``torch`` extra), and
``late:st:<dir>`` any sentence-transformers model.

Score of a passage: for each query token, the best cosine similarity with any passage token;
averaged over the query tokens. Special tokens ([CLS], [SEP], padding) and the embedder's query
prefix are left out. The average lies in [-1, 1]. ``hybrid.retrieval.rerank.blend`` gets it as the logit
``SCALE * (maxsim - center(max_tokens))``:

- ``center`` comes from the bundled sample vault, measured over the 30 fused candidates of
  each labelled query. It is the midpoint between the median MaxSim of candidates from
  relevant notes and that of the others. At 64 tokens those medians are 0.41 and 0.31, so
  the center is 0.36; the 10th-90th percentiles run from 0.21 to 0.73. A tighter cut lowers
  every MaxSim (32 tokens: 0.31 and 0.26), so the center is kept per cut (:data:`CENTERS`).
- ``SCALE`` = 12 maps the usual range, 0.2-0.75 at 64 tokens, to about -2..+4.7. That is a
  sigmoid of 0.13-0.99. The two medians land at +0.6 and -0.6 (0.65 and 0.35), so the fusion
  order keeps its say unless the model is clearly sure.

The embedder is not a trained reranker. It re-reads query and passage token by token, so it
rewards passages that contain the query's words, or near-synonyms in context. It cannot judge
whether a passage answers the query, as a trained cross-encoder does. On obsidian-help, MiniLM
at 64 tokens left nDCG@10 where hybrid has it: 0.587 against 0.585 on the 50 queries, and
0.587 against 0.595 on the 48 paraphrases. At 32 tokens it was lower (0.578 and 0.571).

Cost: one forward pass over every candidate, for each query. Passages are cut to ``max_tokens``
word pieces, special tokens included. A passage starts with its "title > heading" line, then
the chunk text, so the cut keeps the title and the start of the chunk. For 30 candidates of
~150 tokens on the 2-core machine (Xeon with AMX), p50 over 21 calls, from
``eval/archive/models/rerank_latency.py``:

- torch in bfloat16 (``late:minilm-torch`` where the CPU has bfloat16 instructions, :func:`native_bf16`):
  170 ms at 64 tokens on a quiet machine, and 180-190 ms with one core taken.
- torch in float32: 345-410 ms at 64 tokens on a quiet machine (520 ms with one core taken), and
  270-310 ms at 32 tokens. So a CPU without bfloat16 instructions misses a 300 ms budget at
  64 tokens.
- ONNX Runtime int8 (``late:minilm-int8``): 180-230 ms at 64 tokens on a quiet machine, and
  350-420 ms with one core taken.
- ONNX Runtime fp32, the default ``late`` since torch became optional (issue #13): 266 ms p50,
  327 ms p95 at 64 tokens on a quiet machine (torch bf16 159 ms and int8 214 ms in the same
  run). Within the 300 ms p50 budget; ``late:minilm-torch`` is faster where torch is installed.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from hybrid.core.errors import ConfigError, ModelUnavailable

if TYPE_CHECKING:
    import numpy as np

# (max_tokens, center): the midpoint between the median MaxSim of relevant and of other
# candidates, measured with MiniLM at each cut (see above); log-linear in between.
CENTERS = ((32, 0.28), (64, 0.36), (128, 0.41))
SCALE = 12.0
MAX_TOKENS = 64  # word pieces per passage, [CLS]/[SEP] included (the latency budget, see above)
MAX_CHARS = 2_000  # texts are cut to this before tokenizing (a 128-token chunk is ~600 chars)

TokenVectors = Callable[[list[str], int], "list[np.ndarray]"]


def center(max_tokens: int) -> float:
    """The MaxSim that maps to logit 0 for passages cut to ``max_tokens`` word pieces. Shorter
    passages give every query token fewer chances of a close match, so MaxSim runs lower."""
    (t0, c0), *rest = CENTERS
    if max_tokens <= t0:
        return c0
    for t1, c1 in rest:
        if max_tokens <= t1:
            return c0 + (c1 - c0) * math.log(max_tokens / t0) / math.log(t1 / t0)
        t0, c0 = t1, c1
    return c0


def native_bf16() -> bool:
    """Whether this CPU has bfloat16 instructions (AVX512-BF16 or AMX). With them, torch runs
    MiniLM in bfloat16 at about twice its float32 speed, and MaxSim moves by about 0.001.
    Without them, bfloat16 is emulated and slower than float32."""
    import torch
    checks = [getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    try:
        return any(check() for check in checks if check is not None)
    except Exception:  # private torch helpers: a release without them means "don't know"
        return False


def to_logit(maxsim: float, max_tokens: int = MAX_TOKENS) -> float:
    """The blend-ready logit of a mean MaxSim (see the module docstring)."""
    return SCALE * (maxsim - center(max_tokens))


def maxsim(query: np.ndarray, passage: np.ndarray) -> float:
    """Mean over the query's rows of the best cosine with any of the passage's rows (0 when
    either has no tokens)."""
    import numpy as np
    if len(query) == 0 or len(passage) == 0:
        return 0.0
    q = query / np.maximum(np.linalg.norm(query, axis=1, keepdims=True), 1e-12)
    p = passage / np.maximum(np.linalg.norm(passage, axis=1, keepdims=True), 1e-12)
    return float((q @ p.T).max(axis=1).mean())


class LateInteractionReranker:
    """MaxSim over an embedder's token embeddings (the Reranker protocol of
    ``hybrid.embedders``). ``embedder_spec`` is an ``embedder`` spec backed by
    sentence-transformers (``minilm-torch``, ``st:<dir>``) or by ONNX Runtime (``minilm``,
    ``minilm-int8``). The spec is checked at construction. The weights load on the first
    scoring, into a copy that only this reranker uses. ``embedder`` passes that copy in instead
    (built from ``embedder_spec``; a sentence-transformers model gets its ``max_seq_length``
    set to ``max_tokens``, so it must not be shared)."""

    def __init__(self, embedder_spec: str = "minilm", max_tokens: int = MAX_TOKENS,
                 batch_size: int = 32, *, embedder: Any = None, bf16: bool | None = None):
        from hybrid.embedders.registry import make_embedder
        spec = embedder_spec or "minilm"
        try:
            self._embedder: Any = embedder or make_embedder(spec, batch_size=batch_size)
        except ConfigError as exc:
            raise ConfigError(f"`rerank_model = \"late:{spec}\"`: {exc}") from None
        self._vectors: TokenVectors
        if hasattr(self._embedder, "token_embeddings"):
            self._vectors = self._embedder.token_embeddings
        elif hasattr(type(self._embedder), "model"):
            self._vectors = self._torch_vectors
        else:
            raise ConfigError(f"`rerank_model = \"late:{spec}\"` needs an embedder with token embeddings: "
                              f"`late` (the bundled minilm), `late:minilm-int8`, or `late:st:<directory>`")
        self.id = "late" if spec == "minilm" else f"late:{spec}"
        self.max_tokens = max(8, int(max_tokens))
        self.bf16 = bf16  # torch only; None: when the CPU computes bfloat16 natively
        self.precision = None if self._vectors != self._torch_vectors else "fp32"  # torch's, once loaded
        self.batch_size = batch_size
        self._query_prefix = getattr(self._embedder, "query_prefix", "")
        self._document_prefix = getattr(self._embedder, "document_prefix", "")
        self._prefix_tokens: int | None = None
        self._model: Any = None
        self._lock = threading.Lock()

    # --- token vectors from a sentence-transformers model -------------------------------
    def _st_model(self) -> Any:
        with self._lock:
            if self._model is None:
                model = self._embedder.model
                if not hasattr(model, "tokenizer") or not hasattr(model, "encode"):
                    raise ModelUnavailable(f"{self.id}: {type(model).__name__} gives no token embeddings")
                model.max_seq_length = self.max_tokens  # this copy is the reranker's alone
                if self.bf16 if self.bf16 is not None else native_bf16():
                    import torch
                    model.to(torch.bfloat16)
                    self.precision = "bf16"
                self._model = model
            return self._model

    def _torch_vectors(self, texts: list[str], max_tokens: int) -> list[np.ndarray]:
        import torch
        model = self._st_model()
        special = torch.tensor(sorted(set(model.tokenizer.all_special_ids)), dtype=torch.long)
        with torch.inference_mode():
            out = model.encode(texts, output_value=None, batch_size=self.batch_size,
                               show_progress_bar=False, convert_to_numpy=False)
        vecs = []
        for item in out:
            keep = item["attention_mask"].bool() & ~torch.isin(item["input_ids"], special)
            vecs.append(item["token_embeddings"][keep].float().numpy())
        return vecs

    # --- the protocol ---------------------------------------------------------------------
    def _skip(self) -> int:
        """How many leading query tokens are the embedder's query prefix (``query: ``)."""
        if self._prefix_tokens is None:
            prefix = self._query_prefix.strip()
            self._prefix_tokens = len(self._vectors([prefix], self.max_tokens)[0]) if prefix else 0
        return self._prefix_tokens

    def maxsims(self, query: str, passages: Sequence[str]) -> list[float]:
        """The raw mean MaxSim of each passage, in [-1, 1]."""
        if not passages:
            return []
        skip = self._skip()
        (q,) = self._vectors([self._query_prefix + query[:MAX_CHARS]], self.max_tokens)
        ps = self._vectors([self._document_prefix + p[:MAX_CHARS] for p in passages], self.max_tokens)
        return [maxsim(q[skip:], p) for p in ps]

    def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        return [to_logit(s, self.max_tokens) for s in self.maxsims(query, passages)]
