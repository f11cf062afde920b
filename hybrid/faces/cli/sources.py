"""``hybrid source``: register documents that are not a folder of notes (see hybrid.sources).

A source is a vault whose documents come from an export: ``hybrid source add bookmarks FILE``
(a browser's bookmarks export) or ``hybrid source add slack ZIP_OR_FOLDER`` (a Slack export).
It is searched, filtered (``--source bookmark``), listed and removed like any vault.
"""

from __future__ import annotations

import click

from hybrid.faces.cli.complete import complete_vault
from hybrid.faces.cli.support import Group, open_handle, print_json
from hybrid.sources import SOURCES


@click.group("source", cls=Group)
def source_cmd() -> None:
    """Add, list and remove sources: bookmarks and Slack exports."""


@source_cmd.command("add")
@click.argument("kind", type=click.Choice([s.name for s in SOURCES.values() if not s.folder]))
@click.argument("path", type=click.Path(path_type=str))
@click.option("--name", help="Name of the source (default: the file name).")
@click.option("--store", metavar="URL", help="Keep its index in PostgreSQL + pgvector (team mode), as "
              "`hybrid vault add --store`.")
@click.pass_context
def source_add(ctx, kind, path, name, store):
    """Register the export PATH as a source of KIND.

    bookmarks: an export from Chrome, Firefox, Safari or Edge (bookmarks HTML), a Firefox JSON
    backup, or a JSON list of {url, title, tags, added}. Each bookmark is indexed with its
    title, folder, tags and URL; `hybrid index --fetch` adds the pages' text (it goes online).

    slack: the zip Slack's export produces, or the folder it unpacks to. Each channel's day
    is a document, its threads sections.
    """
    v = open_handle(ctx).add_source(kind, path, name, store)
    hint = " (`--fetch` adds the pages' text)" if SOURCES[kind].fetches else ""
    click.echo(f"registered {kind} source {v.name!r} at {v.path}; run `hybrid index` to index "
               f"it{hint}", err=True)


@source_cmd.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def source_list(ctx, as_json):
    """List every vault and source with its kind."""
    vaults = open_handle(ctx).vaults
    if as_json:
        print_json([{"name": v.name, "kind": v.kind, "path": str(v.path)} for v in vaults])
        return
    for v in vaults:
        click.echo(f"{v.name}\t{v.kind}\t{v.path}")


@source_cmd.command("remove")
@click.argument("name", shell_complete=complete_vault)
@click.option("--wait", type=float, default=10, show_default=True,
              help="Seconds to wait for an indexer working on this source.")
@click.pass_context
def source_remove(ctx, name, wait):
    """Unregister source NAME and delete its index (fetched pages included; never the export)."""
    v = open_handle(ctx).remove_vault(name, purge=True, wait=wait)
    click.echo(f"removed {v.kind} {v.name!r}; {v.path} is untouched", err=True)
