"""Stores: where a vault's index lives. :func:`backend` is the only reader of a vault's
``store`` setting: the registry of store kinds (:mod:`hybrid.core.store_url`) names the backend
that keeps it (none: the local backend, :mod:`hybrid.store.local`; a PostgreSQL URL: team mode,
:mod:`hybrid.store.pg`; another scheme: the backend a package declares for it). Every layer
above asks it, through the protocols of :mod:`hybrid.store.port`, and never names a backend."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from hybrid.core.store_url import kind_of, store_kinds

if TYPE_CHECKING:
    from hybrid.core.config import Vault
    from hybrid.core.errors import HybridError
    from hybrid.store.port import Backend, Store


def backend(vault: Vault) -> Backend:
    """The backend that keeps ``vault``'s store (imported on first use: a local vault never
    imports a database driver)."""
    backend: Backend = kind_of(vault.store).load()
    return backend


def open_store(vault: Vault, *, writer: bool = False, wait: float = 0) -> Store:
    """``vault``'s store, as its reader (VaultError when it is not indexed yet) or, for a
    backend that opens writers this way, its writer."""
    return backend(vault).open(vault, writer=writer, wait=wait)


def explain(exc: BaseException) -> HybridError | None:
    """The one-line error for a store driver's exception that escaped a store unexplained (a
    refusal no store method translated); None when it is not a store's. Only backends already
    imported are asked: one that was never loaded raised nothing."""
    for kind in store_kinds():
        if kind.backend.partition(":")[0] in sys.modules:
            found = kind.load().explain(exc)
            if found is not None:
                return found
    return None

