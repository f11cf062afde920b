"""Domain exceptions. The library raises these; the CLI and MCP server turn them into one line
that names the fix. Nothing here is for programming errors (those stay ordinary exceptions)."""

from __future__ import annotations


class HybridError(Exception):
    """Base class: a problem the user can fix. ``str(err)`` is a complete one-line message.
    ``for_agents``: the line an agent (MCP, ``/api/*`` without the owner key) is told instead,
    when the message is for the owner only; None: the message itself."""

    for_agents: str | None = None


class ConfigError(HybridError):
    """The config file or a setting is invalid."""


class VaultError(HybridError):
    """Unknown vault name, missing vault folder, or a bad registration."""


class ModelUnavailable(HybridError):
    """The configured embedding model is not installed or not reachable. Its message may name a
    server's address, quote its answer or name a path here: agents are told only this much."""

    for_agents: str | None = ("a model this search needs is unavailable; the owner can see details in "
                              "the server's log")


class EmbedderMismatch(HybridError):
    """The index was built with another embedder than the one configured."""


class QuerySyntaxError(HybridError):
    """The query text cannot be parsed (unbalanced quote, nothing to search for, bad date)."""


class IndexLocked(HybridError):
    """Another process is indexing the same vault."""


class PathRefused(HybridError):
    """A path that would read outside a registered vault, or that does not exist in it."""


class IndexCorrupt(HybridError):
    """The on-disk index cannot be read; the message names the command that rebuilds it."""


class CatalogCorrupt(IndexCorrupt):
    """The catalog (the ledger) is unreadable: empty, not SQLite, or damaged. The indexer moves
    it aside and rebuilds it from the notes."""


class DiskFull(HybridError):
    """A write failed for lack of disk space; the message names the folder to free space in."""


class StoreUnavailable(HybridError):
    """A PostgreSQL store cannot be used: unreachable, login refused, pgvector missing, a schema
    this hybrid cannot read. The message names the fix and never holds a password; it names the
    server, so agents are told only that the store is unavailable."""

    for_agents: str | None = "the vault's store is unavailable; the owner can see details in the server's log"


def one_line(exc: BaseException, limit: int = 200) -> str:
    """The first line of ``exc``'s message, at most ``limit`` characters (its type's name when
    it has none): how an unforeseen failure is shown to a caller and written to a log record."""
    text = str(exc).strip()
    return text.splitlines()[0][:limit] if text else type(exc).__name__
