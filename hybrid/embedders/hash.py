"""Feature hashing (spec ``hash:<dim>``): deterministic vectors for tests of logic."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hybrid.embedders.base import normalize

if TYPE_CHECKING:
    import numpy as np


class HashEmbedder:
    """Feature hashing of lowercased words into ``dim`` buckets. Deterministic, instant, and
    meaningless beyond shared words: for tests of logic, never for real search."""

    def __init__(self, dim: int = 64):
        self.id = f"hash:{dim}"
        self._dim = dim
        self.max_tokens = 254

    @property
    def dim(self) -> int:
        return self._dim

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(re.findall(r"\w+|[^\w\s]", t)) for t in texts]

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
                out[row, h % self._dim] += 1.0 if (h >> 63) else -1.0
        return normalize(out)

    def embed_query(self, text: str, reach: bool = False) -> np.ndarray:
        return self.embed_documents([text])[0]
