"""``hybrid tags``: tag suggestions, approved by a person (see hybrid.app.tags).

\b
hybrid tags suggest NOTE            suggest 3-5 tags from the vault's own tags; queue them
hybrid tags suggest --all           … for every note (--untagged: only notes with none)
hybrid tags review                  accept or reject each waiting tag, interactively
hybrid tags accept NOTE TAG...      write waiting tags into NOTE's front block
hybrid tags reject NOTE TAG...      never suggest them for NOTE again
hybrid tags list                    what waits for review
"""

from __future__ import annotations

import sys

import click

from hybrid.faces.cli.complete import complete_vault
from hybrid.faces.cli.support import Group, open_handle, print_json, terminal_text


def _line(vault: str, path: str, tags: list[str], many: bool) -> str:
    where = f"{vault}:{path}" if many else path
    return terminal_text(f"{where}: {', '.join(tags)}", one_line=True)


def _reindex(h, vault: str, no_index: bool) -> None:
    from hybrid.faces.cli.proposals import reindex
    click.echo(reindex(h, h.config.vault(vault), no_index), err=True)


@click.group("tags", cls=Group, invoke_without_command=True)
@click.pass_context
def tags_cmd(ctx: click.Context) -> None:
    """Tag suggestions approved by a person: suggest tags from the vault's own tags (the
    nearest notes' tags, key phrases; optionally an LLM through Ollama), review them, and only
    then write the accepted ones into the note's front block. Bare: list what waits."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_cmd)


@tags_cmd.command("suggest")
@click.argument("note", required=False)
@click.option("--all", "every", is_flag=True, help="Every note of the vault.")
@click.option("--untagged", is_flag=True, help="With --all: only the notes that have no tag.")
@click.option("--vault", shell_complete=complete_vault, help="Vault name (needed when several are registered).")
@click.option("-n", "--limit", type=click.IntRange(1, 10), default=5, show_default=True,
              help="Tags to suggest per note.")
@click.option("--llm", metavar="ollama:MODEL", help="Also ask an LLM served by a local Ollama "
              "(the ollama_host setting); its tags are kept only when the vault already uses them.")
@click.option("--new-tags", is_flag=True, help="With --llm: keep tags the vault does not use yet "
              "(marked new).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def suggest_cmd(ctx, note, every, untagged, vault, limit, llm, new_tags, as_json):
    """Suggest tags for NOTE (a path, title or citation, as `hybrid get` takes) or --all notes,
    and put them in the review queue. Nothing is written into any note."""
    if new_tags and not llm:
        raise click.UsageError("--new-tags goes with --llm (the offline suggester only draws on the vault's tags)")
    if untagged and not every:
        raise click.UsageError("--untagged goes with --all")
    h = open_handle(ctx)
    found = h.tags.suggest(note, vault, every=every, untagged=untagged, limit=limit, llm=llm,
                           new_tags=new_tags)
    if as_json:
        print_json([f.to_dict() for f in found])
        return
    waiting = 0
    for f in found:
        if not f.suggestions:
            if not every:
                click.echo(terminal_text(f.message, one_line=True), err=True)
            continue
        waiting += 1
        click.echo(terminal_text(f"{f.vault}:{f.path}", one_line=True))
        for s in f.suggestions:
            mark = " (new)" if s.new else ""
            click.echo(terminal_text(f"  {s.tag}{mark}  {s.score:.2f}  {s.by}: {s.why}", one_line=True))
    if every:
        click.echo(f"{waiting} of {len(found)} notes have suggestions", err=True)
    if waiting:
        click.echo("review: `hybrid tags review`, or `hybrid tags accept NOTE TAG…` / `hybrid tags reject "
                   "NOTE TAG…`; nothing was written into any note", err=True)


@tags_cmd.command("list")
@click.option("--vault", shell_complete=complete_vault, help="Only this vault (default: all).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def list_cmd(ctx, vault=None, as_json=False):
    """List the tags waiting for review, by note."""
    h = open_handle(ctx)
    rows = h.tags.pending(vault)
    if as_json:
        print_json([{"vault": v, **e.to_dict()} for v, e in rows])
        return
    if not rows:
        click.echo("no tags wait for review: `hybrid tags suggest NOTE` (or --all) makes some", err=True)
        return
    many = len({v for v, _ in rows}) > 1
    for v, e in rows:
        click.echo(_line(v, e.path, [s.tag + (" (new)" if s.new else "") for s in e.pending], many))


@tags_cmd.command("accept")
@click.argument("note")
@click.argument("tags", nargs=-1, required=True)
@click.option("--vault", shell_complete=complete_vault, help="Vault name (needed when several are registered).")
@click.option("--no-index", is_flag=True, help="Do not re-index the vault afterwards.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def accept_cmd(ctx, note, tags, vault, no_index, as_json):
    """Write TAGS (waiting for review on NOTE) into NOTE's front block, keeping every other
    byte of the file; refused when the file changed since they were suggested."""
    h = open_handle(ctx)
    done = h.tags.accept(note, list(tags), vault)
    if as_json:
        print_json(done.to_dict())
    else:
        click.echo(_line(done.vault, done.path, done.tags, True))
    click.echo(f"added {', '.join(done.added)} to {done.vault}:{done.path}", err=True)
    _reindex(h, done.vault, no_index)


@tags_cmd.command("reject")
@click.argument("note")
@click.argument("tags", nargs=-1, required=True)
@click.option("--vault", shell_complete=complete_vault, help="Vault name (needed when several are registered).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def reject_cmd(ctx, note, tags, vault, as_json):
    """Reject TAGS for NOTE: dropped from the queue, never suggested for NOTE again."""
    h = open_handle(ctx)
    gone = h.tags.reject(note, list(tags), vault)
    if as_json:
        print_json({"rejected": gone})
        return
    click.echo(f"rejected {', '.join(gone)}: never suggested for that note again", err=True)


@tags_cmd.command("review")
@click.option("--vault", shell_complete=complete_vault, help="Only this vault (default: all).")
@click.option("--no-index", is_flag=True, help="Do not re-index afterwards.")
@click.pass_context
def review_cmd(ctx, vault, no_index):
    """Go through the waiting tags one by one: y accept, n reject, s skip (ask later),
    q quit. A note's accepted tags are written when its last tag is answered."""
    if not sys.stdin.isatty():
        raise click.UsageError("review asks at a terminal; in scripts use `hybrid tags accept NOTE TAG…` "
                               "and `hybrid tags reject NOTE TAG…` (`hybrid tags list --json` shows the queue)")
    h = open_handle(ctx)
    rows = h.tags.pending(vault)
    if not rows:
        click.echo("no tags wait for review: `hybrid tags suggest NOTE` (or --all) makes some", err=True)
        return
    touched: set[str] = set()
    for v, e in rows:
        click.echo(terminal_text(f"\n{v}:{e.path}", one_line=False), err=True)
        yes: list[str] = []
        no: list[str] = []
        quit_ = False
        for s in e.pending:
            label = terminal_text(f"  {s.tag}{' (new)' if s.new else ''}  [{s.by}: {s.why}]", one_line=True)
            answer = click.prompt(f"{label}  accept?", type=click.Choice(["y", "n", "s", "q"]),
                                  default="s", show_choices=True, err=True)
            if answer == "q":
                quit_ = True
                break
            (yes if answer == "y" else no if answer == "n" else []).append(s.tag)
        if no:
            h.tags.reject(e.path, no, v)
            click.echo(f"  rejected {', '.join(no)}", err=True)
        if yes:
            from hybrid.core.errors import HybridError
            try:
                done = h.tags.accept(e.path, yes, v)
                touched.add(v)
                click.echo(f"  added {', '.join(done.added)}", err=True)
            except HybridError as exc:  # this note refused (changed, unparseable): the others go on
                click.echo(f"  error: {exc}", err=True)
        if quit_:
            break
    for v in sorted(touched):
        _reindex(h, v, no_index)
