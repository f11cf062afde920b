"""Dates as a user writes them (``since:2024-01-31``, ``since:30d``) and as notes carry them
(frontmatter ``updated:``), to epoch seconds within the range every index can hold."""

from __future__ import annotations

import datetime as dt
import math
import re
import time

from hybrid.core.errors import QuerySyntaxError

RELATIVE_RE = re.compile(r"^(\d+)\s*([dwmy])$", re.I)
# The dates a ``since`` may name: year 1 to year 9999 (UTC). Beyond them no note can pass or
# fail the filter differently, and the indexes' 64-bit fields would overflow.
SINCE_MIN = -62135596800.0  # 0001-01-01T00:00:00Z
SINCE_MAX = 253402300799.0  # 9999-12-31T23:59:59Z


def parse_date(value: str) -> float:
    """``YYYY-MM-DD`` (local midnight) or ``30d``/``6w``/``3m``/``1y`` ago → epoch seconds.
    QuerySyntaxError (naming ``since``) for anything else, or a date outside years 1-9999."""
    value = value.strip()
    m = RELATIVE_RE.match(value)
    if m:
        if len(m.group(1)) > 9:  # beyond any date (and int() of 5,000 digits raises)
            check_since(-math.inf, value)
        days = int(m.group(1)) * {"d": 1, "w": 7, "m": 30.44, "y": 365.25}[m.group(2).lower()]
        return check_since(time.time() - days * 86400, value)
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        if re.match(r"^\d{5,}-\d\d-\d\d", value):  # a year past 9999
            check_since(math.inf, value)
        raise QuerySyntaxError(f"bad date {value!r} for since: use YYYY-MM-DD or an age like 30d, "
                               f"6m, 1y") from None
    try:
        epoch = when.timestamp()
    except (OverflowError, OSError, ValueError):  # year 1 in a time zone east of UTC
        epoch = -math.inf
    return check_since(epoch, value)


def check_since(epoch: float, shown: object) -> float:
    """``epoch`` if it lies between years 1 and 9999, else QuerySyntaxError naming ``since``."""
    if not SINCE_MIN <= epoch <= SINCE_MAX:  # also NaN
        raise QuerySyntaxError(f"since {shown!r} is out of range: give a date between 0001-01-02 "
                               f"and 9999-12-30 or an age like 30d")
    return float(epoch)


# A note's own date, from its front block: the fields Obsidian users write, taken in this order.
# "Last changed" fields come first (a note written in 2019 and revised last week is recent),
# then "written on" fields. The date filters (``since``), the recency prior and "newest first"
# use the first of them that holds a date, else the file's mtime, which a clone or a sync sets
# to one moment for every file.
NOTE_DATE_FIELDS = ("updated", "modified", "lastmod", "last_modified", "date", "created")
# 2024-03-05, 2024/03/05, 2024.03.05, each optionally followed by a time (``T`` or a space)
_NOTE_DATE_RE = re.compile(r"^(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?:([T ])(.+))?$")


def note_date_value(value: object) -> float | None:
    """A frontmatter value as epoch seconds, or None when it is no date. Dates and datetimes
    as YAML gives them, and text such as ``2024-03-05``, ``2024/03/05``, ``2024-03-05 14:30``,
    ``2024-03-05T14:30:00Z`` or with an offset. A date without a time is local midnight, as a
    ``since`` date is; a time without an offset is local time."""
    if isinstance(value, dt.datetime):
        when = value
    elif isinstance(value, dt.date):
        when = dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        m = _NOTE_DATE_RE.match(value.strip())
        if not m:
            return None
        year, month, day, sep, rest = m.groups()
        text = f"{year}-{int(month):02}-{int(day):02}" + (f"T{rest.strip()}" if sep else "")
        try:
            when = dt.datetime.fromisoformat(text)
        except ValueError:
            return None
    else:
        return None
    try:
        epoch = when.timestamp()
    except (OverflowError, OSError, ValueError):
        return None
    return epoch if SINCE_MIN <= epoch <= SINCE_MAX else None


def note_date(properties: dict, bad: list[str] | None = None) -> tuple[float, str] | None:
    """(epoch seconds, field name) of a note's own date: the first of NOTE_DATE_FIELDS (in any
    case) in its frontmatter ``properties`` that holds one; None when none does. Each field
    that is there but holds no date is named in ``bad`` (given a list)."""
    lower: dict[str, object] = {}
    for key, value in properties.items():
        lower.setdefault(str(key).lower(), value)
    for name in NOTE_DATE_FIELDS:
        value = lower.get(name)
        if value is None or value == "":
            continue
        epoch = note_date_value(value)
        if epoch is not None:
            return epoch, name
        if bad is not None:
            bad.append(name)
    return None


def date_source(properties: dict, modified: float) -> str:
    """Where a note's stored date ``modified`` came from: ``frontmatter:FIELD`` or ``mtime``
    (an index built before a field was read still holds the mtime until the note is read again)."""
    found = note_date(properties)
    if found is not None and abs(found[0] - modified) < 1e-3:
        return f"frontmatter:{found[1]}"
    return "mtime"
