"""``Hybrid.related``: the note a reference names, and the notes most related to it.

The note is found as ``get`` finds it (:func:`hybrid.app.reader.note_path`: a path, a title,
an alias, a wikilink, a citation) and must be indexed. The signals and their score are
:mod:`hybrid.retrieval.related`'s; this module gathers them from one vault's store: the link
graph of its ledger (:class:`~hybrid.store.graph.GraphCache`), its chunk vectors from the
embedding cache (nothing is embedded), and its vector arm.

For an agent everything goes through the agent view: the graph without the hidden notes
(:meth:`~hybrid.store.graph.LinkGraph.without`), the vector arm that leaves them out, rows
read through the agent catalog (redacted; a note made private on disk since it was indexed is
left out). A note the agent may not see is refused with :func:`hybrid.app.reader.read_note`'s
words, whether it exists or not; a note named as co-citing is shown only when it is visible.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any, cast

from hybrid.app import reader
from hybrid.core.errors import PathRefused
from hybrid.retrieval.excerpt import readable
from hybrid.retrieval.hits import snippet, source_fields
from hybrid.retrieval.limits import BadSearchArgs
from hybrid.retrieval.related import (
    MAX_TOP_K,
    NEAREST_CHUNKS,
    WEIGHTS,
    RelatedNote,
    RelatedResult,
    Signals,
    Weights,
    by_note,
    link_signals,
    nearest_chunks,
    rank,
    reasons,
    tag_weights,
)
from hybrid.store.graph import LinkGraph

if TYPE_CHECKING:
    import numpy as np

    from hybrid.app.refs import Ref
    from hybrid.app.session import Session
    from hybrid.core.config import Vault
    from hybrid.store.base import ChunkRow
    from hybrid.store.port import Searchable

SNIPPET_CHARS = 200
ROWS_READ = 300  # nearest chunks whose rows are read, at most


def check_top_k(top_k: object) -> None:
    """BadSearchArgs unless ``top_k`` is a whole number from 1 to MAX_TOP_K."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise BadSearchArgs(f"top_k must be a whole number from 1 to {MAX_TOP_K} (got {top_k!r})")


def find_related(session: Session, parsed: Ref, v: Vault, *, top_k: int = 10, agent: bool = False,
                 weights: Weights = WEIGHTS) -> RelatedResult:
    """See :meth:`hybrid.app.api.Hybrid.related` (``parsed``: the reference as it resolved to
    vault ``v``)."""
    check_top_k(top_k)
    store = session.store(v)  # VaultError: not indexed yet
    s = session.settings
    check, searchable, redacted = None, cast("Searchable", store), None
    if agent:
        view = session.agent_view(v, store)
        check = reader.AgentCheck(view, store.catalog, session.redactor(view))
        agent_store = session.agent_store(v)
        searchable, redacted = agent_store, agent_store.hidden.redacted
    rel = reader.note_path(v, parsed, s.max_file_bytes, agent=check, catalog=store.catalog,
                           max_pdf_bytes=s.max_pdf_bytes)
    graph = session.link_graph(v)
    fid = graph.by_path(rel)
    if agent:
        graph = graph.without(searchable.hidden_files)
    if fid is None or fid not in graph.notes:
        if agent:
            raise reader.agent_refusal(v, parsed.path)
        raise PathRefused(f"{rel!r} is not indexed yet; run `hybrid index --vault {v.name}`")
    with session.lock:  # one reader at a time per handle, as search: shared connections
        return relate(searchable, v, graph, fid, top_k, weights, agent=agent, redacted=redacted,
                      asked=parsed.path)


def relate(searchable: Searchable, v: Vault, graph: LinkGraph, fid: int, top_k: int,
           weights: Weights = WEIGHTS, *, agent: bool = False, redacted: Any = None,
           asked: str = "") -> RelatedResult:
    """The notes of ``graph`` most related to note ``fid``, as ``searchable`` reads them."""
    note = graph.notes[fid]
    found, rows, own_rows, meaning = gather(searchable, graph, fid, weights.mode, agent=agent,
                                            redacted=redacted)
    if agent and found is None:  # hidden since its hidden set was made (changed on disk)
        raise reader.agent_refusal(v, asked or note.path)
    ranked = rank(found or {}, weights, top_k, drop=[fid])
    firsts = _first_rows(searchable, {f for f, _, sig in ranked if sig.chunk is None}
                         | {z for _, _, sig in ranked for z in sig.cociters})
    notes = []
    for other, score, sig in ranked:
        row = rows.get(sig.chunk) if sig.chunk is not None else firsts.get(other)
        if row is None:
            meta = graph.notes.get(other)
            if agent or meta is None:
                continue  # nothing of it may be read now: not shown
            notes.append(_from_meta(v, meta.path, meta.title, score, sig, graph, firsts))
            continue
        notes.append(_from_row(v, row, score, sig, graph, firsts, agent))
    title = next(iter(own_rows.values())).title if own_rows else note.title
    return RelatedResult(v.name, note.path, title, notes, meaning=meaning, weights=weights)


def gather(searchable: Searchable, graph: LinkGraph, fid: int, mode: str, *, agent: bool = False,
           redacted: Any = None) -> tuple[dict[int, Signals] | None, dict[int, ChunkRow], dict[int, ChunkRow], bool]:
    """Every candidate related to note ``fid`` with its signals (None: the note has chunks but
    this reader may read none of them), the rows read of the candidates' chunks, the rows of
    the note's own chunks, and whether its vectors took part. ``graph`` is what the link
    signals may use (the bench passes one without the note's own links)."""
    catalog = searchable.catalog
    own = sorted(searchable.ledger.chunk_ids_of([fid]))
    own_rows = catalog.chunks(own)
    if agent and own and not own_rows:
        return None, {}, {}, False
    queries = source_vectors(searchable, own_rows, redacted)
    shown = catalog.shows if agent else (lambda t: True)
    found = link_signals(graph, fid, _tag_weights(graph), shown)
    rows: dict[int, ChunkRow] = {}
    if queries is not None:
        # its own chunks are dropped after the search, not banned inside it: a ban is a
        # selector every scanned vector is checked against
        near = nearest_chunks(searchable.vector, queries, mode, NEAREST_CHUNKS + len(own))
        for cid in own:
            near.pop(cid, None)
        best = sorted(near.items(), key=lambda x: (-x[1], x[0]))[:ROWS_READ]
        got = catalog.chunks([cid for cid, _ in best])
        rows.update(got)
        _meaning(found, by_note(dict(best), {i: r.file_id for i, r in got.items()}))
        extra = [f for f, sig in found.items() if sig.meaning is None and f != fid]
        if extra:  # linked or tagged, not among the nearest: their meaning is measured too
            file_of = {cid: f for f in extra for cid in searchable.ledger.chunk_ids_of([f])}
            if file_of:
                scores = nearest_chunks(searchable.vector, queries, mode, len(file_of), allowed=set(file_of))
                per_note = by_note(scores, file_of)
                rows.update(catalog.chunks([cid for _, cid in per_note.values()]))
                _meaning(found, {f: m for f, m in per_note.items() if m[1] in rows})
    found.pop(fid, None)
    return found, rows, own_rows, queries is not None


def source_vectors(searchable: Searchable, rows: dict[int, ChunkRow], redacted: Any = None) -> np.ndarray | None:
    """The cached vectors of the source note's live chunks ``rows`` as rows of a matrix (an
    agent's: a redacted chunk by the vector of its redacted text), in the note's order; None
    when it has none (not embedded, or no text)."""
    import numpy as np
    model = searchable.embedder_id
    if not model or not rows:
        return None
    order = sorted(rows, key=lambda i: (rows[i].start_line, i))
    vecs = dict(searchable.ledger.vectors(model, order))
    if redacted is not None and redacted.ids.intersection(order):
        ids, _, mat = redacted.vectors()
        swap = {i: mat[n].tobytes() for n, i in enumerate(ids)}
        vecs = {i: b for i, b in vecs.items() if i not in redacted.ids} | \
            {i: swap[i] for i in order if i in redacted.ids and i in swap}
    got = [np.frombuffer(vecs[i], dtype=np.float32) for i in order if i in vecs]
    if not got or len({len(g) for g in got}) != 1:
        return None
    return np.ascontiguousarray(np.vstack(got), dtype=np.float32)


_IDF: list[tuple[LinkGraph, dict[str, float]]] = []  # the last graph's tag weights


def _tag_weights(graph: LinkGraph) -> dict[str, float]:
    """:func:`~hybrid.retrieval.related.tag_weights` of ``graph``, kept while it is the same
    graph (the owner's is kept per state of the ledger: one pass over the notes saved a call)."""
    held = _IDF[0] if _IDF else None
    if held is not None and held[0] is graph:
        return held[1]
    idf = tag_weights(graph)
    _IDF[:] = [(graph, idf)]
    return idf


def _meaning(found: dict[int, Signals], per_note: dict[int, tuple[float, int]]) -> None:
    """Give each note its best match (a note not yet a candidate becomes one)."""
    for other, (score, cid) in per_note.items():
        sig = found.setdefault(other, Signals())
        if sig.meaning is None or score > sig.meaning:
            sig.meaning, sig.chunk = score, cid


def _first_rows(searchable: Searchable, fids: Collection[int]) -> dict[int, ChunkRow]:
    """``{file id: its first chunk's row}`` of the notes ``fids`` this reader may read now."""
    if not fids:
        return {}
    spans = searchable.ledger.note_spans(fids)
    got = searchable.catalog.chunks([span[0] for span in spans.values()])
    return {fid: got[span[0]] for fid, span in spans.items() if span[0] in got}


def _cociters(sig: Signals, graph: LinkGraph, firsts: dict[int, ChunkRow], agent: bool) -> list[str]:
    """Paths of the notes linking to both (an agent's: only those it may read now)."""
    return [graph.notes[z].path for z in sig.cociters if not agent or z in firsts]


def _from_row(v: Vault, row: ChunkRow, score: float, sig: Signals, graph: LinkGraph,
              firsts: dict[int, ChunkRow], agent: bool) -> RelatedNote:
    cociters = _cociters(sig, graph, firsts, agent)
    fields = source_fields(row.path, row.heading, lambda: row.properties, v.path.name)
    return RelatedNote(
        vault=v.name, path=row.path, title=row.title, score=round(score, 6),
        citation=f"{v.name}:{row.path}:{row.start_line}-{row.end_line}",
        snippet=snippet(readable(row.text), [], SNIPPET_CHARS), source=fields["source"], uri=fields["uri"],
        similarity=None if sig.meaning is None else round(sig.meaning, 4), links=_links(sig),
        shared_tags=sig.tags, co_cited_by=cociters, why=reasons(sig, cociters))


def _from_meta(v: Vault, path: str, title: str, score: float, sig: Signals, graph: LinkGraph,
               firsts: dict[int, ChunkRow]) -> RelatedNote:
    """A related note with no text indexed (the owner's view only)."""
    cociters = _cociters(sig, graph, firsts, False)
    fields = source_fields(path, "", {}, v.path.name)
    return RelatedNote(vault=v.name, path=path, title=title, score=round(score, 6), citation=f"{v.name}:{path}",
                       snippet="", source=fields["source"], uri=fields["uri"], links=_links(sig),
                       shared_tags=sig.tags, co_cited_by=cociters, why=reasons(sig, cociters))


def _links(sig: Signals) -> list[str]:
    return [w for w, on in (("links to", sig.links_to), ("linked from", sig.linked_from)) if on]
