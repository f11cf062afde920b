"""One search request, declared once and validated once, whichever door it came in by (the
Python API, ``hybrid query``, MCP ``search``, ``POST /api/search``, the search page).

:data:`OPTIONS` declares every option of a search: its type, range, choices (from the
registries: modes, document kinds) and help. The doors derive from it: the CLI's options
(:func:`hybrid.faces.cli.main.search_options`), the MCP tool's schema
(:func:`hybrid.faces.mcp.search_signature`), the JSON fields of ``/api/search``
(:meth:`SearchRequest.from_json`) and the search page's controls (``/ui/api/facets``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import InitVar, dataclass, fields
from functools import cached_property
from numbers import Integral
from typing import Any

from hybrid.core.dates import parse_date
from hybrid.retrieval.limits import (
    MAX_CONTEXT_TOKENS,
    MAX_QUERY_CHARS,
    MAX_TOP_K,
    MAX_TOP_K_MCP,
    MODES,
    BadSearchArgs,
    check_query,
    check_strings,
    check_texts,
    is_number,
    json_object,
    show,
)
from hybrid.retrieval.query import ParsedQuery, normalize_folder, parse_query
from hybrid.store.base import NoteFilter as Filters  # which notes a search may return (both arms)


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
    passages: bool = False                   # top_k passages, not top_k notes (hybrid.retrieval.notes)
    context: int = 0                         # tokens of context around the hits, in all (hybrid.retrieval.context)
    props: Sequence[str] = ()                # property filters, KEY:VALUE or KEY>=VALUE (hybrid.store.props)
    max_top_k: InitVar[int] = MAX_TOP_K

    def __post_init__(self, max_top_k: int) -> None:
        check_query(self.query)
        check_options({o.name: getattr(self, o.name) for o in OPTIONS}, {"top_k": max_top_k})
        from hybrid.sources.markdown import normalize_tag
        set_ = object.__setattr__
        set_(self, "top_k", int(self.top_k))
        set_(self, "min_score", float(self.min_score))
        set_(self, "context", int(self.context))
        set_(self, "vaults", None if not self.vaults else tuple(dict.fromkeys(self.vaults)))
        set_(self, "folders", tuple(normalize_folder(f) for f in self.folders))
        set_(self, "exclude_folders", tuple(normalize_folder(f) for f in self.exclude_folders))
        set_(self, "tags", tuple(normalize_tag(t) for t in self.tags))
        from hybrid.sources import check_kinds
        set_(self, "sources", check_kinds(self.sources))
        from hybrid.core.errors import QuerySyntaxError
        from hybrid.store.props import parse_prop
        try:
            set_(self, "props", tuple(str(parse_prop(p)) for p in self.props))
        except QuerySyntaxError as exc:
            raise BadSearchArgs(f"props: {exc}") from None
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
        if not self.query.strip():
            if stands_alone({o.name: getattr(self, o.name) for o in LISTING}):
                return ParsedQuery()
            from hybrid.core.errors import QuerySyntaxError
            raise QuerySyntaxError(empty_query("api"))
        return parse_query(self.query)

    @property
    def filters(self) -> Filters:
        """The request's filters and the query's inline ones together; an inline ``since:``
        wins over the argument. Words that read as property filters count once
        :func:`hybrid.retrieval.filters.resolve_props` has made them filters."""
        from hybrid.store.props import parse_prop
        p = self.parsed
        since = p.since if p.since is not None else self.since
        assert not isinstance(since, str)  # parsed in __post_init__
        return Filters(folders=tuple(self.folders) + tuple(p.folders),
                       tags=tuple(self.tags) + tuple(p.tags), since=since,
                       exclude_folders=tuple(self.exclude_folders),
                       sources=tuple(dict.fromkeys((*self.sources, *p.sources))),
                       props=tuple(dict.fromkeys((*(parse_prop(x) for x in self.props), *p.props))))

    def with_parsed(self, parsed: ParsedQuery) -> SearchRequest:
        """This request with its query read as ``parsed`` (its property words resolved)."""
        import copy
        out = copy.copy(self)
        out.__dict__["parsed"] = parsed
        return out

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
        args = json_object(body)
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


def _kinds() -> tuple[str, ...]:
    from hybrid.sources import KINDS
    return KINDS


def _check_kinds(kinds: Any) -> object:
    from hybrid.sources import check_kinds
    return check_kinds(kinds)


def _kinds_help() -> str:
    from hybrid.sources import KIND_LIST
    return "; ".join(f"{k.name}: {k.help}" for k in KIND_LIST)


@dataclass(frozen=True)
class Option:
    """One option of a search. ``type``: ``int``, ``float``, ``bool``, ``text``, ``texts`` (a list
    of strings), ``choice`` or ``choices`` (one or several of ``choices()``). ``flags``: its
    ``hybrid query`` flags (none: not a CLI option). ``agent``: its name in the MCP tool (None:
    not offered to agents); ``agent_single``: agents give one value of a list; ``agent_high``:
    a lower maximum for agents than ``high`` (MCP's ``top_k``). ``cli_help`` and
    ``agent_help`` replace ``help`` where that door shows something else (the CLI shows notes,
    MCP passages). A value is checked by its type and range (:func:`check_options`); ``must``
    words the refusal. ``text`` takes a number too (``since``: epoch seconds)."""
    name: str
    type: str
    help: str
    flags: tuple[str, ...] = ()
    agent: str | None = None
    agent_single: bool = False
    choices: Callable[[], tuple[str, ...]] | None = None
    choices_help: Callable[[], str] | None = None
    low: float | None = None
    high: float | None = None
    agent_high: float | None = None
    cli_help: str | None = None
    agent_help: str | None = None
    lists: bool = False  # a filter that may stand without words: alone, it lists the notes passing it
    must: str = ""  # what a wrong value is told it must be ("{low}", "{high}": the range)
    must_range: str = ""  # the same for a value of the right type out of range (default: ``must``)
    check: Callable[[Any], object] | None = None  # a check of its own past type and range (ValueError)

    def describe(self) -> dict[str, Any]:
        """The option as JSON (the search page builds its controls from these)."""
        out: dict[str, Any] = {"name": self.name, "type": self.type, "help": self.help,
                               "default": getattr(SearchRequest, self.name, None)}
        if self.choices is not None:
            out["choices"] = list(self.choices())
        if self.low is not None:
            out["low"], out["high"] = self.low, self.high
        return out


OPTIONS: tuple[Option, ...] = (
    Option("top_k", "int", "Number of notes to return (passages with `passages`).", ("-n", "--top-k"),
           agent="top_k", low=1, high=MAX_TOP_K, agent_high=MAX_TOP_K_MCP,
           must="an integer between {low} and {high}", must_range="between {low} and {high}",
           cli_help="Notes to show (passages with --passages).",
           agent_help="Number of notes to return (passages with `passages`), 1-{max_top_k}."),
    Option("mode", "choice", "hybrid (both arms fused), lexical (BM25 only, best for exact strings) or "
           "vector (meaning only).", ("--mode",), agent="mode", choices=lambda: MODES),
    Option("vaults", "texts", "Search only these vaults (default: all).", ("--vault",), agent="vaults",
           cli_help="Search only this vault (repeatable).",
           agent_help="Names of vaults to search (default: all; see list_vaults)."),
    Option("folders", "texts", "Only notes under these vault-relative folders (any of them).", ("--folder",),
           agent="folder", agent_single=True, lists=True, cli_help="Only notes under this folder (repeatable: any).",
           agent_help='Only notes under this vault-relative folder, e.g. "work/runbooks".'),
    Option("tags", "texts", "Only notes carrying all these tags (a tag also matches its nested children).",
           ("--tag",), agent="tags", lists=True,
           cli_help="Only notes with this tag or a nested child (repeatable: all)."),
    Option("since", "text", "Only notes dated since YYYY-MM-DD or an age like 30d, 6m, 1y (a note's frontmatter "
           "updated/modified/date/created, else its file's modification time).", ("--since",),
           agent="since", lists=True, must="a date like 2024-01-31 or an age like 30d"),
    Option("rerank", "bool", "Rescore the top candidates with the cross-encoder (setting rerank_model; slower).",
           ("--rerank",), agent="rerank",
           agent_help="Rescore the top candidates with the configured cross-encoder (slower; needs the "
                      "rerank_model setting)."),
    Option("exclude_folders", "texts", "Leave out notes under these vault-relative folders.", ("--exclude",),
           agent="exclude", cli_help="Leave out notes under this folder (repeatable), as the MCP tool's `exclude`.",
           agent_help="Vault-relative folders to leave out."),
    Option("min_score", "float", "Leave out hits whose confidence is below this, 0-1 (each hit's confidence "
           "estimates how likely its note answers the query: weak < 0.4 <= fair < 0.7 <= strong).",
           ("--min-score",), agent="min_score", low=0.0, high=1.0, must="a number from 0 to 1, a hit's confidence",
           agent_help="Leave out hits whose confidence is below this, 0-1 (each hit's confidence estimates "
                      "how likely its note answers the query: weak < 0.4 <= fair < 0.7 <= strong). 0.4 drops "
                      "weak hits; you may then get none."),
    Option("sources", "choices", "Only documents of these kinds", ("--source",), agent="source", lists=True,
           choices=_kinds, choices_help=_kinds_help, cli_help="Only documents of this kind (repeatable: any).",
           check=_check_kinds),
    Option("passages", "bool", "Answer with passages, best first, not with notes (by default each note "
           "comes once: its best passage, then up to 3 more of its passages).", ("--passages",), agent="passages",
           cli_help="One entry per passage, not one per note (top_k then counts passages)."),
    Option("context", "int", "Also return the text around the hits, read along each note's headings (the "
           "passage's neighbours, its section's start, the parent section's intro, sibling sections), "
           "up to this many tokens in all, counted by hybrid.core.tokens.count_tokens; nothing is "
           "sent twice. 0: off.", ("--context",), agent="context", low=0, high=MAX_CONTEXT_TOKENS,
           must="a whole number of tokens from 0 (off) to {high}, the answer's total",
           cli_help="Also print the text around the hits, up to this many tokens in all (e.g. 600; 0: off).",
           agent_help="Also return the text around the hits (neighbouring paragraphs, the section's start, "
                      "the parent section's intro, sibling sections), each block with its line range, up to "
                      "this many tokens in all (e.g. 1000; 0: off): saves a get_note call per hit."),
    Option("props", "texts", "Only notes whose frontmatter passes each of these property filters: KEY:VALUE "
           "(equal, ignoring case; a list property: contains it), KEY>=VALUE, KEY<=VALUE, KEY>VALUE, "
           "KEY<VALUE (numbers, or dates YYYY-MM-DD).", ("--prop",), agent="props", lists=True,
           cli_help="Only notes whose property passes KEY:VALUE or KEY>=VALUE (<=, >, <) (repeatable: all).",
           agent_help="Frontmatter property filters, all must hold: \"status:done\" (equal, ignoring case; a "
                      "list property: contains), \"rating>=4\", \"due<2026-01-01\" (>=, <=, >, <: numbers "
                      "or dates YYYY-MM-DD). The query may hold them too (status:done)."),
)
QUERY_HELP = (f'Words to search for (at most {MAX_QUERY_CHARS} characters). "Quoted phrases" are required, '
              f"-word excludes a word; identifiers match verbatim. tag:NAME, folder:PATH, since:DATE filter; "
              f"so does a frontmatter property some note has: status:done, rating>=4, due<2026-01-01 (or "
              f"prop:KEY=VALUE). Filters alone (or an empty query with tags/folder/since/props) list the notes "
              f"passing them, newest first.")

LISTING: tuple[Option, ...] = tuple(o for o in OPTIONS if o.lists)


def check_options(values: Mapping[str, Any], highs: Mapping[str, float] = {}) -> None:  # noqa: B006 - read only
    """BadSearchArgs (one line naming the option and the fix) unless each of ``values`` (by
    option name) has its option's type and range (``highs``: a caller's lower maximum, e.g.
    MCP's ``top_k``). Explicit checks, because a wrong type that slips through is worse than a
    TypeError: ``folders="work"`` would filter on 'w', 'o', 'r', 'k'."""
    for option in OPTIONS:
        if option.name in values:
            _check(option, values[option.name], highs.get(option.name, option.high))


def _check(o: Option, value: Any, high: float | None) -> None:
    name = o.name
    must = (o.must or "").format(low=o.low, high=high)
    if o.type == "bool":
        if not isinstance(value, bool):
            raise BadSearchArgs(f"{name} must be true or false (got {type(value).__name__})")
    elif o.type in ("int", "float"):
        whole = o.type == "int"
        if isinstance(value, bool) or not (isinstance(value, Integral) if whole else is_number(value)):
            raise BadSearchArgs(f"{name} must be {must} (got {show(value)})")
        if not o.low <= value <= high:
            within = (o.must_range or o.must).format(low=o.low, high=high)
            raise BadSearchArgs(f"{name} must be {within} (got {show(value)})")
    elif o.type == "choice":
        choices = o.choices() if o.choices else ()
        if not isinstance(value, str) or value not in choices:
            raise BadSearchArgs(f"{name} must be one of {', '.join(choices)} (got {show(value)})")
    elif o.type == "text":
        if value is not None and not (isinstance(value, str) or is_number(value)):
            raise BadSearchArgs(f"{name} must be {must} (got {show(value)})")
        if isinstance(value, str):
            check_texts(value, name)
    elif value is not None or name != "vaults":  # texts, choices (vaults: None is every vault)
        check_strings(name, value)
    if o.check is not None:
        try:
            o.check(value)
        except ValueError as exc:
            raise BadSearchArgs(str(exc)) from None


def stands_alone(values: Mapping[str, Any]) -> bool:
    """Whether a door's option values (by option name) hold a filter that may stand without
    words (:data:`LISTING`): a search of no words and such a filter lists the notes passing it.
    The one rule every door asks (the CLI, MCP, the HTTP API through :attr:`SearchRequest.parsed`)."""
    return any(values.get(o.name) not in (None, "", (), []) for o in LISTING)


def empty_query(door: str) -> str:
    """Why a search of neither words nor a filter that stands alone is refused, in one line that
    names those filters as ``door`` spells them (``cli``: flags, ``agent``: the MCP tool's
    arguments, else the request's fields)."""
    names = [o.flags[-1] if door == "cli" else (o.agent if door == "agent" else None) or o.name for o in LISTING]
    return (f"query is empty: give words to search for, or a filter alone ({', '.join(map(str, names))}) "
            "to list the notes passing it, newest first")


def option_help(option: Option, door: str, **values: Any) -> str:
    """``option``'s help as ``door`` (``cli``, ``agent``, ``page``) shows it, its choices
    explained where they have words of their own."""
    text = {"cli": option.cli_help, "agent": option.agent_help}.get(door) or option.help
    if option.choices_help is not None and door != "cli":
        text = f"{text.rstrip('.')}: {option.choices_help()}."
    return text.format(**values)


def from_options(query: str, values: dict[str, Any], **fixed: Any) -> SearchRequest:
    """A request from a door's option values by option name (None and empty lists are the
    defaults); ``fixed`` (``max_top_k``, a door's own ``top_k``) wins."""
    args = {o.name: values[o.name] for o in OPTIONS
            if o.name in values and values[o.name] not in (None, (), [])}
    if "vaults" in args:
        args["vaults"] = list(args["vaults"])
    return SearchRequest(query, **{**args, **fixed})


if {o.name for o in OPTIONS} != {f.name for f in fields(SearchRequest)} - {"query"}:
    raise RuntimeError("hybrid.retrieval.request.OPTIONS must declare every field of SearchRequest")
