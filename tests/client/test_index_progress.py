"""`tarsctl index --wait` on a terminal, against a real tarsd: it says what it does from the
first moment, and a Ctrl-C ends its line and says that tarsd goes on indexing."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import time

from harness.daemon import silent_server, wait_for
from harness.vault_files import write


def read_until(master: int, process: subprocess.Popen, wanted: bytes, seen: bytes, deadline: float) -> bytes:
    """What the terminal showed until ``wanted`` is in it, the process ended, or the deadline passed."""
    while time.monotonic() < deadline and wanted not in seen:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif process.poll() is not None:
            break
    return seen


def test_ctrl_c_while_waiting_ends_the_line_and_says_tarsd_keeps_indexing(start_daemon, vault, tmp_path):
    write(vault, "garden.md", "# Garden\n\nTomatoes want six hours of sun.\n")
    with silent_server() as hub:
        # A model that never arrives: `--wait` waits for its vectors until the person gives up.
        daemon = start_daemon(embedder="local", TARS_MODEL_DIR="", HF_ENDPOINT=hub, XDG_CACHE_HOME=str(tmp_path / "cache"))
        master, slave = pty.openpty()
        process = subprocess.Popen(
            daemon.tarsctl_command("index", "--wait"), stdin=slave, stdout=slave, stderr=slave, env=daemon.env, close_fds=True
        )
        os.close(slave)
        try:
            seen = read_until(master, process, b"waiting for the embedding model to load", b"", time.monotonic() + 60)
            assert b"waiting for the embedding model to load" in seen, seen
            process.send_signal(signal.SIGINT)  # what Ctrl-C on the terminal sends
            seen = read_until(master, process, b"\x00", seen, time.monotonic() + 30)
            code = process.wait(timeout=30)
        finally:
            os.close(master)
            if process.poll() is None:
                process.kill()
        shown = seen.decode(errors="replace").replace("\r\n", "\n")
        assert code == 130
        # The progress line ends before the message, which names what goes on and how to follow it.
        progress_line, _, after = shown.rpartition("(waiting for the embedding model to load)")
        assert after.startswith("\n"), repr(shown)
        assert "tarsctl: stopped waiting; tarsd goes on indexing in the background (tarsctl status shows how far it is)" in after
        assert daemon.process.poll() is None and daemon.ping()  # tarsd itself is untouched


def test_a_full_index_says_what_it_does_before_the_first_note_is_done(start_daemon, vault):
    # One big note: re-chunking it takes a while, and the terminal shows why from the start.
    write(vault, "Huge.md", "# Huge\n\n" + "".join(f"Paragraph {n} about sourdough starters and ovens.\n\n" for n in range(3_000)))
    write(vault, "garden.md", "# Garden\n\nTomatoes want six hours of sun.\n")
    daemon = start_daemon()
    wait_for(lambda: daemon.status().coverage.reconciled, "the start-up scan")
    master, slave = pty.openpty()
    process = subprocess.Popen(
        daemon.tarsctl_command("index", "--full", "--wait"), stdin=slave, stdout=slave, stderr=slave, env=daemon.env, close_fds=True
    )
    os.close(slave)
    try:
        seen = read_until(master, process, b"\x00", b"", time.monotonic() + 120)
        code = process.wait(timeout=30)
    finally:
        os.close(master)
    shown = seen.decode(errors="replace")
    assert code == 0, shown
    # The first thing on the terminal says what tarsd is doing, before any note is done.
    first = shown.split("\x1b[K", 2)[1]
    assert first.startswith("scan: 0/2 notes (--full: re-reading and re-chunking every one)"), repr(shown[:300])
