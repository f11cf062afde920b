"""Registering vaults: add, remove, rename and move them (what `hybrid vault …` does), each
change to the registry made under the vault's writer lock where it touches the index folder.
A part of :class:`hybrid.app.api.Hybrid`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from hybrid.core.errors import VaultError
from hybrid.store import backend

if TYPE_CHECKING:
    from collections.abc import Sequence

    from hybrid.app.session import Session
    from hybrid.core.config import Config, Vault


class Registry:
    """The vault registry's operations of a handle (which supplies ``config``, ``settings``,
    ``refresh`` and its ``session``)."""

    config: Config
    settings: Any
    session: Session

    if TYPE_CHECKING:  # the handle's own
        def refresh(self) -> bool: ...

    def add_vault(self, path: str | Path, name: str | None = None, include: Sequence[str] = (),
                  exclude: Sequence[str] = (), store: str | None = None, kind: str = "notes") -> Vault:
        """Register ``path``. Refuses a name that is taken by another folder (``move_vault``
        re-points one) and a folder registered under another name. ``store``: a PostgreSQL URL
        (without a password) or ``postgresql`` for ``$HYBRID_DATABASE_URL`` (team mode).
        ``kind``: ``bookmarks`` or ``slack`` registers that export as a source
        (:mod:`hybrid.sources`); the ``store`` setting (the team default) applies to folders
        of notes only, an explicit ``store`` to any."""
        from hybrid.sources import SOURCES, check_source
        check_source(kind, Path(path).expanduser().resolve())
        if store is None and self.settings.store and kind in SOURCES and SOURCES[kind].folder:
            store = self.settings.store  # the team default: folders of notes
        with self.config.edit() as cfg:
            vault = cfg.add_vault(Path(path), name, list(include), list(exclude), store, kind)
        return self.config.vault(vault.name)

    def add_source(self, kind: str, path: str | Path, name: str | None = None,
                   store: str | None = None) -> Vault:
        """Register a bookmarks export (``kind="bookmarks"``) or a Slack export (``"slack"``);
        ``store`` as for :meth:`add_vault` (team mode)."""
        return self.add_vault(path, name, store=store, kind=kind)

    def remove_vault(self, name: str, purge: bool = True, wait: float = 0) -> Vault:
        """Unregister vault ``name`` and (``purge``) delete its index: only the files the index
        is made of, never anything else in that folder, and never the notes. Refused while an
        indexer holds the vault's lock (``wait`` seconds for it)."""
        self.refresh()
        vault = self.config.vault(name)
        with self._index_lock(vault, wait):
            with self.config.edit() as cfg:
                cfg.remove_vault(name)
            self.session.close_store(name)
            if purge:
                backend(vault).purge(vault)
        return vault

    def rename_vault(self, old: str, new: str, wait: float = 0) -> Vault:
        """Rename a vault, keeping its index (its folder is renamed with it)."""
        self.refresh()
        vault = self.config.vault(old)
        target = self.config.index_dir(new)
        with self._index_lock(vault, wait):
            if new not in self.config.vaults and target.exists():
                raise VaultError(f"{target} already exists (an index kept by `vault remove "
                                 f"--keep-index`?); move it away or pick another name")
            with self.config.edit() as cfg:
                self.session.close_store(old)
                backend(vault).rename(vault, new, target)  # refused where the name is shared
                cfg.rename_vault(old, new)
        from hybrid.core.files import sibling
        sibling(vault.index_dir, ".lock").unlink(missing_ok=True)  # no vault has that name now
        return self.config.vault(new)

    def move_vault(self, name: str, path: str | Path) -> Vault:
        """Point vault ``name`` at another folder (its notes moved there); the index is kept and
        the next ``index`` re-reads only what differs."""
        with self.config.edit() as cfg:
            cfg.move_vault(name, Path(path))
        self.session.close_store(name)
        return self.config.vault(name)

    def _index_lock(self, vault: Vault, wait: float):
        """The vault's writer lock (what `hybrid index` holds), so registry changes that touch
        the index folder never pull it from under a running indexer."""
        from hybrid.core.errors import IndexLocked
        from hybrid.core.files import lock_dir
        try:  # the lock file lives beside the index folder: held even before that exists
            lock = lock_dir(vault.index_dir, wait)
        except IndexLocked:
            raise IndexLocked(f"vault {vault.name!r} is being indexed; try again when it finishes "
                              f"(or pass --wait SECONDS)") from None
        return _Releasing(lock)


class _Releasing:
    """Context manager that releases an already acquired lock."""

    def __init__(self, lock):
        self.lock = lock

    def __enter__(self):
        return self.lock

    def __exit__(self, *exc):
        self.lock.release()
        return False
