"""The ``hybrid`` command. stdout carries the payload (``--json`` prints JSON and nothing else);
progress, warnings and errors go to stderr. User mistakes end in one ``error:`` line, exit 1."""

from __future__ import annotations

import logging
import os
import sys
import time

import click

from hybrid.core.errors import HybridError
from hybrid.faces.cli.complete import complete_vault
from hybrid.faces.cli.support import (
    Group,
    LazyGroup,
    TextCommand,
    confirm_remote,
    confirm_remote_config,
    open_handle,
    print_json,
    progress_bar,
    setup_logging,
    slow_query_hint,
    yes_option,
)
from hybrid.sources import include_help

# The commands whose modules load only when they run, each with the summary `--help` and Tab
# completion list it by (held to the command's own short help by tests/unit/test_cli_startup.py)
LAZY_COMMANDS = {
    "audit": (".audit:audit_cmd",
              "Show what agents asked and were given, oldest first (times in local time)."),
    "completion": (".complete:completion_cmd",
                   "Print the completion script for SHELL (bash, zsh or fish): commands, options, vault "
                   "names, setting names and their allowed values."),
    "config": (".config_cmd:config_cmd",
               "Show and change settings in the config file (checked; its comments and formatting kept)."),
    "eval": (".eval:eval_cmd",
             "Measure retrieval quality on labelled queries (default: the bundled sample vault and its 70 "
             "labelled queries): every combination of the modes and settings given is run and scored, "
             "with a 95% confidence interval on every figure."),
    "proposals": (".proposals:proposals_cmd",
                  "Review the notes agents proposed (the proposals_folder setting): list, show, accept "
                  "(move into the vault, status reviewed) or reject (delete)."),
    "related": (".related:related_cmd",
                "The notes most related to the note REF, best first, each with why: similar in meaning "
                "(from the vectors already indexed), linked either way, shared tags, co-cited by the "
                "same notes."),
    "source": (".sources:source_cmd", "Add, list and remove sources: bookmarks and Slack exports."),
    "status": (".status:status_cmd",
               "Show each vault's index: notes, chunks, model, last indexed, size on disk, and the files "
               "new, changed or deleted on disk since (what `hybrid index` would do now) or skipped."),
    "tags": (".tags:tags_cmd",
             "Tag suggestions approved by a person: suggest tags from the vault's own tags (the nearest "
             "notes' tags, key phrases; optionally an LLM through Ollama), review them, and only then "
             "write the accepted ones into the note's front block."),
    "ui": ("hybrid.faces.ui.launch:ui_cmd",
           "Open the search page in the browser, signed in (starts `hybrid serve --http` if needed)."),
}


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]},
             lazy_commands=LAZY_COMMANDS)
@click.option("-v", "--verbose", count=True, help="More log output on stderr (-vv for debug).")
@click.version_option(package_name="hybrid", prog_name="hybrid")
@click.pass_context
def main(ctx: click.Context, verbose: int) -> None:
    """Hybrid (BM25 + vector) search over markdown vaults, with cited passages.

    \b
    hybrid index ~/notes            register a vault and index it
    hybrid query "tailscale subnet router" -n 5
    hybrid get "home-lab/networking.md:12-40"
    """
    ctx.ensure_object(dict)
    from hybrid.faces.cli.term import install
    install(stdout=ctx.invoked_subcommand != "serve")  # MCP over stdio: stdout is the protocol
    setup_logging(verbose)


# --- vaults -------------------------------------------------------------------------------
def _path(v) -> str:
    """A vault's folder on one line (a newline or tab in a folder's name shown as ``\\n``, ``\\t``)."""
    from hybrid.faces.cli.support import terminal_text
    return terminal_text(str(v.path), one_line=True)


@main.group(cls=Group)
def vault() -> None:
    """Register, list and remove vaults."""


@vault.command("add")
@click.argument("path", type=click.Path(file_okay=False, path_type=str))
@click.option("--name", help="Vault name (default: the folder name).")
@click.option("--include", multiple=True, help="Glob of files to index (repeatable; default: the "
              f"`include` setting, out of the box {include_help()}).")
@click.option("--exclude", multiple=True, help="Glob of files to leave out (repeatable).")
@click.option("--store", metavar="URL", help="Keep the index in PostgreSQL + pgvector (team mode): "
              "postgresql://USER@HOST/DB, or `postgresql` for the URL in $HYBRID_DATABASE_URL. "
              "Passwords belong in that variable, ~/.pgpass or PGPASSWORD, not here.")
@click.pass_context
def vault_add(ctx, path, name, include, exclude, store):
    """Register the folder PATH as a vault."""
    v = open_handle(ctx).add_vault(path, name, include, exclude, store)
    click.echo(f"registered vault {v.name!r} at {_path(v)}; run `hybrid index` to index it", err=True)


@vault.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def vault_list(ctx, as_json):
    """List registered vaults."""
    vaults = open_handle(ctx).vaults
    if as_json:
        print_json([{"name": v.name, "path": str(v.path), "include": v.include, "exclude": v.exclude,
                      "embedder": v.embedder, "kind": v.kind} for v in vaults])
        return
    for v in vaults:
        click.echo(f"{v.name}\t{_path(v)}")


@vault.command("remove")
@click.argument("name", shell_complete=complete_vault)
@click.option("--keep-index", is_flag=True, help="Leave the index files on disk.")
@click.option("--wait", type=float, default=10, show_default=True,
              help="Seconds to wait for an indexer (a watcher, say) working on this vault.")
@click.pass_context
def vault_remove(ctx, name, keep_index, wait):
    """Unregister vault NAME and delete its index files (never the notes)."""
    v = open_handle(ctx).remove_vault(name, purge=not keep_index, wait=wait)
    click.echo(f"removed vault {v.name!r}; the notes in {_path(v)} are untouched", err=True)


@vault.command("rename")
@click.argument("old", shell_complete=complete_vault)
@click.argument("new")
@click.option("--wait", type=float, default=10, show_default=True,
              help="Seconds to wait for an indexer (a watcher, say) working on this vault.")
@click.pass_context
def vault_rename(ctx, old, new, wait):
    """Rename vault OLD to NEW, keeping its index."""
    v = open_handle(ctx).rename_vault(old, new, wait=wait)
    click.echo(f"renamed vault {old!r} to {v.name!r}", err=True)


@vault.command("move")
@click.argument("name", shell_complete=complete_vault)
@click.argument("path", type=click.Path(file_okay=False, path_type=str))
@click.pass_context
def vault_move(ctx, name, path):
    """Point vault NAME at the folder PATH (the notes moved); the index is kept."""
    v = open_handle(ctx).move_vault(name, path)
    click.echo(f"vault {v.name!r} now reads {_path(v)}; run `hybrid index` to catch up", err=True)


# --- indexing -----------------------------------------------------------------------------
@main.command()
@click.argument("path", required=False, type=click.Path(file_okay=False, path_type=str))
@click.option("--name", help="With PATH: the name to register it under.")
@click.option("--vault", "vaults", shell_complete=complete_vault,
              multiple=True, help="Index only this vault (repeatable).")
@click.option("--reembed", is_flag=True, help="Drop the vault's index and rebuild it with the configured embedder.")
@click.option("--wait", type=float, default=0, show_default=True,
              help="Seconds to wait for another indexer holding the vault's lock.")
@click.option("--json", "as_json", is_flag=True, help="Print the reports as JSON.")
@click.option("--fetch", is_flag=True, help="Bookmarks sources: first fetch the pages not fetched yet "
              "(and those that failed before) and index their main text. Goes online; pages "
              "fetched once are never fetched again unless --refetch.")
@click.option("--refetch", is_flag=True, help="Bookmarks sources: fetch every page again.")
@yes_option
@click.pass_context
def index(ctx, path, name, vaults, reembed, wait, as_json, fetch, refetch, yes):
    """Index all vaults (or PATH, registering it first). Re-runs are incremental."""
    h = open_handle(ctx)
    if path:
        from pathlib import Path
        same = [v for v in h.vaults if v.path.resolve() == Path(path).expanduser().resolve()]
        v = same[0] if same and name in (None, same[0].name) else h.add_vault(path, name)
        vaults = (v.name,)
    h.refresh()
    confirm_remote(h, vaults, yes=yes)
    reports = []
    with progress_bar(sys.stderr.isatty()) as progress:
        for v in h.config.select(vaults or None):  # one at a time, so each vault has its own bars
            if progress:
                progress.vault(v.name, v.embedder)
            reports += h.index([v.name], reembed=reembed, wait=wait, progress=progress, keep_going=True,
                               fetch="all" if refetch else "new" if fetch else None)
    if as_json:
        print_json([r.to_dict() for r in reports])
    for r in reports:
        if r.error:
            click.echo(f"error: {r.error}", err=True)
        elif not as_json:
            click.echo(f"{r.vault}: {r.added} added, {r.updated} updated, {r.removed} removed, "
                       f"{r.unchanged} unchanged, {r.skipped} skipped · {r.chunks} chunks "
                       f"({r.chunks_embedded} embedded, {r.cache_hits} cache hits) · {r.seconds:.2f} s"
                       + (f" · {r.fetched} pages fetched, {r.fetch_failed} failed"
                          if r.fetched or r.fetch_failed else "")
                       + (f" · upgraded to {r.upgraded} ({r.chunk_parts_reused} vectors kept their "
                          f"first half)" if r.upgraded else ""))
    if any(r.error for r in reports):
        ctx.exit(1)


# --- querying -----------------------------------------------------------------------------
def search_options(command):
    """The search request's options (:data:`hybrid.retrieval.request.OPTIONS`) as click
    options: their flags, types, ranges, choices and help come from the one definition."""
    from hybrid.retrieval.request import OPTIONS, SearchRequest, option_help
    for opt in reversed(OPTIONS):
        if not opt.flags:
            continue
        default = getattr(SearchRequest, opt.name, None)
        kw: dict = {"help": option_help(opt, "cli")}
        if opt.name == "vaults":
            kw["shell_complete"] = complete_vault
        if opt.type == "int":
            kw.update(type=click.IntRange(int(opt.low or 0), int(opt.high or 0)), default=default, show_default=True)
        elif opt.type == "float":
            kw.update(type=click.FloatRange(opt.low, opt.high), default=default)
        elif opt.type == "bool":
            kw.update(is_flag=True)
        elif opt.type == "choice":
            assert opt.choices is not None
            kw.update(type=click.Choice(list(opt.choices())), default=default, show_default=True)
        elif opt.type in ("texts", "choices"):
            kw.update(multiple=True)
            if opt.choices is not None:
                kw.update(type=click.Choice(list(opt.choices())))
        command = click.option(*opt.flags, opt.name, **kw)(command)
    return command


@main.command(cls=TextCommand)
@click.argument("text", nargs=-1)
@search_options
@click.option("-l", "--files-with-matches", "files", is_flag=True,
              help="Print only the matching notes' references (vault:path), one per line, best first.")
@click.option("--explain", is_flag=True, help="Show how the query was read (words, phrases, exclusions, "
                                             "literals, corrections, filters) and each hit's per-arm ranks.")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON: one object per note, its "
                                                       "passages inside (with --passages: the passages).")
@click.option("--group", is_flag=True, hidden=True, help="Accepted for old scripts: answers come by note.")
@click.option("--full", is_flag=True, help="Print each passage's whole chunk, not a snippet.")
@click.option("--rerank-model", help="Reranker: late, ollama:MODEL, or a cross-encoder directory or cached "
                                      "model name (overrides the setting).")
@click.option("--local", is_flag=True, help="Search in this process even when a server is running.")
@click.option("--as-agent", is_flag=True, help="See exactly what an agent would: no private notes, "
                                                "secrets redacted (settings agent_exclude, private_tags).")
@yes_option
@click.pass_context
def query(ctx, text, files, explain, as_json, group, full, rerank_model, local, as_agent, yes, **search):
    """Search. TEXT takes words, "phrases" (required), -word / -"phrase" (excluded),
    and inline filters tag:NAME folder:PATH since:DATE source:KIND KEY:VALUE. Filters alone
    (`tag:recipes`, `rating>=4`, or no TEXT with --tag/--folder/--since/--source/--prop) list the
    notes that pass them, newest first.

    TEXT may start with a dash: `hybrid query -wifi router` (router, not wifi) and
    `hybrid query --advertise-routes` (a flag searched for as written) work; a word that is one
    of the options below is read as that option unless it comes after `--`
    (`hybrid query -n 3 -- --explain`).

    The answer is notes: each note's best passage, up to 3 more of its passages below it
    (--passages: passages instead). When no hit is even fair, it says "nothing relevant" (on
    stderr) before the weak matches. Misspelled words are corrected (said on stderr). NO_COLOR
    turns colour off."""
    from hybrid.retrieval.request import empty_query, stands_alone
    if not text and not stands_alone(search):
        raise click.UsageError(empty_query("cli"))
    top_k, mode = search["top_k"], search["mode"]
    from hybrid.faces.cli.render import Look, QueryView
    if group and search["passages"]:
        raise click.UsageError("--group and --passages contradict each other: use one of them")
    view = QueryView(top_k=top_k, passages=search["passages"], as_json=as_json, files=files, full=full,
                     explain=explain, look=Look.detect())
    from hybrid.retrieval.request import from_options
    # Checked before asking a server: "query is too long" beats the server's 413.
    request = from_options(" ".join(text), search, rerank=search["rerank"] or bool(rerank_model))
    if not rerank_model and not local and not as_agent:
        # a running `hybrid serve --http` has the models warm: asked by a client that reads
        # the config alone (the engine is imported only when no server answers)
        from hybrid.core.config import load_config
        from hybrid.faces import client
        config = ctx.obj.get("hybrid").config if "hybrid" in ctx.obj else load_config()
        if mode != "lexical":
            confirm_remote_config(config, search.get("vaults"), yes=yes)
        result = client.search_result(config, request)
        if result is not None:
            view.roots = {name: config.vault(name).path for name in config.vaults}
            view.show(result, request)
            return
    h = open_handle(ctx)
    if rerank_model:
        h.override(rerank_model=rerank_model)
    if mode != "lexical":
        confirm_remote(h, search.get("vaults"), yes=yes)
    started = time.perf_counter()
    result = h.search(request, agent=as_agent)
    if mode != "lexical":
        slow_query_hint(h, time.perf_counter() - started)
    view.roots = {v.name: v.path for v in h.vaults}
    view.show(result, request)


main.add_command(query, "search")  # the same command under the name agents and users try first


@main.command()
@click.argument("ref")
@click.option("--vault", shell_complete=complete_vault, help="Vault name (needed when several are registered).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--as-agent", is_flag=True, help="Read it as an agent would (refused if private; secrets redacted).")
@click.option("--links", "show_links", is_flag=True,
              help="Print the note's links instead of its text: the notes linking to it (with the line "
                   "holding the link) and the notes it links to.")
@click.pass_context
def get(ctx, ref, vault, as_json, as_agent, show_links):
    """Print a note, or lines of it. REF is what you have at hand: a citation as `hybrid query`
    prints it (vault:path:START-END), a path (.md optional, :START-END 1-based inclusive), a
    note title or alias, or an Obsidian link ([[Note#Heading]] for that section, Note#^block).
    --links prints who links to it and what it links to instead (--json has both lists)."""
    from hybrid.app.links import describe
    note = open_handle(ctx).get(ref, vault, agent=as_agent)
    if as_json:
        print_json(note.to_dict())
    elif show_links:
        if note.backlinks is None:
            raise click.ClickException(f"{note.path} is not in the index: run `hybrid index` to see its links")
        click.echo("\n".join(describe(note)))
    else:
        click.echo(note.text)


@main.command()
@click.option("--vault", "vaults", shell_complete=complete_vault, multiple=True, help="Only this vault (repeatable).")
@click.option("--wait", type=float, default=10, show_default=True,
              help="Seconds to wait for an indexer working on a vault.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def vacuum(ctx, vaults, wait, as_json):
    """Reclaim disk space: unused cached embeddings, deleted documents, free database pages."""
    reports = open_handle(ctx).vacuum(vaults or None, wait=wait)
    if as_json:
        print_json([r.to_dict() for r in reports])
        return
    for r in reports:
        ocr = f", {r.ocr_removed} unused OCR results" if r.ocr_removed else ""
        click.echo(f"{r.vault}: {r.embeddings_removed} unused embeddings removed{ocr}, "
                   f"{r.bytes_before / 1e6:.1f} MB -> {r.bytes_after / 1e6:.1f} MB")


# --- serving ------------------------------------------------------------------------------
def _start_watcher(h, watch: bool, debounce: float):
    if not watch:
        return None
    from hybrid.app.watch import VaultWatcher
    watcher = VaultWatcher(h, debounce=debounce)
    watcher.start()
    return watcher


def _warm_up(h, wait: bool) -> None:
    """Load every vault's models (each part of a mix) and open its indexes as owner and agent
    with one search each, so the first real search is not the slow one: before the HTTP server
    binds and says it is ready (``wait``), or in the background (stdio, whose client starts
    talking at once)."""
    import threading

    from hybrid.embedders.base import parts_of

    def load():
        log = logging.getLogger("hybrid")
        for v in h.vaults:
            started = time.perf_counter()
            try:
                emb = h.embedder(v.embedder)
                for part in (*parts_of(emb), emb):
                    part.embed_query("warm up")
                for agent in (False, True):
                    h.search("warm up", vaults=[v.name], top_k=1, agent=agent)
            except Exception as exc:  # reported again, with its fix, by the first search
                log.warning("could not warm up vault %s: %s", v.name, exc)
                continue
            log.info("vault %s warm (models loaded, indexes open) in %.1f s", v.name,
                     time.perf_counter() - started)

    if wait:
        load()
    else:
        threading.Thread(target=load, name="hybrid-warmup", daemon=True).start()


@main.command()
@click.option("--http", "http_", is_flag=True, help="Serve MCP over Streamable HTTP (default: stdio).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (HTTP).")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(1, 65535), help="Port (HTTP).")
@click.option("--token", envvar="HYBRID_TOKEN", help="Require this bearer token (HTTP; env HYBRID_TOKEN).")
@click.option("--allow-host", "allow_hosts", multiple=True,
              help="Also accept this Host name or IP, e.g. the LAN name clients use with --host 0.0.0.0 "
                   "(HTTP; repeatable; env HYBRID_ALLOWED_HOSTS, comma-separated).")
@click.option("--watch", is_flag=True, help="Keep the vaults' indexes in sync with their folders.")
@click.option("--debounce", default=0.5, show_default=True, type=click.FloatRange(0, 60),
              help="With --watch: seconds of quiet before re-indexing.")
@yes_option
@click.pass_context
def serve(ctx, http_, host, port, token, allow_hosts, watch, debounce, yes):
    """Run the MCP server: stdio (what Claude Desktop / Claude Code launch) or HTTP."""
    h = open_handle(ctx)
    confirm_remote(h, yes=yes, ask=False)  # stdin may be the MCP client's: never asked here
    if http_:
        from hybrid.faces.http_guard import is_loopback
        if not is_loopback(host) and not token:  # before anything starts or is announced
            raise HybridError(f"binding {host} exposes your notes to the network: set a token "
                              f"with --token or HYBRID_TOKEN")
    _warm_up(h, wait=http_)
    watcher = _start_watcher(h, watch, debounce)
    try:
        if http_:
            from hybrid.faces.http import serve_http
            # an IPv6 address is bracketed in a URL; /health never asks for the token
            where = f"[{host}]" if ":" in host and not host.startswith("[") else host
            ready = (f"hybrid: search page at http://{where}:{port}/ (sign in with `hybrid ui`"
                     + (" or the token" if token else "") + "), MCP at /mcp"
                     + (" (token required)" if token else "") + ", health at /health")
            env_hosts = os.environ.get("HYBRID_ALLOWED_HOSTS", "").split(",")
            serve_http(h, host, port, token, watcher,
                       allowed_hosts=[*allow_hosts, *(n.strip() for n in env_hosts if n.strip())],
                       on_ready=lambda: click.echo(ready, err=True))
        else:
            from hybrid.faces.mcp import run_stdio
            run_stdio(h, watcher)
    finally:
        if watcher is not None:
            watcher.stop()


@main.command()
@click.option("--vault", "vaults", shell_complete=complete_vault,
              multiple=True, help="Watch only this vault (repeatable).")
@click.option("--debounce", default=0.5, show_default=True, type=click.FloatRange(0, 60),
              help="Seconds of quiet before re-indexing.")
@click.pass_context
def watch(ctx, vaults, debounce):
    """Keep indexes in sync with their folders until interrupted (Ctrl-C)."""
    import signal
    import threading

    from hybrid.app.watch import VaultWatcher

    h = open_handle(ctx)
    h.config.select(vaults or None)  # unknown names fail here, with the list of known ones
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with VaultWatcher(h, list(vaults) or None, debounce=debounce):
        click.echo(f"watching {', '.join(vaults) or 'all vaults'}; Ctrl-C to stop", err=True)
        while not stop.wait(0.5):
            pass


@main.group(cls=Group)
def service() -> None:
    """Install hybrid as a background service (systemd user unit or launchd agent)."""


@service.command("install")
@click.option("--watch/--no-watch", default=True, show_default=True, help="Keep vaults in sync.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8765, show_default=True, type=click.IntRange(1, 65535))
def service_install(watch, host, port):
    """Write and enable the service: `hybrid serve --http` (a background service has no stdio
    client), watching the vaults unless --no-watch."""
    from hybrid.faces.cli import service as svc
    env = {k: os.environ[k] for k in ("HYBRID_HOME", "HYBRID_TOKEN") if os.environ.get(k)}
    _report(svc.install(http=True, watch=watch, port=port, host=host, env=env))


def _report(result) -> None:
    """An InstallResult: its message, on stderr with exit 1 when it did not succeed."""
    click.echo(result.message, err=not result.ok)
    if not result.ok:
        sys.exit(1)


@service.command("uninstall")
def service_uninstall():
    """Stop and remove the service."""
    from hybrid.faces.cli import service as svc
    _report(svc.uninstall())


@service.command("status")
def service_status():
    """Show whether the service is installed and running."""
    from hybrid.faces.cli import service as svc
    r = svc.status()
    click.echo(r.message)


# `eval`, `audit` and `proposals` live in their own modules, loaded when used (LazyGroup above).


if __name__ == "__main__":
    main()
