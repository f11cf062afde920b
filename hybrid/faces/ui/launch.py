"""``hybrid ui``: open the search page, signed in, starting a server first if none runs.

The running server is found through its address file (``server.json``, see
:mod:`hybrid.faces.http`); a one-time sign-in link is asked for with the owner key written
there, and opened in the browser (or printed). A server started here runs in the background,
detached (``hybrid serve --http``, with ``--watch`` unless told otherwise), logging to
``server.log`` in the data folder, and outlives this command.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hybrid.core.errors import HybridError

if TYPE_CHECKING:
    from hybrid.app.api import Hybrid

START_TIMEOUT = 60.0  # seconds to wait for a server started here to listen


def running_server(h: Hybrid) -> dict | None:
    """The address file of a server that answers ``/health`` now, else None."""
    from hybrid.faces.http import server_info
    info = server_info(h)
    if info is None:
        return None
    try:
        with urllib.request.urlopen(info["url"] + "/health", timeout=2) as resp:
            if resp.status == 200:
                return info
    except (OSError, ValueError):
        pass
    return None


def start_server(h: Hybrid, port: int, watch: bool, timeout: float = START_TIMEOUT) -> dict:
    """Start ``hybrid serve --http`` in the background and wait until it listens; its address
    file. HybridError (with the end of its log) when it does not come up."""
    log_path = h.config.data / "server.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    args = [sys.executable, "-m", "hybrid", "serve", "--http", "--port", str(port)]
    if watch:
        args.append("--watch")
    with open(log_path, "ab") as log_file:  # the same environment: the same config and data folder
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file,
                                start_new_session=True, cwd=str(h.config.data))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = running_server(h)
        if info is not None and info.get("pid") == proc.pid:
            return info
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    else:
        proc.terminate()
    tail = _tail(log_path)
    raise HybridError(f"the server did not start{': ' + tail if tail else ''} (log: {log_path})")


def _tail(path: Path) -> str:
    try:
        lines = [x for x in path.read_text(encoding="utf-8", errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def sign_in_url(info: dict) -> str:
    """A one-time sign-in link from the server at ``info`` (its address file)."""
    req = urllib.request.Request(str(info["url"]) + "/ui/api/ticket", data=b"{}", method="POST",
                                 headers={"Content-Type": "application/json",
                                          "X-Hybrid-Owner": str(info["owner_key"])})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            path = json.loads(resp.read())["path"]
    except urllib.error.HTTPError as exc:
        raise HybridError(f"the server at {info['url']} refused a sign-in link (HTTP {exc.code}): "
                          f"is it an older hybrid? restart it") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HybridError(f"could not reach the server at {info['url']}: {exc}") from None
    return str(info["url"]) + str(path)


@click.command("ui")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(1, 65535),
              help="Port of the server to start when none is running.")
@click.option("--watch/--no-watch", default=True, show_default=True,
              help="A server started here keeps the vaults in sync with their folders.")
@click.option("--no-open", "no_open", is_flag=True, help="Print the sign-in link instead of opening a browser.")
@click.pass_context
def ui_cmd(ctx, port, watch, no_open):
    """Open the search page in the browser, signed in (starts `hybrid serve --http` if needed).

    \b
    The link opened signs this browser in once; it expires after two minutes.
    """
    from hybrid.faces.cli.support import open_handle
    h = open_handle(ctx)
    info = running_server(h)
    if info is None:
        click.echo(f"starting the server on port {port} (log: {h.config.data / 'server.log'})...", err=True)
        info = start_server(h, port, watch)
    url = sign_in_url(info)
    if not no_open:
        import webbrowser
        try:
            opened = webbrowser.open(url)
        except webbrowser.Error:
            opened = False
        if opened:
            click.echo(f"search page: {info['url']}/ (opened in your browser)")
            return
        click.echo("no browser found: open this link (it signs you in once, within two minutes):", err=True)
    click.echo(url)
