"""The documents of a source vault (bookmarks, Slack) as the indexer lists them, and fetching
a bookmarks source's pages on request.

Each :class:`hybrid.sources.VirtualDoc` becomes a :class:`hybrid.sources.walk.FileEntry` whose
``mtime_ns`` is the document's stamp, so an unchanged bookmark or Slack day is skipped on the
size-and-stamp check without being rendered again, exactly like an unchanged file.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hybrid.sources import FetchedPage, VirtualDoc
from hybrid.sources.walk import FileEntry

if TYPE_CHECKING:
    from hybrid.core.config import Vault
    from hybrid.core.settings import Settings

log = logging.getLogger("hybrid")
FAILURES_LISTED = 20  # fetch failures named one by one in the report; the rest are counted


@dataclass(frozen=True)
class Export:
    """How one source's export is read (:data:`hybrid.sources.SOURCES` names the sources)."""
    documents: Callable[[Vault, Any], tuple[list[VirtualDoc], list[str]]]
    document_text: Callable[[Vault, Any, str], str | None]


def documents(vault: Vault, catalog: Any) -> tuple[list[VirtualDoc], list[str]]:
    """(documents, warnings) of a bookmarks or Slack source, read from its export now."""
    if vault.kind not in EXPORTS:
        raise ValueError(f"vault {vault.name!r} is a folder of notes, not a source")
    return EXPORTS[vault.kind].documents(vault, catalog)


def document_text(vault: Vault, catalog: Any, path: str) -> str | None:
    """The text of the one document ``path`` of a bookmarks or Slack source, rendered from its
    export now (None when the export no longer has it)."""
    return EXPORTS[vault.kind].document_text(vault, catalog, path)


def _bookmark_documents(vault: Vault, catalog: Any) -> tuple[list[VirtualDoc], list[str]]:
    from hybrid.sources.bookmarks import documents as bookmark_docs
    from hybrid.sources.bookmarks import read_bookmarks
    marks, warnings = read_bookmarks(vault.path)
    pages = {u: r for u, r in catalog.fetched().items() if r.ok}
    return bookmark_docs(marks, pages), warnings


def _bookmark_text(vault: Vault, catalog: Any, path: str) -> str | None:
    """Only that bookmark's fetched page is read."""
    from hybrid.sources.bookmarks import bookmark_paths, read_bookmarks, render
    marks, _ = read_bookmarks(vault.path)
    for mark, where in zip(marks, bookmark_paths(marks)):
        if where == path:
            page = catalog.fetched(mark.url).get(mark.url)
            return render(mark, page if page is not None and page.ok else None)
    return None


def _slack_documents(vault: Vault, catalog: Any) -> tuple[list[VirtualDoc], list[str]]:
    from hybrid.sources.slack import SlackExport
    export = SlackExport(vault.path)
    return export.documents(), list(export.warnings)


def _slack_text(vault: Vault, catalog: Any, path: str) -> str | None:
    """A Slack export lists its days without rendering them; only that day's file is read."""
    docs, _ = _slack_documents(vault, catalog)
    doc = next((d for d in docs if d.path == path), None)
    return None if doc is None else doc.load()


# How each source that is an export is read, by its name (every source of
# hybrid.core.kinds.SOURCES but the folder; a test checks each is bound)
EXPORTS: dict[str, Export] = {
    "bookmarks": Export(_bookmark_documents, _bookmark_text),
    "slack": Export(_slack_documents, _slack_text),
}


def source_entries(vault: Vault, catalog: Any) -> tuple[list[FileEntry], list[str]]:
    """(entries, warnings) for the indexer's plan."""
    docs, warnings = documents(vault, catalog)
    mtime = vault.path.stat().st_mtime_ns
    where = str(vault.path)
    return [FileEntry(d.path, where, d.size, d.stamp, load=_encoded(d), source_mtime_ns=mtime)
            for d in docs], warnings


def _encoded(doc: VirtualDoc):
    return lambda: doc.load().encode("utf-8")


@dataclass
class FetchSummary:
    """What fetching a bookmarks source's pages did: pages fetched, pages that failed, and the
    warnings naming them (the index run adds these to its report)."""
    fetched: int = 0
    failed: int = 0
    warnings: list[str] = field(default_factory=list)


def fetch_bookmarks(vault: Vault, catalog: Any, mode: str, settings: Settings) -> FetchSummary:
    """Fetch the pages of a bookmarks source into its catalog: with ``mode`` ``"new"`` those
    never fetched and those that failed before, with ``"all"`` every one again. A page that
    fails keeps its title-only entry (and any text fetched before) and is reported."""
    from hybrid.sources.bookmarks import read_bookmarks
    from hybrid.sources.fetch import fetch_pages, skipped_summary
    marks, _ = read_bookmarks(vault.path)
    urls = list(dict.fromkeys(b.url for b in marks))
    catalog.drop_fetched(urls)
    done = {u for u, r in catalog.fetched().items() if r.ok}
    todo = urls if mode == "all" else [u for u in urls if u not in done]
    summary = FetchSummary()
    if not todo:
        return summary
    log.info("%s: fetching %d page(s)", vault.name, len(todo))
    from hybrid.sources.sandbox import convert_limits
    pages = fetch_pages(todo, private=settings.fetch_private, convert=convert_limits(settings))
    catalog.put_fetched(FetchedPage(p.url, p.ok, p.title, p.text, p.error, p.status, p.fetched_at)
                        for p in pages.values())
    failed = [p for p in pages.values() if not p.ok]
    summary.fetched = len(pages) - len(failed)
    summary.failed = len(failed)
    for p in failed[:FAILURES_LISTED]:
        summary.warnings.append(f"{p.url}: not fetched ({p.error}); indexed by its title")
        log.warning("%s: not fetched (%s)", p.url, p.error)
    if len(failed) > FAILURES_LISTED:
        summary.warnings.append(f"… and {len(failed) - FAILURES_LISTED} more pages not fetched")
    skipped = skipped_summary(failed)
    if skipped:  # the refusals counted by why, however many were named above
        summary.warnings.append(f"fetch ({vault.name}): {skipped}")
        log.warning("fetch (%s): %s", vault.name, skipped)
    return summary
