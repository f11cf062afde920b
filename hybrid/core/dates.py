"""Dates as a user writes them (``since:2024-01-31``, ``since:30d``) and as notes carry them
(frontmatter ``updated:``), to epoch seconds within the range every index can hold."""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
import time
from dataclasses import dataclass

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


def utc_epoch(text: str) -> float | None:
    """An ISO date or date-time as epoch seconds, one without an offset taken as UTC (as logs
    and exports write times); None when ``text`` is no such date."""
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


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


def date_source(properties: dict, modified: float, path: str = "",
                names: NameDates | None = None) -> str:
    """Where a note's stored date ``modified`` came from: ``frontmatter:FIELD``, ``name`` (its
    file name, read by ``names``: :class:`NameDates`) or ``mtime`` (an index built before a
    field was read still holds the mtime until the note is read again)."""
    found = note_date(properties)
    if found is not None and abs(found[0] - modified) < 1e-3:
        return f"frontmatter:{found[1]}"
    if names is not None and path:
        named = names.date(path)
        if named is not None and abs(named - modified) < 1e-3:
            return "name"
    return "mtime"


# --- a note's date from its file name (daily notes) ------------------------------------------
# A daily note is named by its day: ``2025-01-03.md``, or by the format the daily-notes plugin
# (or Periodic Notes) is set to, in moment.js tokens (``DD.MM.YYYY``, ``YYYY/MM/YYYY-MM-DD``,
# ``dddd, MMMM Do YYYY``). Where a note has no date in its frontmatter, its name's date is its
# date. Strict: the whole name must be the format (``2023 goals`` or ``1984`` are no dates),
# the format must hold a year, a month and a day, and the day must exist.
DEFAULT_NAME_FORMATS = ("YYYY-MM-DD", "YYYY-MM-DD dddd", "YYYY-MM-DD, dddd", "YYYY_MM_DD")
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_EN_WEEKDAY = "(?:" + "|".join(sorted({*WEEKDAYS, *(d[:3] for d in WEEKDAYS), *(d[:2] for d in WEEKDAYS)},
                                      key=len, reverse=True)) + ")"
# moment.js tokens, longest first: the regex each matches and the part of the date it gives
_TOKENS: tuple[tuple[str, str, str | None], ...] = (
    ("YYYY", r"\d{4}", "year"), ("YY", r"\d{2}", "yy"),
    ("MMMM", "[^\\W\\d_]{3,}", "month_name"), ("MMM", "[^\\W\\d_]{3}\\.?", "month_abbr"),
    ("MM", r"\d{2}", "month"), ("M", r"\d{1,2}", "month"),
    ("DDDD", r"\d{3}", None), ("DDD", r"\d{1,3}", None),
    ("Do", r"\d{1,2}(?:st|nd|rd|th)", "day_ordinal"), ("DD", r"\d{2}", "day"), ("D", r"\d{1,2}", "day"),
    ("dddd", "WEEKDAY", None), ("ddd", "WEEKDAY", None), ("dd", "WEEKDAY", None), ("d", r"\d", None),
    ("gggg", r"\d{4}", None), ("GGGG", r"\d{4}", None), ("ww", r"\d{2}", None), ("WW", r"\d{2}", None),
    ("w", r"\d{1,2}", None), ("W", r"\d{1,2}", None), ("Q", r"\d", None),
    ("HH", r"\d{2}", None), ("H", r"\d{1,2}", None), ("hh", r"\d{2}", None), ("h", r"\d{1,2}", None),
    ("mm", r"\d{2}", None), ("m", r"\d{1,2}", None), ("ss", r"\d{2}", None), ("s", r"\d{1,2}", None),
    ("A", "(?:AM|PM)", None), ("a", "(?:am|pm)", None),
)
NAME_FORMAT_MAX = 100  # characters of a configured format read (a longer one is no day's name)


def name_pattern(fmt: str, weekday: str = "[^\\W\\d_]+") -> re.Pattern[str] | None:
    """The regex a moment.js date ``fmt`` names a file by (``/`` separates folders), with
    groups for its year, month and day; None unless it holds all three. ``weekday``: what a
    weekday name may be (any word for a user's format, in whatever language it is written)."""
    if not isinstance(fmt, str) or not fmt.strip() or len(fmt) > NAME_FORMAT_MAX:
        return None
    out, seen, i = [], set(), 0
    while i < len(fmt):
        if fmt[i] == "[":  # [literal text]
            end = fmt.find("]", i)
            end = len(fmt) if end < 0 else end
            out.append(re.escape(fmt[i + 1:end]))
            i = end + 1
            continue
        for token, regex, part in _TOKENS:
            if fmt.startswith(token, i):
                regex = weekday if regex == "WEEKDAY" else regex
                if part is not None and part not in seen:
                    out.append(f"(?P<{part}>{regex})")
                    seen.add(part)
                else:
                    out.append(f"(?:{regex})")
                i += len(token)
                break
        else:
            out.append(re.escape(fmt[i]))
            i += 1
    has_year = bool(seen & {"year", "yy"})
    has_month = bool(seen & {"month", "month_name", "month_abbr"})
    has_day = bool(seen & {"day", "day_ordinal"})
    return re.compile("".join(out), re.I) if has_year and has_month and has_day else None


def _month(value: str) -> int | None:
    word = value.lower().rstrip(".")
    for n, name in enumerate(MONTHS, 1):
        if word == name or (len(word) == 3 and name.startswith(word)):
            return n
    return None


@dataclass(frozen=True)
class NameDates:
    """How the notes of a vault are named by their day: the default formats and a vault's own
    (``formats``, as its daily-notes settings give them). :meth:`date` reads a path's date."""
    formats: tuple[str, ...] = ()

    @functools.cached_property
    def _patterns(self) -> list[tuple[int, re.Pattern[str]]]:
        """(folders the format spans, pattern), the vault's own first."""
        out = []
        for fmt in self.formats:
            pattern = name_pattern(fmt)
            if pattern is not None:
                out.append((fmt.count("/"), pattern))
        for fmt in DEFAULT_NAME_FORMATS:
            pattern = name_pattern(fmt, _EN_WEEKDAY)
            if pattern is not None:
                out.append((0, pattern))
        return out

    @property
    def fingerprint(self) -> list[str]:
        """The vault's own formats that name a day (what an index records: a change re-reads)."""
        return [f for f in self.formats if name_pattern(f) is not None]

    def date(self, path: str) -> float | None:
        """The date (local midnight, epoch seconds) a markdown note's vault-relative ``path``
        names, or None. The name without its ``.md``, and as many folders above it as the
        format has, must be the whole format."""
        if not path.lower().endswith(".md"):
            return None
        parts = path[:-3].split("/")
        if not parts[-1][:1].isdigit() and not self.formats:
            return None  # the default formats all begin with the year: most names end here
        for folders, pattern in self._patterns:
            if folders >= len(parts):
                continue
            m = pattern.fullmatch("/".join(parts[len(parts) - folders - 1:]))
            if m is not None:
                epoch = _epoch(m.groupdict())
                if epoch is not None:
                    return epoch
        return None


def _epoch(parts: dict[str, str | None]) -> float | None:
    """Local midnight of the day ``parts`` (a name pattern's groups) name, or None."""
    full, short = parts.get("year"), parts.get("yy")
    year = int(full) if full is not None else 2000 + int(short or 0)
    if parts.get("month"):
        month: int | None = int(parts["month"] or 0)
    else:
        month = _month(parts.get("month_name") or parts.get("month_abbr") or "")
    day = parts.get("day") or (parts.get("day_ordinal") or "")[:-2]
    try:
        when = dt.datetime(year, month or 0, int(day or 0))
        epoch = when.timestamp()
    except (ValueError, OverflowError, OSError):
        return None
    return epoch if SINCE_MIN <= epoch <= SINCE_MAX else None
