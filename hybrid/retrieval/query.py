"""Query syntax: free words, ``"required phrases"``, ``-excluded`` words or ``-"phrases"``, and
inline filters ``tag:NAME``, ``folder:PATH``, ``since:DATE``, ``source:KIND``. A query of filters alone lists the
notes passing them, newest first.

``--flags`` are words, not exclusions (only ``-`` followed by a letter excludes). DATE is
``YYYY-MM-DD`` or a relative age such as ``30d``, ``6w``, ``3m``, ``1y``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hybrid.core.dates import parse_date
from hybrid.core.errors import QuerySyntaxError
from hybrid.sources.markdown import normalize_tag

FILTER_RE = re.compile(r"^(tag|folder|since|source):(.+)$", re.I)
# a token of a query: -?"phrase" (groups 1-2) or a bare token (group 3)
TOKEN_RE = re.compile(r'(-?)"([^"]*)"|(\S+)')


@dataclass
class ParsedQuery:
    terms: list[str] = field(default_factory=list)
    phrases: list[str] = field(default_factory=list)
    excludes: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)
    since: float | None = None
    sources: list[str] = field(default_factory=list)  # document kinds (hybrid.sources)

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
    """A vault-relative folder as the indexes store it: no surrounding spaces or slashes."""
    return folder.strip().strip("/")


def is_exclusion(word: str) -> bool:
    """``-word`` excludes; ``--flag`` or ``-5`` is a word like any other."""
    return len(word) > 1 and word[0] == "-" and word[1].isalpha()


def parse_query(text: str) -> ParsedQuery:
    """Split query text into its parts. Raises QuerySyntaxError with a one-line reason."""
    if text is None or not text.strip():
        raise QuerySyntaxError("empty query: give some words to search for")
    if text.count('"') % 2:
        raise QuerySyntaxError('unbalanced quote in query: close the "phrase" or drop the quote')
    q = ParsedQuery()
    for m in TOKEN_RE.finditer(text):
        neg, phrase, word = m.group(1), m.group(2), m.group(3)
        if phrase is not None:
            phrase = phrase.strip()
            if phrase:
                (q.excludes if neg else q.phrases).append(phrase)
            continue
        f = FILTER_RE.match(word)
        if f:
            key, value = f.group(1).lower(), f.group(2)
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
            else:
                q.since = parse_date(value)
            continue
        if is_exclusion(word):
            q.excludes.append(word[1:])
        else:
            q.terms.append(word)
    if not q.terms and not q.phrases:
        if q.excludes:
            raise QuerySyntaxError("query has only exclusions: add a word or phrase to search for")
        if not (q.tags or q.folders or q.since is not None or q.sources):
            raise QuerySyntaxError("empty query: give some words to search for")
    return q  # only filters: a listing of the notes passing them (ParsedQuery.listing)
