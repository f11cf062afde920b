"""Who may use the search page: a signed cookie, got by one of two doors; and the throttle on
wrong secrets that every route of the HTTP server shares.

- A **one-time link** (``/ui/login?ticket=…``): ``hybrid ui`` asks the server for a ticket with
  the owner key from ``server.json`` (readable by the user only), then opens the link. A ticket
  works once, within :data:`TICKET_TTL` seconds.
- The server's **token** (``--token`` / ``HYBRID_TOKEN``), typed into the page's sign-in form.

The cookie (``HttpOnly``, ``SameSite=Strict``, named after the port: cookies ignore ports, and two
servers on one host must not sign each other out) holds an issue time, a random session id and
an HMAC of the two under a key derived from a secret kept in the data folder (``ui.key``, mode
0600), the token and the current *epoch*. Sessions so outlive a server restart; changing the
token, or deleting ``ui.key``, signs every browser out.

Signing out is server-side: the session's id goes on a revoked list, and signing out everywhere
draws a new epoch, which no earlier cookie was signed under. Both live in ``ui-sessions.json``
beside ``ui.key`` (written atomically, mode 0600, re-read when another process changes it). The
list keeps an id only until its session would have expired anyway, and at most
:data:`MAX_REVOKED` of them (past that, everyone is signed out). A missing or damaged file
signs everyone out: it fails closed.

:class:`Throttle` counts wrong guesses of the token per client (the bearer header on any route,
the sign-in form), a client being a host: every loopback address (127.0.0.0/8, ::1) is one,
an IPv6 one counts by its /64. Past :data:`MAX_FAILURES` a client may try once every
``FAILURE_WINDOW / MAX_FAILURES`` seconds; and past :data:`ALL_FAILURES` wrong tokens from all
clients together, a client that has not sent the right token lately (:data:`KNOWN_FOR`) may not
try at all until the count drains. Meanwhile their requests that would need the token checked
are refused unchecked (429, ``Retry-After``). A request that proves itself with something that
cannot be guessed is unaffected: a session cookie, the owner key, a ticket (256 random bits
each; there is nothing to throttle).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import math
import os
import re
import secrets
import threading
import time
from collections import OrderedDict
from pathlib import Path

log = logging.getLogger("hybrid")

SESSION_DAYS = 30
TICKET_TTL = 120.0      # seconds a one-time sign-in link stays valid
MAX_TICKETS = 64        # outstanding tickets kept (the oldest go first)
MAX_FAILURES = 5        # wrong tokens a client may send before it must wait
FAILURE_WINDOW = 60.0   # ... after which it may try MAX_FAILURES times again per this many seconds
# wrong tokens from all clients together per FAILURE_WINDOW: what a guesser with many addresses
# (an IPv6 prefix, a botnet) gets at most; past it only known clients have their token checked
ALL_FAILURES = 30
KNOWN_FOR = 86400.0     # seconds a client that sent the right token stays known
MAX_KNOWN = 1024        # known clients remembered (the longest quiet go first)
MAX_CLIENTS = 4096      # clients the throttle remembers (see Throttle._forget)
MAX_REVOKED = 1024      # signed-out sessions remembered until they expire; past it, all are signed out
COOKIE_PREFIX = "hybrid_session_"
REVOKED_FILE = "ui-sessions.json"
_SESSION_RE = re.compile(r"^(?P<issued>[0-9]{1,12})\.(?P<sid>[0-9a-f]{32})\.(?P<mac>[0-9a-f]{64})$")
_EPOCH_RE = re.compile(r"^[0-9a-f]{32}$")


def _secret(data: Path) -> bytes:
    """The data folder's ``ui.key`` (made on first use, readable by the user only)."""
    path = data / "ui.key"
    try:
        return _secret_read(path)
    except (OSError, ValueError):  # absent (or damaged: a new key signs everyone out, no harm)
        path.unlink(missing_ok=True)
    key = secrets.token_bytes(32)
    if not _write_private(path, key.hex(), first=True):
        return _secret_read(path)  # another server wrote it first: share its key
    return key


def _secret_read(path: Path) -> bytes:
    """The key in ``path``; ValueError unless it is 32 bytes of hex (an empty or cut file must
    not become a key anyone can compute)."""
    key = bytes.fromhex(path.read_text(encoding="ascii").strip())
    if len(key) != 32:
        raise ValueError(f"{path}: not a 32-byte key")
    return key


def _write_private(path: Path, text: str, first: bool = False) -> bool:
    """Write ``text`` to ``path`` whole or not at all (a reader never sees half a file, a crash
    never leaves an empty one), readable by the user only. ``first``: only if ``path`` does not
    exist yet (two servers starting at once keep the first writer's); False when it did."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if not first:
            os.replace(tmp, path)
            return True
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        return True
    finally:
        tmp.unlink(missing_ok=True)


class Sessions:
    """Issues, checks and revokes session cookies, and one-time tickets, for one server."""

    def __init__(self, data: Path, port: int, token: str | None, clock=time.time):
        self._secret = _secret(data)
        self.token = token
        self.cookie = f"{COOKIE_PREFIX}{port}"
        self.clock = clock
        self.path = data / REVOKED_FILE
        self._tickets: dict[str, float] = {}
        self._lock = threading.Lock()
        self._epoch = ""
        self._revoked: dict[str, int] = {}  # session id -> when it expires anyway
        self._seen: tuple | None = ("unread",)  # the file's identity when last read or written
        with self._lock:
            self._sync()

    # --- the cookie -------------------------------------------------------------------------
    def issue(self) -> str:
        issued, sid = str(int(self.clock())), secrets.token_hex(16)
        with self._lock:
            self._sync()
            return f"{issued}.{sid}.{self._mac(issued, sid)}"

    def valid(self, value: str | None) -> bool:
        parsed = self._parse(value)
        if parsed is None:
            return False
        age = self.clock() - int(parsed[0])
        return -60 <= age <= SESSION_DAYS * 86400

    def _parse(self, value: str | None) -> tuple[str, str] | None:
        """(issued, session id) of a cookie signed under the current epoch and not revoked."""
        m = _SESSION_RE.match(value or "")
        if not m:
            return None
        with self._lock:
            self._sync()
            if not hmac.compare_digest(m["mac"], self._mac(m["issued"], m["sid"])):
                return None
            if m["sid"] in self._revoked:
                return None
        return m["issued"], m["sid"]

    def _mac(self, issued: str, sid: str) -> str:
        key = hmac.new(self._secret, b"hybrid-ui-session\0" + (self.token or "").encode() + b"\0" +
                       self._epoch.encode(), hashlib.sha256).digest()
        return hmac.new(key, f"{issued}.{sid}".encode(), hashlib.sha256).hexdigest()

    def set_cookie(self, value: str) -> str:
        """The Set-Cookie header value for a session."""
        return (f"{self.cookie}={value}; Path=/; HttpOnly; SameSite=Strict; "
                f"Max-Age={SESSION_DAYS * 86400}")

    def clear_cookie(self) -> str:
        return f"{self.cookie}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"

    # --- signing out ------------------------------------------------------------------------
    def revoke(self, value: str | None) -> bool:
        """End the session of cookie ``value`` on every server sharing this data folder, for
        good; False when it was not a live session (nothing to do)."""
        parsed = self._parse(value)
        if parsed is None:
            return False
        issued, sid = parsed
        with self._lock:
            self._sync()
            self._revoked[sid] = int(issued) + SESSION_DAYS * 86400
            self._prune()
            if len(self._revoked) > MAX_REVOKED:  # someone signs in and out a lot: all out, list empty
                self._new_epoch()
            self._save()
        return True

    def revoke_all(self) -> None:
        """Sign every browser out (this server's and others sharing the data folder): a new
        epoch, under which no earlier cookie's signature holds; outstanding tickets die too."""
        with self._lock:
            self._sync()
            self._new_epoch()
            self._tickets.clear()
            self._save()

    def _new_epoch(self) -> None:
        self._epoch, self._revoked = secrets.token_hex(16), {}

    def _prune(self) -> None:
        now = self.clock()
        self._revoked = {sid: exp for sid, exp in self._revoked.items() if exp >= now}

    def _sync(self) -> None:
        """Adopt the revocation file when it changed since it was last read (another server
        or a restart wrote it); a missing or damaged one is replaced by a new epoch, which
        signs everyone out. Called with the lock held."""
        seen = self._identity()
        if seen == self._seen:
            return
        try:
            state = json.loads(self.path.read_text(encoding="ascii"))
            epoch, revoked = state["epoch"], state["revoked"]
            if not (isinstance(epoch, str) and _EPOCH_RE.match(epoch) and isinstance(revoked, dict)
                    and all(isinstance(k, str) and type(v) is int for k, v in revoked.items())):
                raise ValueError("not a revocation state")
            self._epoch, self._revoked, self._seen = epoch, dict(revoked), seen
        except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError):
            if seen is not None:
                log.warning("%s is damaged: every browser is signed out of the search page", self.path)
            self._new_epoch()
            self._save(first=seen is None)

    def _save(self, first: bool = False) -> None:
        """Write the revocation state (called with the lock held). When another server made
        the file first (``first``), its state is adopted instead."""
        text = json.dumps({"epoch": self._epoch, "revoked": self._revoked})
        try:
            written = _write_private(self.path, text, first=first)
        except OSError as exc:  # kept in memory: it does not outlive this server
            log.error("cannot record sign-outs in %s (%s): they last until the server stops", self.path, exc)
            written = True
        if written:
            self._seen = self._identity()
        else:
            self._sync()

    def _identity(self) -> tuple | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    # --- one-time tickets -------------------------------------------------------------------
    def ticket(self) -> str:
        now = self.clock()
        with self._lock:
            self._prune_tickets(now)
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

    def _prune_tickets(self, now: float) -> None:
        for t in [t for t, exp in self._tickets.items() if exp < now]:
            del self._tickets[t]


class Throttled(Exception):
    """Too many wrong tokens (from this client, or from all together when ``everyone``): try
    again in ``retry_after`` seconds."""

    def __init__(self, retry_after: int, everyone: bool = False):
        where = "sent to this server lately" if everyone else "from your address"
        super().__init__(f"too many wrong tokens {where}: wait {retry_after} s and try again")
        self.retry_after = retry_after
        self.everyone = everyone


class Throttle:
    """Wrong tokens as leaky buckets: one per client (:func:`client_key`) and one for all of
    them. Each wrong token adds 1 to both; a client's drains by ``limit`` per ``window``
    seconds, the shared one by ``total`` per ``window``. While a client's holds ``limit``, its
    token is not checked at all; while the shared one holds ``total``, no token is checked but
    a known client's (one that sent the right token in the last :data:`KNOWN_FOR` seconds).

    Why not check every right token while the shared bucket is full: a guesser with many
    addresses would then be answered 200 for the right guess and 429 for the others, so each
    guess would still be checked, and the bound would bound nothing. A client already in use
    (an MCP client that sent the token before the flood) keeps working; one seen for the first
    time waits for the flood to stop; the owner key and a page session never wait.

    Only wrong tokens count, so a right one never uses up a budget. Memory is bounded by
    ``max_clients`` (clients whose count drained to nothing are forgotten first) and
    :data:`MAX_KNOWN` known clients; forgetting a client never hands a guesser more checks than
    the shared bucket grants anyway."""

    def __init__(self, limit: int = MAX_FAILURES, window: float = FAILURE_WINDOW,
                 max_clients: int = MAX_CLIENTS, clock=time.monotonic, total: int = ALL_FAILURES):
        self.limit, self.rate, self.max_clients, self.clock = limit, limit / window, max_clients, clock
        self.total, self.total_rate = total, total / window
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # client -> (level, when)
        self._all = (0.0, clock())  # the shared bucket: (level, when)
        self._known: OrderedDict[str, float] = OrderedDict()  # client -> when it last sent the right token
        self._lock = threading.Lock()

    def check(self, client: str, given: str, secret: str) -> bool:
        """Whether ``given`` is ``secret``; a wrong one is counted against ``client`` and all.
        :class:`Throttled` (unchecked) while ``client`` has used up its wrong guesses, or all
        clients have theirs and ``client`` is not known."""
        key, now = client_key(client), self.clock()
        with self._lock:
            level = _drained(self._buckets.get(key, (0.0, now)), now, self.rate)
            if level > self.limit - 1:
                raise Throttled(_wait(level, self.limit, self.rate))
            shared = _drained(self._all, now, self.total_rate)
            if shared > self.total - 1 and now - self._known.get(key, -math.inf) > KNOWN_FOR:
                raise Throttled(_wait(shared, self.total, self.total_rate), everyone=True)
            if hmac.compare_digest(given.encode(), secret.encode()):
                self._known[key] = now
                self._known.move_to_end(key)
                while len(self._known) > MAX_KNOWN:
                    self._known.popitem(last=False)
                return True
            self._buckets[key] = (level + 1, now)
            self._buckets.move_to_end(key)
            self._all = (shared + 1, now)
            if len(self._buckets) > self.max_clients:
                self._forget(now)
            return False

    def _forget(self, now: float) -> None:
        """Make room: forget the clients whose count has drained to nothing, then, if that is
        not enough, those that failed longest ago. A client still counting is forgotten only
        when more than ``max_clients`` clients failed within about a window, which the shared
        bucket (about ``2 * total`` wrong tokens a window, besides known clients' own) keeps
        from happening at the default sizes."""
        for key in [k for k, v in self._buckets.items() if _drained(v, now, self.rate) <= 0]:
            del self._buckets[key]
        while len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)

    @property
    def clients(self) -> int:
        """How many clients it remembers now."""
        return len(self._buckets)


def _drained(bucket: tuple[float, float], now: float, rate: float) -> float:
    level, when = bucket
    return max(0.0, level - (now - when) * rate)


def _wait(level: float, limit: int, rate: float) -> int:
    """Whole seconds until a bucket at ``level`` has room for one more (at least 1)."""
    return max(1, math.ceil((level - (limit - 1)) / rate - 1e-9))


def client_key(host: str) -> str:
    """Who the throttle (and the connection cap) counts by, a host: ``loopback`` for every
    loopback address (127.0.0.0/8 and ::1 are all this machine, 16 million addresses to pick
    from otherwise), an IPv4-mapped IPv6 address as its IPv4, another IPv6 address by its /64
    (one host often has all of it); anything else as it is."""
    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return "loopback"
    if isinstance(ip, ipaddress.IPv6Address):
        return f"{ipaddress.IPv6Address(int(ip) >> 64 << 64)}/64"  # a scope id (%eth0) goes too
    return str(ip)
