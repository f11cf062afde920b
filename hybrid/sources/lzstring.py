"""LZ-String's ``decompressFromBase64``, the one decoder the Excalidraw plugin's drawings need.

The Obsidian Excalidraw plugin stores a drawing's JSON as ``compressed-json``: the JSON
compressed by the lz-string library's ``compressToBase64`` (MIT; an LZW variant writing
variable-width codes, least significant bit first, six bits to a base64 character), split
into lines. The one package on PyPI that decodes it (``lzstring``) has had no release since
2018 and pulls in ``future``, so this is a small decoder of our own, written from the format:

- codes start 2 bits wide; code 0 is a literal 8-bit character, 1 a literal 16-bit one (each
  then enters the dictionary), 2 the end of the stream, any other a dictionary entry;
- the width grows by one bit each time the dictionary reaches the next power of two;
- characters are UTF-16 code units (a pair of them makes one emoji).

It is bounded: at most ``max_chars`` characters come out (a small input whose entries repeat
can expand quadratically), and anything that is not a well-formed stream raises
:class:`Undecodable` rather than returning garbage.
"""

from __future__ import annotations

_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
_VALUE = {c: i for i, c in enumerate(_ALPHABET)}
MAX_CHARS = 64 * 2**20  # characters one drawing may decompress to


class Undecodable(ValueError):
    """The text is not a complete LZ-String base64 stream (or decodes past the bound)."""


def decompress_base64(data: str, max_chars: int = MAX_CHARS) -> str:
    """The text that lz-string's ``compressToBase64`` made ``data`` of (whitespace in ``data``
    is ignored: the plugin splits it into lines). Raises :class:`Undecodable`."""
    data = "".join(data.split())
    if not data:
        raise Undecodable("no data")
    try:
        values = [_VALUE[c] for c in data]
    except KeyError as exc:
        raise Undecodable(f"{exc.args[0]!r} is not a base64 character") from None
    bits = _Bits(values)
    dictionary: list[str] = ["", "", ""]  # codes 0-2 are the literal and end markers
    first = bits.read(2)
    if first == 2:
        return ""
    if first not in (0, 1):
        raise Undecodable("it does not start with a character")
    w = chr(bits.read(8 if first == 0 else 16))
    dictionary.append(w)
    out = [w]
    size = len(w)
    width, room = 3, 4  # code width, and codes that fit in it before it grows
    while True:
        code = bits.read(width)
        if code in (0, 1):
            dictionary.append(chr(bits.read(8 if code == 0 else 16)))
            code = len(dictionary) - 1
            room -= 1
            if room == 0:
                room, width = 1 << width, width + 1
        elif code == 2:
            return _from_utf16("".join(out))
        if code < len(dictionary):
            entry = dictionary[code]
        elif code == len(dictionary):
            entry = w + w[0]
        else:
            raise Undecodable(f"code {code} refers to no entry")
        out.append(entry)
        size += len(entry)
        if size > max_chars:
            raise Undecodable(f"decompresses beyond {max_chars:,} characters")
        dictionary.append(w + entry[0])
        room -= 1
        w = entry
        if room == 0:
            room, width = 1 << width, width + 1


class _Bits:
    """The stream's bits, each six-bit value read from its most significant bit down."""

    def __init__(self, values: list[int]) -> None:
        self.values, self.index, self.mask = values, 0, 32

    def read(self, count: int) -> int:
        out = 0
        for i in range(count):
            if self.index >= len(self.values):
                raise Undecodable("the data ends in the middle of the stream")
            if self.values[self.index] & self.mask:
                out |= 1 << i
            self.mask >>= 1
            if not self.mask:
                self.mask, self.index = 32, self.index + 1
        return out


def _from_utf16(text: str) -> str:
    """JavaScript's string (UTF-16 code units as characters) as Python text: surrogate pairs
    joined; a lone half becomes U+FFFD."""
    if not any("\ud800" <= c <= "\udfff" for c in text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
