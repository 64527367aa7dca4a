"""tarsctl's one warning when the config file is broken.

A search or a status does not need the config file (the socket is $TARS_SOCKET or the default),
so a broken file does not stop them; but tarsd refuses to start with it, and the user should
hear that from the command they run every day, not first from `tarsctl doctor` after a restart
failed. So tarsctl says it once, on stderr, and goes on.

The quick path (quick.py) only checks that the file parses as TOML: checking the values needs
msgspec, whose import costs more than the search. The full client checks the values as tarsd
does (load_config). Whichever runs first warns; the other stays quiet.
"""

from __future__ import annotations

import os
import sys

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


def warn_if_unparsable() -> None:
    """The quick path's check: the file can be read and parses as TOML."""
    path = config_file_address()
    try:
        with open(path, "rb") as file:
            text = file.read().decode("utf-8")
    except FileNotFoundError:
        return  # no file: the defaults, which are valid
    except (OSError, UnicodeDecodeError) as exc:
        _warn(f"cannot read config file {path}: {exc}")
        return
    if not text.strip():
        return  # nothing to parse: tomllib's import is spared
    import tomllib

    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        _warn(f"cannot read config file {path}: {exc}")


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
