"""``hybrid proposals``: review the notes agents proposed (see hybrid.app.proposals).

\b
hybrid proposals                          list them (all vaults)
hybrid proposals show NAME                print one
hybrid proposals accept NAME --to FOLDER  move it into the vault (status reviewed), re-index
hybrid proposals reject NAME              delete it
"""

from __future__ import annotations

import sys

import click

from hybrid.app.proposals import (
    OFF_MESSAGE,
    Proposal,
    ProposalError,
    accept,
    list_proposals,
    read_proposal,
    reject,
)
from hybrid.core.config import Vault
from hybrid.faces.cli.complete import complete_vault
from hybrid.faces.cli.support import Group, open_handle, print_json, terminal_text

HINT = ("review: `hybrid proposals show NAME`, `hybrid proposals accept NAME --to FOLDER`, "
        "`hybrid proposals reject NAME`")


def _folder(h) -> str:
    folder = h.settings.proposals_folder
    if not folder.strip().strip("/"):
        raise ProposalError(f"{OFF_MESSAGE.replace('agents cannot write: ', '')}; "
                            f"the config file is {h.config.path}")
    return folder


def _vaults(h, name: str | None) -> list[Vault]:
    name = name or click.get_current_context().obj.get("proposals_vault")
    return [h.config.vault(name)] if name else h.config.select(None)


def _locate(h, name: str, vault: str | None) -> Vault:
    """The vault holding proposal ``name``: the named one, the only one, or the one vault among
    several whose proposals folder has it."""
    h.refresh()
    folder = _folder(h)
    vaults = _vaults(h, vault)
    if len(vaults) == 1:
        return vaults[0]
    found = []
    for v in vaults:
        try:
            read_proposal(v, folder, name)
            found.append(v)
        except ProposalError:
            continue
    if len(found) == 1:
        return found[0]
    if not found:
        raise ProposalError(f"no proposal {name!r} in any vault; `hybrid proposals` lists them")
    raise ProposalError(f"proposal {name!r} is in several vaults ({', '.join(v.name for v in found)}): "
                        f"name one with --vault")


def reindex(h, vault: Vault, no_index: bool) -> str:
    """Re-index ``vault`` (unless ``no_index``); what was done, for the stderr line."""
    if no_index:
        return f"not re-indexed (run `hybrid index --vault {vault.name}`)"
    report = h.index([vault.name], keep_going=True)[0]
    if report.error:
        raise ProposalError(f"done, but re-indexing failed: {report.error}; "
                            f"run `hybrid index --vault {vault.name}`")
    return (f"re-indexed {vault.name}: {report.added} added, {report.updated} updated, "
            f"{report.removed} removed")


def _indexed(vault: Vault, rel: str) -> bool:
    from hybrid.sources.walk import glob_to_regex
    return any(glob_to_regex(g).match(rel) for g in vault.include) \
        and not any(glob_to_regex(g).match(rel) for g in vault.exclude)


def _cut(text: str, width: int) -> str:
    text = terminal_text(text, one_line=True)
    return text if len(text) <= width else text[:width - 1] + "…"


@click.group("proposals", cls=Group, invoke_without_command=True)
@click.option("--vault", shell_complete=complete_vault,
              help="Only this vault (default: all; also the default of the subcommands).")
@click.option("--json", "as_json", is_flag=True, help="Bare: print the list as JSON.")
@click.pass_context
def proposals_cmd(ctx: click.Context, vault: str | None, as_json: bool) -> None:
    """Review the notes agents proposed (the proposals_folder setting): list, show, accept
    (move into the vault, status reviewed) or reject (delete). Bare: list them."""
    ctx.ensure_object(dict)
    ctx.obj["proposals_vault"] = vault
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_cmd, vault=vault, as_json=as_json)


@proposals_cmd.command("list")
@click.option("--vault", shell_complete=complete_vault, help="Only this vault (default: all).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def list_cmd(ctx: click.Context, vault: str | None = None, as_json: bool = False) -> None:
    """List proposals, newest first."""
    h = open_handle(ctx)
    h.refresh()
    folder = _folder(h)
    rows: list[Proposal] = []
    vaults = _vaults(h, vault)
    for v in vaults:
        if not v.path.is_dir():
            click.echo(f"warning: vault {v.name!r}: folder {v.path} is missing; skipped", err=True)
            continue
        try:
            rows.extend(list_proposals(v, folder))
        except ProposalError as exc:
            if len(vaults) == 1:
                raise
            click.echo(f"warning: vault {v.name!r}: {exc}", err=True)  # the others still list
    rows.sort(key=lambda p: p.created, reverse=True)  # stable: each vault's order kept on ties
    if as_json:
        print_json([p.to_dict() for p in rows])
        return
    if not rows:
        click.echo(f"no proposals in {folder.strip('/')}/ of {', '.join(v.name for v in vaults)}", err=True)
        return
    many = len(vaults) > 1
    table = [(f"{p.vault}:{p.path}" if many else p.path, p.status, _cut(p.proposed_by, 20), p.created,
              _cut(p.title, 60), f"{p.chars:,}") for p in rows]
    head = ("path", "status", "proposed_by", "created", "title", "chars")
    widths = [max(len(r[i]) for r in [head, *table]) for i in range(len(head) - 1)]
    for r in [head, *table]:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    click.echo(HINT, err=True)


@proposals_cmd.command("show")
@click.argument("name")
@click.option("--vault", shell_complete=complete_vault, help="Vault name (needed when several hold that name).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: the proposal and its text.")
@click.pass_context
def show_cmd(ctx, name, vault, as_json):
    """Print proposal NAME (its file name, or its path)."""
    h = open_handle(ctx)
    v = _locate(h, name, vault)
    proposal, text = read_proposal(v, _folder(h), name)
    if as_json:
        print_json({**proposal.to_dict(), "text": text})
        return
    text = terminal_text(text)  # an agent wrote it: no escape sequence reaches the terminal
    click.echo(text, nl=not text.endswith("\n"))


@proposals_cmd.command("accept")
@click.argument("name")
@click.option("--to", "to_folder", required=True,
              help="Vault-relative folder to move it to ('.' = the vault's top level).")
@click.option("--vault", shell_complete=complete_vault, help="Vault name (needed when several hold that name).")
@click.option("--no-index", is_flag=True, help="Do not re-index the vault afterwards.")
@click.option("--json", "as_json", is_flag=True, help="Print the accepted note as JSON.")
@click.pass_context
def accept_cmd(ctx, name, to_folder, vault, no_index, as_json):
    """Accept proposal NAME: move it to --to FOLDER with status reviewed, then re-index the
    vault so the note is searchable at once."""
    h = open_handle(ctx)
    v = _locate(h, name, vault)
    done = accept(v, _folder(h), name, to_folder)
    if as_json:
        print_json(done.to_dict())
    else:
        click.echo(f"{done.vault}:{done.path}")
    click.echo(f"accepted {name!r} as {done.vault}:{done.path} (status reviewed)", err=True)
    if not _indexed(v, done.path):
        click.echo(f"warning: {done.path} is outside vault {v.name!r}'s include globs or excluded: "
                   f"it will not be indexed", err=True)
    click.echo(reindex(h, v, no_index), err=True)


@proposals_cmd.command("reject")
@click.argument("name")
@click.option("--vault", shell_complete=complete_vault, help="Vault name (needed when several hold that name).")
@click.option("--no-index", is_flag=True, help="Do not re-index the vault afterwards.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--json", "as_json", is_flag=True, help="Print the deleted proposal as JSON.")
@click.pass_context
def reject_cmd(ctx, name, vault, no_index, yes, as_json):
    """Reject proposal NAME: delete its file."""
    h = open_handle(ctx)
    v = _locate(h, name, vault)
    folder = _folder(h)
    proposal, _ = read_proposal(v, folder, name)
    if not yes and sys.stdin.isatty():
        click.confirm(f"delete {v.name}:{proposal.path} ({proposal.title!r})?", abort=True, err=True)
    gone = reject(v, folder, name)
    if as_json:
        print_json(gone.to_dict())
    else:
        click.echo(f"{gone.vault}:{gone.path}")
    click.echo(f"rejected: deleted {gone.vault}:{gone.path}", err=True)
    click.echo(reindex(h, v, no_index), err=True)
