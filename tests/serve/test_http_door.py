"""The HTTP door against neighbours who would hold it shut, with a real tarsd: slow requests
(slowloris), a web page's token-less requests, a local process rotating its loopback source
address, and a token file opened up while tarsd runs."""

from __future__ import annotations

import os
import resource
import socket
import threading
import time

import httpx

from harness.daemon import wait_for
from harness.web import Web
from tarsctl.client import Client
from tarsctl.protocol import Ping, Pong

SLOW_CONNECTIONS = 1000
TOKEN_HINT = "send Authorization: Bearer TOKEN; `tarsctl http token` prints it"


def port_of(web: Web) -> int:
    return int(web.url.rsplit(":", 1)[1].strip("/"))


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def closed_by_peer(sock: socket.socket) -> bool:
    """True once the other end has closed the connection (without waiting for it)."""
    try:
        return sock.recv(4096, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except ConnectionError:
        return True


def accept_queue(port: int) -> int:
    """Connections to the listener on ``port`` that the kernel holds for tarsd to accept: for a
    listening socket, /proc/net/tcp's rx_queue is its accept queue."""
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        fields = line.split()
        if fields[1].endswith(f":{port:04X}") and fields[3] == "0A":  # 0A: LISTEN
            return int(fields[4].split(":")[1], 16)
    raise AssertionError(f"nothing listens on port {port}")


class Dribbler(threading.Thread):
    """Sends one more header byte on every connection every ``every`` seconds, as a slowloris does."""

    def __init__(self, sockets: list[socket.socket], every: float):
        super().__init__(daemon=True)
        self.sockets, self.every, self.done = sockets, every, threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every):
            for sock in self.sockets:
                try:
                    sock.send(b"a", socket.MSG_DONTWAIT)
                except OSError:
                    pass  # closed by tarsd: the point


def test_a_thousand_slow_requests_cannot_hold_the_door_shut(start_daemon):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < SLOW_CONNECTIONS + 200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, SLOW_CONNECTIONS + 500), hard))
    # A small limit on open files for tarsd, as on a small machine: the HTTP connections must
    # leave the Unix socket room, however many are attempted.
    daemon = start_daemon(open_files=1024, TARS_HTTP_ENABLED="true", TARS_HTTP_PORT="0")
    web = Web(daemon)
    port = port_of(web)
    # What a search and an HTTP request open and keep (database readers) is open before counting.
    assert daemon.search("anything") == []
    with web.client() as client:
        assert client.get("/status").status_code == 200
    before = open_files(daemon.process.pid)
    slow: list[socket.socket] = []
    dribbler = Dribbler(slow, every=2.0)
    try:
        for _ in range(SLOW_CONNECTIONS):
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            try:
                sock.sendall(f"GET /status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode())
            except OSError:
                pass  # already closed to make room for a newer one
            slow.append(sock)
        dribbler.start()
        # The attack is in place once tarsd has taken in every connection (some of which it closed).
        wait_for(lambda: accept_queue(port) == 0, "tarsd to accept the slow connections", deadline=30)
        for _ in range(5):  # each on a new connection, while the slow ones are held
            started = time.monotonic()
            with web.client(timeout=10) as client:
                answered = client.get("/status")
            took = time.monotonic() - started
            assert answered.status_code == 200, answered.text
            assert took < 1.0, f"an authorised request took {took:.2f} s"
            started = time.monotonic()
            with Client(daemon.socket, timeout=5) as unix:
                assert isinstance(unix.call(Ping(id=1)), Pong)
            assert time.monotonic() - started < 1.0
        held = open_files(daemon.process.pid)
        assert held < before + 140, f"{held} files open (from {before}): the connection cap does not hold"
        assert daemon.search("anything") == []  # the search path, over the socket, answers too
    finally:
        dribbler.done.set()
        for sock in slow:
            sock.close()
    wait_for(lambda: open_files(daemon.process.pid) <= before + 2, "tarsd's file descriptors to come back", deadline=15)
    log = daemon.log.read_text()
    assert "Traceback" not in log and "out of system resource" not in log and "Too many open files" not in log
    assert log.count("closing the longest idle to make room") == 1  # said once, not for each of the thousand


def test_a_request_too_slow_to_arrive_is_closed(http_daemon, vault):
    web = http_daemon(TARS_HTTP_HEADER_TIMEOUT_SECONDS="1", TARS_HTTP_BODY_TIMEOUT_SECONDS="1")
    port = port_of(web)

    def held_for(sock: socket.socket, dribble: bytes) -> float:
        """Seconds until tarsd closes ``sock``, a byte of ``dribble`` sent every 0.2 s meanwhile."""
        started = time.monotonic()
        for byte in dribble * 100:
            if closed_by_peer(sock):
                return time.monotonic() - started
            try:
                sock.send(bytes([byte]))
            except OSError:
                return time.monotonic() - started
            time.sleep(0.2)  # the slowloris's own pace, not a wait for tarsd
        raise AssertionError("tarsd kept a request that never finished arriving")

    # Headers that never end: each byte received used to put the deadline off.
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(f"GET /status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {web.token}\r\n".encode())
        assert 0.8 < held_for(sock, b"X-a: b\r\n") < 10
    # A connection that sends nothing at all.
    with socket.create_connection(("127.0.0.1", port)) as sock:
        wait_for(lambda: closed_by_peer(sock), "tarsd to close a silent connection", deadline=10)
    # A body that never ends, with the right token: the request fails, nothing is remembered.
    with socket.create_connection(("127.0.0.1", port)) as sock:
        head = (
            f"POST /remember HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {web.token}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
        )
        sock.sendall(head.encode() + b'{"fact": "')
        assert 0.8 < held_for(sock, b"slow ") < 10
    # Without the token: refused at once, and the body that follows is not waited for either.
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(f"POST /remember HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 100000\r\n\r\n".encode())
        held_for(sock, b"x")
    assert not (vault / "Memory.md").exists()
    with web.client() as client:
        assert client.get("/status").status_code == 200
    assert "Traceback" not in web.daemon.log.read_text()


def test_a_page_loading_images_cannot_lock_the_user_out(http_daemon, vault):
    """What Chromium sends for <img src="http://127.0.0.1:8277/..."> on another site's page: a GET
    from 127.0.0.1 with no Origin and no token. Ten a second for 10 s; the real page searches on."""
    (vault / "garden.md").write_text("# Garden\n\ntomatoes need sun\n")
    web = http_daemon()
    image = {
        "Accept": "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8",
        "Sec-Fetch-Site": "cross-site",
        "Sec-Fetch-Mode": "no-cors",
        "Sec-Fetch-Dest": "image",
        "Referer": "https://evil.example/",
    }
    stop = threading.Event()
    answers: list[int] = []

    def evil_page() -> None:
        with web.client(token="") as browser:
            n = 0
            while not stop.wait(0.1):
                n += 1
                answers.append(browser.get(f"/search?q=x{n}", headers=image).status_code)

    page = threading.Thread(target=evil_page, daemon=True)
    page.start()
    searches: list[int] = []
    try:
        ends = time.monotonic() + 10
        with web.client() as user:
            while time.monotonic() < ends:
                found = user.get("/search", params={"q": "tomatoes", "mode": "fts"}, headers={"Origin": web.url.rstrip("/")})
                searches.append(found.status_code)
                stop.wait(0.2)
    finally:
        stop.set()
        page.join(timeout=30)
    assert len(answers) > 50 and set(answers) == {401}
    assert len(searches) > 20 and set(searches) == {200}, searches
    with web.client() as user:
        assert user.get("/status").json()["http"]["auth_failures"] == 0


def test_rotating_loopback_addresses_still_meets_the_limiter(http_daemon):
    web = http_daemon(TARS_HTTP_AUTH_FAILURES_BURST="3", TARS_HTTP_AUTH_FAILURES_PER_SECOND="0.1")
    statuses = []
    for n in range(10):
        source = f"127.0.{n + 1}.{n + 2}"  # any of 127.0.0.0/8: a local process can bind them all
        transport = httpx.HTTPTransport(local_address=source)
        with httpx.Client(base_url=web.url, transport=transport, headers={"Authorization": "Bearer guess" + str(n)}) as guesser:
            statuses.append(guesser.get("/status").status_code)
    assert statuses == [401] * 3 + [429] * 7
    with web.client() as owner:  # every loopback address is one client: the owner's too, till it refills
        assert owner.get("/status").status_code == 429


def test_a_token_file_opened_up_while_running_stops_every_token(http_daemon):
    web = http_daemon()
    with web.client() as client, web.client(token="") as anonymous, web.client(token="w" * 43) as wrong:
        assert client.get("/status").status_code == 200
        web.token_file.chmod(0o644)  # no change of content, size or mtime: only the mode
        refused = client.get("/status")
        assert refused.status_code == 503, refused.text
        message = refused.json()["message"]
        assert str(web.token_file) in message and f"chmod 600 {web.token_file}" in message and "--rotate" in message
        assert wrong.get("/status").json()["message"] == message
        # A request without a token is told what it lacks, not about the file.
        assert anonymous.get("/status").json()["hint"] == TOKEN_HINT
        web.token_file.chmod(0o600)
        assert client.get("/status").status_code == 200
        # The error is gone with its cause: 401 bodies name the reason of this request only.
        assert wrong.get("/status").json() == {
            "type": "error",
            "code": "unauthorized",
            "message": "the bearer token is wrong",
            "hint": TOKEN_HINT,
        }
        assert anonymous.get("/status").json() == {
            "type": "error",
            "code": "unauthorized",
            "message": "a valid bearer token is needed",
            "hint": TOKEN_HINT,
        }
        http = client.get("/status").json()["http"]
        assert http["auth_failures"] == 1  # the wrong token once: neither a missing one nor one refused for the file


def test_http_url_needs_tarsd_listening_there(start_daemon):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = str(taken.getsockname()[1])
    try:
        # Another program holds the port: tarsd cannot listen, and the address would reach that program.
        daemon = start_daemon(TARS_HTTP_ENABLED="1", TARS_HTTP_PORT=port)
        url = daemon.tarsctl("http", "url")
        assert url.returncode == 1 and url.stdout == "", url.stdout
        assert "tarsd is not listening for HTTP" in url.stderr and f"cannot listen on 127.0.0.1:{port}" in url.stderr
        assert daemon.stop() == 0
        url = daemon.tarsctl("http", "url")  # no tarsd at all
        assert url.returncode == 3 and url.stdout == "" and "tarsd is not running" in url.stderr  # as every command: 3
    finally:
        taken.close()
