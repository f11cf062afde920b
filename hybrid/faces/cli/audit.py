"""``hybrid audit``: show the agent calls recorded in the audit log (see hybrid.app.audit)."""

from __future__ import annotations

import datetime as dt
import json
from collections import deque
from typing import Any

import click

from hybrid.app.audit import AuditLog, parse_since, record_epoch
from hybrid.faces.cli.support import open_handle, print_json, terminal_text

#: Citations shown per call in the human output (the rest is "…").
SHOWN_CITATIONS = 3
#: Characters shown per argument value in the human output.
ARG_CHARS = 80


@click.command("audit")
@click.option("--since", help="Only calls since YYYY-MM-DD[THH:MM] (local time) or an age: 30min, 12h, "
                              "7d, 2w, 6m (months), 1y.")
@click.option("--tool", help="Only calls of this tool (search, get_note, list_vaults, propose_note, "
                             "api/search).")
@click.option("--client", help="Only calls from clients whose name contains this (case-insensitive).")
@click.option("--limit", type=click.IntRange(min=0), default=100, show_default=True,
              help="Show the last N matching calls (0 = all).")
@click.option("--json", "as_json", is_flag=True, help="Print the records as a JSON list.")
@click.pass_context
def audit_cmd(ctx, since, tool, client, limit, as_json):
    """Show what agents asked and were given, oldest first (times in local time).

    Every MCP tool call and every agent call of the HTTP API is recorded in audit.jsonl in the
    data dir while the audit_log setting is on.
    """
    ctx.ensure_object(dict)
    h = open_handle(ctx)
    since_ts = parse_since(since) if since else None
    log = AuditLog.from_settings(h.config.data, h.settings)
    if not log.enabled:
        click.echo(f"audit logging is off (audit_log = false in {h.config.path}): agent calls are "
                   f"not being recorded", err=True)
    if not log.exists():
        click.echo(f"no agent calls recorded yet ({log.path} does not exist)", err=True)
        if as_json:
            print_json([])
        return
    shown: deque[dict] = deque(maxlen=limit or None)  # the last N matching
    total = 0
    for record in log.records(since=since_ts, tool=tool, client=client):
        total += 1
        shown.append(record)
    if as_json:
        print_json(list(shown))
    else:
        for record in shown:
            click.echo(format_record(record))
    click.echo(_summary(len(shown), total, since_ts, tool, client, log.skipped), err=True)


def format_record(record: dict) -> str:
    """One line: local time, client, tool, what was asked, what came back (or the error), time taken."""
    when = record_epoch(record)
    stamp = (dt.datetime.fromtimestamp(when).strftime("%Y-%m-%d %H:%M:%S") if when is not None
             else _clean(str(record.get("time", "?"))))
    parts = [stamp, _clean(str(record.get("client") or "?")), _clean(str(record.get("tool") or "?"))]
    asked = _asked(record.get("tool"), record.get("args"))
    outcome = _outcome(record)
    parts.append(f"{asked} → {outcome}" if asked else f"→ {outcome}")
    ms = record.get("ms")
    if isinstance(ms, int | float) and not isinstance(ms, bool):
        parts.append(f"({ms:.0f} ms)" if ms >= 10 else f"({ms:.1f} ms)")
    line = "  ".join(parts)
    return line + ("  [truncated]" if record.get("truncated") else "")


def _asked(tool: Any, args: Any) -> str:
    """The call's arguments in a few words: a search's query in quotes, a note's path, then any
    other argument given as key=value."""
    if not isinstance(args, dict):
        return "" if args in (None, {}) else _short(args)
    rest = {k: v for k, v in args.items() if v not in (None, "", [], {}, ())}
    head = ""
    if "query" in rest:
        head = '"' + _short(rest.pop("query"), quote=False) + '"'
    elif tool in ("get_note", "propose_note") and "path" in rest:
        vault = rest.pop("vault", None)
        head = _short(f"{vault}:{rest.pop('path')}" if vault else rest.pop("path"), quote=False)
    extra = " ".join(f"{_clean(str(k))}={_short(v)}" for k, v in rest.items()
                     if not (tool == "propose_note" and k in ("text", "content", "body")))
    return " ".join(p for p in (head, extra) if p)


def _outcome(record: dict) -> str:
    error = record.get("error")
    if error:
        return "ERROR: " + _clean(str(error))
    returned = record.get("returned")
    cites = [_clean(str(c)) for c in returned] if isinstance(returned, list) else []
    count = record.get("count")
    if not isinstance(count, int) or isinstance(count, bool):
        count = len(cites)
    if not cites:
        return str(count)
    more = ", …" if len(cites) > SHOWN_CITATIONS or count > len(cites) else ""
    return f"{count}: " + ", ".join(cites[:SHOWN_CITATIONS]) + more


def _short(value: Any, quote: bool = True) -> str:
    """A value on one line, at most ARG_CHARS characters (strings unquoted when ``quote`` is False)."""
    if isinstance(value, str) and not quote:
        text = value
    elif isinstance(value, str) and value and not any(c.isspace() or c in "\"'" for c in value):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False, default=str)
    text = _clean(text)
    return text if len(text) <= ARG_CHARS else text[:ARG_CHARS - 1] + "…"


def _clean(text: str) -> str:
    """Text safe to print on one terminal line: line breaks, escape sequences and other control
    or format characters (bidi overrides) an agent put in its arguments shown escaped."""
    return terminal_text(text, one_line=True)


def _summary(shown: int, total: int, since: float | None, tool: str | None, client: str | None,
             skipped: int) -> str:
    filters = []
    if since is not None:
        filters.append("since " + dt.datetime.fromtimestamp(since).strftime("%Y-%m-%d %H:%M"))
    if tool:
        filters.append(f"tool {tool}")
    if client:
        filters.append(f"client ~ {client!r}")
    text = f"{shown} call{'' if shown == 1 else 's'} shown (of {total}{' ' if filters else ''}{', '.join(filters)})"
    if skipped:
        text += f"; {skipped} unreadable line{'' if skipped == 1 else 's'} skipped"
    return text
