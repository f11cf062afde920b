"""Frontmatter properties as filters (``status:done``, ``rating>=4``, ``due<2026-01-01``): how a
note's properties are kept for matching, and what a property filter is.

A note's properties become rows ``(key, val, num, day)``, one per value (a list property gives
one row per item): ``key`` lower case; ``val`` the value as text, case-folded, a wiki link
``[[Target|alias]]`` reduced to its target, a checkbox ``true``/``false``, a number in its
shortest form; ``num`` the value as a number when it is one (``4``, ``"4.5"``); ``day`` its
date ``YYYY-MM-DD`` when it is a date or a date and time. Nested mappings are not kept. Both
stores fill a table from :func:`prop_rows`, and the agent view evaluates the same rows in
Python (:meth:`PropFilter.matches`), so the three agree by construction.

The SQL of a filter is :func:`hybrid.store.sql.props_condition`. A filter ``key:value`` holds
when some row of ``key`` has that value (text: ignoring case; a number: equal as numbers; a
date: the same day); ``key>=value`` (``>``, ``<=``, ``<``) when some row compares so, as
numbers when the value is a number, as days when it is a date.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hybrid.core.errors import QuerySyntaxError

OPS = (">=", "<=", ">", "<", ":", "=")   # ``=`` only where written as KEY=VALUE (--prop, prop:)
HAS = "?"                                 # the property exists (has_key: how a key is looked up)
MAX_VALUE = 300                           # characters of a value kept for matching
RESERVED = "hybrid:"  # hybrid's own keys (hybrid:front_unreadable, a canvas's hybrid:cards), never properties
NUMBER_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
DAY_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$")
SPACE_RE = re.compile(r'[\s"]')
LINK_RE = re.compile(r"^\[\[([^\]|#]*)(#[^\]|]*)?(\|[^\]]*)?\]\]$")

Row = tuple[str, str, float | None, str | None]  # (key, val, num, day)


def as_number(text: str) -> float | None:
    """``text`` as a finite number, or None."""
    if not NUMBER_RE.match(text.strip()):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def as_day(text: str) -> str | None:
    """The calendar day ``YYYY-MM-DD`` of a date or date-and-time, or None (``2024-02-30`` is none)."""
    m = DAY_RE.match(text.strip())
    if not m:
        return None
    try:
        dt.date.fromisoformat(m.group(1))
    except ValueError:
        return None
    return m.group(1)


def norm_text(text: str) -> str:
    """A text value as it is matched: trimmed, case-folded, a wiki link reduced to its target."""
    text = text.strip()
    m = LINK_RE.match(text)
    if m:
        text = m.group(1).strip()
    return text.casefold()[:MAX_VALUE]


def number_text(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def value_row(key: str, value: Any) -> Row | None:
    """The row of one scalar value (None for a mapping or nothing)."""
    if isinstance(value, bool):
        return key, "true" if value else "false", None, None
    if isinstance(value, (int, float)):
        num = float(value)
        if not math.isfinite(num):
            return key, str(value).casefold(), None, None
        return key, number_text(num), num, None
    if isinstance(value, str):
        return key, norm_text(value), as_number(value), as_day(value)
    return None


def prop_rows(properties: dict[str, Any] | None) -> list[Row]:
    """The rows of a note's frontmatter (see the module's doc); a key with no usable value
    still gives one row ``(key, "", None, None)``, so that it is known to exist."""
    rows: list[Row] = []
    for k, value in (properties or {}).items():
        key = str(k).strip().lower()
        if not key or key.startswith(RESERVED):
            continue
        items = value if isinstance(value, list) else [value]
        got = [r for v in items if (r := value_row(key, v)) is not None]
        rows.extend(dict.fromkeys(got) or [(key, "", None, None)])
    return rows


def stored_rows(text: str) -> list[Row]:
    """The rows of a note's frontmatter as a catalog stores it (JSON text; none when unreadable)."""
    import json
    try:
        value = json.loads(text)
    except ValueError:
        return []
    return prop_rows(value) if isinstance(value, dict) else []


def raw_values(properties: dict[str, Any] | None) -> list[tuple[Row, str, str]]:
    """Each row of :func:`prop_rows` with its key and value as written (what the agent view
    judges: :func:`hybrid.store.agent.values.hides_value`)."""
    out: list[tuple[Row, str, str]] = []
    for k, value in (properties or {}).items():
        key = str(k).strip().lower()
        if not key or key.startswith(RESERVED):
            continue
        for v in value if isinstance(value, list) else [value]:
            row = value_row(key, v)
            if row is not None:
                out.append((row, str(k).strip(), str(v)))
    return out


@dataclass(frozen=True)
class PropFilter:
    """One property filter: ``key``, ``op`` (``:`` equals or contains; ``>=``, ``<=``, ``>``,
    ``<``) and the value as given."""
    key: str
    op: str
    value: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", self.key.strip().lower())
        object.__setattr__(self, "op", ":" if self.op == "=" else self.op)

    def check(self) -> PropFilter:
        """Itself, or QuerySyntaxError (one line) when it cannot be tested: no key, no value, or
        a comparison with a value that is no number or date."""
        if not self.key:
            raise QuerySyntaxError(f"property filter {self}: name the property before {self.op!r}")
        if not self.value.strip():
            raise QuerySyntaxError(f"property filter {self.key}{self.op}: give a value after {self.op!r}")
        if self.op != ":" and self.number is None and self.day is None:
            raise QuerySyntaxError(f"property filter {self}: {self.op} compares numbers or dates "
                                   f"(YYYY-MM-DD), and {self.value.strip()!r} is neither")
        return self

    def __str__(self) -> str:
        value = self.value.strip()
        return f"{self.key}{self.op}{json_quote(value) if SPACE_RE.search(value) else value}"

    @property
    def text(self) -> str:
        return norm_text(self.value)

    @property
    def number(self) -> float | None:
        return as_number(self.value)

    @property
    def day(self) -> str | None:
        return as_day(self.value)

    def compares(self) -> str:
        """What a comparison compares: ``numbers`` or ``dates`` (``""`` for equality)."""
        if self.op == ":":
            return ""
        return "numbers" if self.number is not None else "dates"

    def row_matches(self, row: Row) -> bool:
        """Whether one row of :func:`prop_rows` passes (the SQL of :func:`prop_condition`, in Python)."""
        key, val, num, day = row
        if key != self.key:
            return False
        if self.op == HAS:
            return True
        if self.op == ":":
            return (val == self.text or (self.number is not None and num == self.number)
                    or (self.day is not None and day == self.day))
        mine, theirs = (self.number, num) if self.number is not None else (self.day, day)
        if theirs is None or mine is None:
            return False
        return {">=": theirs >= mine, "<=": theirs <= mine, ">": theirs > mine,  # type: ignore[operator]
                "<": theirs < mine}[self.op]                                    # type: ignore[operator]

    def matches(self, rows: Iterable[Row]) -> bool:
        return any(self.row_matches(r) for r in rows)


def has_key(key: str) -> PropFilter:
    """The filter "the note has property ``key``" (any value; not written in queries)."""
    return PropFilter(key, HAS, "")


def json_quote(text: str) -> str:
    return '"' + text.replace('"', "") + '"'


def parse_prop(text: str) -> PropFilter:
    """``KEY:VALUE``, ``KEY=VALUE`` or ``KEY>=VALUE`` (``<=``, ``>``, ``<``) as a filter: the
    form of ``--prop``, the MCP tool's and the API's ``props`` and the query's ``prop:``. The
    key is what comes before the first operator (it may hold spaces: ``due date<2026-01-01``).
    QuerySyntaxError (one line) for anything else."""
    return split_prop(text).check()


def split_prop(text: str) -> PropFilter:
    """:func:`parse_prop` without the check that the filter can be tested (what the audit log
    needs of a refused one: its key and value)."""
    if not isinstance(text, str):
        raise QuerySyntaxError(f"a property filter is text like status:done (got {type(text).__name__})")
    m = re.match(r"^([^:=<>]+?)\s*(>=|<=|[:=<>])\s*(.*)$", text.strip(), re.S)
    if not m:
        raise QuerySyntaxError(f"property filter {text.strip()[:60]!r}: write KEY:VALUE, or KEY>=VALUE "
                               f"(also <=, >, <) for a number or date")
    value = m.group(3).strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    return PropFilter(m.group(1), m.group(2), value)
