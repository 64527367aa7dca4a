"""tarsctl run by another user against a real tarsd's socket: it says permission denied and whose
socket it is, not "tarsd is not running" (which would send the user to start a second one)."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from tarsctl.client import Client, DaemonNotRunning


def connect_as(uid: int, gid: int, socket: Path) -> str:
    """Connect with tarsctl's client in a forked child that became ``uid``; returns what it raised.

    A fork, not a new interpreter: this Python lives under /root, which another user cannot run."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read)
        try:
            os.setgid(gid)
            os.setuid(uid)
            try:
                with Client(socket, timeout=10):
                    message = "connected"
            except DaemonNotRunning as exc:
                message = f"{type(exc).__name__}: {exc}"
            os.write(write, message.encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        said = pipe.read().decode()
    os.waitpid(pid, 0)
    return said


@pytest.fixture
def nobody() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        pytest.skip("becoming another user needs root (CI runs as root): not tested here")
    return pwd.getpwnam("nobody")


def test_another_user_is_told_permission_denied_and_whose_socket_it_is(start_daemon, nobody):
    daemon = start_daemon()
    folder = daemon.socket.parent  # tarsd's private folder, mode 0700
    assert (folder.stat().st_mode & 0o777) == 0o700
    said = connect_as(nobody.pw_uid, nobody.pw_gid, daemon.socket)
    assert said.startswith("PermissionDenied: permission denied"), said
    assert "not running" not in said
    assert f"{folder} belongs to root (uid 0)" in said and "run tarsctl as root" in said
    assert "start a tarsd of your own" in said and "TARS_SOCKET" in said
    assert daemon.ping()  # and the daemon still serves its own user


def test_a_socket_that_does_not_exist_is_still_not_running(tmp_path: Path, nobody):
    said = connect_as(nobody.pw_uid, nobody.pw_gid, Path("/tmp") / f"tars-none-{os.getpid()}" / "tarsd.sock")
    assert said.startswith("DaemonNotRunning: tarsd is not running"), said
