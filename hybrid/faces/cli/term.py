"""One sanitiser for everything ``hybrid`` prints: no control character or escape sequence of a
note's, an agent's or a file name's reaches the terminal, piped or not.

A note's title or text may hold ESC sequences (clear the screen, set the window title, an OSC 8
hyperlink that points somewhere else than it says), C1 controls (CSI as U+009B), a carriage
return that overwrites what was printed, or bidi overrides that reorder what the owner reads
(Trojan Source). The command installs :class:`SafeStream` over stdout and stderr
(:func:`install`), so every write — ``click.echo``, ``print``, log lines, click's own errors —
is escaped: such a character is shown as ``\\uXXXX`` (a character past U+FFFF as its UTF-16
pair), which is also how JSON spells it, so ``--json`` output means the same after it.

hybrid's own escape sequences (styles, OSC 8 links of citations: :mod:`hybrid.faces.cli.render`)
are made by :func:`own`, which wraps them in a marker holding a random nonce of this process;
:func:`clean` lets exactly those through. Text cannot forge one: the nonce is never printed,
and a NUL of the text's own is escaped like any control.
"""

from __future__ import annotations

import io
import os
import re
import sys
import unicodedata
from typing import Any, TextIO

_NONCE = os.urandom(8).hex()
_OWN_RE = re.compile("\x00" + _NONCE + "([0-9a-f]*)\x00")
# Characters kept although Unicode files them as format characters: they shape text in the
# scripts that need them (joiners in emoji and Indic scripts, the marks of right-to-left
# text, a soft hyphen, a zero-width space between Thai words). The bidi embeddings, overrides
# and isolates (U+202A-E, U+2066-9), which reorder whole runs, are not among them.
_KEPT_FORMAT = frozenset("\u00ad\u061c\u200b\u200c\u200d\u200e\u200f")


def own(sequence: str) -> str:
    """``sequence`` (an escape sequence hybrid emits) marked as hybrid's, so :func:`clean`
    lets it through."""
    return "\x00" + _NONCE + sequence.encode("utf-8", "surrogatepass").hex() + "\x00"


def visible(text: str) -> str:
    """``text`` without hybrid's marked sequences (what takes room on the screen)."""
    return _OWN_RE.sub("", text)


def _escaped(c: str) -> str:
    n = ord(c)
    if n > 0xFFFF:  # as its UTF-16 pair: what JSON writes too
        n -= 0x10000
        return f"\\u{0xD800 + (n >> 10):04x}\\u{0xDC00 + (n & 0x3FF):04x}"
    return f"\\u{n:04x}"


def escape(text: str, *, one_line: bool = False, strict: bool = False) -> str:
    """``text`` with every control character (C0 but newline and tab, DEL, C1), line and
    paragraph separator, lone surrogate and format character that reorders or hides text shown
    as ``\\uXXXX``. ``one_line``: newlines and tabs too (as ``\\n``, ``\\t``). ``strict``: every
    non-printable character, the format characters kept for scripts included (text an agent
    wrote, shown for review)."""
    if text.isprintable() and not one_line:
        return text
    out = []
    for i, c in enumerate(text):
        if c.isprintable() or c == " ":
            out.append(c)
        elif c in "\n\t":
            out.append(("\\n" if c == "\n" else "\\t") if one_line else c)
        elif c == "\r":  # a line end of a CRLF file is one; a lone one would overwrite the line
            out.append("\\r" if one_line else "" if text[i + 1:i + 2] == "\n" else "\\u000d")
        elif unicodedata.category(c) == "Zs":
            out.append(" " if strict or one_line else c)
        elif not strict and (c in _KEPT_FORMAT or unicodedata.category(c) in ("Cn", "Co")):
            out.append(c)  # shapes a script; unassigned in this Python, or private use: inert
        else:
            out.append(_escaped(c))
    return "".join(out)


def clean(text: str) -> str:
    """``text`` as it may reach a terminal: :func:`escape` d, hybrid's own marked sequences
    (:func:`own`) restored."""
    if "\x00" not in text:
        return escape(text)
    out, last = [], 0
    for m in _OWN_RE.finditer(text):
        out.append(escape(text[last:m.start()]))
        out.append(bytes.fromhex(m.group(1)).decode("utf-8", "surrogatepass"))
        last = m.end()
    out.append(escape(text[last:]))
    return "".join(out)


class SafeStream(io.TextIOBase):
    """A text stream that writes what :func:`clean` makes of each string to ``raw``. Bytes
    written to its ``buffer`` (the MCP stdio transport's) pass untouched."""

    def __init__(self, raw: TextIO):
        self.raw = raw

    def write(self, s: str) -> int:
        self.raw.write(clean(s))
        return len(s)

    def flush(self) -> None:
        self.raw.flush()

    def isatty(self) -> bool:
        return self.raw.isatty()

    def fileno(self) -> int:
        return self.raw.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.raw, "encoding", "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.raw, "errors", None)

    @property
    def buffer(self) -> Any:
        return self.raw.buffer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def install(stdout: bool = True) -> None:
    """Put :class:`SafeStream` s over ``sys.stderr`` and (unless not ``stdout``) ``sys.stdout``, once."""
    for name in ("stdout", "stderr") if stdout else ("stderr",):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, SafeStream):
            setattr(sys, name, SafeStream(stream))


def raw(stream: TextIO) -> TextIO:
    """The stream under a :class:`SafeStream` (for a writer that draws with escape sequences
    of its own and prints no text of a note: the progress bars)."""
    return stream.raw if isinstance(stream, SafeStream) else stream
