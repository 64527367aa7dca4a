"""The HTTP listener's checks on their own (Host, Origin, failed-auth limit, token file), and the
mounting point for MCP over streamable HTTP: a mounted ASGI app sits behind the same guard."""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from tarsctl.protocol import Message, Pong
from tarsd.config.settings import HttpConfig
from tarsd.serve.http_guard import (
    PUBLIC_BODY_SECONDS,
    PUBLIC_MIN_BYTES_PER_SECOND,
    ConnectionGate,
    FailureLimiter,
    HostPolicy,
    body_too_slow,
    client_key,
    page_url,
    split_host,
)
from tarsd.serve.http_token import TokenCheck
from tarsd.setup.http_tokens import TokenError, ensure_token, read_token, rotate_token, token_path


def test_host_policy():
    policy = HostPolicy(8277, "127.0.0.1", ["pi.local", "192.168.1.20", "tars.example.org:443", "fe80::1"])
    for host in ("localhost:8277", "127.0.0.1:8277", "[::1]:8277", "LOCALHOST:8277", "pi.local", "pi.local:8277", "192.168.1.20:8277"):
        assert policy.host_ok(host), host
    assert policy.host_ok("tars.example.org:443") and policy.host_ok("[fe80::1]:8277")
    for host in (
        "",
        "localhost",
        "localhost:80",
        "127.0.0.1:8278",
        "evil.example:8277",
        "tars.example.org",
        "pi.local.evil.example",
        "[::2]:8277",
    ):
        assert not policy.host_ok(host), host
    assert policy.origin_ok("http://localhost:8277") and policy.origin_ok("https://pi.local")
    for origin in ("null", "http://evil.example:8277", "file://", "chrome-extension://abc", "http://localhost:8277/path", "ftp://pi.local"):
        assert not policy.origin_ok(origin), origin
    assert HostPolicy(8277, origins=["https://Tars.Example.org/"]).origin_ok("https://tars.example.org")
    # A listener on a LAN address answers to that address with its port; a wildcard one only to the names.
    assert HostPolicy(8277, "192.168.1.20").host_ok("192.168.1.20:8277") and not HostPolicy(8277, "0.0.0.0").host_ok("0.0.0.0:8277")
    assert split_host("[::1]:80") == ("[::1]", "80") and split_host("Pi.Local") == ("pi.local", "")
    assert page_url("0.0.0.0", 8277) == "http://127.0.0.1:8277/" and page_url("::", 1) == "http://[::1]:1/"


def test_failure_limiter_is_a_token_bucket_per_address():
    now = [100.0]
    limiter = FailureLimiter(burst=3, per_second=0.5, clock=lambda: now[0])
    for _ in range(3):
        assert limiter.retry_after("a") == 0
        limiter.failed("a")
    assert limiter.retry_after("a") == pytest.approx(2.0) and limiter.retry_after("b") == 0
    now[0] += 2.0
    assert limiter.retry_after("a") == 0
    limiter.failed("a")
    assert limiter.retry_after("a") == pytest.approx(2.0)
    with pytest.raises(ValueError, match="auth_failures_per_second"):
        FailureLimiter(burst=5, per_second=0)


def test_every_loopback_address_is_one_client():
    for address in ("127.0.0.1", "127.0.5.6", "127.255.255.254", "::1", "[::1]", "::ffff:127.0.0.2"):
        assert client_key(address) == "loopback", address
    assert client_key("192.168.1.20") == client_key("::ffff:192.168.1.20") == "192.168.1.20"
    # An IPv6 host picks any address of its /64 at will: the /64 is the client.
    assert client_key("2001:db8:1:2::5") == client_key("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::5") != client_key("2001:db8:1:2::5")
    assert client_key("unknown") == "unknown"


def test_connection_gate_closes_the_longest_idle_to_make_room():
    gate = ConnectionGate(per_client=2, total=3)
    assert gate.admit("a1", "A") == [] and gate.admit("a2", "A") == []
    # A's third: A's longest idle connection makes room.
    assert gate.admit("a3", "A") == ["a1"] and len(gate) == 2
    gate.busy("a2")  # a request in progress: never closed to make room
    assert gate.admit("a4", "A") == ["a3"]
    gate.busy("a4")
    assert gate.admit("a5", "A") == ["a5"] and gate.refused == 1  # nothing of A's idle: the new one goes
    # The total cap: any client's longest idle connection makes room, else the new one goes.
    assert gate.admit("b1", "B") == [] and len(gate) == 3
    assert gate.admit("c1", "C") == ["b1"]
    gate.busy("c1")
    assert gate.admit("d1", "D") == ["d1"] and len(gate) == 3
    gate.idle("a2")  # its answer went out: idle again, and the longest idle from now
    gate.idle("a4")
    assert gate.admit("d2", "D") == ["a2"] and gate.closed_to_make_room == 4
    gate.release("a4")
    gate.release("a4")  # closed twice (made room, then lost): counted once
    assert len(gate) == 2 and gate.admit("d3", "D") == []
    with pytest.raises(ValueError, match="max_connections"):
        ConnectionGate(per_client=0, total=10)


def test_unauthenticated_bodies_have_their_own_budget_outside_the_caps():
    gate = ConnectionGate(per_client=2, total=10, readers=2)
    for name in ("w1", "w2"):
        assert gate.admit(name, "loopback") == [] and gate.reading(name) == []
    assert gate.admit("w3", "loopback") == []  # its headers are still on their way: idle
    # Readers leave the caps: the client's two places are free for the token's requests.
    assert gate.admit("t1", "loopback") == [] and gate.admit("t2", "loopback") == ["w3"]
    assert gate.reading("t1") == ["w1"] and gate.readers_closed == 1  # a third reader: the one reading longest goes
    gate.busy("t1")  # its body arrived: a request in progress, back under the caps
    assert gate.admit("t3", "loopback") == ["t2"]
    gate.release("w2")
    gate.release("t1")
    gate.release("t3")
    assert len(gate) == 0 and not gate.crowded()


def test_connection_gate_chooses_whom_to_close_once_a_burst_has_been_read():
    gate = ConnectionGate(per_client=2, total=10, slack=3)
    for n, name in enumerate(("a", "b", "c", "d", "e")):
        assert gate.admit(name, "loopback", at=n * 0.01) == []  # within the slack: nothing closed yet
    assert gate.crowded("loopback") and gate.admit("f", "loopback", at=0.05) == ["a"]  # past it: at once
    gate.busy("c")  # its request arrived: in progress
    # Only connections that had their moment are judged: "f" came too lately, and stays for now.
    assert gate.trim(came_before=0.045) == ["b", "d", "e"] and len(gate) == 2
    assert not gate.crowded() and gate.trim(came_before=1.0) == []


def test_an_unauthenticated_body_must_keep_a_minimum_pace():
    assert not body_too_slow(0, 0.9)  # the grace
    assert body_too_slow(0, 2.0) and body_too_slow(PUBLIC_MIN_BYTES_PER_SECOND // 2, 2.0)
    assert not body_too_slow(PUBLIC_MIN_BYTES_PER_SECOND * 2, 2.0)
    assert body_too_slow(10**9, PUBLIC_BODY_SECONDS)  # the deadline, however fast


def test_failure_limiter_table_stays_bounded():
    now = [0.0]
    limiter = FailureLimiter(burst=2, per_second=1, clock=lambda: now[0], max_clients=100)
    for n in range(1000):
        now[0] += 0.001
        limiter.failed(f"10.0.{n // 250}.{n % 250}")
    assert len(limiter._buckets) <= 101


def test_token_file_is_private_and_checked(tmp_path: Path):
    path = token_path("", tmp_path / "conf" / "config.toml")
    assert path == tmp_path / "conf" / "http_token"
    token = ensure_token(path)
    assert len(token) == 43 and stat.S_IMODE(path.stat().st_mode) == 0o600 and ensure_token(path) == token
    check = TokenCheck(path)
    assert check.matches(token) and not check.matches(token[:-1] + "x") and not check.matches("")
    new = rotate_token(path)
    assert not check.matches(token) and check.matches(new)  # re-read on change
    path.chmod(0o640)
    with pytest.raises(TokenError, match="chmod 600"):
        read_token(path)
    # A token others can read lets nobody in: seen at the next check, though only the mode changed.
    assert not check.matches(new) and check.check(new) is None and "chmod 600" in check.error
    path.chmod(0o600)
    assert check.matches(new) and check.check("x" * 43) is False and check.error == ""
    path.write_text("short\n")
    with pytest.raises(TokenError, match="at least 32 characters"):
        read_token(path)
    link = tmp_path / "link"
    link.symlink_to(path)
    with pytest.raises(OSError):
        read_token(link)
    assert token_path("~/t", path) == Path(os.path.expanduser("~/t"))


class _Dispatcher:
    """Stands in for the socket server: the guard and the mount are what is tested here."""

    def __init__(self):
        self.daemon = SimpleNamespace(config=SimpleNamespace(daemon=SimpleNamespace(max_connections=16)))
        self.max_connections = 16  # the socket's connections, which the listener leaves file descriptors for

    async def dispatch(self, request: Message, _peer):
        yield Pong(id=request.id, server="stand-in")


def test_a_mounted_app_is_behind_the_same_token_host_and_origin_checks(tmp_path: Path):
    from tarsd.serve.http import HttpDoor
    from tarsd.serve.http_app import Mount

    events: list[str] = []

    async def tiny_mcp(scope, receive, send):
        assert scope["type"] == "http"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": f"mcp saw {scope['path']}".encode()})

    @contextlib.asynccontextmanager
    async def lifespan():
        events.append("started")
        yield
        events.append("stopped")

    def mount(dispatch):
        events.append(f"given {type(dispatch).__name__}")
        return Mount("/mcp", tiny_mcp, lifespan=lifespan)

    async def run():
        door = HttpDoor(_Dispatcher(), HttpConfig(enabled=True, port=0), tmp_path / "http_token", mounts=[mount])
        await door.start()
        token = (tmp_path / "http_token").read_text().strip()
        try:
            async with httpx.AsyncClient(base_url=door.url, timeout=10) as client:
                assert (await client.post("/mcp/")).status_code == 401
                ok = await client.post("/mcp/", headers={"Authorization": f"Bearer {token}"})
                assert ok.status_code == 200 and ok.text == "mcp saw /mcp/"
                assert ok.headers["x-content-type-options"] == "nosniff"
                evil = {"Authorization": f"Bearer {token}", "Host": "evil.example"}
                assert (await client.post("/mcp/", headers=evil)).status_code == 403
                cross = {"Authorization": f"Bearer {token}", "Origin": "http://evil.example"}
                assert (await client.post("/mcp/", headers=cross)).status_code == 403
        finally:
            await door.close()

    asyncio.run(run())
    assert events == ["given method", "started", "stopped"]
