"""The WhatsApp webhook cannot hold the HTTP door shut, with a real tarsd: the webhook answers
anyone (Meta cannot send the bearer token), and behind the documented tunnel or reverse proxy
every internet client is the same loopback client, so its limits are its own, not a client's.
Slow bodies that never finish, bodies declared too large, and signed JSON nested too deep."""

from __future__ import annotations

import json
import resource
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from harness import meta
from harness.daemon import wait_for
from harness.fake_graph import FakeGraph
from harness.meta import Meta
from harness.web import Web

PHONE_NUMBER_ID = "123456789"
APP_SECRET = "0123456789abcdef0123456789abcdef"
ACCESS_TOKEN = "EAAGtestpermanenttoken"
ME = "353870000001"
SLOW_CONNECTIONS = 200
ATTACK_SECONDS = 5.0


def private(path: Path, text: str) -> None:
    path.write_text(text + "\n")
    path.chmod(0o600)


@pytest.fixture
def door(start_daemon, tmp_path: Path):
    """A real tarsd with [http] and [whatsapp] enabled; (daemon, web, Meta's signed poster, port)."""
    state = tmp_path / "state"
    state.mkdir()
    private(state / "whatsapp_app_secret", APP_SECRET)
    private(state / "whatsapp_access_token", ACCESS_TOKEN)
    private(state / "whatsapp_verify_token", "verify-tars-webhook")
    with FakeGraph(PHONE_NUMBER_ID, ACCESS_TOKEN) as graph:
        (state / "config.toml").write_text(
            f'[whatsapp]\nenabled = true\nphone_number_id = "{PHONE_NUMBER_ID}"\n'
            f"allowed_senders = {json.dumps(['+' + ME])}\ngraph_url = {json.dumps(graph.url)}\n"
        )
        daemon = start_daemon(TARS_HTTP_ENABLED="true", TARS_HTTP_PORT="0")
        web = Web(daemon)
        hook = Meta(web.url, APP_SECRET)
        try:
            yield daemon, web, hook, int(web.url.rsplit(":", 1)[1].strip("/"))
        finally:
            hook.close()


def closed_by_peer(sock: socket.socket) -> bool:
    """True once the other end has closed the connection, without waiting for it (whatever the
    socket's timeout: with one, even MSG_DONTWAIT waits); what it sent before is read and dropped."""
    timeout = sock.gettimeout()
    sock.settimeout(0)
    try:
        while sock.recv(65536):
            pass
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        sock.settimeout(timeout)


class SlowBodies(threading.Thread):
    """``count`` unauthenticated webhook POSTs held open, each declaring a body of ``length`` bytes
    and sending one byte of it every ``every`` seconds; a connection tarsd closes is opened again
    (as the observed attacker did after each deadline), so the attack holds the whole time."""

    def __init__(self, port: int, count: int, length: int, every: float):
        super().__init__(daemon=True)
        self.port, self.count, self.every = port, count, every
        self.head = (
            f"POST /channels/whatsapp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"X-Hub-Signature-256: sha256={'0' * 64}\r\nContent-Length: {length}\r\n\r\n{{"
        ).encode()
        self.sockets: list[socket.socket] = []
        self.opened = 0
        self.done = threading.Event()

    def open_one(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        self.opened += 1
        try:
            sock.sendall(self.head)
        except OSError:
            pass  # closed at once: opened again on the next round
        return sock

    def start_attack(self) -> None:
        self.sockets = [self.open_one() for _ in range(self.count)]
        self.start()

    def run(self) -> None:
        while not self.done.wait(self.every):
            for i, sock in enumerate(self.sockets):
                if self.done.is_set():
                    return
                if closed_by_peer(sock):
                    sock.close()
                    try:
                        self.sockets[i] = self.open_one()
                    except OSError:
                        pass  # the listener's queue full for a moment: the next round tries again
                    continue
                try:
                    sock.send(b" ", socket.MSG_DONTWAIT)
                except OSError:
                    pass

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=30)
        for sock in self.sockets:
            sock.close()


def response_complete(answer: bytes) -> bool:
    """Whether the whole of a response with a Content-Length has been received."""
    head, sep, body = answer.partition(b"\r\n\r\n")
    if not sep:
        return False
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0)
    return len(body) >= length


def status_request(web: Web) -> tuple[str, float]:
    """GET /status with the right token, on a new connection: (its status code or the failure, seconds).

    A connection the door closed before it read the request (reset, no answer) is tried once more
    on a new one, as a browser does: the door's contract (tarsd/serve/http_guard.py, ConnectionGate)
    is that an idle connection, one whose request has not been read yet, may be closed to make room
    and loses nothing, the client reconnecting. On a machine busy enough that the request's bytes
    wait unread past the gate's moment, this happens (seen once in a full run beside other work)."""
    started = time.monotonic()
    for _attempt in (1, 2):
        try:
            with web.client(timeout=10) as client:
                outcome = str(client.get("/status").status_code)
            break
        except (httpx.ReadError, httpx.RemoteProtocolError) as exc:
            outcome = f"{type(exc).__name__}: {exc}"  # closed before any answer: sent again once
        except httpx.HTTPError as exc:
            outcome = f"{type(exc).__name__}: {exc}"
            break
    return outcome, time.monotonic() - started


def test_slow_webhook_bodies_cannot_starve_the_token_holder_nor_meta(door):
    daemon, web, hook, port = door
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < SLOW_CONNECTIONS + 200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, SLOW_CONNECTIONS + 500), hard))
    assert status_request(web)[0] == "200"
    # Bodies small enough to be read (under the webhook's cap), sent a byte every half second.
    attack = SlowBodies(port, SLOW_CONNECTIONS, length=100_000, every=0.5)
    attack.start_attack()
    answers: list[tuple[str, float]] = []
    delivered = None
    try:
        ends = time.monotonic() + ATTACK_SECONDS
        while time.monotonic() < ends:
            answers.append(status_request(web))
            if delivered is None and len(answers) >= 2:
                # Meta's delivery (a status of a message tars sent: nothing for a model to do), signed.
                payload = meta.status(PHONE_NUMBER_ID, meta.message_id(), ME, "delivered")
                try:
                    answer = hook.deliver(payload)
                    delivered = f"{answer.status_code} {answer.text}"
                except httpx.HTTPError as exc:
                    delivered = f"{type(exc).__name__}: {exc}"
            time.sleep(0.1)
        # The attack held the whole time: every slow connection tarsd closed was opened again.
        assert attack.is_alive() and attack.opened >= SLOW_CONNECTIONS
    finally:
        attack.stop()
    # Starved, a request would be refused, closed or left waiting past its client's 10 s timeout: each
    # one answered is the property. How fast is a figure for the record (pytest -s shows it), not an
    # assertion: a busy machine slows every request alike (issue 43, observation 16).
    failed = [(outcome, round(took, 2)) for outcome, took in answers if outcome != "200"]
    print(f"{len(answers)} right-token requests beside {attack.opened} slow bodies: slowest {max(t for _, t in answers):.2f} s")
    assert len(answers) >= 3 and not failed, f"{len(failed)} of {len(answers)} right-token requests failed: {failed[:5]}"
    assert delivered == "200 ok", f"Meta's signed delivery was not answered: {delivered}"
    assert status_request(web)[0] == "200"
    assert "Traceback" not in daemon.log.read_text()


def test_a_body_declared_over_the_cap_is_refused_before_a_byte_is_read(door):
    daemon, web, hook, port = door
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            f"POST /channels/whatsapp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            "Content-Length: 3000000\r\n\r\n".encode()
        )
        started = time.monotonic()
        answer = b""
        while not response_complete(answer):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
        assert b"too_large" in answer
        # Not a byte of the body was sent, and the connection is closed: nothing is waited for.
        wait_for(lambda: closed_by_peer(sock), "tarsd to close the connection after its 413", deadline=5)
        assert time.monotonic() - started < 5
    assert status_request(web)[0] == "200"


def test_a_webhook_body_below_the_minimum_pace_is_closed_and_a_real_one_read(door):
    daemon, web, hook, port = door
    head = (
        f"POST /channels/whatsapp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        "X-Hub-Signature-256: sha256={signature}\r\nContent-Length: {length}\r\n\r\n"
    )
    # A byte every 0.2 s: far under the pace any sender that means to deliver keeps.
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.format(signature="0" * 64, length=100_000).encode())
        started = time.monotonic()
        while not closed_by_peer(sock):
            assert time.monotonic() - started < 6, "tarsd kept reading a body that arrives at 5 bytes a second"
            try:
                sock.send(b" ")
            except OSError:
                break
            time.sleep(0.2)  # the dribbler's own pace, not a wait for tarsd
        assert time.monotonic() - started > 0.8  # the grace: a body's first moment is not judged
    # A real delivery of 300 KB (Meta's payload, padded with JSON's own spaces) in four pieces,
    # a tenth of a second apart: read, checked and taken.
    payload = meta.status(PHONE_NUMBER_ID, meta.message_id(), ME, "sent")
    body = meta.encode(payload)[:-1] + b" " * 300_000 + b"}"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.format(signature=meta.sign(body, APP_SECRET)[7:], length=len(body)).encode())
        for piece in range(4):
            time.sleep(0.1)
            sock.sendall(body[piece * len(body) // 4 : (piece + 1) * len(body) // 4])
        answer = b""
        while not response_complete(answer):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"\r\n\r\nok"), answer[:300]


def test_signed_json_nested_too_deep_is_refused_with_400(door):
    daemon, web, hook, port = door
    nested = b"[" * 200_000 + b"]" * 200_000
    answer = hook.deliver(nested)  # signed with the app secret: only its shape is wrong
    assert answer.status_code == 400, answer.text
    assert answer.json()["code"] == "bad_request" and "nested" in answer.json()["message"]
    deep_object = b'{"a":' * 200_000 + b"1" + b"}" * 200_000  # the same in objects, over 1 MB: never read
    refused = hook.deliver(deep_object)
    # Answered before its body was read, so its connection closes: the answer says so, and the next
    # delivery goes on a new connection instead of one the door is closing (it failed so, now and then).
    assert refused.status_code == 413 and refused.headers["connection"] == "close"
    # tarsd serves on: a well-formed delivery is taken, and the rest of the API answers.
    assert hook.deliver(meta.status(PHONE_NUMBER_ID, meta.message_id(), ME, "read")).text == "ok"
    assert status_request(web)[0] == "200"
    assert "Traceback" not in daemon.log.read_text()
