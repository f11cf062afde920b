"""Where a vault's text is sent, and the user's once-given yes before it goes to another machine.

The servers come from :func:`hybrid.embedders.remote.destinations` (specs and settings alone).
A server that is not this machine must be confirmed once, per base URL, before the first text
goes there: the CLI asks (or takes ``--yes``) and records the answer in ``remote-consent.json``
in the data dir; every door (CLI, MCP, HTTP, the Python API) goes through :func:`require`
when it builds a model, so an agent's server cannot send text anywhere the owner has not said
yes to. Text that does go is redacted first (:mod:`hybrid.embedders.remote`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from hybrid.core.config import Config, Vault
from hybrid.core.errors import HybridError
from hybrid.embedders.registry import options_from
from hybrid.embedders.remote import Destination, destinations

CONSENT_FILE = "remote-consent.json"


class RemoteNotConfirmed(HybridError):
    """Text would go to a server on another machine that the user has not confirmed (its
    address is for the owner: agents are told only that a model is unavailable)."""

    for_agents: str | None = ("a model this search needs is unavailable; the owner can see details in "
                              "the server's log")


def vault_destinations(config: Config, vault: Vault) -> list[Destination]:
    """Every server vault ``vault``'s text may be sent to: its embedder's (notes when indexed,
    queries when searched) and, when ``rerank_model`` is one, the reranker's (queries and the
    passages it rescores)."""
    o = options_from(config.settings)
    found = destinations(vault.embedder, o) + destinations(config.settings.rerank_model, o, rerank=True)
    return list(dict.fromkeys(found))


def _consent_path(config: Config) -> Path:
    return config.data / CONSENT_FILE


def confirmed(config: Config) -> dict[str, str]:
    """The confirmed base URLs, with when each was confirmed (an unreadable file: none)."""
    try:
        doc = json.loads(_consent_path(config).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    table = doc.get("confirmed") if isinstance(doc, dict) else None
    return {str(k): str(v) for k, v in table.items()} if isinstance(table, dict) else {}


def unconfirmed(config: Config, found: Iterable[Destination]) -> list[Destination]:
    """Those of ``found`` on another machine that nobody has confirmed yet."""
    done = confirmed(config)
    return [d for d in dict.fromkeys(found) if not d.local and d.url not in done]


def confirm(config: Config, urls: Sequence[str]) -> None:
    """Record the user's yes for ``urls`` (atomically, under a lock: two CLIs may answer)."""
    from filelock import FileLock
    path = _consent_path(config)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock", timeout=30):
        table = confirmed(config)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        table.update({u: table.get(u, stamp) for u in urls})
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"confirmed": table}, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)


def describe(d: Destination, pending: bool = False) -> str:
    """``https://api.openai.com/v1 (embeddings (openai:…), another machine[, not confirmed yet])``."""
    return (f"{d.url} ({d.what}, {'this machine' if d.local else 'another machine'}"
            + (", not confirmed yet)" if pending else ")"))


def require(config: Config, found: Iterable[Destination]) -> None:
    """RemoteNotConfirmed (one line, naming the servers and how to confirm) unless every server
    of ``found`` on another machine has been confirmed."""
    missing = unconfirmed(config, found)
    if missing:
        names = "; ".join(describe(d) for d in missing)
        raise RemoteNotConfirmed(
            f"text would be sent to {names}, which you have not confirmed: run "
            f"`hybrid index --yes` (or answer yes when `hybrid index` asks) once, or choose a "
            f"model that runs here")
