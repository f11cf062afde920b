"""What an agent may learn about a frontmatter property's value: one rule, judged with its key.

A value alone often says nothing (``CorrectHorse42`` is a word, ``12345678`` a number); beside
its key it is a password (``wifi_password: CorrectHorse42``, ``passcode: 12345678``). So a value
is judged with its key:

- under a key naming a credential (:func:`hybrid.store.agent.redact_rules.column_kind`, the
  words that head a table's password or token column: ``wifi_password``, ``db_pass``, ``pin``,
  ``Passwort``, ``пароль``, ``api_key``) every value is a secret, whatever it is: a passphrase
  of common words, ``yes``, a number YAML reads in another base (``pin: 0420`` is 272 to the
  parser), ``12:34``; a property is a field, not prose, so nothing there is "see the vault";
- under any key, a value the redactor finds in the line ``key: value`` (a token).

:func:`hides_value` is that judgement, and everything an agent is told of a value follows it:
the front block ``get_note`` shows (:func:`front_spans`, part of every redaction), which values
a property filter matches, the values and ranges a filter that matches nothing suggests
(:mod:`hybrid.retrieval.properties`), the properties of the rows it is served, and what the
audit log records of its filters. A value shown redacted is therefore never matched, suggested,
ranged or written in clear, so no filter can confirm a guess of it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from hybrid.store.agent.redact_rules import REDACTED, column_kind

_KEY_LINE = re.compile(r"^(?P<indent>[ \t]*)(?:-[ \t]+)?(?P<key>[^\s:#\-\[{][^:]*?|\"[^\"]+\"|'[^']+')[ \t]*:"
                       r"(?:[ \t]+(?P<value>.*?))?[ \t]*$")
_ITEM_LINE = re.compile(r"^(?P<indent>[ \t]*)-[ \t]+(?P<value>.*?)[ \t]*$")
_QUOTES = "\"'"
RESERVED = "hybrid:"  # hybrid's own keys (hybrid.store.props.RESERVED): no value of the owner's
_PIN_KEY = re.compile(r"(?i)(?:[\w-]+[ _-]){0,2}(?:pin|pins|pin[ _-]?code|pincode|pin[ _-]?nummer|geheimzahl)")
_MARK = REDACTED.strip("[]")  # the mark as YAML reads it back unquoted: a list of that one item
# the forms of YAML the line pass does not read: a complex key, a quoted key with an escape, a
# flow mapping; a block without any is not parsed again when the lines show no credential
_UNUSUAL = re.compile(r'^[ \t]*\?|^[ \t]*(?:-[ \t]+)?"[^"\n]*\\|\{', re.M)


def hides_value(redactor: Any, key: str, value: str) -> bool:
    """Whether an agent is shown ``value`` of property ``key`` redacted (see the module's doc)."""
    return hidden_pairs(redactor, [(key, value)])[0]


def hidden_pairs(redactor: Any, pairs: Sequence[tuple[str, str]]) -> list[bool]:
    """:func:`hides_value` of each ``(key, value)`` of ``pairs`` (a note's properties), with one
    scan of their lines ``key: value`` (a line apart each: the redactor's rules stop at a line's
    end), not one a value: what a search's first look at a note's rows costs."""
    keys = [str(k) for k, _ in pairs]
    values = [" ".join(str(v).split()) for _, v in pairs]  # one line each
    out = [bool(v) and _credential(k) for k, v in zip(keys, values)]
    todo = [i for i, v in enumerate(values) if v and not out[i]]
    if not todo:
        return out
    lines = [f"{keys[i]}: {values[i]}" for i in todo]
    spans = redactor.spans("\n\n".join(lines))
    start = 0
    for i, line in zip(todo, lines):
        end = start + len(line)
        out[i] = any(s < end and e > start for s, e in spans)
        start = end + 2
    return out


def front_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the values in the front block that opens ``text`` which the key rule
    hides (a scan of the text finds the rest): under a key naming a credential, a scalar with
    the lines it continues on, each item of a list (inline ``[a, b]`` or one ``- item`` a line),
    the lines of a block scalar, a flow mapping holding such a key, whatever the value's type.
    What the spans leave is checked with the YAML parser the indexer reads the block with: when
    a value under such a key survives (a form of YAML the lines do not show: a ``? key``, an
    escaped key), every value of the block is hidden."""
    if not text.startswith("---"):
        return []
    first = text.find("\n")
    if first < 0 or text[:first].strip() != "---":
        return []
    body_start = first + 1
    close = _closing(text, body_start)
    if close is None:
        return []
    spans = _line_spans(text, body_start, close)
    if spans and not _leaves_no_secret(text[body_start:close], spans, body_start):
        return _every_value(text, body_start, close)
    if not spans and _UNUSUAL.search(text, body_start, close) and _holds_credential(text[body_start:close]):
        return _every_value(text, body_start, close)
    return spans


def _closing(text: str, pos: int) -> int | None:
    """Where the front block's closing ``---`` (or ``...``) line starts, or None."""
    while pos < len(text):
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        if text[pos:end].strip() in ("---", "..."):
            return pos
        pos = end + 1
    return None


def _line_spans(text: str, pos: int, close: int) -> list[tuple[int, int]]:
    """The spans the lines of the block show under keys naming a credential."""
    spans: list[tuple[int, int]] = []
    key_at: list[tuple[int, str]] = []  # (indent, key) of the keys whose values may follow
    block: tuple[int, str] | None = None   # a block scalar (``key: |``) or a scalar that goes on
    while pos < close:
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        line = text[pos:end]
        indent = len(line) - len(line.lstrip(" \t"))
        if block is not None:
            if line.strip() and indent <= block[0]:
                block = None
            elif line.strip():
                if _credential(block[1]):
                    spans.append((pos + indent, end - (len(line) - len(line.rstrip()))))
                pos = end + 1
                continue
        m = _KEY_LINE.match(line)
        item = _ITEM_LINE.match(line) if m is None else None
        if m is not None:
            key = _key_text(m["key"])
            while key_at and key_at[-1][0] >= indent:
                key_at.pop()
            key_at.append((indent, key))
            value = m["value"] or ""
            if value and not value.startswith("#"):
                if value[0] in "|>" and value.strip("|>+-0123456789") == "" or not value.startswith(("[", "{")):
                    block = (indent, key)  # a block scalar's lines, or a plain scalar's next ones
                if value[0] not in "|>" or value.strip("|>+-0123456789") != "":
                    spans += _judged(key, pos + m.start("value"), value)
        elif item is not None and key_at:
            spans += _judged(key_at[-1][1], pos + item.start("value"), item["value"])
            block = (indent, key_at[-1][1])
        pos = end + 1
    return spans


def _judged(key: str, at: int, value: str) -> list[tuple[int, int]]:
    """The span of ``value`` (at offset ``at`` of the text) when its key names a credential (a
    quoted value without its quotes), or when it is a flow mapping holding such a key."""
    if key.startswith(RESERVED) or REDACTED in value:  # redacted already (redaction is idempotent)
        return []
    if value.startswith("{") and any(_credential(_key_text(k.split(":", 1)[0]))
                                     for k in value[1:].rstrip("}").split(",") if ":" in k):
        return [(at + 1, at + len(value.rstrip("}")))]
    if not _credential(key):
        return []
    inner = _unquoted(value)
    if value.startswith("[") and value.endswith("]"):
        inner = value[1:-1]
    if not inner.strip():
        return []
    start = at + value.find(inner)
    return [(start, start + len(inner))]


def _credential(key: str) -> bool:
    """Whether property ``key`` names a credential: a password or token word as a table column's
    header would (:func:`column_kind`), or a PIN (``pin``, ``alarm_pin``, ``PIN-Code``: a key,
    unlike a table's "Pin" column of a wiring diagram)."""
    key = key.strip()
    if key.startswith(RESERVED) or len(key) > 60:
        return False
    return column_kind(key) is not None or _PIN_KEY.fullmatch(key) is not None


def _key_text(key: str) -> str:
    """A key as YAML reads it: a quoted one unquoted, its escapes resolved (``"p\\x61ss"``)."""
    key = key.strip()
    if len(key) >= 2 and key[0] == key[-1] == '"' and "\\" in key:
        import yaml
        try:
            return str(yaml.safe_load(key))
        except yaml.YAMLError:
            return key[1:-1]
    return key.strip("'\"")


def _leaves_no_secret(block: str, spans: list[tuple[int, int]], offset: int) -> bool:
    """Whether the block with ``spans`` redacted, read by the indexer's YAML parser, holds no
    value under a key naming a credential but the redaction mark (True too when the block is
    not YAML the parser reads: its note is then hidden from agents as a whole)."""
    from hybrid.sources.markdown import FrontmatterRefused, load_frontmatter
    shown, last = [], 0
    for s, e in sorted(spans):
        shown += [block[last:s - offset], REDACTED]
        last = e - offset
    shown.append(block[last:])
    try:
        parsed = load_frontmatter("".join(shown))
    except (FrontmatterRefused, ValueError, RecursionError, Exception):  # noqa: BLE001 - any failure: unreadable
        return True
    return not _secrets_under_credentials(parsed, False)


def _holds_credential(block: str) -> bool:
    """Whether the block, read by the indexer's YAML parser, has a non-empty value under a key
    naming a credential (that its lines did not show: a ``? key``, an escaped key)."""
    from hybrid.sources.markdown import load_frontmatter
    try:
        parsed = load_frontmatter(block)
    except Exception:  # noqa: BLE001 - not YAML: unreadable, its note hidden from agents as a whole
        return False
    return _secrets_under_credentials(parsed, False)


def _secrets_under_credentials(value: Any, under: bool) -> bool:
    """Whether ``value`` holds a scalar under a key naming a credential that is not empty and
    does not hold the redaction mark."""
    stack = [(value, under)]
    while stack:
        item, cred = stack.pop()
        if isinstance(item, dict):
            stack += [(v, cred or _credential(str(k))) for k, v in item.items()]
        elif isinstance(item, list):
            stack += [(v, cred) for v in item]
        elif cred and item is not None and str(item).strip() and _MARK not in str(item):
            return True
    return False


def _every_value(text: str, pos: int, close: int) -> list[tuple[int, int]]:
    """Every value of the block: after each key's colon, each item's dash, and any other line
    whole (what a YAML form the lines do not show may hold)."""
    spans = []
    while pos < close:
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        line = text[pos:end]
        m = _KEY_LINE.match(line)
        item = _ITEM_LINE.match(line) if m is None else None
        if m is not None and m["value"]:
            spans.append((pos + m.start("value"), pos + m.end("value")))
        elif item is not None and item["value"]:
            spans.append((pos + item.start("value"), pos + item.end("value")))
        elif m is None and line.strip():
            spans.append((pos + len(line) - len(line.lstrip()), pos + len(line.rstrip())))
        pos = end + 1
    return spans


def _unquoted(value: str) -> str:
    v = value.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in _QUOTES:
        return v[1:-1]
    return v


def shown_properties(props: str, redactor: Any) -> str:
    """A note's frontmatter (JSON, as rows carry it) as an agent is shown it: each value that
    :func:`hides_value` hides replaced by the redaction mark (a list's items one by one; a
    nested mapping's values under their own keys). The same text when nothing is hidden."""
    try:
        value = json.loads(props)
    except ValueError:
        return "{}"
    if not isinstance(value, dict):
        return "{}"
    pairs = [pair for k, v in value.items() if not str(k).startswith(RESERVED) for pair in _scalars(str(k), v)]
    hidden = {pair for pair, h in zip(pairs, hidden_pairs(redactor, [(k, str(v)) for k, v in pairs])) if h}
    if not hidden:
        return props

    def shown(key: str, v: Any) -> Any:
        if isinstance(v, dict):
            return {k: shown(str(k), x) for k, x in v.items()}
        if isinstance(v, list):
            return [shown(key, x) for x in v]
        return REDACTED if (key, v) in hidden else v
    return json.dumps({k: v if str(k).startswith(RESERVED) else shown(str(k), v) for k, v in value.items()})


def _scalars(key: str, value: Any) -> list[tuple[str, Any]]:
    """The ``(key, value)`` of every scalar of a frontmatter value (a list's items under its key,
    a nested mapping's under their own), booleans and nothing left out (no secret)."""
    if isinstance(value, dict):
        return [pair for k, v in value.items() for pair in _scalars(str(k), v)]
    if isinstance(value, list):
        return [pair for v in value for pair in _scalars(key, v)]
    if value is None or isinstance(value, bool):
        return []
    return [(key, value)]
