"""How two spellings of a path, a glob or a tag are compared: :func:`fold`, the one rule.

Two spellings are the same name when their folds are equal: composed and decomposed accents
are one (macOS's HFS+ writes file names decomposed, a keyboard types them composed), and so are
upper and lower case, by Unicode's default case folding, without a locale: ``ß`` and ``SS``
are one, Turkish ``İ`` folds to ``i`` with a combining dot (not to ``i``) and ``ı`` stays
itself. Used wherever Python compares such names: the agent view (paths, globs, tags), the
proposals folder's bounds, repeated bookmark paths.

A fold is a key for comparing, never shown: names are shown and stored as written. Two forms
that look like folds are not comparisons: a tag's stored form
(``hybrid.sources.markdown.normalize_tag``: NFC, lower case, as Obsidian matches tags; what the
indexes hold, hits show and the tag desk writes into notes) and a folder filter's value
(``hybrid.retrieval.query.normalize_folder``: trimmed only, as the stores compare it with the
paths as they were walked).
"""

from __future__ import annotations

import unicodedata


def fold(text: str) -> str:
    """``text`` as names are compared: NFC, case-folded, NFC again (folding may decompose:
    ``ǰ`` folds to ``j`` and a combining caron). ASCII is only lower-cased, which is its fold."""
    if text.isascii():
        return text.lower()
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", text).casefold())
