"""Checks every HTTP request passes before the token is even looked at: the Host header (against
DNS rebinding: a page on evil.example whose name is made to resolve to 127.0.0.1 sends
``Host: evil.example``), the Origin header when a browser sends one, and a limit on failed
authentications per client; the caps on open connections per client and in all, with a budget
of their own and a minimum pace for the bodies of requests that authenticate themselves from
their body (a webhook's).
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

# Bodies of requests nobody has authenticated yet (a webhook's: its signature covers the body, so
# the body has to be read before anything is known of its sender). Behind a tunnel or a reverse
# proxy every sender is the same loopback client, so these limits are the webhook's own, not a
# client's. Meta's deliveries are small and sent at a datacentre's speed: a body arrives whole
# within moments, and these limits only ever close a sender that holds a connection on purpose.
PUBLIC_READERS = 16  # such bodies read at once; a 17th closes the one reading longest
PUBLIC_BODY_SECONDS = 10.0  # for the whole body, after the headers
PUBLIC_GRACE_SECONDS = 1.0  # before the minimum rate applies (a connection's first round trips)
PUBLIC_MIN_BYTES_PER_SECOND = 8192  # on average since the headers, after the grace
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


def body_too_slow(received: int, elapsed: float) -> bool:
    """Whether an unauthenticated body that has sent ``received`` bytes in ``elapsed`` seconds
    since its headers is too slow to go on reading: past its deadline, or under the minimum rate
    once the grace is over. A sender that means to deliver is never near either."""
    if elapsed >= PUBLIC_BODY_SECONDS:
        return True
    return received < PUBLIC_MIN_BYTES_PER_SECOND * (elapsed - PUBLIC_GRACE_SECONDS)


class ConnectionGate:
    """Open connections per client and in all, so that nobody can hold the listener's door shut
    (slowloris: many connections that never finish a request) nor use up tarsd's file descriptors.

    A connection is "idle" while it has no request in progress: before its request has arrived
    whole, and between requests on a kept-alive connection. At a cap, the connection that has
    been idle longest (the client's own at the per-client cap) is closed to make room: an idle
    connection loses nothing (a client reconnects to send its next request), and a connection
    dribbling a request byte by byte is idle all along, so a flood of them cannot keep a real
    request out. When no connection is idle the new one is closed at once. Who is closed is
    chosen a moment after a burst of new connections (``admit``, ``trim``).

    A connection "reading" the body of a request nobody has authenticated yet (the webhook's)
    leaves the caps for a budget of its own: at most ``readers`` read at once, and a new one
    closes the one reading longest. So requests that authenticate (the token's) find the caps'
    room whatever the webhook is sent, and a sender that delivers (whose body arrives within
    moments) always gets read, however many connections dribble bodies.
    """

    def __init__(self, per_client: int, total: int, readers: int = PUBLIC_READERS, slack: int = 0):
        if per_client < 1 or total < 1:
            raise ValueError(f"[http] max_connections and max_connections_per_client must be at least 1 (got {total}, {per_client})")
        self.per_client, self.total, self.readers = per_client, total, readers
        # Connections over a cap by no more than ``slack`` are closed by ``trim``, a moment after
        # they came, not at once: see ``admit``.
        self.slack = slack
        self._client: dict[Hashable, str] = {}  # every open connection -> its client
        self._per_client: dict[str, int] = {}  # the connections under the caps (all but the readers), per client
        self._idle: dict[Hashable, None] = {}  # idle connections, longest idle first (insertion order)
        self._reading: dict[Hashable, None] = {}  # reading an unauthenticated body, longest reading first
        self._admitted: dict[Hashable, float] = {}  # when each open connection came (the caller's clock)
        self.closed_to_make_room = 0
        self.readers_closed = 0  # closed because ``readers`` others read
        self.refused = 0

    def __len__(self) -> int:
        return len(self._client)

    def _capped(self) -> int:
        return len(self._client) - len(self._reading)

    def admit(self, connection: Hashable, client: str, at: float = 0.0) -> list[Hashable]:
        """Counts a new (idle) connection; returns the connections to close: an idle one that makes
        room, or ``connection`` itself (then not counted) when none can.

        Up to ``slack`` over a cap, nothing is closed yet: a flood arrives in bursts (a turn of the
        event loop accepts many connections at once, before any has been read), and choosing
        then would close a real request's connection as readily as the flood's. ``trim``, once the
        burst has been read, closes what is over the caps: by then a real request is in progress
        and not closable, while the flood's are idle (or reading, outside the caps). ``at`` is
        when the connection came, on the clock ``trim`` is given."""
        closing = []
        held = self._per_client.get(client, 0)
        if held >= self.per_client + self.slack or self._capped() >= self.total + self.slack:
            victim = self._victim(client if held >= self.per_client + self.slack else None)
            if victim is None:
                self.refused += 1
                return [connection]
            self._make_room(victim, closing)
        self._client[connection] = client
        self._count(client, 1)
        self._idle[connection] = None
        self._admitted[connection] = at
        return closing

    def crowded(self, client: str | None = None) -> bool:
        """Whether connections are open over the caps (within the slack): in all or ``client``'s, or
        in all or any client's."""
        if self._capped() > self.total:
            return True
        if client is not None:
            return self._per_client.get(client, 0) > self.per_client
        return any(held > self.per_client for held in self._per_client.values())

    def trim(self, came_before: float) -> list[Hashable]:
        """The idle connections to close to come back within the caps, longest idle first, of those
        that came before ``came_before`` (those that came since have not had their moment to send
        a request yet); never a request in progress. What is still over is for the next trim, or
        closed when those requests end and a new connection comes."""
        closing: list[Hashable] = []
        for client in [c for c, held in self._per_client.items() if held > self.per_client]:
            while self._per_client.get(client, 0) > self.per_client and (victim := self._victim(client, came_before)) is not None:
                self._make_room(victim, closing)
        while self._capped() > self.total and (victim := self._victim(None, came_before)) is not None:
            self._make_room(victim, closing)
        return closing

    def _victim(self, client: str | None, came_before: float = math.inf) -> Hashable | None:
        """The idle connection to close to make room (``client``'s own, when given) that came before ``came_before``."""
        return next((c for c in self._idle if self._admitted[c] < came_before and (client is None or self._client[c] == client)), None)

    def _make_room(self, victim: Hashable, closing: list[Hashable]) -> None:
        self.release(victim)
        self.closed_to_make_room += 1
        closing.append(victim)

    def _count(self, client: str, change: int) -> None:
        held = self._per_client.get(client, 0) + change
        if held:
            self._per_client[client] = held
        else:
            del self._per_client[client]

    def _stop_reading(self, connection: Hashable) -> None:
        if self._reading.pop(connection, 0) is None:  # back under the caps
            self._count(self._client[connection], 1)

    def idle(self, connection: Hashable) -> None:
        """No request in progress on ``connection`` (any more): it may be closed to make room."""
        if connection in self._client and connection not in self._idle:
            self._stop_reading(connection)
            self._idle[connection] = None

    def busy(self, connection: Hashable) -> None:
        """A request is in progress on ``connection``: it is not closed to make room."""
        if connection in self._client:
            self._idle.pop(connection, None)
            self._stop_reading(connection)

    def reading(self, connection: Hashable) -> list[Hashable]:
        """``connection`` reads the body of a request nobody has authenticated yet: it leaves the
        caps for the readers' budget. Returns the connection to close when ``readers`` others
        already read (the one reading longest)."""
        if connection not in self._client or connection in self._reading:
            return []
        self._idle.pop(connection, None)
        closing = []
        if len(self._reading) >= self.readers:
            victim = next(iter(self._reading))
            self.release(victim)
            self.readers_closed += 1
            closing.append(victim)
        self._reading[connection] = None
        self._count(self._client[connection], -1)
        return closing

    def release(self, connection: Hashable) -> None:
        client = self._client.pop(connection, None)
        if client is None:
            return
        self._idle.pop(connection, None)
        del self._admitted[connection]
        if self._reading.pop(connection, 0) is not None:  # not a reader: it was under the caps
            self._count(client, -1)


def retry_after_header(seconds: float) -> str:
    return str(max(1, math.ceil(seconds)))
