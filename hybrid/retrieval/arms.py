"""The two arms of a search: BM25 over every target vault (chunks, or heading sections standing
for their best chunk) and the nearest chunks by vector, each with the request's filters applied
inside its own search, the vaults merged by score; keys are ``(vault name, chunk id)``.
:mod:`hybrid.retrieval.pipeline` runs them and fuses what they return (:class:`Arms`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from hybrid.core.tokens import literals
from hybrid.core.workers import worker
from hybrid.retrieval import fuse
from hybrid.retrieval.query import ParsedQuery
from hybrid.retrieval.request import Filters
from hybrid.store.lexicon import LexicalQuery

if TYPE_CHECKING:
    from hybrid.core.config import Vault
    from hybrid.core.settings import Settings
    from hybrid.embedders.mix import ReachQuery
    from hybrid.store.port import Searchable

Key = tuple[str, int]                    # (vault name, chunk id)
Ranked = list[tuple[Key, float]]         # best first
# why a hit was pinned at the top: the whole query verbatim, every identifier of a short query,
# a required phrase, or a tag the query names (hybrid.retrieval.tagged)
Pin = Literal["verbatim", "literal", "phrase", "tag"]
# a store, or one seen through the agent view (hybrid.store.agent.store.AgentStore: the same parts,
# filtered): hybrid.store.port.Searchable
Targets = Sequence[tuple["Vault", "Searchable"]]
# (embedder id, text, reach): reach = the vaults hold notes in other languages than English
QueryVector = Callable[[str, str, bool], "object"]


@dataclass
class Arms:
    """What each arm returned, merged over the vaults (empty when the arm did not run)."""
    lexical: Ranked = field(default_factory=list)
    vector: Ranked = field(default_factory=list)
    exact: int = 0  # how many top hits exact-first placed (they answer a literal: no rerank)
    coverage: float = 1.0  # share of the query's content words the best BM25 hits contain
    # how the final order came about, for the score breakdown (the search page, --json)
    fused: dict = field(default_factory=dict)    # key → fused score before the priors
    pins: dict[Key, Pin] = field(default_factory=dict)  # what pinned a hit at the top
    demoted: dict = field(default_factory=dict)  # key → recency penalty applied (0..1)
    weights: tuple[float, float] | None = None   # (lexical, vector) fusion weights used


def embed_query(targets: Targets, mode: str, text: str, query_vector: QueryVector | None,
                reach: bool = False, skip: set[str] | frozenset[str] = frozenset()) -> dict[str, Future]:
    """Start embedding ``text`` (the text with its sure typos rewritten: the model reads a
    misspelling as noise) once per distinct embedder of the target vaults, on the embedding thread; the
    lexical arm runs meanwhile. Empty when the vector arm does not run. ``reach`` tells a
    multilingual embedder that some vault holds notes in other languages (so an English
    question weighs its multilingual half too: :mod:`hybrid.embedders.mix`); the embedders in
    ``skip`` are not asked (their vaults' vector arm does not run)."""
    vectors: dict[str, Future] = {}
    if mode not in ("vector", "hybrid") or query_vector is None:
        return vectors
    for _, store in targets:
        eid = store.embedder_id
        if eid and eid not in vectors and eid not in skip:
            # torch and ONNX Runtime release the GIL during the forward pass: the lexical arm runs meanwhile
            vectors[eid] = worker("hybrid-query-embed").submit(query_vector, eid, text, reach)
    return vectors


def lexical_arm(targets: Targets, parsed: ParsedQuery, filters: Filters, depth: int,
                settings: Settings, typos: Sequence[str] = ()) -> Ranked:
    """BM25 over every vault, filters applied inside the search, merged by score: over chunks,
    sections or both (``lexical_unit``, see :func:`by_section`); a lookup always over chunks.
    Only ``typos`` (words no vault searched nor word list knows) also match one edit away."""
    lq = LexicalQuery(parsed.terms, parsed.phrases, parsed.excludes, typos=list(typos))
    opts: dict[str, Any] = dict(where=filters, fuzzy=settings.fuzzy, stopwords=settings.stopwords)
    lists = []
    # a lookup (nothing but literals: `max.poll.interval.ms`) wants the chunk that names it,
    # not the section that repeats it most
    lookup = bool(parsed.terms) and len(literals(parsed.terms)) == len(parsed.terms)
    for vault, store in targets:
        hits = store.lexical.search(lq, depth, **opts)
        if settings.lexical_unit != "chunk" and not lookup:
            sections = store.lexical.search_units(lq, depth, unit="section", **opts)
            hits = by_section(hits, sections, settings.lexical_unit == "both")
        lists.append([((vault.name, cid), s) for cid, s in hits])
    return fuse.merge_by_score(lists, depth)


def by_section(chunks: list[tuple[int, float]], sections: list[tuple[list[int], float]],
               both: bool) -> list[tuple[int, float]]:
    """The lexical ranking from section evidence. Each ranked section stands for its best chunk
    (the one BM25 ranked highest among the chunk hits, else its first), in section order with
    the section's score, and the chunk hits not placed follow; with ``both`` that list is
    instead fused (RRF) with the chunk ranking. Then every placed chunk brings the other chunk
    hits of its section right behind it: several matching chunks of one section keep their
    weight in fusion, as they have in a plain chunk ranking."""
    if not sections:
        return list(chunks)
    chunk_score = dict(chunks)
    section_of: dict[int, int] = {}
    reps: list[tuple[int, float]] = []
    for n, (ids, score) in enumerate(sections):
        for i in ids:
            section_of.setdefault(i, n)
        best = max(ids, key=lambda i: (chunk_score.get(i, -1.0), -i))
        if section_of[best] == n:
            reps.append((best, score))
    if both:
        ranked = fuse.rrf([[c for c, _ in reps], [c for c, _ in chunks]], k=SECTION_RRF_K)
    else:
        placed = {c for c, _ in reps}
        floor = min((s for _, s in reps), default=1.0)
        ranked = reps + [(c, floor * s / (1.0 + s)) for c, s in chunks if c not in placed]
    members: dict[int, list[int]] = {}
    for c, _ in chunks:  # chunk order: best first within each section
        if c in section_of:
            members.setdefault(section_of[c], []).append(c)
    out: list[tuple[int, float]] = []
    seen: set[int] = set()
    for c, score in ranked:
        for i, m in enumerate([c, *members.get(section_of.get(c, -1), [])]):
            if m not in seen:
                seen.add(m)
                out.append((m, score * (1.0 - 1e-6 * i)))
    return out


SECTION_RRF_K = 60


def vector_arm(targets: Targets, parsed: ParsedQuery, filters: Filters, depth: int,
               vectors: dict[str, Future]) -> Ranked:
    """Nearest chunks over every vault with vectors, merged by similarity. ``-word`` exclusions
    are banned ids and required phrases restrict the search to the ids that hold them. Note
    filters (folders, tags, date, kinds, excluded folders) are conditions of the vector query
    itself where the arm takes them (PostgreSQL: ``filters_in_query``); else they become ids
    too (a broad filter is applied after the search, see :func:`post_filtered`)."""
    from hybrid.embedders.mix import ReachQuery
    lists = []
    for vault, store in targets:
        if store.embedder_id not in vectors:  # no vectors, or a model that cannot read the query
            continue
        qvec = vectors[store.embedder_id].result()
        if isinstance(qvec, ReachQuery):
            hits = _reach_hits(store, qvec, parsed, filters, depth)
        else:
            hits = _vector_hits(store, qvec, parsed, filters, depth)
        lists.append([((vault.name, cid), s) for cid, s in hits])
    return fuse.merge_by_score(lists, depth)


def _reach_hits(store: Searchable, q: ReachQuery, parsed: ParsedQuery, filters: Filters,
                depth: int) -> list[tuple[int, float]]:
    """The nearest chunks for an English question over a vault with notes in other languages
    (:class:`hybrid.embedders.mix.ReachQuery`): the nearest by both halves and the nearest by
    the second model's alone, each document scored over the halves it has, best ``depth``."""
    by_vector = dict(_vector_hits(store, q.vector, parsed, filters, depth))
    by_second = dict(_vector_hits(store, q.second, parsed, filters, depth))
    missing = [i for i in by_second if i not in by_vector]
    if missing:  # the mixed score of those too (they passed the filters in the second search)
        by_vector.update(store.vector.search(q.vector, len(missing), set(missing)))
    scores = q.rescore(by_vector, by_second)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:depth]


def _vector_hits(store: Searchable, qvec, parsed: ParsedQuery, filters: Filters,
                 depth: int) -> list[tuple[int, float]]:
    if store.vector.filters_in_query:  # PostgreSQL: the note filters are conditions of its query
        banned: set[int] = set()
        for ex in parsed.excludes:
            banned |= store.lexical.matching_ids(LexicalQuery(phrases=[ex]))
        must = store.lexical.matching_ids(LexicalQuery(phrases=parsed.phrases)) if parsed.phrases else None
        where = filters if (filters.narrows or filters.exclude_folders) else None
        return store.vector.search(qvec, depth, must, banned, where=where)
    banned = set()
    if filters.exclude_folders:
        banned |= store.catalog.filter_ids(Filters(folders=filters.exclude_folders))
    for ex in parsed.excludes:
        banned |= store.lexical.matching_ids(LexicalQuery(phrases=[ex]))
    if filters.narrows and not parsed.phrases and not few_notes_pass(store, filters):
        hits = post_filtered(store, qvec, depth, banned, filters)
        if hits is not None:
            return hits
    allowed = store.catalog.filter_ids(filters) if filters.narrows else None
    if parsed.phrases:
        must = store.lexical.matching_ids(LexicalQuery(phrases=parsed.phrases))
        allowed = must if allowed is None else allowed & must
    return store.vector.search(qvec, depth, allowed, banned)


FEW_NOTES = 1000  # a filter passing at most this many notes is searched by its chunk list at once


def few_notes_pass(store: Searchable, filters: Filters) -> bool:
    """Whether at most ``FEW_NOTES`` notes pass ``filters`` (counted lazily: a broad filter
    stops at the first ``FEW_NOTES + 1``). Their chunk list is then cheap to make, and the
    oversampled unfiltered searches of :func:`post_filtered` would find too few of them anyway
    (measured at 100k chunks: a tag on 28 notes spent 35 ms there before the list was made)."""
    from hybrid.retrieval.filters import notes_passing
    return notes_passing(store, filters, FEW_NOTES + 1) <= FEW_NOTES


def post_filtered(store: Searchable, qvec, depth: int, banned: set[int],
                   filters: Filters) -> list[tuple[int, float]] | None:
    """A note filter that keeps many chunks is cheapest applied after the search: take the
    nearest ``10·depth`` (then ``40·depth``) chunks unfiltered and keep those the catalog says
    pass. Listing every passing id up front (hundreds of thousands in a big vault, per query)
    costs far more. Returns None when too few pass; the caller then searches with the full id
    list, which is what a selective filter needs anyway."""
    total = store.vector.count()
    for wide in (10 * depth, 40 * depth):
        cand = store.vector.search(qvec, wide, None, banned)
        keep = store.catalog.filter_ids(filters, [i for i, _ in cand])
        got = [(i, s) for i, s in cand if i in keep]
        if len(got) >= depth:
            return got[:depth]
        if wide >= total and store.vector.exact:
            return got  # every vector was looked at: nothing more passes
    return None
