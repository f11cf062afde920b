"""Query syntax: free words, ``"required phrases"``, ``-excluded`` words or ``-"phrases"``, and
inline filters ``tag:NAME``, ``folder:PATH``, ``since:DATE``, ``source:KIND``, and frontmatter
properties: ``prop:KEY=VALUE`` always, ``KEY:VALUE`` / ``KEY>=VALUE`` (``<=``, ``>``, ``<``)
when some note has the property ``KEY`` (:func:`property_shaped`; resolved against the vaults by
:func:`hybrid.retrieval.filters.resolve_props`). A query of filters alone lists the notes
passing them, newest first.

``--flags`` are words, not exclusions (only ``-`` followed by a letter excludes). DATE is
``YYYY-MM-DD`` or a relative age such as ``30d``, ``6w``, ``3m``, ``1y``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hybrid.core.dates import parse_date
from hybrid.core.errors import QuerySyntaxError
from hybrid.sources.markdown import normalize_tag
from hybrid.store.props import PropFilter, parse_prop

FILTER_RE = re.compile(r"^(tag|folder|since|source|prop):(.+)$", re.I)
# a token of a query: -?"phrase" (groups 1-2), a bare token (group 3), or a filter with a quoted
# value, key:"two words" (group 4)
QUOTED_VALUE = r'[^\s"]+(?:>=|<=|[:<>=])"[^"]*"'
TOKEN_RE = re.compile(rf'(-?)"([^"]*)"|(?!{QUOTED_VALUE})(\S+)|({QUOTED_VALUE})')
# a word that reads as a property filter: a key of 2+ letters, digits, _ or - that starts with a
# letter, an operator, and a value that does not start like a URL's or path's rest (//, \) and
# holds no further colon (10:30, foo::bar, rl:global:checkout, obsidian://… stay words)
PROPERTY_RE = re.compile(r"^([^\W\d_][\w-]+)(>=|<=|[:<>])([^\s:/\\<>=][^\s:]*)$")


@dataclass
class ParsedQuery:
    terms: list[str] = field(default_factory=list)
    phrases: list[str] = field(default_factory=list)
    excludes: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)
    since: float | None = None
    sources: list[str] = field(default_factory=list)  # document kinds (hybrid.sources)
    props: list[PropFilter] = field(default_factory=list)  # frontmatter property filters
    # words that read as property filters (status:done): searched as words until
    # hybrid.retrieval.filters.resolve_props finds the property in the vaults searched
    maybe_props: list[tuple[list[str], PropFilter]] = field(default_factory=list)

    @property
    def text(self) -> str:
        """What the vector arm embeds: the words and phrases, without operators or filters."""
        return " ".join(self.phrases + self.terms)

    @property
    def listing(self) -> bool:
        """Nothing to search for, only filters (``tag:recipes``): the query lists the notes
        passing them (see :mod:`hybrid.retrieval.listing`) instead of ranking passages."""
        return not (self.terms or self.phrases or self.excludes)


def normalize_folder(folder: str) -> str:
    """A vault-relative folder as the indexes store it: no surrounding spaces or slashes. Case
    and accents are kept as typed: the stores compare it with the paths as they were walked
    (folding it here would not fold what they compare it with)."""
    return folder.strip().strip("/")


def is_exclusion(word: str) -> bool:
    """``-word`` excludes; ``--flag`` or ``-5`` is a word like any other."""
    return len(word) > 1 and word[0] == "-" and word[1].isalpha()


def property_shaped(word: str) -> PropFilter | None:
    """The property filter ``word`` reads as (``status:done``, ``rating>=4``), or None: a URL, a
    time, an identifier with ``::``, a path stay words. Not checked yet: ``Vec<String>`` is a
    word unless some note has a property ``vec`` (then: a comparison with no number or date)."""
    m = PROPERTY_RE.match(word)
    if not m:
        return None
    return PropFilter(m.group(1), m.group(2), m.group(3))


def unquote(token: str) -> str:
    """``key:"two words"`` as ``key:two words``."""
    return token.replace('"', "")


def parse_query(text: str) -> ParsedQuery:
    """Split query text into its parts. Raises QuerySyntaxError with a one-line reason."""
    if text is None or not text.strip():
        raise QuerySyntaxError("empty query: give some words to search for")
    if text.count('"') % 2:
        raise QuerySyntaxError('unbalanced quote in query: close the "phrase" or drop the quote')
    q = ParsedQuery()
    for m in TOKEN_RE.finditer(text):
        neg, phrase, word, quoted = m.group(1), m.group(2), m.group(3), m.group(4)
        if quoted is not None:
            _quoted_filter(q, quoted)
            continue
        if phrase is not None:
            phrase = phrase.strip()
            if phrase:
                (q.excludes if neg else q.phrases).append(phrase)
            continue
        f = FILTER_RE.match(word)
        if f:
            _filter(q, f.group(1).lower(), f.group(2))
            continue
        if is_exclusion(word):
            q.excludes.append(word[1:])
            continue
        q.terms.append(word)
        pf = property_shaped(word)
        if pf is not None:
            q.maybe_props.append(([word], pf))
    if not q.terms and not q.phrases:
        if q.excludes:
            raise QuerySyntaxError("query has only exclusions: add a word or phrase to search for")
        if not (q.tags or q.folders or q.since is not None or q.sources or q.props):
            raise QuerySyntaxError("empty query: give some words to search for")
    return q  # only filters: a listing of the notes passing them (ParsedQuery.listing)


def _quoted_filter(q: ParsedQuery, token: str) -> None:
    """``key:"two words"``: a filter of the query's syntax with its value quoted, or a property
    filter if some note has that property (else words)."""
    f = FILTER_RE.match(unquote(token))
    if f:
        _filter(q, f.group(1).lower(), f.group(2))
        return
    m = re.match(r'^([^\W\d_][\w-]+)(>=|<=|[:<>])"([^"]*)"$', token)
    words = unquote(token).split()
    q.terms.extend(words)
    if m and m.group(3).strip():
        q.maybe_props.append((words, PropFilter(m.group(1), m.group(2), m.group(3))))


def _filter(q: ParsedQuery, key: str, value: str) -> None:
    """One filter of the query's own syntax (``tag:``, ``folder:``, ``source:``, ``prop:``, ``since:``)."""
    if key == "tag":
        q.tags.append(normalize_tag(value))
    elif key == "folder":
        q.folders.append(normalize_folder(value))
    elif key == "source":
        from hybrid.sources import check_kinds
        try:
            q.sources.extend(check_kinds(value.split(",")))
        except ValueError as exc:
            raise QuerySyntaxError(str(exc)) from None
    elif key == "prop":
        q.props.append(parse_prop(value))
    else:
        q.since = parse_date(value)
