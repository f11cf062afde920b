"""Who may use the search page: a signed cookie, got by one of two doors.

- A **one-time link** (``/ui/login?ticket=…``): ``hybrid ui`` asks the server for a ticket with
  the owner key from ``server.json`` (readable by the user only), then opens the link. A ticket
  works once, within :data:`TICKET_TTL` seconds.
- The server's **token** (``--token`` / ``HYBRID_TOKEN``), typed into the page's sign-in form.
  Failed attempts are throttled (:data:`MAX_FAILURES` a minute, then 429).

The cookie (``HttpOnly``, ``SameSite=Strict``, named after the port: cookies ignore ports, and two
servers on one host must not sign each other out) holds an issue time and an HMAC of it under a
key derived from a secret kept in the data folder (``ui.key``, mode 0600) and the token. Sessions
so outlive a server restart; changing the token, or deleting ``ui.key``, signs every browser out.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
import time
from pathlib import Path

SESSION_DAYS = 30
TICKET_TTL = 120.0      # seconds a one-time sign-in link stays valid
MAX_TICKETS = 64        # outstanding tickets kept (the oldest go first)
MAX_FAILURES = 5        # wrong tokens accepted per minute before sign-in answers 429
COOKIE_PREFIX = "hybrid_session_"


def _secret(data: Path) -> bytes:
    """The data folder's ``ui.key`` (made on first use, readable by the user only)."""
    path = data / "ui.key"
    try:
        return _secret_read(path)
    except (OSError, ValueError):  # absent (or damaged: a new key signs everyone out, no harm)
        path.unlink(missing_ok=True)
    data.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(key.hex())
        fh.flush()
        os.fsync(fh.fileno())  # never an empty key after a crash
    try:
        os.link(tmp, path)  # first writer wins: two servers starting at once share one key
    except FileExistsError:
        return _secret_read(path)
    finally:
        tmp.unlink(missing_ok=True)
    return key


def _secret_read(path: Path) -> bytes:
    """The key in ``path``; ValueError unless it is 32 bytes of hex (an empty or cut file must
    not become a key anyone can compute)."""
    key = bytes.fromhex(path.read_text(encoding="ascii").strip())
    if len(key) != 32:
        raise ValueError(f"{path}: not a 32-byte key")
    return key


class Sessions:
    """Issues and checks session cookies and one-time tickets for one server."""

    def __init__(self, data: Path, port: int, token: str | None, clock=time.time):
        self.key = hmac.new(_secret(data), b"hybrid-ui-session\0" + (token or "").encode(),
                            hashlib.sha256).digest()
        self.token = token
        self.cookie = f"{COOKIE_PREFIX}{port}"
        self.clock = clock
        self._tickets: dict[str, float] = {}
        self._failures: list[float] = []
        self._lock = threading.Lock()

    # --- the cookie -------------------------------------------------------------------------
    def issue(self) -> str:
        issued = str(int(self.clock()))
        return f"{issued}.{self._mac(issued)}"

    def valid(self, value: str | None) -> bool:
        if not value or value.count(".") != 1:
            return False
        issued, mac = value.split(".")
        if not (issued.isascii() and issued.isdigit() and mac.isascii()):
            return False
        if not hmac.compare_digest(mac.encode(), self._mac(issued).encode()):
            return False
        age = self.clock() - int(issued)
        return -60 <= age <= SESSION_DAYS * 86400

    def _mac(self, issued: str) -> str:
        return hmac.new(self.key, issued.encode(), hashlib.sha256).hexdigest()

    def set_cookie(self, value: str) -> str:
        """The Set-Cookie header value for a session."""
        return (f"{self.cookie}={value}; Path=/; HttpOnly; SameSite=Strict; "
                f"Max-Age={SESSION_DAYS * 86400}")

    def clear_cookie(self) -> str:
        return f"{self.cookie}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"

    # --- one-time tickets -------------------------------------------------------------------
    def ticket(self) -> str:
        now = self.clock()
        with self._lock:
            self._prune(now)
            while len(self._tickets) >= MAX_TICKETS:
                self._tickets.pop(next(iter(self._tickets)))
            t = secrets.token_urlsafe(32)
            self._tickets[t] = now + TICKET_TTL
            return t

    def redeem(self, ticket: str) -> bool:
        """Whether ``ticket`` is one this server gave and has not expired; it is used up."""
        with self._lock:
            expires = self._tickets.pop(ticket, None)
            return expires is not None and self.clock() <= expires

    def _prune(self, now: float) -> None:
        for t in [t for t, exp in self._tickets.items() if exp < now]:
            del self._tickets[t]

    # --- the token form ---------------------------------------------------------------------
    def check_token(self, given: str) -> str:
        """"ok", "wrong" or "throttled" for a token typed into the sign-in form. Without a
        server token the form has nothing to check: always "wrong"."""
        now = self.clock()
        with self._lock:
            self._failures = [t for t in self._failures if t > now - 60]
            if len(self._failures) >= MAX_FAILURES:
                return "throttled"
            if self.token and hmac.compare_digest(given.encode(), self.token.encode()):
                return "ok"
            self._failures.append(now)
            return "wrong"
