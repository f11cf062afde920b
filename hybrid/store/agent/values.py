"""What an agent may learn about a frontmatter property's value: one rule, judged with its key.

A value alone often says nothing (``CorrectHorse42`` is a word, ``12345678`` a number); beside
its key it is a password (``wifi_password: CorrectHorse42``, ``passcode: 12345678``). So a value
is judged as the pair ``key: value``:

- the redactor's scan of the line ``key: value`` (a token of any key, ``api_key: <random>``, a
  password in the syntaxes notes use), and
- the rule of a table column (:func:`hybrid.store.agent.redact_rules.column_kind`): under a
  password word (``wifi_password``, ``db_pass``, ``Passwort``, ``пароль``) any value but a
  stand-in (``changeme``, "see 1Password") is a secret, digits included; under a secret or token
  word (``api_key``) a random-looking one.

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
from typing import Any

from hybrid.store.agent.redact_rules import REDACTED, cell_is_secret, column_kind

_KEY_LINE = re.compile(r"^(?P<indent>[ \t]*)(?:-[ \t]+)?(?P<key>[^\s:#\-\[{][^:]*?|\"[^\"]+\"|'[^']+')[ \t]*:"
                       r"(?:[ \t]+(?P<value>.*?))?[ \t]*$")
_ITEM_LINE = re.compile(r"^(?P<indent>[ \t]*)-[ \t]+(?P<value>.*?)[ \t]*$")
_QUOTES = "\"'"
RESERVED = "hybrid:"  # hybrid's own keys (hybrid.store.props.RESERVED): no value of the owner's


def hides_value(redactor: Any, key: str, value: str) -> bool:
    """Whether an agent is shown ``value`` of property ``key`` redacted (see the module's doc)."""
    value = str(value).strip()
    if not value:
        return False
    kind = column_kind(str(key))
    if kind is not None and cell_is_secret(_unquoted(value), kind):
        return True
    line = f"{key}: {value}"
    return redactor.redact(line) != line


def front_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the values in the front block that opens ``text`` which the column
    rule hides (a scan of the text finds the rest): a scalar, each item of a list (inline
    ``[a, b]`` or one ``- item`` a line) and the lines of a block scalar, judged with the key
    they stand under (a nested mapping's own key inside it)."""
    if not text.startswith("---"):
        return []
    first = text.find("\n")
    if first < 0 or text[:first].strip() != "---":
        return []
    spans: list[tuple[int, int]] = []
    pos = first + 1
    key_at: list[tuple[int, str]] = []  # (indent, key) of the keys whose values may follow
    block: tuple[int, str] | None = None   # a block scalar (``key: |``): (its key's indent, key)
    while pos < len(text):
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        line = text[pos:end]
        if line.strip() in ("---", "..."):
            break
        indent = len(line) - len(line.lstrip(" \t"))
        if block is not None:
            if line.strip() and indent <= block[0]:
                block = None
            elif line.strip():
                spans += _judged(block[1], line, pos + indent, line.strip())
                pos = end + 1
                continue
        m = _KEY_LINE.match(line)
        item = _ITEM_LINE.match(line) if m is None else None
        if m is not None:
            key = m["key"].strip(_QUOTES)
            while key_at and key_at[-1][0] >= indent:
                key_at.pop()
            key_at.append((indent, key))
            value = m["value"] or ""
            if value[:1] in "|>" and value.strip("|>+-0123456789") == "":
                block = (indent, key)
            elif value and not value.startswith("#"):
                spans += _judged(key, line, pos + m.start("value"), value)
        elif item is not None and key_at:
            spans += _judged(key_at[-1][1], line, pos + item.start("value"), item["value"])
        pos = end + 1
    return spans


def _judged(key: str, line: str, at: int, value: str) -> list[tuple[int, int]]:
    """The span of ``value`` (at offset ``at`` of the text) when the column rule hides it under
    ``key``: an inline list whole when one of its items is hidden, a quoted value without its
    quotes."""
    if key.startswith(RESERVED):
        return []
    kind = column_kind(key)
    if kind is None:
        return []
    if value.startswith("[") and value.endswith("]"):
        items = [x.strip().strip(_QUOTES) for x in value[1:-1].split(",")]
        return [(at + 1, at + len(value) - 1)] if any(x and cell_is_secret(x, kind) for x in items) else []
    inner = _unquoted(value)
    if not inner or not cell_is_secret(inner, kind):
        return []
    start = at + value.find(inner)
    return [(start, start + len(inner))]


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
    changed = False

    def shown(key: str, v: Any) -> Any:
        nonlocal changed
        if isinstance(v, dict):
            return {k: shown(str(k), x) for k, x in v.items()}
        if isinstance(v, list):
            return [shown(key, x) for x in v]
        if v is None or isinstance(v, bool):
            return v
        if hides_value(redactor, key, str(v)):
            changed = True
            return REDACTED
        return v
    out = {k: v if str(k).startswith(RESERVED) else shown(str(k), v) for k, v in value.items()}
    return json.dumps(out) if changed else props
