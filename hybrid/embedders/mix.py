"""Two embedders as one (spec ``mix:<spec>,<spec>``; the default ``mix:minilm,use-multilingual``):
an English model and a multilingual one, their scores fused per query by the query's language.

A document's vector is both models' unit vectors side by side, each scaled by 1/√2 (a unit
vector of ``dim_a + dim_b`` dimensions). A query's vector is ``[a·q_a, b·q_b]`` scaled so that
its inner product with a document is ``(a·cos_a + b·cos_b) / (a + b)``: score-level fusion of
the two models inside one vector index, with weights chosen per query and nothing changed in
the stores. A document in another language (:data:`OTHER_TEXT`) has no first half: the
English model reads noise in it. The weights come from how far the query is not English
(:func:`hybrid.core.lang.foreign`, ``p``, mapped to ``s``: 0 up to 0.25, 1 from 0.75, linear in
between): ``a = 1 − s`` and ``b = english·(1 − s) + s``, where
``english`` is the second model's weight on an English question (:data:`ENGLISH_WEIGHT`;
:data:`REACH_WEIGHT` when the vaults searched hold notes in other languages, so that an English
question finds them). A
model whose weight is 0 is not run (nor loaded): an English question with ``english = 0``
costs exactly what the first model alone costs, and scores exactly as it would.

Chunking counts the first model's tokens (its window is the one that truncates), so a vault's
chunks are those the first model alone would make: upgrading an index from the first model to
the mix re-embeds only the second model's half (:meth:`MixEmbedder.embed_documents` takes the
halves already known). The id is ``mix(<id a>,<id b>)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal, overload

from hybrid.core.lang import SAMPLE_CHARS, foreign
from hybrid.core.workers import worker
from hybrid.embedders.base import Embedder, ReachQuery
from hybrid.embedders.registry import Options, UnknownSpec, make_embedder, spec_id

if TYPE_CHECKING:
    import numpy as np

DEFAULT = "mix:minilm,use-multilingual"
ENGLISH_WEIGHT = 0.0  # the second model's weight on an English query (see the module docstring)
REACH_WEIGHT = 0.5  # … when the vaults searched hold notes in other languages
# a query up to this far not English (foreign) is English; from SURE_OTHER on it is another
# language; in between the weights slide (a product name or a word both languages have)
SURE_ENGLISH, SURE_OTHER = 0.25, 0.75
OTHER_TEXT = 0.8  # a document this far not English (hybrid.core.lang.foreign) has no first half
ROOT2 = math.sqrt(2.0)


def split_spec(arg: str) -> tuple[str, str]:
    """The two specs of ``mix:<a>,<b>`` (UnknownSpec unless exactly two non-empty ones)."""
    parts = [p.strip() for p in arg.split(",")]
    if len(parts) != 2 or not all(parts) or any(p.startswith("mix:") for p in parts):
        raise UnknownSpec
    return parts[0], parts[1]


def mix_id(ids: Sequence[str]) -> str:
    return f"mix({','.join(ids)})"


def mix_parts(embedder_id: str) -> list[str] | None:
    """The ids of the parts a mix recorded as ``embedder_id`` (:func:`mix_id`), or None for an
    embedder that is no mix."""
    if not (embedder_id.startswith("mix(") and embedder_id.endswith(")")):
        return None
    return embedder_id[4:-1].split(",")


def build(arg: str, options: Options) -> MixEmbedder:
    a, b = split_spec(arg)
    first, second = (make_embedder(s, options=options) for s in (a, b))
    return MixEmbedder(first, second)


def build_id(arg: str) -> str:
    return mix_id([spec_id(s) for s in split_spec(arg)])


class MixEmbedder:
    """Two embedders fused per query (see the module docstring); the Embedder protocol."""

    def __init__(self, first: Embedder, second: Embedder, english: float = ENGLISH_WEIGHT):
        self.parts = (first, second)
        self.english = english
        self.id = mix_id([first.id, second.id])
        self.max_tokens = first.max_tokens

    @property
    def dim(self) -> int:
        return self.parts[0].dim + self.parts[1].dim

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.parts[0].count_tokens(texts)

    def embed_documents(self, texts: Sequence[str],
                        known: Sequence[Mapping[int, np.ndarray]] = ({}, {})) -> np.ndarray:
        """Both halves of each text's vector; ``known[j]`` maps a text's position to part
        ``j``'s vector when it is already at hand (an index built by that part alone), and
        only the rest is embedded. A text in another language has no first half (the English
        model reads noise in it), so the first model never reads it. The second model runs on
        a thread of its own meanwhile: the multilingual model uses one core, the first model
        both, and together they keep both busy (the mix indexed at 1.28x the first model's
        wall time with the two in turn; eval/archive/models/mix_cost.py)."""
        import numpy as np
        # the first (English) model's half of a text in another language is left out: the
        # text is found through the second model alone
        other = {i for i, t in enumerate(texts) if foreign(t[:SAMPLE_CHARS]) > OTHER_TEXT}
        skip: tuple[set[int], set[int]] = (other, set())
        halves, jobs = [], []
        for part, have, left_out in zip(self.parts, known, skip):
            out = np.zeros((len(texts), part.dim), dtype=np.float32)
            for i, v in have.items():
                if i not in left_out:
                    out[i] = v
            todo = [i for i in range(len(texts)) if i not in have and i not in left_out]
            halves.append(out)
            jobs.append((part, out, texts, todo))
        second = jobs[1]
        pending = worker("hybrid-mix-second").submit(_fill, *second) if second[3] else None
        try:
            _fill(*jobs[0])
        finally:
            if pending is not None:  # its error, if it failed; else the first model's
                pending.result()
        return np.ascontiguousarray(np.hstack(halves) / np.float32(ROOT2))

    def weights(self, text: str, reach: bool = False) -> tuple[float, float]:
        """(first, second) model weights for the query ``text``; ``reach``: the vaults searched
        hold notes in other languages, which an English question reaches through the second
        model (weight :data:`REACH_WEIGHT`)."""
        s = min(1.0, max(0.0, (foreign(text) - SURE_ENGLISH) / (SURE_OTHER - SURE_ENGLISH)))
        english = max(self.english, REACH_WEIGHT) if reach else self.english
        return 1.0 - s, english * (1.0 - s) + s

    @overload
    def embed_query(self, text: str, reach: Literal[False] = False) -> np.ndarray: ...
    @overload
    def embed_query(self, text: str, reach: bool) -> np.ndarray | ReachQuery: ...

    def embed_query(self, text: str, reach: bool = False) -> np.ndarray | ReachQuery:
        """The query vector of ``text``. With ``reach`` (the vaults searched hold notes in other
        languages): a :class:`ReachQuery` when both models weigh (an English or mixed question),
        else the one vector (a question in another language: the second model alone scores
        every document)."""
        vector, halves, weights = self._query(text, reach)
        if not reach or min(weights) <= 0:
            return vector
        import numpy as np
        second = np.concatenate([np.zeros(self.parts[0].dim, dtype=np.float32), halves[1]]) * np.float32(ROOT2)
        return ReachQuery(vector, np.ascontiguousarray(second, dtype=np.float32), weights)

    def _query(self, text: str, reach: bool) -> tuple[np.ndarray, list[np.ndarray], tuple[float, float]]:
        """(the query vector, each model's unit vector of ``text`` (zeros where its weight is
        0: not run), the weights)."""
        import numpy as np
        wa, wb = self.weights(text, reach)
        scale = np.float32(ROOT2 / (wa + wb))
        units = [part.embed_query(text) if w > 0 else np.zeros(part.dim, dtype=np.float32)
                 for part, w in zip(self.parts, (wa, wb))]
        vector = np.concatenate([u * np.float32(w) for u, w in zip(units, (wa, wb))]) * scale
        return np.ascontiguousarray(vector), units, (wa, wb)


def _fill(part: Embedder, out: np.ndarray, texts: Sequence[str], todo: list[int]) -> None:
    """Embed ``texts`` at positions ``todo`` with ``part`` into those rows of ``out``."""
    if todo:
        out[todo] = part.embed_documents([texts[i] for i in todo])
