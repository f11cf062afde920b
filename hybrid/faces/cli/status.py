"""``hybrid status``: each vault's index, where its text goes, what agents see; ``--files``
lists every file and what became of it."""

from __future__ import annotations

import click

from hybrid.faces.cli.complete import complete_vault
from hybrid.faces.cli.support import list_vault_files, open_handle, print_json, server_state, watcher_state


@click.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--skipped", "list_skipped", is_flag=True,
              help="List the files index runs skipped (a scanned or damaged PDF, a file over a size "
                   "limit, ...) and why; they are tried again when they change.")
@click.option("--files", "list_files", is_flag=True,
              help="List every file each vault holds and what became of it: indexed (chunks), pending "
                   "(new, changed, deleted), skipped (why), failed (the error), excluded (which glob, "
                   "set where). With --json: one JSON object a line.")
@click.option("--vault", "vaults", shell_complete=complete_vault, multiple=True, help="Only this vault (repeatable).")
@click.pass_context
def status_cmd(ctx, as_json, list_skipped, list_files, vaults):
    """Show each vault's index: notes, chunks, model, last indexed, size on disk, and the files
    new, changed or deleted on disk since (what `hybrid index` would do now) or skipped.
    --files lists every file instead (docs/sources.md, "What became of each file")."""
    h = open_handle(ctx)
    if list_files:
        list_vault_files(h, h.config.select(vaults), as_json)
        return
    names = {v.name for v in h.config.select(vaults)} if vaults else None
    rows = [r for r in h.status() if names is None or r.name in names]
    agent = {r.name: h.agent_counts(r.name)[0] for r in rows if r.indexed and not r.error}
    hidden = {name: h.agent_hidden(name) for name in agent}
    if as_json:
        print_json([{**r.to_dict(), "agent_notes": agent.get(r.name),
                     "agent_hidden": {k: len(v) for k, v in hidden.get(r.name, {}).items()},
                     "front_unreadable": hidden.get(r.name, {}).get("front block unreadable", [])}
                    for r in rows])
        return
    click.echo(f"config {h.config.path} · data {h.config.data} · {server_state(h)} · {watcher_state(h)}")
    if not rows:
        click.echo("no vaults registered; run `hybrid index PATH`", err=True)
        return
    for r in rows:
        state = "indexed" if r.indexed else "not indexed"
        if r.store:
            state += f" in {r.store}" + ("" if r.exists else "; no folder here: queries only")
        elif not r.exists:
            state += ", FOLDER MISSING" if r.kind == "notes" else ", EXPORT MISSING"
        if r.pending:
            state += f", {r.pending} pending (run `hybrid index`)"
        if r.error:
            state += f", UNREADABLE: {r.error}"
        kind = "" if r.kind == "notes" else f"{r.kind} source "
        click.echo(f"{r.name}: {kind}{r.path} ({state})")
        if r.indexed and not r.error:
            size = "" if r.store else f", {r.disk_bytes / 1e6:.1f} MB on disk"
            click.echo(f"  {r.notes} notes, {r.chunks} chunks, {r.embedder} ({r.dim}-d), "
                       f"last indexed {r.last_indexed}{size}")
            if r.vector_index:
                click.echo(f"  vectors: {r.vector_index}")
        if not r.error:
            click.echo("  text sent to: " + "; ".join(r.sends_to) if r.sends_to
                       else "  text sent to: nowhere (its models run in this process)")
        if r.indexed and not r.error:
            if r.server:
                click.echo(f"  server: {r.server}")
            if r.shared_chunks:  # identical sections: one embedding each (hybrid.indexing.shared)
                click.echo(f"  deduplicated: {r.shared_chunks} chunks share {r.shared_texts} texts, "
                           f"{r.embeddings_saved} embeddings saved")
            if r.sources and set(r.sources) != {"note"}:
                click.echo("  documents: " + ", ".join(f"{n} {k}" for k, n in r.sources.items()))
            if r.changes is not None:
                click.echo(f"  files on disk: {r.changes.text}")
                if list_skipped:
                    for f in r.changes.skipped_files:
                        click.echo(f"    skipped {f['reason']}")
            why = hidden[r.name]
            parts = ", ".join(f"{len(paths)} {reason}" for reason, paths in why.items())
            click.echo(f"  agents see {agent[r.name]} notes ({r.notes - agent[r.name]} hidden"
                       f"{': ' + parts if parts else ''})")
            unreadable = why.get("front block unreadable", [])
            if unreadable:
                shown = ", ".join(unreadable[:5]) + (f", … ({len(unreadable)} in all)" if len(unreadable) > 5 else "")
                click.echo(f"  hidden from agents until their front block is fixed: {shown}")
