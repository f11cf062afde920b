"""Stores: where a vault's index lives. :func:`backend` is the only reader of a vault's
``store`` setting (none: the local backend, :mod:`hybrid.store.local`; a PostgreSQL URL: team
mode, :mod:`hybrid.store.pg`); every layer above asks it, through the protocols of
:mod:`hybrid.store.port`, and never names a backend."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hybrid.core.config import Vault
    from hybrid.core.errors import HybridError
    from hybrid.store.port import Backend, Store


def backend(vault: Vault) -> Backend:
    """The backend that keeps ``vault``'s store (loaded on first use: a local vault never
    imports the PostgreSQL driver)."""
    if vault.store:
        from hybrid.store.pg.backend import BACKEND as pg
        return pg
    from hybrid.store.local.backend import BACKEND as local
    return local


def open_store(vault: Vault, *, writer: bool = False, wait: float = 0) -> Store:
    """``vault``'s store, as its reader (VaultError when it is not indexed yet) or, for a
    backend that opens writers this way, its writer."""
    return backend(vault).open(vault, writer=writer, wait=wait)


def explain(exc: BaseException) -> HybridError | None:
    """The one-line error for a database driver's exception that escaped a store unexplained
    (a refusal no store method translated); None when it is not a store's."""
    if "psycopg" in sys.modules:  # only a PostgreSQL store loads it
        from hybrid.store.pg.connect import explain as pg_explain
        return pg_explain(exc)
    return None
