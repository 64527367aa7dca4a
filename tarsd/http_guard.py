"""Checks every HTTP request passes before the token is even looked at: the Host header (against
DNS rebinding: a page on evil.example whose name is made to resolve to 127.0.0.1 sends
``Host: evil.example``), the Origin header when a browser sends one, and a limit on failed
authentications per client address. Standard library only, so it is tested on its own.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections.abc import Callable
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
    """Failed authentications per client address, as a token bucket: ``burst`` failures at once,
    then ``per_second``. Past that every request from the address gets 429 until the bucket refills,
    the right token included (otherwise guessing would go on at full speed, told apart by 401 and 200)."""

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


def retry_after_header(seconds: float) -> str:
    return str(max(1, math.ceil(seconds)))
