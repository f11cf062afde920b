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
