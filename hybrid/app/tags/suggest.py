"""Offline tag suggestions, drawn from the vault's own tags.

For a note, two kinds of evidence name tags it may lack:

- **its neighbours' tags**: the notes nearest to it by meaning (the mean of its chunks' vectors,
  searched in the vector arm) and by words (its most frequent words as a BM25 query in the
  lexical arm), fused by reciprocal rank (k = 60); each tag scores the summed weight of the
  :data:`NEIGHBOURS` nearest notes that carry it (the nearest weighs 1, the others their fused
  score relative to it);
- **key phrases**: a tag whose words (its last part, ``home-assistant`` read as "home
  assistant") occur in the note: :data:`PHRASE_TITLE` when in its title, up to
  :data:`PHRASE_BODY` by how often in its text.

Tags the note carries already, and tags the owner rejected for it, are never suggested. Ties go
to the tag more notes of the vault carry. Figures: ``eval/reports/notes/issue30-tags.md``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hybrid.core.errors import HybridError

if TYPE_CHECKING:
    from hybrid.store.port import Store

RRF_K = 60
NEIGHBOURS = 10        # nearest notes whose tags vote
CANDIDATES = 60        # chunks asked of each arm
QUERY_TERMS = 24       # words of the note in its BM25 query
PHRASE_TITLE = 1.0     # a tag's words in the note's title
PHRASE_BODY = 0.5      # … in its text (scaled by how often, up to this)
WORD_RE = re.compile(r"[^\W_][\w'-]*[^\W_]|[^\W_]")


class NoSuggestions(HybridError):
    """Nothing to suggest from: the vault has no tags at all, or the note is not indexed."""


@dataclass
class Candidate:
    tag: str
    score: float
    why: list[str] = field(default_factory=list)


def fuse(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> dict[int, float]:
    """Reciprocal-rank fusion of rankings of ids (rank 1 first): ``{id: sum 1/(k + rank)}``."""
    out: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, 1):
            out[item] = out.get(item, 0.0) + 1.0 / (k + rank)
    return out


def first_by_note(chunk_ranking: Iterable[int], note_of: Mapping[int, int]) -> list[int]:
    """The notes of a ranking of chunks, each at its best chunk's place."""
    return list(dict.fromkeys(note_of[c] for c in chunk_ranking if c in note_of))


def neighbour_votes(fused: Mapping[int, float], tags_of: Mapping[int, Sequence[str]],
                    n: int = NEIGHBOURS) -> dict[str, tuple[float, int]]:
    """``{tag: (weight, notes)}`` over the ``n`` best fused notes (untagged ones count among
    them): each note adds its fused score relative to the best one's."""
    best = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    if not best:
        return {}
    top = best[0][1]
    out: dict[str, tuple[float, int]] = {}
    for note, score in best:
        for t in dict.fromkeys(tags_of.get(note, ())):
            w, c = out.get(t, (0.0, 0))
            out[t] = (w + score / top, c + 1)
    return out


def _words(text: str) -> list[str]:
    return WORD_RE.findall(text.lower())


def tag_phrase(tag: str) -> list[str]:
    """The words a tag stands for: its last part, split at '-' and '_' (``work/home-assistant``
    → ``["home", "assistant"]``)."""
    leaf = tag.rsplit("/", 1)[-1]
    return [w for w in re.split(r"[-_\s]+", leaf.lower()) if w]


def phrase_scores(tags: Iterable[str], title: str, text: str) -> dict[str, tuple[float, str]]:
    """``{tag: (score, where)}`` for the tags whose words occur in order in the title or text
    (a one-word tag of fewer than 3 letters never matches: too many false hits)."""
    title_w, text_w = " " + " ".join(_words(title)) + " ", " " + " ".join(_words(text)) + " "
    out: dict[str, tuple[float, str]] = {}
    for t in tags:
        words = tag_phrase(t)
        if not words or (len(words) == 1 and len(words[0]) < 3):
            continue
        phrase = " " + " ".join(words) + " "
        if phrase in title_w:
            out[t] = (PHRASE_TITLE, "in its title")
            continue
        count = len(re.findall(f"(?={re.escape(phrase)})", text_w))  # adjacent ones share a space
        if count:
            out[t] = (PHRASE_BODY * min(1.0, (1 + math.log(count)) / (1 + math.log(3))),
                      f"'{' '.join(words)}' occurs {count}× in it")
    return out


def rank(votes: Mapping[str, tuple[float, int]], phrases: Mapping[str, tuple[float, str]],
         vocabulary: Mapping[str, int], exclude: Collection[str], neighbours: int,
         limit: int) -> list[Candidate]:
    """The best ``limit`` tags of the vocabulary by neighbour votes plus key phrases, none of
    ``exclude``; ties to the more frequent tag, then by name."""
    out = []
    for t in set(votes) | set(phrases):
        if t in exclude or t not in vocabulary:
            continue
        why = []
        score = 0.0
        if t in votes:
            w, c = votes[t]
            score += w
            why.append(f"on {c} of its {neighbours} nearest notes")
        if t in phrases:
            score += phrases[t][0]
            why.append(phrases[t][1])
        out.append(Candidate(t, round(score, 4), why))
    out.sort(key=lambda c: (-c.score, -vocabulary.get(c.tag, 0), c.tag))
    return out[:limit]


def vocabulary(store: Store) -> Counter[str]:
    """Every tag of the vault's live notes, with how many notes carry it."""
    counts: Counter[str] = Counter()
    for note in store.catalog.notes():
        counts.update(t for t in dict.fromkeys(note.tags) if isinstance(t, str) and t)
    return counts


def query_terms(title: str, text: str, n: int = QUERY_TERMS) -> list[str]:
    """The note's ``n`` most frequent words (title words count three times), stopwords and
    one-letter words left out: its BM25 query."""
    from hybrid.core.tokens import STOPWORDS
    counts: Counter[str] = Counter()
    for w in _words(text):
        counts[w] += 1
    for w in _words(title):
        counts[w] += 3
    keep = [(w, c) for w, c in counts.items() if len(w) > 1 and w not in STOPWORDS and not w.isdigit()]
    keep.sort(key=lambda wc: (-wc[1], wc[0]))
    return [w for w, _ in keep[:n]]


def neighbours(store: Store, file_id: int, title: str, text: str,
               chunk_ids: Collection[int]) -> dict[int, float]:
    """The notes nearest to note ``file_id`` (its chunks ``chunk_ids``): ``{file id: fused
    score}`` over the vector arm (the mean of its chunk vectors) and the lexical arm (its
    :func:`query_terms`), itself left out."""
    import numpy as np

    from hybrid.store.lexicon import LexicalQuery
    own = store.catalog.chunk_ids_of([file_id]) | set(chunk_ids)
    rankings: list[list[int]] = []
    model = store.embedder_id
    vec_hits: list[int] = []
    if model and chunk_ids:
        rows = store.catalog.vectors(model, sorted(chunk_ids))
        if rows:
            mat = np.stack([np.frombuffer(v, dtype=np.float32) for _, v in rows])
            q = mat.mean(axis=0)
            norm = float(np.linalg.norm(q))
            if norm > 0:
                vec_hits = [c for c, _ in store.vector.search((q / norm).astype(np.float32), CANDIDATES,
                                                              banned=own)]
    terms = query_terms(title, text)
    lex_hits = [c for c, _ in store.lexical.search(LexicalQuery(terms=terms), CANDIDATES + len(own),
                                                   fuzzy=False)] if terms else []
    lex_hits = [c for c in lex_hits if c not in own]
    rows_of = store.catalog.chunks(list(dict.fromkeys(vec_hits + lex_hits)))
    note_of = {c: r.file_id for c, r in rows_of.items() if r.file_id != file_id}
    for hits in (vec_hits, lex_hits):
        if hits:
            rankings.append(first_by_note(hits, note_of))
    return fuse(rankings)
