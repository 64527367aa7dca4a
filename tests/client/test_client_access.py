"""tarsctl run by another user against a real tarsd's socket: it says permission denied and whose
socket it is, not "tarsd is not running" (which would send the user to start a second one)."""

from __future__ import annotations

import json
import os
import pwd
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import pytest

from tarsctl.client import Client, DaemonNotRunning
from tarsctl.doctor import Doctor


def connect(socket: Path) -> str:
    try:
        with Client(socket, timeout=10):
            return "connected"
    except DaemonNotRunning as exc:
        return f"{type(exc).__name__}: {exc}"


def doctor_daemon_check(socket: Path) -> str:
    doctor = Doctor(socket)
    doctor.daemon()
    return json.dumps([asdict(check) for check in doctor.checks])


def run_as(uid: int, gid: int, action: Callable[[Path], str], socket: Path) -> str:
    """Run ``action`` (tarsctl's own code) in a forked child that became ``uid``; returns what it said.

    A fork, not a new interpreter: this Python lives under /root, which another user cannot run."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read)
        try:
            os.setgid(gid)
            os.setuid(uid)
            os.write(write, action(socket).encode())
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
    said = run_as(nobody.pw_uid, nobody.pw_gid, connect, daemon.socket)
    assert said.startswith("PermissionDenied: permission denied"), said
    assert "not running" not in said
    assert f"{folder} belongs to root (uid 0)" in said and "run tarsctl as root" in said
    assert "start a tarsd of your own" in said and "TARS_SOCKET" in said
    [check] = json.loads(run_as(nobody.pw_uid, nobody.pw_gid, doctor_daemon_check, daemon.socket))
    assert check["status"] == "problem" and check["summary"].startswith("permission denied") and "run tarsctl as root" in check["summary"]
    assert daemon.ping()  # and the daemon still serves its own user


def test_a_socket_that_does_not_exist_is_still_not_running(tmp_path: Path, nobody):
    said = run_as(nobody.pw_uid, nobody.pw_gid, connect, Path("/tmp") / f"tars-none-{os.getpid()}" / "tarsd.sock")
    assert said.startswith("DaemonNotRunning: tarsd is not running"), said
