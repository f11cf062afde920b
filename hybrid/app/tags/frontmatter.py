"""Adding tags to a note's front block, and nothing else: every other byte of the file stays.

The edit is made on the lines of the file as they are (no YAML round trip, which would drop
comments, reorder keys and requote values): the ``tags:`` (or ``tag:``) entry is extended where it
stands — a block list gets new ``- item`` lines in its own indent, a flow list ``[a, b]`` new
items before its ``]``, a string ``a, b`` or ``a b`` new words in its own separator — a front
block without one gets a block list before its closing fence, and a note without a front block
gets one. New lines take the newline of the file (CRLF stays CRLF); a byte-order mark stays.

Then the result is read back with the note parser: its tags must be the old ones plus the new,
in order, and every other property must be unchanged. Anything else (a value form this module
does not handle, YAML that reads otherwise than the lines suggest) is refused with one line and
nothing is written. A front block that cannot be parsed is never rewritten.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path

from hybrid.core.errors import HybridError
from hybrid.core.files import fsync_dir

BOM = "\ufeff"
# the key of the tags entry: `tags:` or `tag:` at the start of a front-block line (any case)
KEY_RE = re.compile(r"^(tags?)[ \t]*:(?=[ \t]|\r?$)", re.I)
ITEM_RE = re.compile(r"^([ \t]*)-(?=[ \t]|\r?$)")
# a tag as a note may carry it: no whitespace, no ASCII punctuation but '-', '_' and '/'
VALID_TAG = re.compile(r"^[^\s!-,.:-@\[-^`{-~]+$")


class TagWriteError(HybridError):
    """A tag could not be written into a note (the message says why and what to do)."""


def content_hash(data: bytes) -> str:
    """The hash a suggestion remembers of the file it was made for."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def check_tag(tag: str) -> str:
    """``tag`` as stored (normalized: no '#', lower case, NFC), or TagWriteError when it could
    not be a tag: empty, whitespace or punctuation other than ``- _ /``, digits only."""
    from hybrid.sources.markdown import normalize_tag
    if not isinstance(tag, str):
        raise TagWriteError(f"a tag must be text, got {type(tag).__name__}")
    t = normalize_tag(tag)
    if not t or len(t) > 100 or not VALID_TAG.match(t) or "//" in t \
            or not any(not (c.isdigit() or c == "/") for c in t):
        raise TagWriteError(f"{tag[:60]!r} is not a tag: letters, digits, '-', '_' and '/' only "
                            f"(not digits alone), at most 100 characters")
    return t


def _scalar(tag: str) -> str:
    """``tag`` as a YAML scalar that reads back as that string (quoted only when it must be)."""
    import yaml
    try:
        plain = yaml.safe_load(tag) == tag
    except yaml.YAMLError:
        plain = False
    return tag if plain else "'" + tag.replace("'", "''") + "'"


def _eol(line: str) -> str:
    return "\r" if line.endswith("\r") else ""


def add_tags(text: str, tags: Sequence[str], where: str = "the note") -> str:
    """``text`` (a whole note, as decoded from UTF-8) with ``tags`` added to its front block;
    the tags it already carries (front block or inline) are not added again. TagWriteError when
    the front block cannot be parsed or the edit would not read back as intended."""
    from hybrid.sources.markdown import FRONT_UNREADABLE, front_block, parse_note
    bom = BOM if text.startswith(BOM) else ""
    body = text[len(bom):]
    before = parse_note("note.md", body)
    if FRONT_UNREADABLE in before.properties:
        why = before.properties[FRONT_UNREADABLE]
        raise TagWriteError(f"the front block of {where} cannot be parsed ({why}): fix it in an editor; "
                            f"nothing was written")
    new = [t for t in dict.fromkeys(check_tag(t) for t in tags) if t not in before.tags]
    if not new:
        return text
    lines = body.split("\n")  # each keeps its '\r' (a CRLF file stays CRLF)
    fm, _, _ = front_block([ln.rstrip("\r") for ln in lines])
    nl = "\r" if lines and lines[0].endswith("\r") else ""
    if fm is None:
        block = ["---" + nl, "tags:" + nl, *(f"  - {_scalar(t)}{nl}" for t in new), "---" + nl]
        out = block + lines
    else:
        out = _edit_block(lines, len(fm), new, where)
    result = bom + "\n".join(out)
    _check(before, result[len(bom):], new, where)
    return result


def _edit_block(lines: list[str], n_fm: int, new: list[str], where: str) -> list[str]:
    """The file's lines with ``new`` added to the tags entry of the front block (lines
    ``1..n_fm``; line 0 is the opening fence, line ``n_fm + 1`` the closing one)."""
    keys = [i for i in range(1, n_fm + 1) if KEY_RE.match(lines[i])]
    close = n_fm + 1
    nl = _eol(lines[close]) or _eol(lines[0])
    if not keys:
        return lines[:close] + ["tags:" + nl, *(f"  - {_scalar(t)}{nl}" for t in new)] + lines[close:]
    # the entry the parser reads: `tags` wins over `tag`, a later key over an earlier one
    tagged = [i for i in keys if KEY_RE.match(lines[i]).group(1).lower() == "tags"]  # type: ignore[union-attr]
    i = (tagged or keys)[-1]
    line = lines[i]
    eol = _eol(line)
    head = KEY_RE.match(line).group(0)  # type: ignore[union-attr]
    value = line[len(head):len(line) - len(eol)]
    stripped, comment = _split_comment(value)
    v = stripped.strip()

    def with_value(repl: str) -> list[str]:
        """The key's line with its value replaced by ``repl``, spacing and comment kept."""
        new_value = stripped.replace(v, repl, 1) if v else " " + repl
        return lines[:i] + [head + new_value + comment + eol] + lines[i + 1:]

    if v in ("", "~", "null"):  # an empty entry, or a block list under it
        run: list[int] = []
        for j in range(i + 1, close):  # the list's own lines: items, and their continuations
            if ITEM_RE.match(lines[j]) or (run and lines[j][:1] in (" ", "\t") and lines[j].strip()):
                run.append(j)
            else:
                break
        if not run:
            first = head + (" " + comment.lstrip() if comment else "") + eol
            return lines[:i] + [first, *(f"  - {_scalar(t)}{eol or nl}" for t in new)] + lines[i + 1:]
        last_item = max(j for j in run if ITEM_RE.match(lines[j]))
        ind = ITEM_RE.match(lines[last_item]).group(1)  # type: ignore[union-attr]
        item_eol = _eol(lines[run[-1]]) or nl
        at = run[-1] + 1
        return lines[:at] + [f"{ind}- {_scalar(t)}{item_eol}" for t in new] + lines[at:]
    if v.startswith("[") and v.endswith("]") and "[" not in v[1:-1] and "]" not in v[1:-1]:
        inner = v[1:-1].strip()
        items = ", ".join(_scalar(t) for t in new)
        return with_value(f"[{inner}, {items}]" if inner else f"[{items}]")
    if v[0] in "'\"":
        q = v[0]
        if not (len(v) > 1 and v.endswith(q)) or q in v[1:-1]:
            raise TagWriteError(f"the tags of {where} are a quoted value this edit does not handle: "
                                f"add the tags by hand")
        inner = v[1:-1]
        sep = ", " if "," in inner else " "
        return with_value(q + inner + (sep if inner.strip() else "") + sep.join(new) + q)
    if v[0] in "[|>{&*!%@`":
        raise TagWriteError(f"the tags of {where} are written in a YAML form this edit does not handle "
                            f"({v[:20]!r}): add the tags by hand")
    sep = ", " if "," in v else " "
    return with_value(v + sep + sep.join(new))


def _split_comment(value: str) -> tuple[str, str]:
    """(the value, a trailing ``# comment`` with its ``#``) of one YAML line's value part: a
    ``#`` starts a comment after whitespace, outside quotes."""
    quote = ""
    for k, c in enumerate(value):
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"" and (k == 0 or value[k - 1] in " \t[,"):
            quote = c
        elif c == "#" and (k == 0 or value[k - 1] in " \t"):
            return value[:k], value[k:]
    return value, ""


def _check(before, text: str, new: list[str], where: str) -> None:
    """The edited note must read as the old one plus ``new`` tags, every other property alike."""
    from hybrid.sources.markdown import parse_note
    after = parse_note("note.md", text)
    want = list(dict.fromkeys([*before.tags, *new]))
    lower_b = {str(k).lower(): v for k, v in before.properties.items()}
    lower_a = {str(k).lower(): v for k, v in after.properties.items()}
    for key in ("tags", "tag"):
        lower_b.pop(key, None)
        lower_a.pop(key, None)
    if sorted(after.tags) != sorted(want) or lower_a != lower_b or after.warnings:
        raise TagWriteError(f"adding tags to {where} would not read back as intended (its front block's "
                            f"tags are in a form this edit does not handle): add them by hand; nothing "
                            f"was written")


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data``: written to a temporary file beside it, fsynced, renamed over
    it (a reader sees the old file or the new one, never half of one); its mode is kept."""
    tmp = path.with_name(f".{path.name}.hybrid-tags.tmp")
    tmp.unlink(missing_ok=True)  # ours, left by a write that was cut short
    try:
        mode = os.stat(path).st_mode & 0o7777
    except OSError:
        mode = 0o644
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
