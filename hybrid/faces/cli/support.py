"""What every ``hybrid`` command shares: one-line errors, stderr logging, the handle, JSON
output and the progress bar."""

from __future__ import annotations

import json
import logging
import sys
from contextlib import contextmanager
from typing import Any

import click

from hybrid.core.errors import HybridError


def terminal_text(text: str, *, one_line: bool = False) -> str:
    """``text`` an agent wrote or a field that must stay on one line, shown strictly: every
    non-printable character as a ``\\uXXXX`` escape (:func:`hybrid.faces.cli.term.escape`), so
    it cannot move the cursor, recolour, hide or reorder what the owner reads. Newlines and tabs
    stay, unless ``one_line`` (then ``\\n``, ``\\t``). All output is cleaned again on its way out
    (:mod:`hybrid.faces.cli.term`)."""
    from hybrid.faces.cli.term import escape
    return escape(text, one_line=one_line, strict=True)


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
        except Exception as exc:
            from hybrid.store import explain
            problem = explain(exc)  # a store's driver error no store method translated
            if problem is None:
                raise
            click.echo(f"error: {problem}", err=True)
            ctx.exit(1)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)


class LazyGroup(Group):
    """A group some of whose commands live in modules imported only when that command runs
    (``lazy_commands``: name -> ("module:attribute", its one-line summary)), so a plain `hybrid
    query` does not pay for importing `hybrid audit`'s or `hybrid eval`'s modules, and neither
    do the command list of `--help` nor Tab completion, which show each summary as it stands
    (tests/unit/test_cli_startup.py holds each to its command's own short help)."""

    def __init__(self, *args, lazy_commands: dict[str, tuple[str, str]] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})
        self._listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str):
        if cmd_name in self.lazy_commands and cmd_name not in self.commands:
            target, summary = self.lazy_commands[cmd_name]
            if self._listing:  # a stand-in that is listed, never run
                return click.Command(cmd_name, help=summary)
            from importlib import import_module
            module, _, attr = target.partition(":")
            self.add_command(getattr(import_module(module, __package__), attr), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            self._listing = False

    def shell_complete(self, ctx: click.Context, incomplete: str):
        self._listing = True
        try:
            return super().shell_complete(ctx, incomplete)
        finally:
            self._listing = False


class TextCommand(click.Command):
    """A command whose positional words are free text that may start with ``-``: an argument
    that is not one of the command's options is taken as text, not refused as "No such option"
    (``hybrid query -wifi router``, ``hybrid query --advertise-routes``). Real options, their
    values, ``-n5``-style short values and ``--`` (everything after it is text) work as ever."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        options, text = split_text_args(self.get_params(ctx), args)
        for word in text:
            near = near_option(self.get_params(ctx), word)
            if near:
                click.echo(f"note: {word} is not an option of `{ctx.command_path}`; searched for it as "
                           f"text (did you mean {near}?)", err=True)
        return super().parse_args(ctx, [*options, "--", *text] if text else options)


def _option_table(params: list[click.Parameter]) -> dict[str, click.Option]:
    return {name: p for p in params if isinstance(p, click.Option) for name in (*p.opts, *p.secondary_opts)}


def _takes_value(opt: click.Option) -> bool:
    return not (opt.is_flag or opt.count)


def _is_option(word: str, table: dict[str, click.Option]) -> tuple[bool, bool]:
    """(whether ``word`` is an option as click would read it, whether the next argument is its
    value). A short cluster counts only when every letter is a known flag, up to one that takes
    a value whose attached rest converts to that option's type (``-n5``, not ``-news``)."""
    if word.startswith("--"):
        name, eq, _ = word.partition("=")
        opt = table.get(name)
        return (opt is not None and (not eq or _takes_value(opt)), opt is not None and not eq and _takes_value(opt))
    if word in table:
        return True, _takes_value(table[word])
    for i, letter in enumerate(word[1:], 1):
        opt = table.get("-" + letter)
        if opt is None:
            return False, False
        if _takes_value(opt):
            rest = word[i + 1:]
            if not rest:
                return True, True
            number = int if isinstance(opt.type, click.types.IntParamType) else \
                float if isinstance(opt.type, click.types.FloatParamType) else None
            try:  # a number's range is checked later, with click's own message
                number(rest) if number else opt.type.convert(rest, opt, None)
            except (ValueError, click.BadParameter):
                return False, False
            return True, False
    return True, False


def split_text_args(params: list[click.Parameter], args: list[str]) -> tuple[list[str], list[str]]:
    """``args`` as (the options with their values, the text words in order): a word starting
    with ``-`` that is not an option (see :func:`_is_option`) is text; after ``--`` all is."""
    table = _option_table(params)
    options: list[str] = []
    text: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            text += args[i + 1:]
            break
        is_opt, takes_next = _is_option(word, table) if word.startswith("-") and word != "-" else (False, False)
        if not is_opt:
            text.append(word)
        else:
            options.append(word)
            if takes_next and i + 1 < len(args):
                options.append(args[i + 1])
                i += 1
        i += 1
    return options, text


def near_option(params: list[click.Parameter], word: str) -> str | None:
    """The option ``word`` is probably a typo of (``--top-kk`` → ``--top-k``), if any."""
    if not word.startswith("--") or " " in word:
        return None
    import difflib
    close = difflib.get_close_matches(word.partition("=")[0], list(_option_table(params)), n=1, cutoff=0.85)
    return close[0] if close else None


def open_handle(ctx: click.Context):
    from hybrid.app.api import open as open_hybrid
    if "hybrid" not in ctx.obj:
        ctx.obj["hybrid"] = open_hybrid()
    return ctx.obj["hybrid"]


def print_json(data) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


def list_vault_files(h, vaults, as_json: bool) -> None:
    """`hybrid status --files`: each file of ``vaults`` and what became of it, printed as it
    is found (a large vault is never held whole); with ``as_json``, one JSON object a line
    (its ``vault`` named), else a line a file and each vault's counts at its end."""
    from hybrid.app.coverage import STATES
    for v in vaults:
        counts = dict.fromkeys(STATES, 0)
        if not as_json:
            click.echo(f"{v.name}: {terminal_text(str(v.path), one_line=True)}")
        told = False
        for row in h.files(v.name):
            counts[row.state] += 1
            if as_json:
                click.echo(json.dumps({"vault": v.name, **row.to_dict()}, ensure_ascii=False))
                continue
            if row.from_index and not told:
                told = True
                click.echo("  (the folder is not here, or is a source's export: what the index records)")
            click.echo("  " + terminal_text(row.line, one_line=True))
        if not as_json:
            click.echo(f"  {sum(counts.values())} files: " + ", ".join(f"{n} {s}" for s, n in counts.items()))


# What `hybrid index`'s progress stages (hybrid.indexing.report.PROGRESS_STAGES) are called on screen;
# any other stage (`hybrid eval`'s) is shown under its own name.
STAGE_LABELS = {"scan": "reading notes", "load": "loading model", "embed": "embedding chunks",
                "write": "writing indexes"}


class ProgressBars:
    """The ``progress(stage, done, total)`` callback behind a rich display: one bar per stage
    (and per vault: see :meth:`vault`), labelled for people, with an ETA. A total of None shows
    an indeterminate bar until it is known; an estimated total (:class:`Estimate`) is shown as
    one, in the label, and follows the caller; an exact total is never lowered and ``done``
    never shown past it, whatever the caller reports."""

    def __init__(self, bar: Any):
        self.bar = bar
        self.tasks: dict[str, Any] = {}
        self.totals: dict[str, int | None] = {}
        self.estimated: dict[str, bool] = {}
        self.prefix, self.model = "", ""

    def vault(self, name: str, model: str = "") -> None:
        """Bars from now on belong to vault ``name`` (its embedder spec: ``model``)."""
        self.prefix, self.model = f"{name}: ", model

    def label(self, stage: str) -> str:
        text = STAGE_LABELS.get(stage, stage)
        if stage == "load" and self.model:
            text += f" {self.model}"
        if stage == "embed" and self.model.startswith("mix:"):  # both models embed each chunk, at once
            text += f" ({' + '.join(p.strip() for p in self.model[4:].split(','))})"
        return self.prefix + text

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        from hybrid.indexing.report import Estimate
        key = self.prefix + stage
        guess = isinstance(total, Estimate)
        if key not in self.tasks:
            self.tasks[key] = self.bar.add_task(self.label(stage), total=total)
            self.totals[key], self.estimated[key] = total, False
        known = self.totals[key]
        if total is not None and (known is None or self.estimated[key] or total > known):
            self.totals[key] = known = total
            self.bar.update(self.tasks[key], total=total)
        if guess != self.estimated[key] and total is not None:
            self.estimated[key] = guess
            self.bar.update(self.tasks[key], description=self.label(stage) + (" (total estimated)" if guess else ""))
        self.bar.update(self.tasks[key], completed=done if known is None else min(done, known))


@contextmanager
def progress_bar(enabled: bool):
    """A :class:`ProgressBars` on stderr, or None (nothing is printed) when not ``enabled``:
    callers pass ``sys.stderr.isatty()``, so pipes and CI logs get no bar."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from hybrid.faces.cli.term import raw
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                  console=Console(file=raw(sys.stderr)), transient=True) as bar:
        yield ProgressBars(bar)


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
               f"through it in about 0.15 s", err=True)
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass


def server_state(h) -> str:
    """"server running at URL (pid N)" from the address file a running `hybrid serve --http`
    keeps in the data dir (checked to be alive), else "no server running"."""
    from hybrid.app.watch import pid_alive
    from hybrid.faces.http import server_file
    try:
        info = json.loads(server_file(h).read_text(encoding="utf-8"))
        pid, url = int(info["pid"]), str(info["url"])
        alive = pid_alive(pid)
    except (OSError, ValueError, KeyError, TypeError):
        alive = False
    if not alive:
        return "no server running (`hybrid serve --http --watch` keeps models warm)"
    return f"server running at {url} (pid {pid})"


def watcher_state(h) -> str:
    """"watcher running (pid N: vaults)" for each live watcher (`hybrid watch`, `serve
    --watch`), else "no watcher running"."""
    from hybrid.app.watch import running_watchers
    live = running_watchers(h.config.data)
    if not live:
        return "no watcher running (notes edited now are indexed by the next `hybrid index`)"
    return "; ".join(f"watcher running (pid {w['pid']}: {', '.join(w['vaults']) or 'no vaults'})" for w in live)


def yes_option(command):
    """``--yes``: confirm, for scripts, sending text to the model servers on other machines the
    settings name (asked once otherwise; :mod:`hybrid.app.remote`)."""
    return click.option("--yes", "-y", "yes", is_flag=True,
                        help="Confirm sending text to a model server on another machine (the "
                             "embedder or reranker the settings name); asked once otherwise.")(command)


def confirm_remote(h, names=None, *, yes: bool, ask: bool = True) -> None:
    """Before text of vaults ``names`` (default: all) may go to a server on another machine that
    nobody confirmed: see :func:`confirm_destinations`."""
    confirm_remote_config(h.config, names, yes=yes, ask=ask)


def confirm_remote_config(config, names=None, *, yes: bool, ask: bool = True) -> None:
    """:func:`confirm_remote` from the config alone (what a client of a running server has)."""
    from hybrid.app import remote
    if not config.vaults:
        return
    found = [d for v in config.select(names or None) for d in remote.vault_destinations(config, v)]
    confirm_destinations(config, found, yes=yes, ask=ask)


def confirm_destinations(config, found, *, yes: bool, ask: bool = True, refuse: bool = True) -> None:
    """For the servers of ``found`` on other machines that nobody confirmed: record ``--yes``,
    or ask on a terminal (``ask``), or stop with the one-line error that says how to confirm
    (with ``refuse``; else say so and go on: nothing is sent until someone confirms)."""
    from hybrid.app import remote
    missing = remote.unconfirmed(config, found)
    if not missing:
        return
    if not yes and ask and sys.stdin.isatty() and sys.stderr.isatty():
        for d in missing:
            click.echo(f"hybrid would send text (notes and queries, secrets redacted) to {remote.describe(d)}.",
                       err=True)
        yes = click.confirm("Send text there from now on?", default=False, err=True)
        if not yes and refuse:
            raise click.ClickException("nothing sent; choose a model that runs here "
                                       "(`hybrid config set embedder minilm`) or confirm with --yes")
    if yes:
        remote.confirm(config, [d.url for d in missing])
        for d in missing:
            click.echo(f"confirmed: text may be sent to {remote.describe(d)}", err=True)
        return
    if refuse:
        remote.require(config, missing)
    for d in missing:
        click.echo(f"note: text would be sent to {remote.describe(d, True)}; nothing is sent until "
                   f"you confirm (`hybrid index` asks once, or `--yes`)", err=True)
