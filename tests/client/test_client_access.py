"""tarsctl run by another user against a real tarsd's socket: it says permission denied and whose
socket it is, not "tarsd is not running" (which would send the user to start a second one)."""

from __future__ import annotations

import json
import multiprocessing
import os
import pwd
from collections.abc import Callable
from dataclasses import asdict
from multiprocessing.connection import Connection
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


def _become_and_say(uid: int, gid: int, action: Callable[[Path], str], socket: Path, said: Connection) -> None:
    os.setgid(gid)
    os.setuid(uid)
    said.send(action(socket))


def run_as(uid: int, gid: int, action: Callable[[Path], str], socket: Path) -> str:
    """Run ``action`` (tarsctl's own code) in a child that became ``uid``; returns what it said.

    Not a new interpreter run as ``uid``: this Python lives under /root, which another user cannot
    run. Not a fork of this pytest worker either: it has threads, and a fork of a threaded process
    can deadlock on a lock one of them held. The forkserver is a fresh single-threaded process
    (started as root) that forks the child."""
    context = multiprocessing.get_context("forkserver")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_become_and_say, args=(uid, gid, action, socket, send))
    child.start()
    send.close()
    try:
        said = receive.recv()
    except EOFError:
        said = None
    child.join(timeout=30)
    assert said is not None, f"the child run as uid {uid} said nothing (exit code {child.exitcode})"
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
