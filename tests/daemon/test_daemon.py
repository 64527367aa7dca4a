"""A real tarsd subprocess on a temp vault: live watching, restarts, bad clients, signals."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat

import msgspec
import pytest

from harness.daemon import wait_for
from harness.paths import DENDRON
from harness.vault_files import write
from tarsctl.protocol import Hello, Index, IndexDone, Ping, Pong, Progress, Status, frame, server_decoder
from tarsctl.transport import HEADER


def test_edits_creates_deletes_renames_and_atomic_saves_are_followed(start_daemon, vault):
    write(vault, "garden.md", "# Garden\n\ntomatoes and basil\n")
    daemon = start_daemon()
    assert daemon.search("tomatoes") == ["garden.md"]

    write(vault, "ideas.md", "# Ideas\n\na quokka sanctuary\n")
    wait_for(lambda: daemon.search("quokka") == ["ideas.md"], "a created note")

    write(vault, "garden.md", "# Garden\n\npeppers now\n")
    wait_for(lambda: daemon.search("peppers") == ["garden.md"] and daemon.search("tomatoes") == [], "an edited note")

    os.rename(vault / "ideas.md", vault / "projects.md")
    wait_for(lambda: daemon.search("quokka") == ["projects.md"], "a renamed note")

    # An editor's atomic save: write a temp file, then rename it over the note.
    temp = vault / ".garden.md.swp"
    temp.write_text("# Garden\n\naubergines instead\n", encoding="utf-8")
    os.replace(temp, vault / "garden.md")
    wait_for(lambda: daemon.search("aubergines") == ["garden.md"] and daemon.search("peppers") == [], "an atomic save")

    (vault / "projects.md").unlink()
    wait_for(lambda: daemon.search("quokka") == [], "a deleted note")

    (vault / "archive").mkdir()
    write(vault, "outside/moved.md", "a wombat burrow")
    shutil.move(str(vault / "outside"), str(vault / "archive" / "outside"))
    wait_for(lambda: daemon.search("wombat") == ["archive/outside/moved.md"], "a folder moved within the vault")


def test_a_burst_of_500_writes_is_fully_indexed(start_daemon, vault):
    daemon = start_daemon()
    for i in range(500):
        write(vault, f"burst/note-{i:03}.md", f"# Note {i}\n\nmarker{i} appears only here\n")
    with daemon.client() as client:
        wait_for(lambda: client.call(Status(id=1)).counts["files"] == 500, "500 notes in the index")
    for i in (0, 123, 250, 499):
        assert daemon.search(f"marker{i}") == [f"burst/note-{i:03}.md"]
    status = daemon.status()
    assert status.counts["chunks"] == status.counts["fts_rows"] == 500


def test_changes_made_while_stopped_are_picked_up_at_start(start_daemon, vault):
    write(vault, "kept.md", "tomatoes")
    write(vault, "removed.md", "peppers")
    daemon = start_daemon()
    assert daemon.stop() == 0
    write(vault, "kept.md", "aubergines")
    (vault / "removed.md").unlink()
    write(vault, "added.md", "courgettes")
    daemon.start()
    wait_for(lambda: daemon.status().last_sync.get("at"), "the start-up reconcile")
    assert daemon.search("aubergines") == ["kept.md"]
    assert daemon.search("tomatoes peppers") == []
    assert daemon.search("courgettes") == ["added.md"]


def _raw(daemon, payload: bytes, hello: bool = True, read: bool = True):
    """Send raw bytes after an optional hello; return the decoded reply or None if closed."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(daemon.socket))
    try:
        if hello:
            sock.sendall(frame(Hello(client="test")))
            _read_frame(sock)
        sock.sendall(payload)
        return _read_frame(sock) if read else None
    finally:
        sock.close()


def _read_frame(sock):
    header = b""
    while len(header) < 4:
        part = sock.recv(4 - len(header))
        if not part:
            return None
        header += part
    (length,) = HEADER.unpack(header)
    body = b""
    while len(body) < length:
        part = sock.recv(length - len(body))
        if not part:
            return None
        body += part
    return server_decoder.decode(body)


def _body(obj) -> bytes:
    data = msgspec.msgpack.encode(obj)
    return HEADER.pack(len(data)) + data


@pytest.mark.parametrize(
    "payload, code",
    [
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "too_large"),  # garbage: "GET " read as a length
        (HEADER.pack(0xFFFFFFF0) + b"x", "too_large"),
        (HEADER.pack(5) + b"\xc1\xc1\xc1\xc1\xc1", "bad_frame"),  # 0xc1 is never valid msgpack
        (_body({"type": "search", "id": "one", "query": 5}), "bad_request"),  # wrong types
        (_body({"type": "launch_missiles", "id": 1}), "bad_request"),  # unknown tag
        (_body([1, 2, 3]), "bad_request"),  # not a map
        (_body({"type": "hello"}), "bad_request"),  # a second hello
    ],
)
def test_malformed_frames_get_typed_errors_and_the_daemon_keeps_serving(start_daemon, vault, payload, code):
    write(vault, "a.md", "tomatoes")
    daemon = start_daemon()
    reply = _raw(daemon, payload)
    assert reply is not None and reply.code == code, reply
    assert reply.message
    assert daemon.search("tomatoes") == ["a.md"]


def test_first_message_must_be_hello_and_half_frames_are_dropped(start_daemon, vault):
    write(vault, "a.md", "tomatoes")
    daemon = start_daemon()
    reply = _raw(daemon, frame(Ping(id=4)), hello=False)
    assert reply.code == "bad_request" and "hello" in reply.message
    # A client that disconnects mid-frame, in the header and in the body.
    _raw(daemon, b"\x00\x00", read=False)
    _raw(daemon, HEADER.pack(100) + b"\x82", read=False)
    # A client that connects and says nothing does not block others.
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.connect(str(daemon.socket))
    try:
        assert daemon.search("tomatoes") == ["a.md"]
        with daemon.client() as client:
            assert isinstance(client.call(Ping(id=9)), Pong)
    finally:
        silent.close()


def test_one_daemon_per_vault_and_stale_sockets_are_cleared(start_daemon, vault):
    write(vault, "a.md", "tomatoes")
    first = start_daemon()
    second = start_daemon(wait=False)
    assert second.process.wait(timeout=60) == 3
    assert "already serving the vault" in second.log.read_text()
    assert first.search("tomatoes") == ["a.md"]

    first.kill()  # kill -9 leaves the socket file behind
    assert first.socket.exists()
    first.start()
    assert first.search("tomatoes") == ["a.md"]


def test_kill_during_a_large_index_leaves_a_consistent_index(start_daemon, vault):
    for note in sorted(DENDRON.glob("*.md")):
        shutil.copy(note, vault / note.name)
    daemon = start_daemon(wait=False)
    wait_for(lambda: (daemon.status().counts["files"] or 0) > 50, "indexing to be under way", interval=0.01)
    daemon.kill()
    daemon.start()
    expected = len(list(DENDRON.glob("*.md")))
    status = wait_for(lambda: (s := daemon.status()).counts["files"] == expected and not s.indexing and s, "the index to be complete")
    counts = status.counts
    assert counts["chunks"] == counts["fts_rows"] > expected
    assert counts["skipped"] == 0
    assert daemon.search("publishing github pages")


def test_sigterm_exits_cleanly_and_removes_the_socket(start_daemon, vault):
    daemon = start_daemon()
    assert daemon.stop(signal.SIGTERM) == 0
    assert not daemon.socket.exists()
    daemon.start()
    assert daemon.stop(signal.SIGINT) == 0


def test_socket_is_private(start_daemon):
    daemon = start_daemon()
    assert stat.S_IMODE(daemon.socket.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(daemon.socket.stat().st_mode) & 0o077 == 0


def test_systemd_notify(start_daemon, tmp_path):
    path = f"/tmp/tars-notify-{os.getpid()}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(path)
    listener.settimeout(60)
    try:
        daemon = start_daemon(NOTIFY_SOCKET=path, WATCHDOG_USEC="2000000")
        messages = []
        while not any("READY=1" in m for m in messages):
            messages.append(listener.recv(4096).decode())
        while not any("WATCHDOG=1" in m for m in messages):
            messages.append(listener.recv(4096).decode())
        daemon.stop()
        while not any("STOPPING=1" in m for m in messages):
            messages.append(listener.recv(4096).decode())
        assert any(m.startswith("READY=1\nSTATUS=") for m in messages)
    finally:
        listener.close()
        os.unlink(path)


def test_index_request_streams_progress(start_daemon, vault):
    for i in range(450):
        write(vault, f"n{i}.md", f"note {i}")
    daemon = start_daemon()
    with daemon.client() as client:
        replies = list(client.stream(Index(id=7, full=True)))
    assert any(isinstance(r, Progress) and r.phase == "scan" for r in replies)
    final = replies[-1]
    assert isinstance(final, IndexDone) and final.id == 7 and final.indexed == 450


def test_tarsctl_commands(start_daemon, vault):
    write(vault, "Memory.md", "# Core\n\n- Dog: Perry the beagle\n")
    write(vault, "notes/beagles.md", "# Beagles\n\nBeagles are scent hounds.\n")
    daemon = start_daemon()

    human = daemon.tarsctl("search", "beagle", "--mode", "fts")
    assert human.returncode == 0 and "Memory.md:1" in human.stdout and "notes/beagles.md:1" in human.stdout

    lines = daemon.tarsctl("search", "beagle", "--mode", "fts", "--json", "--type", "semantic").stdout.splitlines()
    hits = [json.loads(line) for line in lines]
    assert [h["path"] for h in hits] == ["Memory.md"] and hits[0]["band"] in ("relevant", "kinda", "maybe", "not")

    assert daemon.tarsctl("search", "beagle", "--mode", "fts", "--path", "notes/", "--json").stdout.count("\n") == 1
    vec = daemon.tarsctl("search", "beagle", "--mode", "vec")
    assert vec.returncode == 1 and "vector search is unavailable" in vec.stderr and "hint:" in vec.stderr

    status = json.loads(daemon.tarsctl("status", "--json").stdout)
    assert status["counts"]["files"] == 2 and status["vault"] == str(vault.resolve())
    assert status["watcher"]["alive"] and status["versions"]["sqlite_vec"]
    assert "vault" in daemon.tarsctl("status").stdout

    index = daemon.tarsctl("index", str(vault / "notes" / "beagles.md"), "--json")
    assert json.loads(index.stdout.splitlines()[-1])["scanned"] == 1
    outside = daemon.tarsctl("index", "/etc/passwd")
    assert outside.returncode == 1 and "not inside the vault" in outside.stderr

    assert json.loads(daemon.tarsctl("ping", "--json").stdout)["type"] == "pong"
    assert daemon.tarsctl("search").returncode == 2
    assert daemon.tarsctl("search", "x", "--mode", "bogus").returncode == 2
    assert "complete -o default -F _tarsctl tarsctl" in daemon.tarsctl("completion", "bash").stdout
    assert "#compdef tarsctl" in daemon.tarsctl("completion", "zsh").stdout

    assert daemon.tarsctl("stop").returncode == 0
    assert daemon.process.wait(timeout=60) == 0
    gone = daemon.tarsctl("ping")
    assert gone.returncode == 3 and "tarsd is not running" in gone.stderr and "tarsd --vault" in gone.stderr


def test_live_vectors_with_the_local_model(start_daemon, vault):
    daemon = start_daemon(embedder="local")
    write(vault, "trip.md", "# Trip\n\nWe took the train to Lisbon in June.\n")
    wait_for(lambda: daemon.search("holiday by rail to Portugal", mode="vec") == ["trip.md"], "a new note to be found by meaning")
    status = daemon.status()
    assert status.embedder.state == "ready" and status.counts["vectors"] == status.counts["chunks"]


def test_tarsds_log_holds_no_escape_sequence_a_tool_server_sent(start_daemon, tmp_path):
    """tarsd logs to its stderr: a terminal when it runs in the foreground, `tarsctl service logs`
    (tail) on macOS. A tool server's name for itself (its serverInfo) went into the "ready" line
    raw, so a server could clear that terminal or write its clipboard (OSC 52)."""
    import sys

    from harness.tool_servers import TESTS, Journal, toml_config
    from tarsctl.shown import shown_text

    hostile = "evil\x1b[2J\x1b]52;c;d2lyZQ==\x07\x9b31m\u202e"
    state = tmp_path / "state"
    state.mkdir()
    journal = Journal(tmp_path / "journal.jsonl")
    server = {
        "command": [sys.executable, "-m", "harness.tool_server", hostile],
        "cwd": str(TESTS),
        "env": {"TOOL_SERVER_JOURNAL": str(journal.path)},
    }
    (state / "config.toml").write_text(toml_config({"tasks": server}))
    daemon = start_daemon()
    wait_for(lambda: [s.state for s in daemon.status().tool_servers] == ["ready"], "the tool server")
    wait_for(lambda: "MCP server tasks ready" in daemon.log.read_text(encoding="utf-8", errors="replace"), "its ready line")
    logged = daemon.log.read_text(encoding="utf-8", errors="replace")
    assert not set(logged) & set("\x1b\x07\x9b\u202e"), logged
    assert f"test-{shown_text(hostile)}" in logged  # what it said, shown as escapes
