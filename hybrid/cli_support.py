"""What every ``hybrid`` command shares: one-line errors, stderr logging, the handle, JSON
output and the progress bar."""

from __future__ import annotations

import json
import logging
import sys
from contextlib import contextmanager
from typing import Any

import click

from .errors import HybridError


class StderrFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"


def setup_logging(verbose: int) -> None:
    logger = logging.getLogger("hybrid")
    if not any(getattr(h, "_hybrid_cli", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(StderrFormatter())
        handler._hybrid_cli = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.setLevel(logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG)
    logger.propagate = False


class Group(click.Group):
    """Turns domain errors into one line on stderr instead of a traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except HybridError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(1)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)


def open_handle(ctx: click.Context):
    import hybrid
    if "hybrid" not in ctx.obj:
        ctx.obj["hybrid"] = hybrid.open()
    return ctx.obj["hybrid"]


def print_json(data) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


@contextmanager
def progress_bar(enabled: bool):
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
        tasks: dict[str, Any] = {}

        def update(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        yield update


SLOW_QUERY_S = 2.0  # an in-process query slower than this loaded a model


def slow_query_hint(h, seconds: float) -> None:
    """Say once (per data dir) how to make a cold query fast, after one that loaded the model."""
    if seconds < SLOW_QUERY_S:
        return
    marker = h.config.data / "hints" / "slow-query"
    if marker.exists():
        return
    click.echo(f"hint: this query took {seconds:.1f} s because the model had to load; keep it warm with "
               f"`hybrid serve --http --watch` (or `hybrid service install`) and `hybrid query` answers "
               f"through it in about 0.2 s", err=True)
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass


def server_state(h) -> str:
    """"server running at URL (pid N)" from the address file a running `hybrid serve --http`
    keeps in the data dir (checked to be alive), else "no server running"."""
    import os
    try:
        info = json.loads((h.config.data / "server.json").read_text(encoding="utf-8"))
        pid, url = int(info["pid"]), str(info["url"])
        os.kill(pid, 0)  # raises when no such process
    except (OSError, ValueError, KeyError, TypeError):
        return "no server running (`hybrid serve --http --watch` keeps models warm)"
    return f"server running at {url} (pid {pid})"
