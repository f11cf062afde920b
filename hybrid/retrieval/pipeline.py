"""The query pipeline, one named stage per function:

repair spelling → embed the query (on a worker thread) → lexical arm → vector arm → fuse →
hydrate rows → priors (exact-first, recency) → rerank → hits.

Each arm (:mod:`hybrid.retrieval.arms`) searches every target vault with the request's filters
applied inside its own search and merges the vaults by score; results are keyed
``(vault name, chunk id)``.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from hybrid.core.dates import date_source
from hybrid.core.timing import Stopwatch
from hybrid.retrieval import confidence, fitted, fold, fuse, notes
from hybrid.retrieval.arms import Arms, Key, QueryVector, Ranked, Targets, embed_query, lexical_arm, vector_arm
from hybrid.retrieval.exact import exact_first, strong_literals, verbatim_text
from hybrid.retrieval.excerpt import Marker, readable, words_by_start
from hybrid.retrieval.filters import all_shown, all_shown_notice
from hybrid.retrieval.hits import NEEDLE_RE, Hit, flat_snippet, flatten, source_fields
from hybrid.retrieval.languages import REACH_SHARE, other_languages, scored_by, unread_by, unread_notice
from hybrid.retrieval.query import ParsedQuery
from hybrid.retrieval.request import SearchRequest
from hybrid.retrieval.result import SearchResult, apply_corrections
from hybrid.retrieval.spelling import Spelling, repair
from hybrid.retrieval.tagged import tag_first
from hybrid.sources.daily import vault_name_dates
from hybrid.store.base import ChunkRow

if TYPE_CHECKING:
    from hybrid.core.config import Vault
    from hybrid.core.settings import Settings

log = logging.getLogger("hybrid")

# why an answer with no fair hit is not "nothing relevant" (confidence.cannot_tell)
KEYWORDS_UNSURE = "keyword scores alone cannot tell whether these answer: a hybrid search can"
NEAR_CUT = "no hit is fair, but the first is near the cut: it may answer"


def below_min_score_notice(count: int, unit: str, best: float, min_score: float) -> str:
    """Why an answer that matched shows nothing: each of its ``count`` notes or passages
    (``unit``) was under the ``min_score`` asked for."""
    what = f"1 {unit} matched" if count == 1 else f"{count} {unit}s matched"
    best = math.floor(best * 100) / 100  # shown down: 0.987 under 0.99 is not "the best: 0.99"
    return f"{what}, all under min_score {min_score:g} (the best: {best:.2f}): lower it to see them"
READ_RETRIES = 2  # times the arms run again when an index run committed under a search
Rescorer = Callable[[str, Sequence[str]], list[float]]
# a passage's marks from its text in lower case and its words by their starts (excerpt.Marker)
Mark = Callable[[str, dict[str, set[str]]], list[str]]


def run_search(targets: Targets, request: SearchRequest, settings: Settings,
               query_vector: QueryVector | None, rescore: Rescorer | None = None,
               clock: Stopwatch | None = None) -> SearchResult:
    """Run ``request`` over the given vault stores. ``query_vector(embedder_id, text)`` returns
    the embedding of ``text`` for a vault's embedder (only called when the vector arm runs; on a
    worker thread, so the model's forward pass overlaps the lexical arm); ``rescore(query,
    passages)`` returns cross-encoder logits (only with ``request.rerank``). Stage timings are
    added to ``clock``. The hits come as a :class:`~hybrid.retrieval.result.SearchResult`, a list that
    also says which words were corrected and what was searched for."""
    clock = clock or Stopwatch()
    filters, depth = request.filters, max(settings.candidates, request.top_k)
    with clock("repair"):
        spelling = (repair([s for _, s in targets], request.parsed, settings.spell_languages)
                    if settings.fuzzy else Spelling())
        parsed = apply_corrections(request.parsed, spelling.rewrites)
    reach = request.mode != "lexical" and any(other_languages(store) >= REACH_SHARE for _, store in targets)
    # a vault whose model cannot read the query's script is searched by keywords alone
    unread = ({} if request.mode == "lexical" else
              {eid: script for eid in {s.embedder_id for _, s in targets if s.embedder_id}
               if (script := unread_by(eid, parsed.text))})
    vectors = embed_query(targets, request.mode, parsed.text, query_vector, reach, skip=set(unread))
    typos = [w for w in spelling.typos if w not in spelling.rewrites]
    for attempt in range(1 + READ_RETRIES):
        versions = [store.catalog.data_version() for _, store in targets]
        arms = Arms()
        if request.mode in ("lexical", "hybrid"):
            with clock("lexical"):
                arms.lexical = lexical_arm(targets, parsed, filters, depth, settings, typos)
        if request.mode in ("vector", "hybrid") and vectors:
            with clock("vector"):
                arms.vector = vector_arm(targets, parsed, filters, depth, vectors)
        with clock("hydrate"):
            keys = list(dict.fromkeys(k for k, _ in arms.lexical + arms.vector))
            rows = hydrate(targets, keys)
        if len(rows) == len(keys) or versions == [s.catalog.data_version() for _, s in targets]:
            break
        # an index run committed between the arms and their rows: the ids they found may be
        # gone (replaced chunks are purged once the derived indexes drop them), so a search
        # straddling a commit could lose every hit; the arms read the new state
        log.debug("the index changed during the search (attempt %d): searching it again", attempt + 1)
    # ids gone since the arms ran (or, for an agent, of a note made private meanwhile) are
    # dropped before fusion, so no rank or score shows the gap they leave
    arms.lexical = [kv for kv in arms.lexical if kv[0] in rows]
    arms.vector = [kv for kv in arms.vector if kv[0] in rows]
    fit = fusion_of(targets, settings)
    analyze = targets[0][1].lexical.stem.stems if targets else None  # the vaults' words, as BM25 reads them
    with clock("weigh"):
        weights = fusion_weights(targets, parsed, arms, rows, settings, fit) if request.mode == "hybrid" else None
    fused = fuse_arms(request.mode, arms, fit, weights)
    arms.fused, arms.weights = dict(fused), weights
    fused = apply_priors(fused, arms, rows, parsed, request.mode, settings, analyze)
    ce: dict[Key, float] = {}
    if request.rerank and rescore is not None and fused and not arms.exact:
        with clock("rerank"):
            fused, ce, kept = rerank(fused, rows, parsed, rescore, settings.rerank_top_n)
            arms.pins.update((k, "phrase") for k, _ in fused[:kept])
    with clock("hits"):
        words = needles(targets, parsed)
        mark: Mark = Marker(parsed.text, analyze).marks if analyze else (lambda *_: [])
        # notes (or passages) in the order shown, no two overlapping passages of one note
        folder = fold.Folder([rows[k].text for k, _ in fused], settings.duplicate_similarity)
        shown = notes.select([(k, (k[0], rows[k].path), (rows[k].start_line, rows[k].end_line)) for k, _ in fused],
                             request.top_k, by_note=not request.passages,
                             copy_of=folder.copy_of if settings.duplicate_similarity else None)
        hits = build_hits(targets, [fused[i] for i in shown], rows, arms, ce, mark, settings.snippet_chars)
        fold.annotate(hits, shown, folder, [k for k, _ in fused], rows)
    shown_rows = [rows[(h.vault, h.chunk_id)] for h in hits]
    with clock("confidence"):
        confidence.annotate(hits, shown_rows, [s for _, s in arms.vector],
                            parsed, analyze or str.split,
                            # which model scored the vector arm (none ran: the lexical model applies)
                            {scored_by(store.embedder_id or "", parsed.text, reach) for _, store in targets}
                            if arms.vector else set(),
                            ranks=[i + 1 for i in shown], kind=store_kind(targets))
        if request.passages:
            for h, c in zip(hits, notes.monotone([h.confidence for h in hits])):
                h.confidence = c
        else:
            notes.monotone_notes(hits)
        matched = hits
        if request.min_score:  # confidence falls down the list: this cuts its tail
            hits = [h for h in hits if (h.confidence or 0.0) >= request.min_score]
    # the filters chose the answer when it shows every note passing them: never "nothing relevant"
    chosen = all_shown([s for _, s in targets], filters, len({(h.vault, h.path) for h in hits}))
    # no fair hit, but a first one near the cut: unknown, not "nothing relevant"
    unsure = not chosen and confidence.cannot_tell(hits, shown_rows, parsed, keywords_only=not arms.vector,
                                                   coverage=arms.coverage)
    notices = [unread_notice(s, request.mode) for s in dict.fromkeys(unread.values())]
    notices += [all_shown_notice(chosen)] if chosen else []
    notices += [KEYWORDS_UNSURE if not arms.vector else NEAR_CUT] if unsure else []
    def counted(some: Sequence[Hit]) -> int:
        return len(some) if request.passages else len({(h.vault, h.path) for h in some})
    if matched and not hits:  # not "no notes matched": they did, under the bar asked for
        notices.append(below_min_score_notice(counted(matched), "passage" if request.passages else "note",
                                              max(h.confidence or 0.0 for h in matched), request.min_score))
    if log.isEnabledFor(logging.DEBUG):  # not worth a dict per search otherwise
        log.debug("search stages (s): %s", clock.rounded())
    fusion = ({"k": fit.rrf_k, "lexical": round(arms.weights[0], 4), "vector": round(arms.weights[1], 4)}
              if arms.weights else {})
    return SearchResult(hits, query=request.query, parsed=parsed, corrections=spelling.rewrites,
                        suggestions=spelling.suggestions, needles=words, fusion=fusion,
                        grouped=not request.passages, notices=notices, by_filters=chosen,
                        unsure=unsure, below_min_score=counted(matched) - counted(hits))


def store_kind(targets: Targets) -> str:
    """Whose fitted parameters the search uses (:mod:`hybrid.retrieval.fitted`)."""
    return fitted.kind_of(store.lexical.store_kind for _, store in targets)


def fusion_of(targets: Targets, settings: Settings) -> fitted.Fusion:
    """The fusion parameters fitted for the targets' store kind, the settings' own where a user
    changed them."""
    return fitted.fusion(store_kind(targets), settings)


def fusion_weights(targets: Targets, parsed: ParsedQuery, arms: Arms, rows: dict[Key, ChunkRow],
                   settings: Settings, fit: fitted.Fusion | None = None) -> tuple[float, float]:
    """The (lexical, vector) fusion weights for this query (``fit``: the parameters, default
    those of the targets' store kind). With ``adaptive_fusion`` the BM25
    weight is scaled by how much of the query the best BM25 hits cover (see
    :meth:`hybrid.retrieval.fitted.Fusion.coverage_weight`): a question asked in other words than the notes use
    matches only a few of its words anywhere, and then the BM25 ranking is mostly noise from
    common words; a keyword query, a section's own words or an identifier are covered whole."""
    fit = fit or fusion_of(targets, settings)
    wl, wv = fit.weight_lexical, fit.weight_vector
    if not settings.adaptive_fusion or not arms.lexical or not arms.vector:
        return wl, wv
    store = targets[0][1]
    want = fuse.content_stems(parsed.text, store.lexical.stem.stems)
    if not want:
        return wl, wv
    top = [rows[k] for k, _ in arms.lexical[:COVERAGE_HITS]]
    texts = [f"{r.title} {r.heading} {r.text}" for r in top]
    arms.coverage = cov = fuse.coverage(want, texts, store.lexical.stem.stems)
    return wl * fit.coverage_weight(cov), wv


COVERAGE_HITS = 3  # how many of the best BM25 hits the coverage looks at


def fuse_arms(mode: str, arms: Arms, fit: fitted.Fusion,
              weights: tuple[float, float] | None = None) -> Ranked:
    """One arm's ranking as is, or (hybrid) weighted reciprocal-rank fusion of both (weights
    from :func:`fusion_weights`, default ``fit``'s fixed ones)."""
    if mode == "lexical":
        return list(arms.lexical)
    if mode == "vector":
        return list(arms.vector)
    wl, wv = weights or (fit.weight_lexical, fit.weight_vector)
    return fuse.rrf([[k for k, _ in arms.lexical], [k for k, _ in arms.vector]], k=fit.rrf_k,
                    weights=[wl, wv])


def hydrate(targets: Targets, keys: Sequence[Key]) -> dict[Key, ChunkRow]:
    """The catalog rows of ``keys`` (one query per vault); ids deleted meanwhile are absent."""
    by_vault: dict[str, list[int]] = {}
    for v, cid in keys:
        by_vault.setdefault(v, []).append(cid)
    out: dict[Key, ChunkRow] = {}
    for vault, store in targets:
        ids = by_vault.get(vault.name)
        if ids:
            out.update(((vault.name, cid), row) for cid, row in store.catalog.chunks(ids).items())
    return out


def apply_priors(fused: Ranked, arms: Arms, rows: dict[Key, ChunkRow], parsed: ParsedQuery,
                 mode: str, settings: Settings, stems: Callable[[str], Any] | None = None) -> Ranked:
    """Exact-first (hybrid mode: chunks naming every literal of the query rank first), then
    tag-first (a short query naming a tag: the notes carrying it next; ``stems``: the vaults'
    analyzer, None to skip it) and the recency demotion of notes not modified for
    ``recency_months``."""
    if mode == "hybrid" and settings.exact_first:
        lits = strong_literals(parsed.terms, arms.coverage)
        lookup = bool(lits) and len(lits) == len(parsed.terms)
        before = fused
        fused = exact_first(fused, [k for k, _ in arms.lexical], rows, lits, lookup,
                            verbatim_text(parsed.terms, lits))
        old = dict(before)
        lifted = [(k, s - old.get(k, 0.0)) for k, s in fused if s != old.get(k)]
        arms.exact = len(lifted)
        arms.pins.update((k, "verbatim" if lift >= 2.0 else "literal") for k, lift in lifted)
        if stems is not None:  # a short query naming a tag: the notes carrying it next
            fused, tagged = tag_first(fused, rows, parsed.text, stems)
            arms.pins.update((k, "tag") for k in tagged)
    if settings.recency_months:
        cutoff = time.time() - settings.recency_months * 30.44 * 86400
        penalties = {k: settings.recency_penalty for k, _ in fused if rows[k].modified < cutoff}
        fused = fuse.demote(fused, penalties)
        arms.demoted.update(penalties)
    return fused


def rerank(fused: Ranked, rows: dict[Key, ChunkRow], parsed: ParsedQuery, rescore: Rescorer,
           top_n: int) -> tuple[Ranked, dict[Key, float], int]:
    """Rescore the top ``top_n`` with the cross-encoder and blend its order with the fused one;
    chunks holding the query's phrases or compound identifiers stay pinned on top. Returns the
    new ranking, each rescored key's logit and how many leading hits stayed pinned."""
    from hybrid.core.tokens import identifiers, is_compound
    from hybrid.retrieval.rerank import blend, pinned
    depth = max(top_n, 1)
    head = fused[:depth]
    logits = rescore(parsed.text, [_passage(rows[k]) for k, _ in head])
    ce = {k: round(x, 6) for (k, _), x in zip(head, logits)}
    lits = parsed.phrases + [t for t in identifiers(" ".join(parsed.terms)) if is_compound(t)]
    keep = pinned(lits, [rows[k].text for k, _ in head])
    reranked = sorted(zip([k for k, _ in head], blend(logits, depth)), key=lambda kv: -kv[1])
    reranked = head[:keep] + [kv for kv in reranked if kv[0] not in dict(head[:keep])]
    return reranked + fused[len(head):], ce, keep


def _passage(row: ChunkRow) -> str:
    """What the cross-encoder reads: where the chunk sits, then the chunk."""
    where = " > ".join(p for p in [row.title, row.heading] if p)
    return f"{where}\n{row.text}"


def needles(targets: Targets, parsed: ParsedQuery) -> list[str]:
    """The query's words as typed and as each vault stems them (reported as ``needles``; snippets
    centre on, and doors highlight, each hit's own ``marks``)."""
    out = set(NEEDLE_RE.findall(parsed.text.lower()))
    for _, store in targets:
        out.update(store.lexical.stem.stems(parsed.text))
    return sorted(out)


def build_hits(targets: Targets, ranked: Ranked, rows: dict[Key, ChunkRow], arms: Arms,
               ce: dict[Key, float], mark: Mark, snippet_chars: int) -> list[Hit]:
    """One :class:`Hit` per ranked key, with each arm's rank and score for the record, its
    snippet as readable text centred on the words ``mark`` finds in it (its ``marks``)."""
    lex_rank, lex_score = fuse.ranks([k for k, _ in arms.lexical]), dict(arms.lexical)
    vec_rank, vec_score = fuse.ranks([k for k, _ in arms.vector]), dict(arms.vector)
    static = {v.name: _static_fields(v) for v, _ in targets}
    hits = []
    for key, score in ranked:
        r = rows[key]
        low, flat, flat_low, fields, words = r.derived(*static[key[0]])
        found = mark(low, words)
        hits.append(Hit(
            vault=key[0], path=r.path, title=r.title, start_line=r.start_line, end_line=r.end_line,
            snippet=flat_snippet(flat, flat_low, found, snippet_chars), marks=found, score=round(float(score), 6),
            lexical_rank=lex_rank.get(key), lexical_score=_r(lex_score.get(key)),
            vector_rank=vec_rank.get(key), vector_score=_r(vec_score.get(key)),
            rerank_score=ce.get(key), fused_score=_r(arms.fused.get(key)), pin=arms.pins.get(key),
            recency_penalty=arms.demoted.get(key), tags=r.tags, chunk_id=r.id, text=r.text,
            **fields, heading_path=r.heading.split(" > ") if r.heading else []))
    return hits


Static = tuple[str, str, str, dict[str, Any], dict[str, set[str]]]


def _static_fields(vault: Vault) -> tuple[tuple, Callable[[ChunkRow], Static]]:
    """(key, make) for :meth:`ChunkRow.derived`: what a hit of vault ``vault`` takes from its
    row alone, whatever the query, made once per row: its text in lower case (what the marks
    are found in) and its words by their starts (where they are looked up), its text as a
    reader sees it on one line (as is and in lower case: what the snippet is cut from), and its
    other fields (its date and where the date came from, its kind's fields, the link that
    opens it)."""
    folder, names = vault.path.name, vault_name_dates(vault)

    def make(r: ChunkRow) -> Static:
        fields = source_fields(r.path, r.heading, lambda: r.properties, folder, r.start_line, r.end_line)
        fields["modified"] = dt.datetime.fromtimestamp(r.modified).isoformat(timespec="seconds")
        fields["date_source"] = date_source(r.properties, r.modified, r.path, names)
        flat, low = flatten(readable(r.text)), r.text.lower()
        return low, flat, flat.lower(), fields, words_by_start(low)
    return ("hit", folder, names.formats if names is not None else None), make


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 6)
