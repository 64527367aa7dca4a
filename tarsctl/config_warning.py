"""tarsctl's one warning when the config file is broken.

A search or a status does not need the config file (the socket is $TARS_SOCKET or the default),
so a broken file does not stop them; but tarsd refuses to start with it, and the user should
hear that from the command they run every day, not first from `tarsctl doctor` after a restart
failed. So tarsctl says it once, on stderr, and goes on.

Both paths check the config as tarsd does (load_config), and only when the file changed after
the running tarsd started: a file tarsd started with is known good, and the check loads msgspec
and the settings, which cost more than the search. Whichever path runs first warns; the other
stays quiet.
"""

from __future__ import annotations

import os
import sys

from tarsctl.transport import default_socket_address

_warned = False


def config_file_address() -> str:
    """The config file tarsd reads, as settings.config_file_path finds it, without importing
    platformdirs (it brings shutil and tempfile: 5 ms of a quick search)."""
    named = os.environ.get("TARS_CONFIG")
    if named:
        return os.path.expanduser(named)
    if sys.platform == "darwin":
        return os.path.expanduser("~/Library/Application Support/tars/config.toml")
    base = os.environ.get("XDG_CONFIG_HOME", "")
    return os.path.join(base if base.strip() else os.path.expanduser("~/.config"), "tars", "config.toml")


def warn_if_changed(socket: str | None) -> None:
    """The quick path's check. A running tarsd read the config when it started, and refuses one it
    cannot use: a file no newer than tarsd's socket (made at that start) is known good, for the
    cost of two stats. A file changed since, or no tarsd to compare with: the full check, which
    loads msgspec and the settings (40 to 80 ms on a busy 2-core box) only then."""
    try:
        changed = os.stat(config_file_address()).st_mtime_ns
    except FileNotFoundError:
        return  # no file: the defaults, which are valid
    except OSError:
        changed = None  # unreadable: the full check says why
    try:
        started = os.stat(socket or default_socket_address()).st_mtime_ns
    except OSError:
        started = None
    if changed is not None and started is not None and changed < started:
        return
    warn_if_invalid()


def warn_if_invalid() -> None:
    """The full client's check: the config as tarsd would load it (the file and TARS_* variables)."""
    if _warned:
        return
    from tarsd.config.settings import ConfigError, MissingConfigFile, load_config

    try:
        load_config()
    except MissingConfigFile:
        return  # nothing broken to read: tarsd says so itself when it starts
    except ConfigError as exc:
        _warn(str(exc))


def _warn(problem: str) -> None:
    global _warned
    _warned = True
    print(f"tarsctl: warning: {problem}; tarsd will not start with this config until it is fixed", file=sys.stderr)
