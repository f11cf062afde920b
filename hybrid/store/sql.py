"""SQL that both SQL backends share (SQLite's catalog, PostgreSQL's): escaping a LIKE pattern, the
condition that a path is a document of some kinds, and that a note passes property filters. No
SQL is written above the store: the layers above ask the catalog's named queries
(:class:`hybrid.store.port.Catalog`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hybrid.sources import KIND_SUFFIXES
from hybrid.store.props import HAS, PropFilter


def like_escape(text: str) -> str:
    """``text`` as a LIKE pattern matching itself (``ESCAPE '\\'``, PostgreSQL's default)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def kind_condition(kinds: tuple[str, ...] | list[str], column: str = "f.path",
                   placeholder: str = "?") -> tuple[str, list[str]]:
    """A SQL condition (SQLite or PostgreSQL) that ``column``, a vault-relative path, is a
    document of one of ``kinds``, and its arguments. Markdown is also whatever no other kind
    claims (``kind_of``), so ``note`` is "none of the others"."""
    others = [s for k, sufs in KIND_SUFFIXES.items() if k != "note" for s in sufs]
    parts: list[str] = []
    args: list[str] = []
    for kind in kinds:
        if kind == "note":
            parts.append("(" + " AND ".join(f"lower({column}) NOT LIKE {placeholder}"
                                            for _ in others) + ")")
            args.extend("%" + s for s in others)
        else:
            for suffix in KIND_SUFFIXES[kind]:
                parts.append(f"lower({column}) LIKE {placeholder}")
                args.append("%" + suffix)
    return "(" + " OR ".join(parts or ["1=0"]) + ")", args


def mention_condition(keys: Sequence[str], tags: Sequence[str], placeholder: str,
                      like: str) -> tuple[str, list[str]]:
    """A condition over ``files f`` (``f.properties``, ``f.tags``: JSON text) that holds for
    every file whose frontmatter has one of ``keys`` as a key or whose tags include one of
    ``tags`` (a superset: the caller judges each row). ``like``: the operator (``ILIKE`` where
    LIKE is case-sensitive). Tags are stored as JSON with non-ASCII characters escaped, so a
    tag that is not ASCII matches every file with a non-ASCII tag (few). An empty string for
    nothing to look for."""
    escape = " ESCAPE '\\'"  # SQLite has no default escape character; PostgreSQL's is the same
    where = [f"f.properties {like} {placeholder}{escape}" for _ in keys]
    args = ['%"' + like_escape(k) + '"%' for k in keys]
    for t in tags:
        if t.isascii():
            where.append(f"f.tags {like} {placeholder}{escape}")
            args.append('%"' + like_escape(t) + "%")
    if not all(t.isascii() for t in tags):
        where.append(f"f.tags LIKE {placeholder}{escape}")
        args.append("%\\\\u%")
    return " OR ".join(where), args


def prop_condition(pf: PropFilter, id_column: str, table: str, placeholder: str) -> tuple[str, list[Any]]:
    """A SQL condition (SQLite or PostgreSQL) that the note ``id_column`` (its file id) has a row
    in ``table`` (``file_id, key, val, num, day``) passing ``pf``, and its arguments."""
    p = placeholder
    if pf.op == HAS:
        return f"{id_column} IN (SELECT file_id FROM {table} WHERE key = {p})", [pf.key]
    if pf.op == ":":
        tests, args = [f"val = {p}"], [pf.text]  # type: list[str], list[Any]
        if pf.number is not None:
            tests.append(f"num = {p}")
            args.append(pf.number)
        if pf.day is not None:
            tests.append(f"day = {p}")
            args.append(pf.day)
        test = "(" + " OR ".join(tests) + ")"
    elif pf.number is not None:
        test, args = f"num {pf.op} {p}", [pf.number]
    else:
        test, args = f"day {pf.op} {p}", [pf.day]
    return (f"{id_column} IN (SELECT file_id FROM {table} WHERE key = {p} AND {test})", [pf.key, *args])


def props_condition(props: Sequence[PropFilter], id_column: str, table: str,
                    placeholder: str) -> tuple[list[str], list[Any]]:
    """WHERE terms for every filter of ``props`` (all must hold)."""
    where: list[str] = []
    args: list[Any] = []
    for pf in props:
        cond, more = prop_condition(pf, id_column, table, placeholder)
        where.append(cond)
        args.extend(more)
    return where, args
