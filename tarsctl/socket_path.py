"""Where tarsd's socket is, as a path, and which folders are safe for it: the daemon binds where
the client connects, and refuses the folders that ``tarsctl doctor`` reports, so both read the
rule here. (transport.py has the same address as a string: tarsctl's quick path does without
pathlib.)"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tarsctl.transport import default_socket_address


def default_socket_path() -> Path:
    """``$TARS_SOCKET``, else ``$XDG_RUNTIME_DIR/tars/tarsd.sock`` on Linux, else a short
    per-user path under /tmp (macOS's $TMPDIR is too long for a socket address)."""
    return Path(default_socket_address())


def socket_dir_problem(path: Path) -> str | None:
    """What makes the directory of the socket at ``path`` unsafe, and what to do; None when it is fine.

    The rule: the socket's directory must be ours and not writable by group or others, or someone else
    could put their own socket in its place. A world-writable directory is acceptable only with the
    sticky bit (like /tmp), and then only above the socket's own private subdirectory
    (/tmp/tars-UID/tarsd.sock, never /tmp/tarsd.sock). A directory that does not exist yet is fine:
    tarsd creates it with mode 0700.
    """
    directory = Path(path).expanduser().absolute().parent
    uid = os.getuid()
    change = "set TARS_SOCKET or [daemon] socket to a path in a directory of your own"
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        return _socket_parent_problem(directory, change)
    except OSError as exc:
        return f"cannot inspect the socket directory {directory} ({exc.strerror}): {change}"
    if stat.S_ISLNK(info.st_mode):
        if info.st_uid not in (uid, 0):
            return f"the socket directory {directory} is a symlink owned by uid {info.st_uid}, not by you: remove it, or {change}"
        try:
            info = os.stat(directory)
        except OSError as exc:
            return f"the socket directory {directory} is a broken symlink ({exc.strerror}): remove it, or {change}"
    if not stat.S_ISDIR(info.st_mode):
        return f"{directory} should be the socket's directory but is not a directory: remove it, or {change}"
    if info.st_mode & stat.S_IWOTH and info.st_mode & stat.S_ISVTX:
        return (
            f"the socket sits directly in the shared directory {directory}: put it in a private subdirectory "
            f"of its own, e.g. TARS_SOCKET={directory / f'tars-{uid}' / 'tarsd.sock'}"
        )
    if info.st_uid != uid:
        return f"the socket directory {directory} belongs to uid {info.st_uid}, not to you (uid {uid}): {change}"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        who = "everyone" if info.st_mode & stat.S_IWOTH else "its group"
        return (
            f"the socket directory {directory} is writable by {who} (mode {stat.S_IMODE(info.st_mode):o}), so they could replace "
            f"the socket: run `chmod 700 {directory}`"
        )
    return _socket_parent_problem(directory, change)


def _socket_parent_problem(directory: Path, change: str) -> str | None:
    """The nearest existing directory above ``directory`` must not let others rename it away:
    world-writable is acceptable only with the sticky bit."""
    for parent in directory.parents:
        try:
            info = os.stat(parent)
        except FileNotFoundError:
            continue
        except OSError as exc:
            return f"cannot inspect {parent} ({exc.strerror}), which holds the socket directory: {change}"
        if info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
            return (
                f"{parent}, which holds the socket directory, is world-writable without the sticky bit: anyone could swap "
                f"the socket directory for their own; {change}"
            )
        return None
    return None
