"""tarsctl's quick path: `search` and `ping` over JSON bodies, without msgspec, printing exactly
what the full client prints; and the daemon's JSON bodies under it."""

from __future__ import annotations

import json
import re
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

import msgspec
import pytest

from harness.vault_files import write
from tarsctl.protocol import Coverage, Hit, Pong, SearchResults, Welcome, encoder
from tarsctl.transport import HEADER

FULL_CLIENT = "import sys; from tarsctl.cli import main; sys.exit(main(sys.argv[1:]))"


def full(daemon, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", FULL_CLIENT, *args], env=daemon.env, capture_output=True, text=True, timeout=60)


def without_timings(text: str) -> str:
    return re.sub(r'"(elapsed_ms|uptime)":[0-9.e+-]+', r'"\1":0', text)


@pytest.fixture
def notes_daemon(start_daemon, vault: Path):
    write(
        vault,
        "Sourdough.md",
        "---\naliases: [Bread]\n---\n# Sourdough\n\n## Bake\n\nBake the **bread** at 250 °C, [[Oven|the oven]] hot.\n",
    )
    write(vault, "Oven.md", "# Oven\n\nThe oven takes 40 minutes to reach 250 °C before bread goes in.\n")
    write(vault, "Ünïcode “quotes”.md", "# Ünïcode\n\nNon-ASCII text: naïve café, 東京, and a tab\there.\n")
    daemon = start_daemon()
    assert daemon.tarsctl("index").returncode == 0
    return daemon


@pytest.mark.parametrize(
    "argv",
    [
        ("search", "bread"),
        ("search", "--mode", "fts", "bread", "oven", "--explain"),
        ("search", "--json", "--explain", "bread"),
        ("search", "--json", "café 東京"),
        ("search", "--limit", "1", "--tag", "none", "bread"),
        ("search", "--since", "1d", "--json", "bread"),
        ("search", "zzzz-nothing-matches"),
        ("ping", "--json"),
        ("search", "--limit", "0", "bread"),
        ("search", "--mode", "nope", "bread"),
        ("search", "--since", "someday", "bread"),
        ("search", "   "),
        ("search", "--help"),
        ("ping", "-h"),
    ],
)
def test_the_quick_path_prints_what_the_full_client_prints(notes_daemon, argv):
    quick = notes_daemon.tarsctl(*argv)
    slow = full(notes_daemon, *argv)
    assert quick.returncode == slow.returncode, (quick.stderr, slow.stderr)
    assert without_timings(quick.stdout) == without_timings(slow.stdout)
    assert without_timings(quick.stderr) == without_timings(slow.stderr)
    if argv[0] == "search" and quick.returncode == 0 and "--json" in argv:
        assert quick.stdout.strip(), "the search found nothing: the comparison would be empty"


def test_a_quick_search_or_ping_never_loads_msgspec(notes_daemon):
    for argv in (("search", "--mode", "fts", "bread"), ("ping",), ("--version",)):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "tarsctl", *argv], env=notes_daemon.env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        modules = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
        assert modules and not {m for m in modules if m.split(".")[0] in ("msgspec", "tarsctl.protocol", "tarsctl.cli")}, argv
        assert "tarsctl.protocol" not in modules and "tarsctl.client" not in modules, argv
        # Neither socket's enums nor the shutil argparse asks the terminal's width with: 4 ms of a search.
        assert not {"socket", "shutil"} & modules, argv


def test_other_commands_still_go_to_the_full_client(notes_daemon):
    done = notes_daemon.tarsctl("status", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["type"] == "status_reply"
    helped = notes_daemon.tarsctl("--help")
    assert helped.returncode == 0 and "remember" in helped.stdout  # every command, not only the quick ones


def frames(sock: socket.socket, *bodies: bytes) -> list[bytes]:
    """Send these bodies; return every frame body the daemon sends until it closes."""
    for body in bodies:
        sock.sendall(HEADER.pack(len(body)) + body)
    sock.shutdown(socket.SHUT_WR)
    got, buffer = [], b""
    while chunk := sock.recv(65536):
        buffer += chunk
    while buffer:
        (length,) = HEADER.unpack(buffer[:4])
        got.append(buffer[4 : 4 + length])
        buffer = buffer[4 + length :]
    return got


def talk(daemon, *bodies: bytes) -> list[bytes]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(str(daemon.socket))
        return frames(sock, *bodies)


def test_a_json_hello_is_answered_in_json_with_every_field(notes_daemon):
    hello = b'{"type":"hello","protocol":1,"client":"a-script/1"}'
    welcome, pong, results = talk(notes_daemon, hello, b'{"type":"ping","id":7}', b'{"type":"search","id":8,"query":"bread","mode":"fts"}')
    assert json.loads(welcome)["type"] == "welcome" and "search" in json.loads(welcome)["capabilities"]
    assert json.loads(pong)["type"] == "pong" and json.loads(pong)["id"] == 7
    reply = json.loads(results)
    assert reply["type"] == "search_results" and reply["id"] == 8 and reply["results"]
    hit = reply["results"][0]
    # Defaults are sent too (msgpack leaves them out): every field of Hit and of Explain is there.
    assert set(hit) == set(Hit.__struct_fields__) and hit["explain"] is None
    assert set(reply["coverage"]) == set(Coverage.__struct_fields__)
    # And the same values the msgpack client decodes, typed as the struct says.
    assert isinstance(reply["coverage"]["reconciled"], bool) and isinstance(hit["score"], float)


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'{"type":"search","id":1,"query":"x","limit":0}', "bad_request"),  # out of bounds, as in msgpack
        (b'{"type":"search","id":1,"query":', "bad_frame"),  # cut short
        (b'{"type":"search","id":1,"query":"\xff"}', "bad_frame"),  # not UTF-8
        (b'{"type":"nosuch","id":1}', "bad_request"),
        (b"[" * 100_000 + b"]" * 100_000, "bad_frame"),  # nested past any decoder's depth
    ],
)
def test_a_bad_json_request_gets_an_error_in_json_and_the_daemon_goes_on(notes_daemon, body, code):
    replies = talk(notes_daemon, b'{"type":"hello","protocol":1}', body)
    assert json.loads(replies[0])["type"] == "welcome"
    error = replies[-1]
    assert json.loads(error)["type"] == "error" and json.loads(error)["code"] in (code, "bad_request"), error[:200]
    assert notes_daemon.tarsctl("ping").returncode == 0


def test_a_json_hello_that_does_not_decode_is_refused_in_json(notes_daemon):
    [error] = talk(notes_daemon, b'{"type":"hello","protocol":"one"}')
    assert json.loads(error)["type"] == "error" and json.loads(error)["code"] == "bad_request"
    [error] = talk(notes_daemon, b'{"type":"ping","id":1}')
    assert json.loads(error)["code"] == "bad_request" and "hello" in json.loads(error)["message"]
    assert notes_daemon.tarsctl("ping").returncode == 0


def body(conn: socket.socket) -> bytes:
    (length,) = HEADER.unpack(conn.recv(4, socket.MSG_WAITALL))
    return conn.recv(length, socket.MSG_WAITALL)


def test_an_older_tarsd_that_answers_only_msgpack_still_gets_its_search(tmp_path: Path):
    """A tarsd from before JSON bodies answers a JSON hello in msgpack: tarsctl goes the full way."""
    path = tmp_path / "old.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)
    hellos: list[bytes] = []

    def old_tarsd() -> None:
        hit = Hit(
            path="a.md",
            title="A",
            heading_path="A",
            start_line=1,
            end_line=2,
            snippet="the **word**",
            score=0.9,
            band="relevant",
            memory_type="note",
        )
        for _ in range(2):
            conn, _ = listener.accept()
            with conn:
                hellos.append(body(conn))
                data = encoder.encode(Welcome(server="tarsd/0.0.9"))
                conn.sendall(HEADER.pack(len(data)) + data)
                try:
                    request = msgspec.msgpack.decode(body(conn))
                except (msgspec.DecodeError, struct.error):
                    continue  # the quick path hung up on the msgpack welcome
                if request.get("type") == "ping":
                    data = encoder.encode(Pong(id=request["id"], server="tarsd/0.0.9"))
                else:
                    data = encoder.encode(SearchResults(id=request["id"], mode="fts", results=[hit], coverage=Coverage(reconciled=True)))
                conn.sendall(HEADER.pack(len(data)) + data)

    server = threading.Thread(target=old_tarsd, daemon=True)
    server.start()
    done = subprocess.run(
        [sys.executable, "-m", "tarsctl", "--socket", str(path), "search", "word"], capture_output=True, text=True, timeout=60
    )
    server.join(30)
    listener.close()
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "a.md:1  A  [relevant 0.90]"
    assert hellos[0].startswith(b"{") and not hellos[1].startswith(b"{")  # JSON first, then msgpack
