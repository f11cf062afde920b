"""One search request, validated and normalised once, whichever door it came in by (the Python
API, ``hybrid query``, MCP ``search``, ``POST /api/search``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import InitVar, dataclass, fields
from functools import cached_property
from typing import Any

from hybrid.core.dates import parse_date
from hybrid.retrieval.limits import MAX_TOP_K, BadSearchArgs, check_search
from hybrid.retrieval.query import ParsedQuery, normalize_folder, parse_query


@dataclass(frozen=True)
class Filters:
    """Which notes a search may return: the request's filters merged with the query's inline
    ``folder:`` / ``tag:`` / ``since:`` ones. Both arms apply them inside their own search."""
    folders: tuple[str, ...] = ()           # any of these folders (or below)
    tags: tuple[str, ...] = ()              # every one of these tags (or a nested child)
    since: float | None = None              # modified at or after (epoch seconds)
    exclude_folders: tuple[str, ...] = ()   # none of these folders
    sources: tuple[str, ...] = ()           # any of these document kinds (hybrid.sources)

    @property
    def narrows(self) -> bool:
        """Whether a note must pass a folder, tag, date or kind test (exclusions aside)."""
        return bool(self.folders or self.tags or self.since is not None or self.sources)


@dataclass(frozen=True)
class SearchRequest:
    """What to search for and where. Made with the caller's values; checked against
    :mod:`hybrid.retrieval.limits` on creation (BadSearchArgs names the argument and the fix), then
    normalised: lists become tuples, folders lose their slashes, tags their ``#`` and case,
    and ``since`` (a date, an age like ``30d``, or epoch seconds) becomes epoch seconds.
    ``max_top_k`` is the caller's cap (MCP allows fewer hits than the API)."""
    query: str
    top_k: int = 8
    mode: str = "hybrid"
    vaults: Sequence[str] | None = None      # stored as a tuple, or None for every vault
    folders: Sequence[str] = ()              # stored as tuples, normalised
    tags: Sequence[str] = ()
    since: float | str | None = None         # stored as epoch seconds
    rerank: bool = False
    exclude_folders: Sequence[str] = ()
    min_score: float = 0.0                   # drop hits whose confidence is below (0..1)
    sources: Sequence[str] = ()              # document kinds: note, pdf, text, web, bookmark, slack
    max_top_k: InitVar[int] = MAX_TOP_K

    def __post_init__(self, max_top_k: int) -> None:
        check_search(self.query, top_k=self.top_k, mode=self.mode, vaults=self.vaults,
                     folders=self.folders, tags=self.tags, since=self.since, rerank=self.rerank,
                     exclude_folders=self.exclude_folders, min_score=self.min_score,
                     sources=self.sources, max_top_k=max_top_k)
        from hybrid.sources.markdown import normalize_tag
        set_ = object.__setattr__
        set_(self, "top_k", int(self.top_k))
        set_(self, "min_score", float(self.min_score))
        set_(self, "vaults", None if not self.vaults else tuple(dict.fromkeys(self.vaults)))
        set_(self, "folders", tuple(normalize_folder(f) for f in self.folders))
        set_(self, "exclude_folders", tuple(normalize_folder(f) for f in self.exclude_folders))
        set_(self, "tags", tuple(normalize_tag(t) for t in self.tags))
        from hybrid.sources import check_kinds
        set_(self, "sources", check_kinds(self.sources))
        if self.since is not None:
            from hybrid.core.dates import check_since
            from hybrid.core.errors import QuerySyntaxError
            try:
                since = parse_date(self.since) if isinstance(self.since, str) else \
                    check_since(float(self.since), self.since)
            except (QuerySyntaxError, OverflowError) as exc:  # OverflowError: float() of a huge int
                raise BadSearchArgs(str(exc) if "since" in str(exc) else f"since: {exc}") from None
            set_(self, "since", since)

    @cached_property
    def parsed(self) -> ParsedQuery:
        """The query text split into terms, phrases, exclusions and inline filters
        (QuerySyntaxError for an empty query, an open quote, a bad date). No text at all with a
        folder, tag or date filter is a listing (``ParsedQuery.listing``), as ``tag:x`` is."""
        if not self.query.strip() and (self.folders or self.tags or self.since is not None
                                       or self.sources):
            return ParsedQuery()
        return parse_query(self.query)

    @property
    def filters(self) -> Filters:
        """The request's filters and the query's inline ones together; an inline ``since:``
        wins over the argument."""
        p = self.parsed
        since = p.since if p.since is not None else self.since
        assert not isinstance(since, str)  # parsed in __post_init__
        return Filters(folders=tuple(self.folders) + tuple(p.folders),
                       tags=tuple(self.tags) + tuple(p.tags), since=since,
                       exclude_folders=tuple(self.exclude_folders),
                       sources=tuple(dict.fromkeys((*self.sources, *p.sources))))

    def to_json(self) -> dict[str, Any]:
        """The JSON body of ``POST /api/search`` for this request."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        if out["vaults"] is None:
            del out["vaults"]
        return out

    @classmethod
    def from_json(cls, body: bytes | str, max_top_k: int = MAX_TOP_K) -> SearchRequest:
        """A request from a JSON object of known fields; BadSearchArgs (HTTP 400) for anything
        else, so a wrong value is refused before it reaches the engine or waits for its lock."""
        try:
            args = json.loads(body)
        except (ValueError, RecursionError):  # RecursionError: '[[[[…' nested past the parser's depth
            raise BadSearchArgs("body must be a JSON object") from None
        if not isinstance(args, dict):
            raise BadSearchArgs("body must be a JSON object")
        known = [f.name for f in fields(cls)]
        unknown = set(args) - set(known)
        if unknown:
            raise BadSearchArgs(f"unknown fields {[k[:40] for k in sorted(unknown)[:5]]}; "
                                f"known: {', '.join(sorted(known))}")
        if "query" not in args:
            raise BadSearchArgs("query is required")
        return cls(**args, max_top_k=max_top_k)


def as_request(query: str | SearchRequest, options: dict[str, Any]) -> SearchRequest:
    """``query`` itself when it is already a request (no options allowed then), else a request
    built from the text and keyword options."""
    if isinstance(query, SearchRequest):
        if options:
            raise TypeError(f"pass options inside the SearchRequest, not as keywords: {sorted(options)}")
        return query
    return SearchRequest(query, **options)
