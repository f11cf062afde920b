"""Where a fetch may connect (SSRF): a bookmark is a URL someone else chose, so before every hop
:class:`Guard` resolves the host and refuses link-local and cloud metadata addresses always,
loopback and private ones unless the user allowed them (``fetch_private``), however the address
is spelled (decimal, hex, octal, short, IPv4-mapped, IPv4-translated, NAT64, 6to4, Teredo). The
connections themselves are made by :class:`GuardedBackend`, which resolves and checks again and connects
only to the addresses it checked, so a name that answers a public address to the check and a
private one to the connection (DNS rebinding) is refused too. :mod:`hybrid.sources.fetch` follows the
redirects and asks robots.txt.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import time
from typing import Any

from hybrid.core.errors import one_line

# Why a page was not fetched on purpose: each refusal's error names one of these.
METADATA = "link-local/metadata address"
PRIVATE = "private address"
ROBOTS = "disallowed by robots.txt"
PRIVATE_HINT = "set fetch_private = true to allow"
# Cloud instance metadata, refused always. Most providers answer at the link-local
# 169.254.169.254 (AWS, Azure's IMDS, GCP, DigitalOcean, OpenStack...), which 169.254.0.0/16 and
# fe80::/10 cover; listed one by one are those put elsewhere: AWS's IMDS over IPv6
# fd00:ec2::254, Google's fd20:ce::254, Alibaba's 100.100.100.200, Oracle's older 192.0.0.192,
# and Azure's wireserver 168.63.129.16, a Microsoft address that is globally routable (so no
# property of an address can tell it) and that every Azure VM reaches on its host.
_METADATA_NETS = tuple(ipaddress.ip_network(n) for n in (
    "169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128", "fd20:ce::254/128", "100.100.100.200/32",
    "192.0.0.192/32", "168.63.129.16/32"))
_METADATA_NAMES = frozenset({"metadata.google.internal", "metadata.goog", "metadata",
                             "instance-data", "instance-data.ec2.internal"})
# Special-purpose blocks (the IANA registries) that are not globally reachable but that the
# ipaddress of older Pythons still calls global: IETF protocol assignments (192.0.0.0/24, its
# two anycast addresses included) and the IPv6 documentation block of 2024 (3fff::/20).
# Everything else not public is what ipaddress says (is_global, is_multicast, is_reserved...).
_NOT_GLOBAL = tuple(ipaddress.ip_network(n) for n in ("192.0.0.0/24", "3fff::/20"))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: a network's own translator
# IPv4-translated addresses (RFC 2765's SIIT, ::ffff:0:a.b.c.d): a stateless translator maps them
# to the IPv4 address they end with. Not routed as that address on the internet (ipaddress calls
# them private), but where a translator runs they reach it.
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
# The numbers-and-dots forms the resolver reads as IPv4 (2852039166, 0xa9fea9fe, 0251.254.43518,
# 127.1): handed to inet_aton, the C library's own parser, so the check reads them as it does.
_NUMERIC_HOST = re.compile(r"[0-9][0-9a-fx.]*", re.I)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class Failed(Exception):
    """One page's failure; its message is the page's error."""

    def __init__(self, error: str, status: int | None = None, content_type: str = "") -> None:
        super().__init__(error)
        self.status = status
        self.content_type = content_type


class Refused(Failed):
    """A request not made on purpose (an address, a scheme, robots.txt); after a redirect its
    error names where the redirect went."""


def _embedded_v4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries and may be routed to: IPv4-mapped
    (``::ffff:a.b.c.d``), IPv4-compatible (``::a.b.c.d``), NAT64 (``64:ff9b::/96``), 6to4."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if (ip.packed[:12] == bytes(12) and int(ip) > 1) or ip in _NAT64:  # :: and ::1 are IPv6's own
        return ipaddress.IPv4Address(ip.packed[12:])
    return None


def _carried_v4(ip: IPAddress) -> list[ipaddress.IPv4Address]:
    """Every IPv4 address an IPv6 address may lead to, for the metadata check: the one it is
    routed to (:func:`_embedded_v4`), a Teredo address's server and client, the address a
    local-use NAT64 one holds under any of RFC 6052's prefix lengths, and the last 32 bits of an
    IPv4-translated one (``::ffff:0:a.b.c.d``)."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return []
    found = [a for a in (_embedded_v4(ip),) if a is not None]
    if ip.teredo is not None:
        found += ip.teredo
    if ip in _TRANSLATED:
        found.append(ipaddress.IPv4Address(ip.packed[12:]))
    if ip in _LOCAL_NAT64:  # the prefix length is the translator's choice: every RFC 6052 layout
        found += _rfc6052_v4(ip.packed)
    return found


def _rfc6052_v4(packed: bytes) -> list[ipaddress.IPv4Address]:
    """The IPv4 address an IPv4-embedded IPv6 address holds under each prefix length of RFC 6052
    (32, 40, 48, 56, 64, 96 bits), bits 64-71 (the 'u' octet) left out."""
    rest = packed[:8] + packed[9:]
    return [ipaddress.IPv4Address(rest[i:i + 4]) for i in (4, 5, 6, 7, 8, 11)]


def _address_class(ip: IPAddress) -> str | None:
    """:data:`METADATA` for a link-local or cloud metadata address, :data:`PRIVATE` for any
    other address that is not public (loopback, private, unique-local, CGNAT, unspecified,
    multicast, reserved, documentation, IETF protocol assignments), None for a public one. An
    IPv6 address carrying an IPv4 one is judged by both."""
    if any(a in net for a in (ip, *_carried_v4(ip)) for net in _METADATA_NETS):
        return METADATA
    judged = _embedded_v4(ip) or ip
    if (not judged.is_global or judged.is_multicast or judged.is_reserved
            or judged.is_unspecified or getattr(judged, "is_site_local", False)
            or any(judged in net for net in _NOT_GLOBAL)):
        return PRIVATE
    return None


def _literal(host: str) -> IPAddress | None:
    """The address ``host`` spells, however it spells it (None for a name)."""
    bare = host.strip("[]").rstrip(".")
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        pass
    if _NUMERIC_HOST.fullmatch(bare):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(bare))
        except OSError:
            return None
    return None


class Guard:
    """Which addresses a fetch may connect to. :meth:`addresses` resolves a host (every
    address it has) and refuses it when any address is link-local or cloud metadata, or, unless
    ``private``, not public; the addresses it returns are the only ones to connect to."""

    def __init__(self, private: bool) -> None:
        self.private = private

    def addresses(self, host: str, port: int) -> list[str]:
        """The checked addresses of ``host`` (a URL's host: a name or an IP in any spelling);
        Refused when one may not be reached, Failed when the name does not resolve."""
        name = host.strip("[]").rstrip(".").lower()
        if name in _METADATA_NAMES:
            raise Refused(f"refused: {METADATA} {name}")
        literal = _literal(host)
        if literal is not None:
            found = [literal]
        else:
            try:
                infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
            except socket.gaierror as exc:
                if exc.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)):
                    raise Failed("host not found") from None
                raise Failed(f"cannot resolve {name}: {exc.strerror or exc}") from None
            except (OSError, UnicodeError) as exc:
                raise Failed(f"cannot resolve {name}: {one_line(exc)}") from None
            found = list(dict.fromkeys(ipaddress.ip_address(str(info[4][0])) for info in infos))
            if not found:
                raise Failed("host not found")
        for ip in found:
            kind = _address_class(ip)
            if kind is None or (kind == PRIVATE and self.private):
                continue
            shown = _embedded_v4(ip) or ip
            where = (f"{shown} for {name}" if literal is None
                     else f"{shown} (written {name})" if str(shown) != name else str(shown))
            hint = f" ({PRIVATE_HINT})" if kind == PRIVATE else ""
            raise Refused(f"refused: {kind} {where}{hint}")
        return [str(ip) for ip in found]


class GuardedBackend:
    """httpcore's network backend with every TCP connection checked: the host is resolved and
    checked by the guard, and the connection goes to one of exactly those addresses (tried in
    order), never to whatever a second lookup would answer. Checking the peer of a connection
    already made would come too late: the request, path and all, would have been sent."""

    def __init__(self, guard: Guard) -> None:
        import httpcore
        self.guard = guard
        self.inner = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None, socket_options: Any = None) -> Any:
        last: Exception | None = None
        for address in self.guard.addresses(host, port):
            try:
                return self.inner.connect_tcp(address, port, timeout=timeout,
                                              local_address=local_address,
                                              socket_options=socket_options)
            except Exception as exc:  # noqa: BLE001 - httpcore's connect errors; the next address
                last = exc
        raise last if last is not None else Failed("host not found")

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> Any:
        raise Refused("refused: not a network address")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def guarded_transport(guard: Guard, limits: Any) -> Any:
    """httpx's own transport, its connections made by :class:`GuardedBackend`."""
    import httpcore
    import httpx

    ssl_context = httpx.create_ssl_context()
    transport = httpx.HTTPTransport(verify=ssl_context, limits=limits)
    # httpx takes no network backend; the pool is what HTTPTransport.handle_request sends
    # through, so it is swapped for one (as httpx would build it) whose backend is guarded.
    backend: Any = GuardedBackend(guard)  # duck-typed httpcore.NetworkBackend
    transport._pool = httpcore.ConnectionPool(
        ssl_context=ssl_context, max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry, network_backend=backend)
    return transport
