"""``hybrid related NOTE``: the notes most related to a note, each with why."""

from __future__ import annotations

import click

from hybrid.faces.cli.complete import complete_vault
from hybrid.faces.cli.support import open_handle, print_json, terminal_text
from hybrid.retrieval.related import MAX_TOP_K


@click.command("related")
@click.argument("ref")
@click.option("--vault", shell_complete=complete_vault, help="Vault name (needed when several are registered).")
@click.option("-n", "--top-k", "top_k", type=click.IntRange(1, MAX_TOP_K), default=10, show_default=True,
              help="How many related notes.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--as-agent", is_flag=True, help="Answer as an agent would (only notes agents may see; "
              "secrets redacted; refused if the note is private).")
@click.pass_context
def related_cmd(ctx, ref, vault, top_k, as_json, as_agent):
    """The notes most related to the note REF, best first, each with why: similar in meaning
    (from the vectors already indexed), linked either way, shared tags, co-cited by the same
    notes. REF is anything `hybrid get` takes: a path, a title or alias, [[a wikilink]], a
    citation (vault:path:START-END)."""
    result = open_handle(ctx).related(ref, vault, top_k=top_k, agent=as_agent)
    if as_json:
        print_json(result.to_json())
        return
    click.echo(terminal_text(f"related to {result.vault}:{result.path}"
                             + ("" if result.meaning else " (not embedded: links and tags only)"),
                             one_line=True), err=True)
    if not result.notes:
        click.echo("no related notes found", err=True)
    for i, n in enumerate(result.notes, 1):
        click.echo(terminal_text(f"{i}. {n.title or n.path}  [{n.score:.3f}]  {n.citation}", one_line=True))
        for why in n.why:
            click.echo("   · " + terminal_text(why, one_line=True))
