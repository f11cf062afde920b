"""Documented limits on a search, shared by every entry point (Python API, CLI, HTTP, MCP).

Each limit exists because an unbounded value was shown to take the server down: a huge
``top_k`` aborted the process on allocation, a 700 KB query took 6 GB and 26 s, a 50 MB body
held the search lock for over a minute. Every search argument is checked when its
:class:`~hybrid.retrieval.request.SearchRequest` is made, so no path can skip it; the HTTP and
MCP servers make it early, to answer with 400 / a tool error before doing any work.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from numbers import Real
from typing import Any

from hybrid.core.errors import HybridError

MAX_TOP_K = 1000  # hits per search: Python API, CLI and /api/search
MAX_TOP_K_MCP = 50  # hits per MCP `search` call: an agent's context is the constraint there
MAX_QUERY_CHARS = 4000  # characters of query text
MAX_BODY_BYTES = 64 * 1024  # bytes of an HTTP request body (any route)
MAX_FILTER_ITEMS = 256  # entries in each of vaults / folders / tags / exclude_folders
# tokens of context around the hits (hybrid.retrieval.context) one search returns at most: more
# is reading whole notes, which `get` does
MAX_CONTEXT_TOKENS = 32_000
# The most bytes one character can take in a JSON body (an emoji as "\ud83e\udd8a"): an MCP
# request may carry ``proposal_max_chars`` characters of propose_note content, whatever they are.
JSON_BYTES_PER_CHAR = 12


def mcp_body_limit(proposal_max_chars: int) -> int:
    """Bytes of an MCP request body: room for a whole proposal in the worst JSON encoding, so the
    tool (not the transport) refuses an over-long one, naming its limit."""
    return MAX_BODY_BYTES + JSON_BYTES_PER_CHAR * max(0, proposal_max_chars)
MODES = ("lexical", "vector", "hybrid")


class BadSearchArgs(HybridError, ValueError):
    """A search argument has the wrong type or is outside its documented range. A ValueError
    too, so plain-Python callers can catch it the usual way."""


def check_query(query: object) -> None:
    """BadSearchArgs unless ``query`` is text of at most MAX_QUERY_CHARS characters. The
    options are checked by their declarations (:func:`hybrid.retrieval.request.check_options`)."""
    if not isinstance(query, str):
        raise BadSearchArgs(f"query must be a string (got {type(query).__name__})")
    _check_text("query", query)
    if len(query) > MAX_QUERY_CHARS:
        raise BadSearchArgs(f"query is too long ({len(query)} characters; the limit is "
                            f"{MAX_QUERY_CHARS}): search for a few distinctive words instead")


def check_strings(name: str, value) -> None:
    """A list (or tuple) of strings; a bare string is refused rather than split into letters."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise BadSearchArgs(f"{name} must be a list of strings (got {type(value).__name__})")
    if len(value) > MAX_FILTER_ITEMS:
        raise BadSearchArgs(f"{name} has {len(value)} entries; the limit is {MAX_FILTER_ITEMS}")
    for item in value:
        if not isinstance(item, str):
            raise BadSearchArgs(f"{name} must be a list of strings (found {type(item).__name__})")
        _check_text(name, item)


def _check_text(name: str, value: str) -> None:
    check_texts(value, name)


def json_object(body: bytes | str) -> dict[str, Any]:
    """The JSON object a request's body holds, or BadSearchArgs saying what is wrong, in one line:
    not JSON or not an object ('body must be a JSON object'), nested past what the parser's stack
    holds, not UTF-8, or holding an integer of more digits than Python converts
    (:func:`long_number`: 'top_k holds a number too long (5,000 digits; at most 4,300)'). Every
    route reading a JSON body parses it here."""
    try:
        value = read_json(body)
    except RecursionError:  # '[[[[…' or '{"a": {"a": …' past the parser's depth
        raise BadSearchArgs("body is nested too deep to read; send a JSON object of known fields") from None
    except UnicodeDecodeError:
        raise BadSearchArgs("body is not UTF-8 text; send a JSON object in UTF-8") from None
    except ValueError:
        raise BadSearchArgs("body must be a JSON object") from None
    if not isinstance(value, dict):
        raise BadSearchArgs("body must be a JSON object")
    too_long = long_number(value)
    if too_long:
        raise BadSearchArgs(too_long)
    return value


class LongInt:
    """An integer of more digits than Python converts (``sys.get_int_max_str_digits``), as
    :func:`read_json` leaves it in place of the number: json.loads raised a ValueError naming no
    field, and converting it would be quadratic if it were allowed."""

    def __init__(self, digits: int):
        self.digits = digits


def _int(text: str) -> int | LongInt:
    digits = len(text) - text.startswith("-")
    return LongInt(digits) if digits > sys.get_int_max_str_digits() else int(text)


def read_json(text: bytes | str) -> Any:
    """json.loads, with an integer too long to convert left as a :class:`LongInt`
    (:func:`long_number` finds it). Parsed plainly first: the callback for every integer only
    for a text that has such an integer (json's one ValueError that is not a JSONDecodeError)."""
    try:
        return json.loads(text)
    except ValueError as exc:
        if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError)):
            raise
    return json.loads(text, parse_int=_int)


def long_number(value: Any, where: str = "") -> str | None:
    """The refusal of the first integer too long to convert in a value :func:`read_json` read,
    naming where it is ('top_k holds a number too long (5,000 digits; at most 4,300)'); None
    when there is none."""
    found = first_path(value, where, lambda x: isinstance(x, LongInt))
    if found is None:
        return None
    at, item = found
    return f"{at or 'body'} holds a number too long ({item.digits:,} digits; at most {sys.get_int_max_str_digits():,})"


def check_texts(value: Any, where: str = "") -> None:
    """BadSearchArgs naming the place (:func:`unreadable_text`) of the first string in
    ``value`` that is not valid text. Each door calls it on a request's arguments as they come
    in (the HTTP server on every JSON body, the MCP server on every tool's arguments)."""
    at = unreadable_text(value, where)
    if at is not None:
        raise BadSearchArgs(f"{at} is not valid text (invalid UTF-8 or an unpaired surrogate); retype it")


def unreadable_text(value: Any, where: str = "") -> str | None:
    """Where in ``value`` (a string, or the lists and objects of a decoded JSON value) a string
    is not valid text, as a path like ``note``, ``tags[1]`` or ``params.arguments.path``; None
    when all are. Not text: a lone surrogate (JSON's "\\ud800", or a command-line argument that
    was not UTF-8), which cannot be encoded: the indexes, the file system and the answer's own
    JSON fail on it deep inside. The path never holds the bad string itself."""
    found = first_path(value, where, lambda x: isinstance(x, str) and not encodable(x))
    return None if found is None else (found[0] or "text")


def first_path(value: Any, where: str, bad: Callable[[Any], bool]) -> tuple[str, Any] | None:
    """The first item of ``value`` (the lists and objects of a decoded JSON value, keys
    included, in document order) for which ``bad`` holds, with its path (``where``, ``tags[1]``,
    ``params.arguments.path``); None when none does. A key that is not text is named '(a key)'."""
    stack: list[tuple[str, Any]] = [(where, value)]
    while stack:
        at, item = stack.pop()
        if bad(item):
            return at, item
        if isinstance(item, dict):
            for key in reversed(list(item)):  # reversed: the first bad one in the document is named
                name = str(key)[:40] if encodable(str(key)) else "(a key)"
                path = f"{at}.{name}" if at else name
                stack.append((path, item[key]))
                stack.append((path, str(key)))  # the key itself, before its value
        elif isinstance(item, (list, tuple)):
            stack.extend((f"{at}[{i}]", x) for i, x in reversed(list(enumerate(item))))
    return None


def encodable(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_number(value) -> bool:
    """A finite real number (a timestamp); not bool, not NaN or infinity."""
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


def show(value, width: int = 40) -> str:
    """repr() cut short: an error message stays one short line whatever was sent."""
    try:
        text = repr(value)
    except ValueError:  # an int too long to print
        return f"a {type(value).__name__}"
    return text if len(text) <= width else text[:width] + "…"
