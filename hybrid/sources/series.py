"""Pictures that are the pages of one document: ``letter-1.png``, ``letter-2.png`` … as a
scanner, a phone's scanning app or ``pdftoppm`` saves a document's pages.

The second page of a scanned letter starts mid-letter: nothing on it says which title and
heading it sits under. Read as a series, the headings in force at the end of one page are
carried to the text at the top of the next, as a PDF's pages carry them
(:mod:`hybrid.sources.pdf`), so a hit on page 2 cites ``Letter title > Section`` and is found by
those words (the indexer works them out: :mod:`hybrid.indexing.pages`).

**What makes a series** (:func:`page_of`). Pictures in one folder, of one file type, whose names
are one stem and a page number (``scan_001.jpg``, ``Scan 2.jpeg``, ``minutes-p3.png``); a page
carries over only to the page numbered next, and not where two files hold one number. Not a
series: a camera's or a phone's running photo number (``IMG_0042.jpg``, ``DSC01234.JPG``,
``PXL_20250101_…``), a date (``2025-06-01.png``: the number follows another number), a
browser's copy (``receipt (2).jpg``). A camera roll named otherwise is further kept apart by
type: pages of one document are set in one body size (:data:`SAME_BODY`), and only headings are
carried.
"""

from __future__ import annotations

import re

# one stem and a page number: the stem must not end in a digit (a date, a version) nor be empty
_NAME_RE = re.compile(r"^(?P<stem>.*?[^\W\d](?:[ _.-]?(?:p|pg|page|seite|s))?[ _.-]?)(?P<num>\d{1,4})$", re.I)
# a camera's or a phone's running number (and screen recordings): photos, not pages
_CAMERA_RE = re.compile(r"^(img|dsc[nf]?|dscf|pxl|mvimg|gopr|dji|vid|mov|photo|pict?|sam|wp)[ _-]?\d", re.I)
# a version's number (`diagram-v2`, `plan rev3`): versions of one picture, not its pages
_VERSION_RE = re.compile(r"(?:^|[\W_])(v|ver|version|rev|r)[ _.-]?$", re.I)
SAME_BODY = 0.15  # pages whose body text differs in size by more than this are not one document


def page_of(path: str) -> tuple[str, int] | None:
    """(the series' key, this page's number) of a picture at vault-relative ``path`` whose name
    is a stem and a page number, else None. Two pictures are pages of one series when their
    keys are equal."""
    folder, _, name = path.rpartition("/")
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        return None
    m = _NAME_RE.match(stem)
    if m is None or _CAMERA_RE.match(stem) or _VERSION_RE.search(m.group("stem")):
        return None
    return f"{folder}/{m.group('stem').lower()}.{ext.lower()}", int(m.group("num"))


def same_body(a: float, b: float) -> bool:
    """Are body sizes ``a`` and ``b`` (the same unit) those of one document's pages?"""
    return a > 0 and b > 0 and abs(a - b) <= SAME_BODY * max(a, b)
