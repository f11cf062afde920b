"""Where a vault's index lives, as its ``store`` setting says (`hybrid vault add --store`):
locally (no value), at a PostgreSQL URL, or at the URL in ``$HYBRID_DATABASE_URL``. The config
checks the value when it is written; a store backend resolves it when it connects. A password
never reaches the config file, a message or a log (:func:`redact`)."""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit, urlunsplit

from hybrid.core.errors import StoreUnavailable

ENV_URL = "HYBRID_DATABASE_URL"
SCHEMES = ("postgresql://", "postgres://")
ENV_WORDS = ("postgresql", "postgres", "env")  # `store = "postgresql"`: the URL is in ENV_URL


def is_store_value(value: str) -> bool:
    """Whether ``value`` names a PostgreSQL store: a word for the URL in ``$HYBRID_DATABASE_URL``
    (:data:`ENV_WORDS`), or a PostgreSQL URL. (Empty, local files, is none.)"""
    return value in ENV_WORDS or value.startswith(SCHEMES)


def check_store_value(value: str) -> str:
    """A vault's ``store`` as given to `hybrid vault add --store`: a PostgreSQL URL without a
    password (config files get copied and shown), or ``postgresql`` for ``$HYBRID_DATABASE_URL``."""
    value = value.strip()
    if not is_store_value(value):
        raise StoreUnavailable(f"store {redact(value)!r} is not a PostgreSQL URL "
                               f"(postgresql://user@host/db) nor `postgresql` (the URL in ${ENV_URL})")
    if value in ENV_WORDS:
        return "postgresql"
    if urlsplit(value).password or re.search(r"(^|[?&])password=", urlsplit(value).query):
        raise StoreUnavailable(f"the store URL holds a password, which would be written to the "
                               f"config file; set {ENV_URL} and use --store postgresql, or keep "
                               f"the password in ~/.pgpass or PGPASSWORD")
    return value


def resolve(value: str, vault: str) -> str:
    """The URL to connect with for a vault's ``store`` value."""
    if value in ENV_WORDS:
        url = os.environ.get(ENV_URL, "").strip()
        if not url:
            raise StoreUnavailable(f"vault {vault!r} is stored in PostgreSQL but {ENV_URL} is not "
                                   f"set; export {ENV_URL}=postgresql://USER@HOST/DB")
        if not url.startswith(SCHEMES):
            raise StoreUnavailable(f"{ENV_URL} is not a PostgreSQL URL (postgresql://USER@HOST/DB)")
        return url
    return value


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***`` (in the authority and the query)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    netloc = parts.netloc
    if parts.password is not None:
        netloc = netloc.replace(":" + parts.password + "@", ":***@", 1)
    query = re.sub(r"(^|&)(password)=[^&]*", r"\1\2=***", parts.query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
