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
expands quadratically: 92 KB of it can hold 63 million characters), else :class:`TooLarge`;
anything that is not a well-formed stream raises :class:`Undecodable` rather than returning
garbage. Its work is linear in what it reads and writes: each code costs its width in bits
(read a few at a time from a buffer) and its entry's length twice (the output, the next entry).
"""

from __future__ import annotations

_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
# each base64 character's six bits, most significant first as the stream is read, as a number
# whose lowest bit is the first read: the stream is then one little-endian run of bits
_VALUE = {c: int(f"{i:06b}"[::-1], 2) for i, c in enumerate(_ALPHABET)}
MAX_CHARS = 64 * 2**20  # characters one drawing may decompress to


class Undecodable(ValueError):
    """The text is not a complete LZ-String base64 stream (or decodes past the bound)."""


class TooLarge(Undecodable):
    """The stream decodes past the bound it was given."""


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
            raise TooLarge(f"decompresses beyond {max_chars:,} characters")
        dictionary.append(w + entry[0])
        room -= 1
        w = entry
        if room == 0:
            room, width = 1 << width, width + 1


class _Bits:
    """The stream's bits, read from a buffer refilled six at a time (:data:`_VALUE`)."""

    def __init__(self, values: list[int]) -> None:
        self.values, self.index, self.buffer, self.held = values, 0, 0, 0

    def read(self, count: int) -> int:
        while self.held < count:
            if self.index >= len(self.values):
                raise Undecodable("the data ends in the middle of the stream")
            self.buffer |= self.values[self.index] << self.held
            self.index += 1
            self.held += 6
        out = self.buffer & ((1 << count) - 1)
        self.buffer >>= count
        self.held -= count
        return out


def _from_utf16(text: str) -> str:
    """JavaScript's string (UTF-16 code units as characters) as Python text: surrogate pairs
    joined; a lone half becomes U+FFFD."""
    if not any("\ud800" <= c <= "\udfff" for c in text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
