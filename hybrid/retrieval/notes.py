"""The answer's shape, the same in every door: notes, not passages.

By default a search answers with notes: the first ``top_k`` notes of the fused ranking, each
with its best passage (the headline) and up to :data:`PER_NOTE` - 1 more of its passages under
it, in rank order. With ``passages`` it answers with the first ``top_k`` passages. Either way:

- no two passages of one note overlap (the chunker's overlap makes neighbours share lines:
  the lower-ranked one is left out, its place taken by the next);
- confidence never rises down the list as shown (:func:`monotone`, :func:`monotone_notes`): a
  note listed lower is never more confident than one above it, and a note's headline is at
  least as confident as the passages under it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hybrid.retrieval.hits import Hit

PER_NOTE = 4  # passages of one note in a grouped answer: the headline and up to 3 more

NoteKey = tuple[str, str]  # (vault name, path)


@dataclass
class NoteHits:
    """A note's passages in the answer, the headline (its best passage) first."""
    hits: list[Hit] = field(default_factory=list)

    @property
    def best(self) -> Hit:
        return self.hits[0]

    @property
    def ref(self) -> str:
        return f"{self.best.vault}:{self.best.path}"

    @property
    def confidence(self) -> float | None:
        """The headline's confidence (monotone answers: never below a passage under it)."""
        known = [h.confidence for h in self.hits if h.confidence is not None]
        return max(known) if known else None

    def to_dict(self, text: bool = True) -> dict[str, Any]:
        """The note as JSON: where it is, how sure, its passages (each a hit's JSON)."""
        b = self.best
        return {"vault": b.vault, "path": b.path, "title": b.title, "uri": b.uri, "citation": b.citation,
                "best_score": b.score, "confidence": self.confidence,
                "passages": [h.to_dict(text=text) for h in self.hits]}


def group_by_note(hits: Iterable[Hit]) -> list[NoteHits]:
    """One :class:`NoteHits` per note, in the order of each note's first hit."""
    notes: dict[NoteKey, NoteHits] = {}
    for h in hits:
        notes.setdefault((h.vault, h.path), NoteHits()).hits.append(h)
    return list(notes.values())


def overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether two inclusive line ranges share a line."""
    return a[0] <= b[1] and b[0] <= a[1]


def select(ranked: Sequence[tuple[Any, NoteKey, tuple[int, int]]], top_k: int, by_note: bool,
           per_note: int = PER_NOTE, copy_of: Callable[[int], int | None] | None = None) -> list[int]:
    """Which of ``ranked`` (best first: (key, note, line range) of each candidate passage) the
    answer holds, as indexes into it, in the order they are shown: ``top_k`` notes (their
    passages together, the note's best first) or, not ``by_note``, ``top_k`` passages. A
    passage overlapping a better one of its note is left out, and so is one that ``copy_of``
    (asked only of a passage about to be taken: :class:`hybrid.retrieval.fold.Folder`) says
    repeats a passage taken before."""
    kept: dict[NoteKey, list[int]] = {}
    chosen: list[int] = []
    for i, (_, note, lines) in enumerate(ranked):
        mine = kept.get(note)
        if mine is not None and any(overlaps(lines, ranked[j][2]) for j in mine):
            continue
        if by_note:
            if mine is None and len(kept) >= top_k:
                continue  # the answer's notes are chosen; later ones may still add passages to them
            if mine is not None and len(mine) >= per_note:
                continue
        elif len(chosen) >= top_k:
            break
        if copy_of is not None and copy_of(i) is not None:
            continue
        kept.setdefault(note, []).append(i)
        chosen.append(i)
    if not by_note:
        return chosen
    return [i for ids in kept.values() for i in ids]  # dicts keep order: notes by their best passage


def monotone(values: Sequence[float | None]) -> list[float | None]:
    """``values`` (confidences in the order shown) made non-increasing with the least change
    (pool adjacent violators: a run that rises is replaced by its mean). None stays None and
    is skipped."""
    blocks: list[list[float]] = []  # [sum, count]
    for v in values:
        if v is None:
            continue
        blocks.append([v, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] < blocks[-1][0] / blocks[-1][1]:
            s, n = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += n
    flat = iter([round(s / n, 3) for s, n in blocks for _ in range(int(n))])
    return [None if v is None else next(flat) for v in values]


def monotone_notes(hits: Sequence[Hit]) -> None:
    """Make the confidences of a grouped answer (each note's passages together, its headline
    first) agree with its order, in place: within a note the passages fall from the headline
    (:func:`monotone` over them), and over the notes the headlines fall (:func:`monotone` over
    those); a passage under a headline that was lowered is lowered to it. A note's weak further
    passages do not drag down the next note: each note is one step of the order."""
    groups: dict[NoteKey, list[Hit]] = {}
    for h in hits:
        groups.setdefault((h.vault, h.path), []).append(h)
    inside = [monotone([h.confidence for h in g]) for g in groups.values()]
    heads = monotone([vals[0] for vals in inside])
    for g, vals, head in zip(groups.values(), inside, heads):
        g[0].confidence = head
        for h, v in zip(g[1:], vals[1:]):
            h.confidence = v if v is None or head is None else min(v, head)


def violations(confidences: Sequence[float | None]) -> tuple[int, int]:
    """(adjacent pairs where the lower one is more confident, adjacent pairs) of a list."""
    known = [c for c in confidences if c is not None]
    pairs = list(zip(known, known[1:]))
    return sum(1 for a, b in pairs if b > a), len(pairs)
