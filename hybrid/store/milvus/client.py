"""Connecting to Milvus, and the collections hybrid keeps there.

A store URL names where a vault's derived indexes live:

- ``milvus:///ABSOLUTE/PATH/index.db``: Milvus Lite, a folder served from inside this process
  (pymilvus starts it for a URI ending in ``.db``);
- ``milvus://[USER@]HOST[:PORT]/DB``: a Milvus server (port 19530 by default, database
  ``default`` when none is named), logged into with ``$HYBRID_MILVUS_TOKEN`` (``user:password``
  or an API key) or else the URL's user. A password is never put in a message or a log.

Each index is a set of collections named by :func:`collection_name` and reached through an
alias: a rebuild fills a new *generation* beside the old one and moves the alias at the end
(:class:`Generations`), so readers see the old index until the new one is whole. Every
collection carries the version of the layout it was written with (:data:`SCHEMA_KEY`); one
written by another layout is refused (IndexCorrupt naming `hybrid index`, which rebuilds it
from the ledger).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from hybrid.core.errors import HybridError, IndexCorrupt, StoreUnavailable, one_line
from hybrid.core.store_url import redact

if TYPE_CHECKING:
    from pymilvus import MilvusClient

SCHEMA_KEY = "hybrid.schema"  # the collection property holding the layout's version
SCHEMA_VERSION = "1"
TOKEN_ENV = "HYBRID_MILVUS_TOKEN"
CONNECT_TIMEOUT = 5.0  # seconds to wait for a server to answer before calling it down
DEFAULT_PORT = 19530
NAME_MAX = 255         # Milvus's longest collection name
# Milvus caps a search's and a query's limit at this (topk); Milvus Lite takes more, a server not
MAX_TOPK = 16384
# Each store has a connection of its own, closed with it (pymilvus would share one per address,
# and hand a connection broken by a server restart to the next client for a while). Its
# keepalive pings every 5 minutes and only during calls: gRPC servers refuse pings more often
# than that by default (Milvus Lite's answers pymilvus's 10-second ones with GOAWAY "too many
# pings", which failed the next call after an idle spell, such as a long embedding run).
CHANNEL: dict[str, Any] = {"dedicated": True, "grpc_options": {"grpc.keepalive_permit_without_calls": 0,
                                                                "grpc.keepalive_time_ms": 300_000}}


def connect(url: str, vault: str, timeout: float = CONNECT_TIMEOUT) -> MilvusClient:
    """A client for the Milvus that ``url`` names; StoreUnavailable naming the fix when there
    is none to be had (not installed, not running, login refused, no such database)."""
    try:
        from pymilvus import MilvusClient
    except ImportError:
        raise StoreUnavailable(f"vault {vault!r} is stored in Milvus, which needs pymilvus and "
                               f"milvus-lite: pip install pymilvus milvus-lite") from None
    quiet_drivers()
    kwargs = _client_args(url, vault, timeout)
    try:
        return MilvusClient(**kwargs)
    except Exception as exc:  # pymilvus raises its own, grpc's and OSError alike
        if "token" not in kwargs and held_elsewhere(kwargs["uri"]):
            raise StoreUnavailable(f"the Milvus Lite store {redact(url)} of vault {vault!r} is open in "
                                   f"another process (a Milvus Lite folder serves one process at a "
                                   f"time); stop it, or serve the folder (python -m milvus_lite server "
                                   f"--data-dir PATH --host 127.0.0.1 --port PORT) and use "
                                   f"milvus://127.0.0.1:PORT/default") from None
        raise StoreUnavailable(connect_problem(exc, url, vault, kwargs.get("token", ""))) from None


def quiet_drivers() -> None:
    """pymilvus and milvus-lite log a traceback for every call that fails (a server that is
    down, a Lite folder held by another process) before raising it; hybrid turns each failure
    into one line of its own, so theirs are kept to what is fatal."""
    for name in ("pymilvus", "milvus_lite"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def held_elsewhere(path: str) -> bool:
    """Whether another process holds Milvus Lite's lock on the folder ``path`` (its ``LOCK``
    file, flocked by the process serving it)."""
    import fcntl
    lock = os.path.join(path, "LOCK")
    if not os.path.exists(lock):
        return False
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _client_args(url: str, vault: str, timeout: float) -> dict[str, Any]:
    """MilvusClient's arguments for ``url`` (a Lite folder or a server)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise StoreUnavailable(f"the Milvus URL of vault {vault!r} is not valid ({redact(url)}); "
                               f"use milvus:///ABSOLUTE/PATH/index.db or milvus://HOST:PORT/DB") from None
    if parts.scheme.lower() != "milvus":
        raise StoreUnavailable(f"{redact(url)} is not a Milvus URL (milvus:///ABSOLUTE/PATH/index.db "
                               f"or milvus://HOST:PORT/DB)")
    if not parts.netloc:
        path = unquote(parts.path)
        if not (os.path.isabs(path) and path.endswith(".db")):
            raise StoreUnavailable(f"Milvus Lite store {redact(url)}: give an absolute path ending in "
                                   f".db (milvus:///ABSOLUTE/PATH/index.db)")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return {"uri": path, **CHANNEL}
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token and parts.username:
        token = unquote(parts.username) + (f":{unquote(parts.password)}" if parts.password else "")
    return {**CHANNEL, "uri": f"http://{parts.hostname}:{port or DEFAULT_PORT}", "token": token,
            "db_name": unquote(parts.path.strip("/")) or "default", "timeout": timeout}


def connect_problem(exc: BaseException, url: str, vault: str, token: str = "") -> str:
    """One line for a failed connect, by what pymilvus said (``token``: scrubbed from it)."""
    text = scrub(one_line(exc, 300), token)
    low = text.lower()
    where = f"Milvus at {redact(url)}"
    if "auth" in low or "credential" in low or "password" in low or "unauthenticated" in low:
        return (f"{where} refused the login for vault {vault!r}; set {TOKEN_ENV}=USER:PASSWORD "
                f"(or an API key)")
    if "database" in low and ("not found" in low or "not exist" in low):
        return f"{where}: the database does not exist; create it (create_database) or fix the URL"
    if not urlsplit(url).netloc:
        return f"cannot open the Milvus Lite store {redact(url)} of vault {vault!r} ({text[:160]})"
    return (f"cannot reach {where} for vault {vault!r} ({text[:160]}); is Milvus running there? "
            f"start it or check the URL")


def explain(exc: BaseException, url: str) -> HybridError | None:
    """The one-line error for a pymilvus failure that escaped an index method (the server went
    away mid-run; a collection dropped under a reader); None for any other exception."""
    try:
        from pymilvus.exceptions import MilvusException
    except ImportError:
        return None
    if not isinstance(exc, MilvusException):
        return None
    text = one_line(exc, 200)
    low = text.lower()
    where = f"Milvus at {redact(url)}" if url else "Milvus"
    if "fail connecting" in low or "unavailable" in low or "deadline" in low or "timeout" in low:
        return StoreUnavailable(f"{where} stopped answering ({text[:160]}); is it running? start it or "
                                f"check the URL; nothing indexed is lost (the next `hybrid index` catches up)")
    if "collection" in low and ("not found" in low or "not exist" in low):
        return IndexCorrupt(f"{where}: an index collection is missing ({text[:160]}); "
                            f"run `hybrid index` to rebuild it from the ledger")
    return None


def scrub(text: str, secret: str) -> str:
    """``text`` with ``secret`` (a token, or its password part) replaced by ``***``."""
    for part in {secret, secret.partition(":")[2]} - {""}:
        text = text.replace(part, "***")
    return text


def collection_name(prefix: str, part: str) -> str:
    """The Milvus name of ``part`` (``chunks``, ``vectors``…) of the index ``prefix`` names:
    letters, digits and ``_`` only, starting with a letter or ``_``. A prefix that had to be
    changed to fit gets a hash of itself, so two prefixes never share a name (``my-notes`` and
    ``my_notes``)."""
    raw = f"{prefix}_{part}"
    name = re.sub(r"[^A-Za-z0-9_]", "_", raw)
    if not name[:1].isalpha() and not name.startswith("_"):
        name = "_" + name
    if name != raw:
        name = f"{name}_{hashlib.blake2b(raw.encode(), digest_size=4).hexdigest()}"
    if len(name) > NAME_MAX - 16:  # room for a generation's suffix (Generations)
        name = f"{name[:NAME_MAX - 42]}_{hashlib.blake2b(raw.encode(), digest_size=8).hexdigest()}"
    return name


def literal(text: str) -> str:
    """``text`` as a string literal of a Milvus filter expression (double quotes, with the
    quotes, backslashes and line breaks inside escaped)."""
    body = (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
            .replace("\r", "\\r").replace("\t", "\\t"))
    return f'"{body}"'


def id_list(ids: Any) -> str:
    """``[1,2,3]``: integer ids as a filter expression's list."""
    return "[" + ",".join(str(int(i)) for i in ids) + "]"


def query_upto(client: MilvusClient, collection: str, expr: str, fields: list[str], limit: int) -> list[dict]:
    """Up to ``limit`` rows passing ``expr``: one query while the limit is within a server's
    cap (:data:`MAX_TOPK`, which Milvus refuses to pass: "invalid max query result window"),
    else one capped query and, when that comes back full, a query iterator over them all."""
    rows = client.query(collection, filter=expr, limit=min(limit, MAX_TOPK), output_fields=fields)
    if len(rows) < MAX_TOPK or limit <= MAX_TOPK:
        return rows
    rows = []
    it = client.query_iterator(collection, batch_size=MAX_TOPK, limit=limit, filter=expr, output_fields=fields)
    try:
        while batch := it.next():
            rows += batch
    finally:
        it.close()
    return rows


def create(client: MilvusClient, name: str, schema: Any, index: Any) -> None:
    """Create collection ``name`` marked with this layout's version, its ``index`` built and
    loaded. Reads are strong (a count right after a write sees it: the sync compares counts).
    The index is not waited for: pymilvus polls every half second, and an empty collection's
    index is built at once."""
    client.create_collection(name, schema=schema, consistency_level="Strong",
                             properties={SCHEMA_KEY: SCHEMA_VERSION})
    client.create_index(name, index, sync=False)
    client.load_collection(name)


class Generations:
    """The collections of one index part kept under an alias: ``{alias}_g{N}``, the alias on
    the newest whole one. A rebuild makes generation N+1 beside N, then moves the alias
    (:meth:`point`) and drops the rest (:meth:`prune`); a crash before leaves N answering and
    N+1 as litter, dropped by the next prune. Parts built together share their numbers, so a
    reader that found one part's generation reads the others' by name."""

    def __init__(self, client: MilvusClient, alias: str):
        self.client, self.alias = client, alias
        self.loaded: set[str] = set()

    def name(self, number: int) -> str:
        return f"{self.alias}_g{number}"

    @staticmethod
    def number(name: str) -> int:
        return int(name.rsplit("_g", 1)[1])

    def current(self) -> str | None:
        """The collection the alias points to (None: no index yet). Asked with has_collection
        first: pymilvus logs a traceback for every call that fails, a missing alias's too."""
        if not self.client.has_collection(self.alias):
            return None
        return str(self.client.describe_alias(self.alias)["collection_name"])

    def _all(self) -> list[str]:
        pattern = re.compile(re.escape(self.alias) + r"_g(\d+)$")
        return sorted((c for c in self.client.list_collections() if pattern.match(c)), key=self.number)

    def next_number(self) -> int:
        """A generation number no collection of this part has."""
        return max((self.number(c) for c in self._all()), default=0) + 1

    def point(self, name: str) -> None:
        """Point the alias at ``name``."""
        if self.current() is None:
            self.client.create_alias(name, self.alias)
        else:
            self.client.alter_alias(name, self.alias)

    def prune(self) -> None:
        """Drop every generation the alias does not point to."""
        keep = self.current()
        for old in self._all():
            if old != keep:
                self.client.drop_collection(old)

    def drop(self) -> None:
        """Drop the alias and every generation."""
        if self.current() is not None:
            self.client.drop_alias(self.alias)
        for name in self._all():
            self.client.drop_collection(name)

    def load(self, name: str) -> None:
        """Load collection ``name`` unless this handle did: Milvus Lite starts every collection
        released, and a rebuild elsewhere moves the alias to one this process never loaded."""
        if name not in self.loaded:
            self.client.load_collection(name)
            self.loaded.add(name)

    def read(self) -> tuple[str, dict[str, str]] | None:
        """(the current collection, loaded; its properties), None when there is no index yet;
        IndexCorrupt when another version of hybrid wrote it."""
        if not self.client.has_collection(self.alias):
            return None
        found = self.client.describe_collection(self.alias)
        name = str(found.get("collection_name") or self.alias)
        props = dict(found.get("properties") or {})
        if props.get(SCHEMA_KEY) != SCHEMA_VERSION:
            raise IndexCorrupt(f"Milvus collection {self.alias} was written by another version of "
                               f"hybrid (layout {props.get(SCHEMA_KEY) or 'unknown'}, this one reads "
                               f"{SCHEMA_VERSION}); run `hybrid index` to rebuild it from the ledger")
        self.load(name)
        return name, props
