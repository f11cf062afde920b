"""A query of filters alone (``tag:recipes``, ``folder:work since:30d``, or no text with
``--tag``): the notes passing the filters, newest modified first, one hit per note.

No arm runs and nothing is ranked: each hit cites its whole note (the line span of its chunks),
with the note's title and tags, and its first chunk as snippet and text. Notes without any text
to index (no chunks) are not listed: there is nothing to cite. Stores seen through the agent view
(:class:`hybrid.store.agent.store.AgentStore`) list no hidden note, and their rows come redacted.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hybrid.core.dates import date_source
from hybrid.retrieval.excerpt import readable
from hybrid.retrieval.hits import Hit, snippet, source_fields
from hybrid.retrieval.result import SearchResult
from hybrid.sources.daily import vault_name_dates

if TYPE_CHECKING:
    from hybrid.core.config import Vault
    from hybrid.core.settings import Settings
    from hybrid.retrieval.request import Filters, SearchRequest
    from hybrid.store.port import Searchable

BATCH = 500  # ids per SQL query (SQLite's host parameter limit is 999 on old builds)


def list_notes(targets: Sequence[tuple[Vault, Searchable]], request: SearchRequest, settings: Settings) -> SearchResult:
    """Up to ``request.top_k`` hits, one per note of ``targets`` ((vault, store) pairs, as
    :func:`hybrid.retrieval.pipeline.run_search` takes them) passing ``request.filters``, newest first."""
    notes: list[tuple[float, str, str, int, int]] = []  # (modified, vault, path, target, file id)
    for n, (vault, store) in enumerate(targets):
        for fid, path, modified in _passing(store, request.filters):
            notes.append((modified, vault.name, path, n, fid))
    notes.sort(key=lambda x: (-x[0], x[1], x[2]))
    hits: list[Hit] = []
    for start in range(0, len(notes), max(request.top_k, 50)):  # most notes have chunks: few rounds
        hits += _hits(targets, notes[start:start + max(request.top_k, 50)], settings.snippet_chars)
        if len(hits) >= request.top_k:
            break
    return SearchResult(hits[:request.top_k], query=request.query, parsed=request.parsed,
                        grouped=not request.passages)


def _passing(store: Searchable, filters: Filters) -> list[tuple[int, str, float]]:
    """(file id, path, modified) of the live notes of ``store`` passing ``filters`` that the
    store's reader may see."""
    catalog = store.ledger
    ids = list(store.catalog.note_ids(filters))  # an agent's: visible only
    out = []
    for note in catalog.notes(ids):
        if not any(note.path.startswith(f + "/") for f in filters.exclude_folders):
            out.append((note.id, note.path, note.modified))
    return out


def _hits(targets: Sequence[tuple[Vault, Searchable]], notes: list[tuple[float, str, str, int, int]],
          snippet_chars: int) -> list[Hit]:
    """The hits of ``notes`` (in their order) that have a chunk to cite."""
    spans: dict[tuple[int, int], tuple[int, int, int]] = {}  # (target, file id) -> first chunk, lines
    for n, (_, store) in enumerate(targets):
        fids = [fid for _, _, _, t, fid in notes if t == n]
        for fid, lines in store.ledger.note_spans(fids).items():
            spans[(n, fid)] = lines
    rows: dict[tuple[int, int], Any] = {}
    for n, (_, store) in enumerate(targets):
        first_ids = [cid for (t, _), (cid, _, _) in spans.items() if t == n]
        # through the store's own catalog: an agent's rows come redacted, a note made private
        # since the listing began is dropped here
        for row in store.catalog.chunks(first_ids).values():
            rows[(n, row.file_id)] = row
    hits = []
    for _, name, path, n, fid in notes:
        found, span = rows.get((n, fid)), spans.get((n, fid))
        if found is None or span is None:
            continue
        row = found
        vault = targets[n][0]
        fields = source_fields(path, row.heading, lambda row=row: row.properties, vault.path.name)
        fields.pop("page", None)  # a listing cites the whole document
        hits.append(Hit(
            vault=name, path=path, title=row.title, heading_path=[], start_line=span[1],
            end_line=span[2], snippet=snippet(readable(row.text), [], snippet_chars), score=0.0, tags=row.tags,
            modified=dt.datetime.fromtimestamp(row.modified).isoformat(timespec="seconds"),
            date_source=date_source(row.properties, row.modified, path, vault_name_dates(vault)),
            chunk_id=row.id, text=row.text, **fields))
    return hits


def _batches(ids: list[int]):
    for i in range(0, len(ids), BATCH):
        yield ids[i:i + BATCH]
