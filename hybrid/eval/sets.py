"""Labelled sets for the fitters (``hybrid eval fit``, ``hybrid eval calibrate``): a vault
folder, its queries and their judgements, each query in a tune or a held-out split, and a
scratch home that indexes the sets' vaults once for every set over them.

The split rule (qrels/README.md): a query's own ``split``; in a set without one, the first,
third, fifth... query is tuned on and the second, fourth... held out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hybrid.eval.inputs import Problems, Query, load_qrels, load_queries, sample_set

if TYPE_CHECKING:
    from hybrid.app.api import Hybrid

TUNE, HELDOUT = "tune", "heldout"


@dataclass(frozen=True)
class LabelledSet:
    """A set of questions over one vault; ``qrels`` None: no question of it has an answer
    in the vault (what a confidence must call weak)."""
    vault: Path
    queries: Path
    qrels: Path | None = None

    @property
    def name(self) -> str:
        """The queries file's name without ``.queries.jsonl`` (``obsidian-help-para``)."""
        return self.queries.name.split(".queries.")[0].removesuffix(self.queries.suffix)


@dataclass
class Loaded:
    """A set read: its queries in file order, each with its split, and its judgements."""
    set: LabelledSet
    queries: list[Query]
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)

    def split(self, name: str) -> list[Query]:
        return [q for q in self.queries if q.split == name]


def sample() -> LabelledSet:
    """The bundled sample vault and its 70 labelled queries."""
    vault, queries, qrels = sample_set()
    return LabelledSet(vault, queries, qrels)


def split_of(query: Query, i: int) -> str:
    """The split of the ``i``-th query of a file (0 = the first)."""
    return query.split or (TUNE if i % 2 == 0 else HELDOUT)


def load(labelled: LabelledSet, problems: Problems | None = None) -> Loaded:
    """The set's queries (each with its split) and judgements (grade > 0)."""
    problems = problems or Problems()
    queries = list(load_queries(labelled.queries, problems).values())
    queries = [Query(q.qid, q.text, q.category, split_of(q, i)) for i, q in enumerate(queries)]
    qrels = load_qrels(labelled.qrels, problems) if labelled.qrels else {}
    return Loaded(labelled, queries, qrels)


def open_indexed(home: Path, folders: list[Path], *, store: str | None = None, log=None,
                 **settings: Any) -> tuple[Hybrid, dict[Path, str]]:
    """A handle on the scratch ``home`` with every folder registered (a folder registered
    there already keeps its name, so a kept home is indexed again only for what changed) and
    indexed; ``store``: a PostgreSQL URL for the folders registered here (team mode).
    Returns the handle and each folder's vault name."""
    import time

    from hybrid.app.api import open as open_hybrid
    h = open_hybrid(home, **settings)
    names: dict[Path, str] = {}
    for folder in folders:
        folder = folder.resolve()
        known = {v.path: v.name for v in h.vaults}
        if folder not in known:
            taken = set(known.values())
            base = re.sub(r"[^A-Za-z0-9_-]+", "-", folder.name).strip("-") or "vault"
            name, n = base, 1
            while name in taken:
                n += 1
                name = f"{base}-{n}"
            h.add_vault(folder, name, store=store)
            known[folder] = name
        names[folder] = known[folder]
    started = time.perf_counter()
    h.index(list(dict.fromkeys(names.values())))
    if log:
        log(f"indexed in {time.perf_counter() - started:.0f} s")
    return h, names


def drop_from_database(h) -> None:
    """Drop the vaults of scratch home ``h`` that live in a shared database (their local
    files go with the home)."""
    from hybrid.core.store_url import kind_of
    from hybrid.store import backend
    for vault in h.vaults:
        if kind_of(vault.store).shared:
            backend(vault).drop(vault)
