"""Where a vault's index lives, as its ``store`` setting says (`hybrid vault add --store`), and
which backend keeps it: the one registry of store kinds, keyed by the URL's scheme.

- none (or ``file://``): local files under hybrid's data folder (:mod:`hybrid.store.local`);
- ``postgresql://`` (``postgres://``), or the word ``postgresql`` for the URL in
  ``$HYBRID_DATABASE_URL``: a shared PostgreSQL database (:mod:`hybrid.store.pg`);
- ``milvus://HOST:19530/DB`` (a Milvus server) or ``milvus:///PATH/index.db`` (Milvus Lite): the
  ledger in local files, both indexes in Milvus (:mod:`hybrid.store.milvus`);
- a scheme another package declares in the entry-point group :data:`ENTRY_POINT_GROUP`.

A kind is declared here by name and scheme only; its backend module is imported when a vault of
it is first opened (:meth:`StoreKind.load`), so a local vault never imports a database driver.
The config checks a value when it is written (:func:`check_store_value`); a backend resolves it
when it connects. A password never reaches the config file, a message or a log (:func:`redact`).
"""

from __future__ import annotations

import importlib
import logging
import os
import re
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from hybrid.core.errors import StoreUnavailable

log = logging.getLogger("hybrid")

ENTRY_POINT_GROUP = "hybrid.stores"  # a third-party store kind: an entry point naming a StoreKind
ENV_URL = "HYBRID_DATABASE_URL"


@dataclass(frozen=True)
class StoreKind:
    """One kind of store, as the registry knows it before its backend is imported."""
    name: str                    # "local", "postgresql": what tests and messages call it
    schemes: tuple[str, ...]     # URL schemes it keeps ("postgresql", "postgres")
    backend: str                 # "module:attribute" of its hybrid.store.port.Backend
    example: str                 # a value of it, for messages ("postgresql://USER@HOST/DB")
    words: tuple[str, ...] = ()  # bare values standing for a URL in ``env`` (first: the stored form)
    env: str = ""                # the environment variable those words read
    shared: bool = False         # it lives outside this machine's data folder (a database)

    def load(self) -> Any:
        """Its backend object (imported on first use)."""
        module, _, attr = self.backend.partition(":")
        return getattr(importlib.import_module(module), attr)

    def holds(self, value: str) -> bool:
        """Whether ``value`` (a ``store`` setting) names a store of this kind."""
        return value in self.words or urlsplit(value).scheme.lower() in self.schemes


LOCAL = StoreKind("local", ("file",), "hybrid.store.local.backend:BACKEND", "file://")
POSTGRESQL = StoreKind("postgresql", ("postgresql", "postgres"), "hybrid.store.pg.backend:BACKEND",
                       "postgresql://USER@HOST/DB", words=("postgresql", "postgres", "env"),
                       env=ENV_URL, shared=True)
MILVUS = StoreKind("milvus", ("milvus",), "hybrid.store.milvus.backend:BACKEND",
                   "milvus://HOST:19530/DB or milvus:///PATH/index.db", shared=True)
BUILT_IN = (LOCAL, POSTGRESQL, MILVUS)


@cache
def store_kinds() -> tuple[StoreKind, ...]:
    """Every store kind: the built-in ones, then those other installed packages declare (an
    entry point of :data:`ENTRY_POINT_GROUP` naming a :class:`StoreKind`). A declaration that
    cannot be loaded, or claims a scheme already taken, is skipped with one logged line."""
    from importlib.metadata import entry_points
    kinds = list(BUILT_IN)
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            kind = ep.load()
        except Exception as exc:  # a broken plugin must not stop hybrid
            log.warning("store kind %r (%s) skipped: %s", ep.name, ep.value, exc)
            continue
        if not isinstance(kind, StoreKind):
            log.warning("store kind %r skipped: %s is not a hybrid StoreKind", ep.name, ep.value)
            continue
        taken = [k.name for k in kinds if k.name == kind.name or set(k.schemes) & set(kind.schemes)]
        if taken:
            log.warning("store kind %r skipped: its name or scheme is %r's", kind.name, taken[0])
            continue
        kinds.append(kind)
    return tuple(kinds)


def kind_of(value: str | None) -> StoreKind:
    """The kind of store a ``store`` setting names (empty: local); StoreUnavailable naming the
    kinds known when none keeps it."""
    value = (value or "").strip()
    if not value:
        return LOCAL
    for kind in (*BUILT_IN, *store_kinds()):  # the built-in ones first: no package scan for them
        if kind.holds(value):
            return kind
    known = ", ".join(k.example for k in store_kinds())
    raise StoreUnavailable(f"store {redact(value)!r} is no store hybrid knows (empty for local files, "
                           f"`postgresql` for ${ENV_URL}, or a URL: {known})")


def is_store_value(value: str) -> bool:
    """Whether ``value`` names a store of a known kind (empty: local files)."""
    try:
        kind_of(value)
    except StoreUnavailable:
        return False
    return value == value.strip()


def check_store_value(value: str) -> str:
    """A vault's ``store`` as given to `hybrid vault add --store`, as the config keeps it: a URL
    without a password (config files get copied and shown), a kind's word for its URL in the
    environment (``postgresql``), or empty for local files (``file://`` too)."""
    value = value.strip()
    kind = kind_of(value)
    if kind is LOCAL:
        if urlsplit(value).netloc or urlsplit(value).path:
            raise StoreUnavailable(f"store {value!r}: a local store has no address (its folder is "
                                   f"under hybrid's data folder); leave --store out")
        return ""
    if value in kind.words:
        return kind.words[0]
    if urlsplit(value).password or re.search(r"(^|[?&])password=", urlsplit(value).query):
        raise StoreUnavailable(f"the store URL holds a password, which would be written to the "
                               f"config file; set {kind.env or ENV_URL} and use --store "
                               f"{kind.words[0] if kind.words else kind.name}, or keep the password "
                               f"where the {kind.name} client reads it")
    return value


def resolve(value: str, vault: str) -> str:
    """The URL to connect with for a vault's ``store`` value."""
    kind = kind_of(value)
    if value in kind.words:
        url = os.environ.get(kind.env, "").strip()
        if not url:
            raise StoreUnavailable(f"vault {vault!r} is stored in {kind.name} but {kind.env} is not "
                                   f"set; export {kind.env}={kind.example}")
        if url in kind.words or not kind.holds(url):
            raise StoreUnavailable(f"{kind.env} is not a {kind.name} URL ({kind.example})")
        return url
    return value


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***`` (in the authority and the query)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    query = re.sub(r"(^|&)(password)=[^&]*", r"\1\2=***", parts.query)
    if parts.password is None and query == parts.query:
        return url  # nothing to hide: kept as written (urlunsplit drops the `//` of `milvus:///path`)
    netloc = parts.netloc
    if parts.password is not None:
        netloc = netloc.replace(":" + parts.password + "@", ":***@", 1)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
