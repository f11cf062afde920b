"""Notes related to a note: shared meaning, links in either direction, shared tags, co-citation.

Four signals, each in [0, 1], are added with fixed weights (:data:`WEIGHTS`) into one score:

- **meaning**: the cosine of the mean of the source's chunk vectors with the candidate's best
  chunk (``mean``, the default: one question to the vector arm), or of the best match between
  the source's chunk vectors and the candidate's (``best``: each source chunk asks; measured no
  better, and slower). The vectors are those already in the index
  and the embedding cache: nothing is embedded at query time.
- **link**: 1 when either note links to the other (a wikilink, an embed, a markdown link).
- **tags**: the tags both carry, weighted by rarity: the sum of ``log(1 + N / df)`` over the
  shared tags divided by the same sum over the tags either carries (a weighted Jaccard; ``N``
  notes, ``df`` notes with the tag).
- **co-cited**: the notes that link to both, each weighted ``1 / log(2 + its outlinks)`` (a
  hub that links to everything says little: Adamic-Adar), the sum ``x`` squashed ``x / (1 + x)``.

Candidates are the notes of the nearest chunks, the linked and co-cited notes, and the notes
sharing the most tags; every candidate's meaning is then measured, so no signal is missing for
want of a search. The weights were chosen on tune splits and are reported on held-out splits
in eval/reports/notes/issue30-related.md (bench: eval/archive/notes/related_links.py): the tag signal is
shown as evidence but weighted 0 (it lowered recall where it could be measured); the link
weight cannot be measured by hiding links and is set by design.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from hybrid.store.graph import LinkGraph
    from hybrid.store.port import VectorArm

MEANING_MODES = ("best", "mean")
NEAREST_CHUNKS = 60      # chunks each question to the vector arm returns
MAX_SOURCE_CHUNKS = 24   # the source's chunks that ask (``best``): a long note's first ones
MAX_TAG_CANDIDATES = 40  # notes sharing tags considered, the most similar by tags first
MAX_TOP_K = 100


@dataclass(frozen=True)
class Weights:
    meaning: float = 1.0
    link: float = 0.3
    tags: float = 0.0    # shown as evidence; scoring them lowered recall where measurable
    cocited: float = 0.3
    mode: str = "mean"

    def to_dict(self) -> dict:
        return asdict(self)


WEIGHTS = Weights()


@dataclass
class Signals:
    """What relates one candidate to the source note."""
    meaning: float | None = None     # cosine of the best match (None: no vectors to compare)
    chunk: int | None = None         # the candidate's chunk of that match
    links_to: bool = False           # the source links to it
    linked_from: bool = False        # it links to the source
    tags: list[str] = field(default_factory=list)  # shared tags
    tag_score: float = 0.0
    cociters: list[int] = field(default_factory=list)  # notes linking to both
    cocite_score: float = 0.0

    def score(self, w: Weights) -> float:
        link = 1.0 if (self.links_to or self.linked_from) else 0.0
        return (w.meaning * max(0.0, self.meaning or 0.0) + w.link * link + w.tags * self.tag_score
                + w.cocited * self.cocite_score)


@dataclass
class RelatedNote:
    """One related note: where it is, how related, and why (the evidence)."""
    vault: str
    path: str
    title: str
    score: float
    citation: str             # its passage nearest in meaning (else its first), vault:path:start-end
    snippet: str
    source: str = "markdown"
    uri: str = ""
    similarity: float | None = None   # cosine of the best passage match
    links: list[str] = field(default_factory=list)   # "links to" (the note asked about links
    # to it), "linked from" (it links to the note asked about)
    shared_tags: list[str] = field(default_factory=list)
    co_cited_by: list[str] = field(default_factory=list)  # paths of the notes linking to both
    why: list[str] = field(default_factory=list)  # the above, in words

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class RelatedResult:
    vault: str
    path: str                 # the note asked about
    title: str
    notes: list[RelatedNote]
    meaning: bool = True      # whether its vectors took part (False: not embedded)
    weights: Weights = WEIGHTS

    def to_json(self) -> dict:
        return {"vault": self.vault, "path": self.path, "title": self.title, "meaning": self.meaning,
                "weights": self.weights.to_dict(), "notes": [n.to_dict() for n in self.notes]}


def without_links(graph: LinkGraph, fid: int) -> LinkGraph:
    """``graph`` with every link to or from ``fid`` taken out (the note stays): what the link
    signals may use when ``fid``'s own links are what is measured (leave-links-out)."""
    from hybrid.store.graph import LinkGraph
    out = {f: kept for f, ids in graph.out.items() if f != fid and (kept := [i for i in ids if i != fid])}
    back = {f: kept for f, ids in graph.back.items() if f != fid and (kept := [i for i in ids if i != fid])}
    return LinkGraph(graph.notes, out, back, graph.unresolved)


def tag_weights(graph: LinkGraph) -> dict[str, float]:
    """``log(1 + N / df)`` of every tag the graph's notes carry (lowercased)."""
    df: dict[str, int] = {}
    for note in graph.notes.values():
        for t in {str(t).lower() for t in note.tags}:
            df[t] = df.get(t, 0) + 1
    n = max(1, len(graph.notes))
    return {t: math.log(1 + n / d) for t, d in df.items()}


def link_signals(graph: LinkGraph, source: int, idf: dict[str, float],
                 shown: Callable[[str], bool] = lambda t: True) -> dict[int, Signals]:
    """The candidates the graph and the tags give for ``source``, with those signals filled.
    ``shown``: whether a tag may be shown (an agent's: no secret in it); others do not count."""
    found: dict[int, Signals] = {}

    def at(fid: int) -> Signals:
        return found.setdefault(fid, Signals())

    for fid in graph.outlinks(source):
        at(fid).links_to = True
    for fid in graph.backlinks(source):
        at(fid).linked_from = True
    for z in graph.backlinks(source):
        weight = 1.0 / math.log(2 + len(graph.outlinks(z)))
        for fid in graph.outlinks(z):
            if fid != source:
                s = at(fid)
                s.cociters.append(z)
                s.cocite_score += weight
    for s in found.values():
        s.cocite_score = s.cocite_score / (1 + s.cocite_score)
    mine = {str(t).lower(): str(t) for t in graph.notes[source].tags if shown(str(t))}
    if mine:
        scored = []
        for fid, note in graph.notes.items():
            if fid == source:
                continue
            theirs = {str(t).lower() for t in note.tags if shown(str(t))}
            common = theirs & mine.keys()
            if common:
                union = sum(idf.get(t, 0.0) for t in theirs | mine.keys())
                scored.append((sum(idf.get(t, 0.0) for t in common) / union if union else 0.0, fid,
                               sorted(mine[t] for t in common)))
        scored.sort(key=lambda x: (-x[0], x[1]))
        for i, (value, fid, common_tags) in enumerate(scored):
            if i >= MAX_TAG_CANDIDATES and fid not in found:
                continue
            s = at(fid)
            s.tags, s.tag_score = common_tags, value
    return found


def nearest_chunks(vector: VectorArm, queries: np.ndarray, mode: str, k: int,
                   banned: Collection[int] = (), allowed: Collection[int] | None = None) -> dict[int, float]:
    """``{chunk id: cosine}`` of the chunks nearest the source's chunk vectors ``queries`` (one
    per row, normalised): by their mean (``mean``), or each chunk's best match with any of them
    (``best``)."""
    import numpy as np
    if len(queries) == 0 or k <= 0:
        return {}
    if mode == "mean":
        q = queries.mean(axis=0)
        norm = float(np.linalg.norm(q))
        if norm == 0.0:
            return {}
        return dict(vector.search((q / norm).astype(np.float32), k, allowed, banned))
    best: dict[int, float] = {}
    for q in queries[:MAX_SOURCE_CHUNKS]:
        for cid, s in vector.search(q, k, allowed, banned):
            if s > best.get(cid, -2.0):
                best[cid] = s
    return best


def by_note(scores: dict[int, float], file_of: dict[int, int]) -> dict[int, tuple[float, int]]:
    """``{file id: (best cosine, its chunk)}`` from chunk scores (chunks not in ``file_of``: not
    live, or not visible to this reader, are dropped)."""
    out: dict[int, tuple[float, int]] = {}
    for cid, s in sorted(scores.items(), key=lambda x: (-x[1], x[0])):
        fid = file_of.get(cid)
        if fid is not None and fid not in out:
            out[fid] = (s, cid)
    return out


def rank(candidates: dict[int, Signals], w: Weights, top_k: int,
         drop: Iterable[int] = ()) -> list[tuple[int, float, Signals]]:
    """The best ``top_k`` candidates as (file id, score, signals), best first, ties by id."""
    gone = set(drop)
    scored = [(fid, s.score(w), s) for fid, s in candidates.items() if fid not in gone]
    scored.sort(key=lambda x: (-x[1], x[0]))
    return [x for x in scored if x[1] > 0][:top_k]


def reasons(s: Signals, cociters: Sequence[str]) -> list[str]:
    """Why a note is related, in words, strongest evidence first."""
    out = []
    if s.links_to and s.linked_from:
        out.append("linked both ways")
    elif s.links_to:
        out.append("the note links to it")
    elif s.linked_from:
        out.append("it links to the note")
    if s.meaning is not None:
        out.append(f"similar in meaning (cosine {s.meaning:.2f})")
    if s.tags:
        out.append("shared tags: " + ", ".join("#" + t for t in s.tags))
    if cociters:
        shown = ", ".join(cociters[:3]) + (f" and {len(cociters) - 3} more" if len(cociters) > 3 else "")
        out.append(f"co-cited by {len(cociters)} note{'s' if len(cociters) != 1 else ''}: {shown}")
    return out
