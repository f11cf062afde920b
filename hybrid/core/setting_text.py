"""Settings as people type and read them (`hybrid config`): a value given as text read by its
setting's type, a value shown as TOML, an unknown name answered with the nearest, and what a
change asks of the indexes (the table's ``reindex``). The rules a value obeys stay in
:mod:`hybrid.core.settings`: text that cannot be read as the type is passed on as it is, so the
table's own check refuses it, with the table's own message."""

from __future__ import annotations

import difflib
import json
import math
import re
import tomllib
from collections.abc import Sequence
from dataclasses import Field, fields
from typing import Any

from hybrid.core.errors import ConfigError
from hybrid.core.settings import NAMES, REINDEX, Settings

FIELDS: dict[str, Field] = {f.name: f for f in fields(Settings)}
TRUE = ("true", "yes", "on", "1")
FALSE = ("false", "no", "off", "0")
_INT_RE = re.compile(r"[+-]?\d(_?\d)*")


def kind(name: str) -> str:
    """``bool``, ``int``, ``float``, ``list`` or ``str``: how setting ``name`` is typed."""
    annotation = str(FIELDS[name].type)
    return "list" if annotation.startswith("tuple") else annotation


def check_name(name: str, extra: Sequence[str] = ()) -> str:
    """``name`` if it is a setting, else ConfigError suggesting the nearest one."""
    if name in NAMES:
        return name
    if name in ("path", "kind"):
        raise ConfigError(f"{name!r} is a vault's, not a setting: `hybrid vault list` shows it"
                          + (", `hybrid vault move NAME PATH` changes it" if name == "path" else ""))
    close = difflib.get_close_matches(name, [*NAMES, *extra], n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}?" if close else "`hybrid config list` shows them all"
    raise ConfigError(f"unknown setting {name!r} ({hint})")


def parse(name: str, text: str) -> Any:
    """``text`` (from the command line) as a value of setting ``name``: true/false/yes/no/on/off
    for a switch, a number for a number, a TOML or JSON array or comma-separated words for a
    list (empty text: the empty list), the text itself for a string. Text that is none of
    these is returned unchanged, for the settings table to refuse with its rule."""
    k, word = kind(name), text.strip()
    if k == "bool":
        low = word.lower()
        return True if low in TRUE else False if low in FALSE else text
    if k in ("int", "float"):
        if _INT_RE.fullmatch(word):
            return int(word.replace("_", ""))
        try:
            number = float(word.replace("_", ""))
        except ValueError:
            return text
        return number if math.isfinite(number) else text
    if k == "list":
        if word.startswith("["):
            try:
                return tomllib.loads(f"v = {word}")["v"]
            except tomllib.TOMLDecodeError:
                try:
                    return json.loads(word)
                except ValueError:
                    raise ConfigError(f"setting {name!r}: {word!r} is not a TOML or JSON array; write "
                                      f"one like '[\"a/**\", \"b/**\"]', or words separated by "
                                      f"commas: 'a/**, b/**'") from None
        return [part.strip() for part in word.split(",") if part.strip()]
    return text


def show(value: Any) -> str:
    """``value`` as TOML writes it: ``true``, ``10``, ``"text"``, ``["a", "b"]``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(show(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def summary(name: str) -> str:
    """The first sentence of setting ``name``'s help (completion menus show it)."""
    text = FIELDS[name].metadata["help"]
    return re.split(r"(?<=[.:;])\s", text, maxsplit=1)[0].rstrip(".:;")


def choices(name: str) -> tuple[str, ...]:
    """The values setting ``name`` may take, where the table lists them (a switch: true, false)."""
    if kind(name) == "bool":
        return ("true", "false")
    return tuple(FIELDS[name].metadata["choices"])


def reindex_note(name: str, vaults: Sequence[str], every: bool) -> str | None:
    """What changing setting ``name`` asks of the indexes of ``vaults`` (``every``: they are
    all the registered ones), or None when it asks nothing."""
    code = FIELDS[name].metadata["reindex"]
    if not code:
        return None
    if "{scope}" in REINDEX[code] and not vaults:
        return None  # no vault indexed with it
    scope = ("every vault" if every and len(vaults) > 1 else
             f"vault {vaults[0]}" if len(vaults) == 1 else "vaults " + ", ".join(vaults))
    option = "" if every else "".join(f" --vault {v}" for v in vaults)
    return REINDEX[code].format(scope=scope, vault=option)
