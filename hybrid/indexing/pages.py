"""Pictures that are the pages of one document (:mod:`hybrid.sources.series`): the headings each
page starts under, carried from the end of the page before.

**What a page gets.** The headings in force at the end of the page numbered just before it
(that page's own, nested under those it carried in turn), kept in its reserved property
:data:`~hybrid.sources.markdown.CARRIED`; its chunks start under them
(:func:`hybrid.indexing.chunk`), so they are in its heading path, its embedded header and its
indexed headings. Its own headings' levels are set among the carried ones' by type size
relative to the body (:func:`hybrid.sources.ocr.page_end`). The series breaks (the next page
carries nothing) at a missing number, a number two files hold, a page whose body text is set in
another size (not one document: :data:`~hybrid.sources.series.SAME_BODY`), a page not read
(skipped, or with OCR off), and a page agents may not see (it lends no words, so owners and
agents are shown the same headings). A page with no text passes on what it carried.

**When.** In a run that changed a file, :func:`changed` walks the series with a page read or
removed in it (every series when the agent view changed: who is hidden may have changed), each
page from the OCR cache (:func:`hybrid.sources.ocr.cached_reading`: no picture is recognised
twice), and names the pages whose carried headings differ from those they hold; the indexer
reads them again, from the cache, with their new headings (:mod:`hybrid.indexing.indexer`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from hybrid.indexing.context import VIEW_META
from hybrid.sources import kind_of
from hybrid.sources.markdown import CARRIED, carried
from hybrid.sources.ocr import Carried, cached_reading, page_end
from hybrid.sources.series import page_of, same_body

if TYPE_CHECKING:
    from hybrid.core.config import Vault
    from hybrid.sources.sandbox import Limits
    from hybrid.store.agent.view import AgentView
    from hybrid.store.base import NoteRecord
    from hybrid.store.port import Ledger


def held(properties: Any) -> list[tuple[str, str, float]]:
    """The carried headings a page's properties hold, as :func:`changed` names them."""
    return [(src, text, ratio) for src, text, ratio, _ in carried(properties)]


def changed(catalog: Ledger, vault: Vault, view: AgentView, limits: Limits | None,
            records: list[NoteRecord], removed: Collection[str], known: Mapping[str, Any],
            listed: Iterable[str]) -> dict[str, list[tuple[str, str, float]]]:
    """``{picture path: the headings it now starts under}`` of the pages of a series whose
    carried headings differ from those they hold after this run (``records``: the files read
    in it; ``removed``: the paths gone; ``known``: the ledger's files before it, by path;
    ``listed``: the folder's files). Empty when nothing changed, or the vault reads no
    pictures."""
    if not vault.is_folder or limits is None or not limits.ocr or limits.ocr_cache is None:
        return {}
    fresh = {r.path: r for r in records}
    every = catalog.get_meta(VIEW_META) != view.fingerprint  # who is hidden may have changed: all
    touched = {key[0] for p in [*fresh, *removed] if kind_of(p) == "image" and (key := page_of(p))}
    if not every and not touched:  # no page of a series read or removed (a run of no change)
        return {}
    todo: dict[str, dict[int, list[str]]] = {}
    for path in listed:
        if path not in removed and kind_of(path) == "image" and (key := page_of(path)) is not None \
                and (every or key[0] in touched):
            todo.setdefault(key[0], {}).setdefault(key[1], []).append(path)
    if not todo:
        return {}
    stored = {path: held(props) for _, path, _, props in catalog.files_mentioning((CARRIED,), ())}
    out: dict[str, list[tuple[str, str, float]]] = {}
    for pages in todo.values():
        carry: Carried = []
        body = 0.0
        prev: int | None = None
        for number in sorted(pages):
            if prev is None or number != prev + 1 or len(pages[number]) > 1:
                carry, body = [], 0.0  # a missing page or two of one number: the series breaks
            prev = number
            for path in pages[number]:
                want: list[tuple[str, str, float]] = list(carry)
                got = None
                digest = fresh[path].hash if path in fresh else getattr(known.get(path), "hash", None)
                if digest is not None:
                    got = cached_reading(digest, limits)
                if got is None:  # not read (skipped, or over a bound): it passes nothing on
                    want, carry, body = [], [], 0.0
                else:
                    end, size = page_end(path, got, want)
                    if size and body and not same_body(size, body):  # another document's type
                        want = []
                        end, size = page_end(path, got, want)
                    if view.hides(path):  # lends no words: what agents may not see
                        carry, body = [], 0.0
                    elif size:
                        carry, body = end, size
                mine = held(fresh[path].properties) if path in fresh else stored.get(path, [])
                if want != mine:
                    out[path] = want
    return out
