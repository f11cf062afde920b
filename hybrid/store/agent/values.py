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
from collections.abc import Sequence
from typing import Any

from hybrid.store.agent.redact_rules import REDACTED, cell_is_secret, column_kind

_KEY_LINE = re.compile(r"^(?P<indent>[ \t]*)(?:-[ \t]+)?(?P<key>[^\s:#\-\[{][^:]*?|\"[^\"]+\"|'[^']+')[ \t]*:"
                       r"(?:[ \t]+(?P<value>.*?))?[ \t]*$")
_ITEM_LINE = re.compile(r"^(?P<indent>[ \t]*)-[ \t]+(?P<value>.*?)[ \t]*$")
_QUOTES = "\"'"
RESERVED = "hybrid:"  # hybrid's own keys (hybrid.store.props.RESERVED): no value of the owner's


def hides_value(redactor: Any, key: str, value: str) -> bool:
    """Whether an agent is shown ``value`` of property ``key`` redacted (see the module's doc)."""
    return hidden_pairs(redactor, [(key, value)])[0]


def hidden_pairs(redactor: Any, pairs: Sequence[tuple[str, str]]) -> list[bool]:
    """:func:`hides_value` of each ``(key, value)`` of ``pairs`` (a note's properties), with one
    scan of their lines ``key: value`` (a line apart each: the redactor's rules stop at a line's
    end), not one a value: what a search's first look at a note's rows costs."""
    keys = [str(k) for k, _ in pairs]
    values = [" ".join(str(v).split()) for _, v in pairs]  # one line each
    out = [bool(v) and (kind := column_kind(k)) is not None and cell_is_secret(_unquoted(v), kind)
           for k, v in zip(keys, values)]
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
