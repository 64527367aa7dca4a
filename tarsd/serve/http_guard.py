"""Checks every HTTP request passes before the token is even looked at: the Host header (against
DNS rebinding: a page on evil.example whose name is made to resolve to 127.0.0.1 sends
``Host: evil.example``), the Origin header when a browser sends one, and a limit on failed
authentications per client; and the caps on open connections per client and in all.
Standard library only, so it is tested on its own.

A client is an address, except that every loopback address (127.0.0.0/8, ::1, ::ffff:127.x)
is one client, "loopback": any local process can bind any of them, so counting them apart
would let it escape every per-client limit. An IPv6 client is its /64, for the same reason.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections.abc import Callable, Hashable
from urllib.parse import urlsplit

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
WILDCARDS = ("", "0.0.0.0", "::", "[::]")


def bracketed(host: str) -> str:
    """An IPv6 address as it appears in a Host header: [::1]."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def page_url(host: str, port: int) -> str:
    """The page's address for a listener on host:port (a wildcard listener is reached on loopback)."""
    host = host.strip()
    shown = "127.0.0.1" if host in ("", "0.0.0.0") else "[::1]" if host in ("::", "[::]") else bracketed(host)
    return f"http://{shown}:{port}/"


def is_loopback(host: str) -> bool:
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def split_host(value: str) -> tuple[str, str]:
    """("name", "port") of a Host header or netloc; port "" when there is none. Lowercased."""
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value.partition("]")
        return name + "]", rest[1:] if rest.startswith(":") else ""
    name, sep, port = value.rpartition(":")
    return (name, port) if sep and port.isdigit() else (value, "")


LOOPBACK_CLIENT = "loopback"


def client_key(address: str) -> str:
    """The client an address belongs to, for the per-client limits: "loopback" for every
    loopback address, an IPv6 address's /64, else the address itself."""
    try:
        ip = ipaddress.ip_address(address.strip("[]").split("%", 1)[0])
    except ValueError:
        return address  # a Unix socket path or "unknown": as it is
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return LOOPBACK_CLIENT
    if isinstance(ip, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class HostPolicy:
    """Which Host and Origin headers the listener accepts.

    The loopback names (localhost, 127.0.0.1, [::1]) with the listener's own port; the address it
    is bound to, with its port; and each configured name, with any port or none (a reverse proxy
    on 443 may pass its own name on) unless the name gives one.
    """

    def __init__(self, port: int, bound_host: str = "127.0.0.1", hostnames: list[str] | None = None, origins: list[str] | None = None):
        self.port = str(port)
        self.exact = {f"{name}:{port}" for name in LOOPBACK_NAMES}
        if bound_host not in WILDCARDS:
            self.exact.add(f"{bracketed(bound_host).lower()}:{port}")
        self.names: set[str] = set()
        for entry in hostnames or []:
            name, given_port = split_host(bracketed(entry) if entry.count(":") > 1 else entry)
            if given_port:
                self.exact.add(f"{name}:{given_port}")
            elif name:
                self.names.add(name)
        self.origins = {origin.strip().rstrip("/").lower() for origin in origins or [] if origin.strip()}

    def host_ok(self, host: str) -> bool:
        if not host:
            return False  # HTTP/1.1 requires it; a request without one cannot be placed
        host = host.strip().lower()
        return host in self.exact or split_host(host)[0] in self.names

    def origin_ok(self, origin: str) -> bool:
        """An Origin header (browsers send one on cross-site requests and on every POST): one of
        the accepted hosts over http or https, or a configured origin. "null" (a sandboxed frame,
        a file: page) never."""
        origin = origin.strip().lower()
        if origin in self.origins:
            return True
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
            return False
        return self.host_ok(parts.netloc)


class FailureLimiter:
    """Failed authentications per client (``client_key``), as a token bucket: ``burst`` failures
    at once, then ``per_second``. Past that every request from the client that presents a token
    gets 429 until the bucket refills, the right token included (otherwise guessing would go on at
    full speed, told apart by 401 and 200). Only a wrong token counts: a request with none guesses
    nothing, and any web page can make the browser send one (an <img> from 127.0.0.1), so it
    must not lock the user out."""

    def __init__(self, burst: int, per_second: float, clock: Callable[[], float] = time.monotonic, max_clients: int = 4096):
        if burst < 1 or not per_second > 0:
            raise ValueError(
                f"[http] auth_failures_burst must be at least 1 and auth_failures_per_second above 0 (got {burst}, {per_second})"
            )
        self.burst, self.rate, self.clock, self.max_clients = float(burst), per_second, clock, max_clients
        self._buckets: dict[str, tuple[float, float]] = {}  # address -> (allowance, at)

    def _allowance(self, address: str, now: float) -> float:
        allowance, at = self._buckets.get(address, (self.burst, now))
        return min(self.burst, allowance + (now - at) * self.rate)

    def retry_after(self, address: str) -> float:
        """Seconds before ``address`` may try again; 0 when it may now."""
        allowance = self._allowance(address, self.clock())
        return 0.0 if allowance >= 1 else (1 - allowance) / self.rate

    def failed(self, address: str) -> None:
        now = self.clock()
        self._buckets[address] = (self._allowance(address, now) - 1, now)
        if len(self._buckets) > self.max_clients:
            self._forget_recovered(now)

    def _forget_recovered(self, now: float) -> None:
        """Bound the table: addresses whose bucket is full again are as good as new."""
        for address in [a for a in self._buckets if self._allowance(a, now) >= self.burst]:
            del self._buckets[address]
        while len(self._buckets) > self.max_clients:  # still too many: the oldest go
            del self._buckets[min(self._buckets, key=lambda a: self._buckets[a][1])]


class ConnectionGate:
    """Open connections per client and in all, so that nobody can hold the listener's door shut
    (slowloris: many connections that never finish a request) nor use up tarsd's file descriptors.

    A connection is "idle" while it has no request in progress: before its request has arrived
    whole, and between requests on a kept-alive connection. At a cap, the connection that has
    been idle longest (the client's own at the per-client cap) is closed to make room: an idle
    connection loses nothing (a client reconnects to send its next request), and a connection
    dribbling a request byte by byte is idle all along, so a flood of them cannot keep a real
    request out. When no connection is idle the new one is closed at once.
    """

    def __init__(self, per_client: int, total: int):
        if per_client < 1 or total < 1:
            raise ValueError(f"[http] max_connections and max_connections_per_client must be at least 1 (got {total}, {per_client})")
        self.per_client, self.total = per_client, total
        self._client: dict[Hashable, str] = {}  # every open connection -> its client
        self._per_client: dict[str, int] = {}
        self._idle: dict[Hashable, None] = {}  # idle connections, longest idle first (insertion order)
        self.closed_to_make_room = 0
        self.refused = 0

    def __len__(self) -> int:
        return len(self._client)

    def admit(self, connection: Hashable, client: str) -> list[Hashable]:
        """Counts a new (idle) connection; returns the connections to close: an idle one that makes
        room, or ``connection`` itself (then not counted) when none can."""
        closing = []
        if self._per_client.get(client, 0) >= self.per_client or len(self._client) >= self.total:
            full = self._per_client.get(client, 0) >= self.per_client
            victim = next((c for c in self._idle if not full or self._client[c] == client), None)
            if victim is None:
                self.refused += 1
                return [connection]
            self.release(victim)
            self.closed_to_make_room += 1
            closing.append(victim)
        self._client[connection] = client
        self._per_client[client] = self._per_client.get(client, 0) + 1
        self._idle[connection] = None
        return closing

    def idle(self, connection: Hashable) -> None:
        """No request in progress on ``connection`` (any more): it may be closed to make room."""
        if connection in self._client and connection not in self._idle:
            self._idle[connection] = None

    def busy(self, connection: Hashable) -> None:
        """A request is in progress on ``connection``: it is not closed to make room."""
        self._idle.pop(connection, None)

    def release(self, connection: Hashable) -> None:
        client = self._client.pop(connection, None)
        if client is None:
            return
        self._idle.pop(connection, None)
        left = self._per_client[client] - 1
        if left:
            self._per_client[client] = left
        else:
            del self._per_client[client]


def retry_after_header(seconds: float) -> str:
    return str(max(1, math.ceil(seconds)))
