"""The Milvus backend (:class:`hybrid.store.port.Backend`): a vault's ledger is the local SQLite
catalog, as for a local vault (written by one indexer under the folder's lock, crash-safe, the
re-embed built beside and swapped in), and its derived indexes, the owner's and the agent
view's lexical indexes and the vector index, are collections in Milvus
(``milvus://HOST:19530/DB``, or Milvus Lite's file: ``milvus:///path/to/index.db``).

Why the ledger stays in SQLite: everything a search ranks runs inside Milvus (BM25 over hybrid's
own tokens, the ANN index, every note filter as a scalar expression); what the ledger answers
is a search's few rows and a filter's note list, which one file serves fast on the machine that
indexes. docs/scale-out.md says which store to pick at which size.

Each ledger names its collections ``hy_<vault>_<generation>_<part>``: a re-embed (a new ledger
built beside the old one) writes a new generation while the old one answers, and once the new
ledger is swapped in, the collections of the generations this machine's ledgers named before
and name no more are dropped (:func:`sweep`). Only those: another home's ledger may keep a
vault of the same name in the same database (one database per home is the rule, docs/scale-out.md),
and its collections are never touched.
"""

from __future__ import annotations

import logging
import re
import secrets
from typing import TYPE_CHECKING, Any, TypeVar

from hybrid.core.errors import HybridError, IndexCorrupt
from hybrid.core.store_url import redact, resolve
from hybrid.store.local.backend import LocalBackend
from hybrid.store.local.layout import REEMBED_READY, REEMBED_TMP, purge_index_dir

if TYPE_CHECKING:
    from collections.abc import Callable

    from hybrid.core.config import Vault
    from hybrid.store.agent.redact import Redactor
    from hybrid.store.agent.view import AgentView
    from hybrid.store.local.store import VaultStore
    from hybrid.store.milvus.lexical import MilvusLexical
    from hybrid.store.milvus.vector import MilvusVector
    from hybrid.store.port import Store

log = logging.getLogger("hybrid")
T = TypeVar("T")
GENERATION_KEY = "milvus_generation"  # the ledger's meta: which collections it projects into


# A vault name's characters other than letters and digits (hybrid.core.config.check_vault_name),
# spelled as Milvus allows: each escape starts with "_" then a letter that is no hex digit, so no
# vault's collections can be read as another's generation (see :func:`generation_of`).
ESCAPES = {"_": "__", "-": "_h", ".": "_o"}
GENERATION_RE = re.compile(r"([0-9a-f]{8})(?:_|$)")


def base_name(vault: str) -> str:
    """``hy_<vault>_``: what every collection of ``vault`` starts with (Milvus allows letters,
    digits and underscores only; two vault names never give one base)."""
    return "hy_" + "".join(ESCAPES.get(c, c) for c in vault) + "_"


def generation_of(name: str, vault: str) -> str | None:
    """The generation of collection ``name`` when it is ``vault``'s (None: another's)."""
    base = base_name(vault)
    m = GENERATION_RE.match(name, len(base)) if name.startswith(base) else None
    return m.group(1) if m else None


class MilvusIndexes:
    """A vault's indexes in Milvus (:class:`hybrid.store.local.store.IndexPlace`)."""

    def __init__(self, url: str, vault: str):
        self.url, self.vault = url, vault
        self._client: Any = None

    def client(self) -> Any:
        """One client for the store's indexes (connected on first use, closed with the store)."""
        if self._client is None:
            from hybrid.store.milvus.client import connect
            self._client = connect(self.url, self.vault)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def prefix(self, store: VaultStore) -> str:
        """The collections ``store``'s ledger projects into; a new ledger's writer picks a new
        generation (a reader of a ledger with none finds the vault not indexed yet)."""
        gen = store.catalog.get_meta(GENERATION_KEY)
        if not gen:
            if not store.writable:
                raise IndexCorrupt("not indexed yet")
            gen = secrets.token_hex(4)
            store.catalog.set_meta(GENERATION_KEY, gen)
        return base_name(self.vault) + gen

    def lexical(self, store: VaultStore, agent: bool) -> MilvusLexical:
        """A writer that finds it written by another layout drops it (the sync rebuilds it from
        the ledger); a reader gets IndexCorrupt naming `hybrid index` when it searches."""
        from hybrid.store.agent.view import META_KEY
        from hybrid.store.milvus.lexical import MilvusLexical
        lex = MilvusLexical(self.client(), self.prefix(store) + ("_agent" if agent else ""))
        if store.writable:
            try:
                lex.verify()
            except IndexCorrupt as exc:
                store.heal_note(f"{store.name}: {'agent ' if agent else ''}lexical index unreadable ({exc}); "
                                f"rebuilding it from the catalog")
                lex.destroy()
                if agent:
                    store.catalog.set_meta(META_KEY, "")  # rebuilt by the next sync
        return lex

    def vector(self, store: VaultStore) -> MilvusVector:
        from hybrid.store.milvus.vector import MilvusVector
        return MilvusVector(self.client(), self.prefix(store))

    def drop(self, store: VaultStore) -> None:
        """A new ledger projects into a new generation: nothing of it exists yet, and the old
        ledger's collections go once no ledger names them (:func:`sweep`)."""


def sweep(client: Any, vault: str, gone: set[str]) -> list[str]:
    """Drop ``vault``'s collections of the generations ``gone`` (their aliases first: a server
    refuses to drop a collection an alias names); the names dropped."""
    dropped = []
    for name in client.list_collections() if gone else ():
        if generation_of(name, vault) in gone:
            for alias in client.list_aliases(collection_name=name).get("aliases", []):
                client.drop_alias(alias)
            client.drop_collection(name)
            dropped.append(name)
    if dropped:
        log.info("%s: dropped %d Milvus collections of an earlier index", vault, len(dropped))
    return dropped


def generations(vault: Vault) -> set[str]:
    """The generations the vault's ledgers on this machine name: its index folder's, and a
    re-embed's beside it (finished or not)."""
    from hybrid.core.files import sibling
    from hybrid.store.local.catalog import Catalog
    out = set()
    for folder in (vault.index_dir, sibling(vault.index_dir, REEMBED_TMP), sibling(vault.index_dir, REEMBED_READY)):
        path = folder / "catalog.sqlite"
        if not path.exists():
            continue
        try:
            cat = Catalog(path, readonly=True)
        except Exception:  # an unreadable ledger names nothing we can read
            continue
        try:
            gen = cat.get_meta(GENERATION_KEY)
        finally:
            cat.close()
        if gen:
            out.add(gen)
    return out


class MilvusBackend(LocalBackend):
    name = "milvus"

    def indexes(self, vault: Vault) -> MilvusIndexes:
        return MilvusIndexes(resolve(vault.store or "", vault.name), vault.name)

    def explain(self, exc: BaseException) -> HybridError | None:
        """A Milvus failure that escaped an index method (the server went away mid-run), as one line."""
        from hybrid.store.milvus.client import explain
        return explain(exc, "")

    def where(self, vault: Vault) -> str | None:
        return redact(resolve(vault.store or "", vault.name))

    def write(self, vault: Vault, run: Callable[[Store], T], *, reembed: bool, wait: float,
              view: AgentView, redactor: Redactor | None) -> T:
        """As a local vault's; then the collections of the ledgers it replaced (a re-embed's
        old one, an unreadable one rebuilt from the notes, a re-embed that died) are dropped."""
        from hybrid.store.milvus.client import explain
        before = generations(vault)
        try:
            result = super().write(vault, run, reembed=reembed, wait=wait, view=view, redactor=redactor)
        except Exception as exc:  # Milvus went away mid-run: the ledger keeps the journal
            problem = explain(exc, self.where(vault) or "")
            if problem is None:
                raise
            raise problem from None
        self._sweep(vault, before - generations(vault))
        return result

    def _sweep(self, vault: Vault, gone: set[str]) -> None:
        if gone:
            place = self.indexes(vault)
            try:
                sweep(place.client(), vault.name, gone)
            finally:
                place.close()

    def purge(self, vault: Vault) -> list[str]:
        """The ledger's folder, and the collections its ledgers name (they project it: nothing
        else reads them)."""
        self._sweep(vault, generations(vault))
        return purge_index_dir(vault.index_dir)

    def drop(self, vault: Vault) -> None:
        self.purge(vault)

    def rename(self, vault: Vault, new_name: str, new_index_dir: Any) -> None:
        """The ledger's folder moves; the collections and their aliases are renamed to the new
        name's (the ledger names them by its generation, which stays)."""
        gens = generations(vault)
        if gens:
            place = self.indexes(vault)
            try:
                client = place.client()
                old, new = base_name(vault.name), base_name(new_name)
                for name in client.list_collections():
                    if generation_of(name, vault.name) in gens:
                        aliases = client.list_aliases(collection_name=name).get("aliases", [])
                        for alias in aliases:
                            client.drop_alias(alias)
                        client.rename_collection(name, new + name[len(old):])
                        for alias in aliases:
                            client.create_alias(new + name[len(old):], new + alias[len(old):])
            finally:
                place.close()
        super().rename(vault, new_name, new_index_dir)


BACKEND = MilvusBackend()
