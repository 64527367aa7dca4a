"""Secrets come from files only their owner can read, never from the config: for MCP servers
``env_file`` (``KEY=VALUE`` lines, as a .env file) and ``headers_file`` (``Name: value`` lines);
for a messenger channel one secret a file (``read_secret``, and ``SecretFile``, which reads it again
when the file changes: WhatsApp's app secret, access token and verify token, Telegram's bot token
and webhook secret). A file that others can read is refused, as the HTTP token file is: the server
or channel is not used and its status (and ``tarsctl doctor``) says which file and ``chmod 600``.

tarsd and ``tarsctl doctor`` both read them here (standard library only).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # with fullmatch
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP token (RFC 9110)
MAX_SECRET_FILE_BYTES = 64 * 1024


class SecretFileError(Exception):
    """A secrets file that cannot be used; the message says why and what to do."""


def _read_private(path_text: str, what: str, missing_hint: str = "") -> list[tuple[int, str]]:
    path = Path(path_text).expanduser()
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO in its place must not hang tarsd
    except FileNotFoundError:
        hint = missing_hint or f"create it (mode 600) or remove {what} from the config"
        raise SecretFileError(f"the {what} {path} does not exist: {hint}") from None
    except OSError as exc:
        raise SecretFileError(f"cannot read the {what} {path}: {exc.strerror}") from None
    # The checks look at the file opened, not at the path again: a file swapped in between is not read.
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SecretFileError(f"the {what} {path} is not a regular file")
        if info.st_uid != os.getuid():
            raise SecretFileError(f"the {what} {path} belongs to uid {info.st_uid}, not to you: secrets must be your own file")
        if info.st_mode & 0o077:
            raise SecretFileError(
                f"the {what} {path} can be read by others (mode {stat.S_IMODE(info.st_mode):o}): run `chmod 600 {path}`, "
                "and change the secret if anyone may have read it"
            )
        if info.st_size > MAX_SECRET_FILE_BYTES:
            raise SecretFileError(f"the {what} {path} is {info.st_size} bytes: a secrets file holds a few lines")
        text = handle.read(MAX_SECRET_FILE_BYTES).decode("utf-8", errors="replace")
    return [
        (number, line.strip()) for number, line in enumerate(text.splitlines(), 1) if line.strip() and not line.lstrip().startswith("#")
    ]


def read_env_file(path_text: str) -> dict[str, str]:
    """``KEY=VALUE`` lines (an optional ``export``, optional quotes around the value)."""
    found: dict[str, str] = {}
    for number, line in _read_private(path_text, "env_file"):
        key, sep, value = line.removeprefix("export ").partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not _ENV_NAME.fullmatch(key):
            raise SecretFileError(f"env_file {path_text} line {number}: expected KEY=VALUE (letters, digits and _ in KEY)")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        found[key] = value
    return found


def read_headers_file(path_text: str) -> dict[str, str]:
    """``Name: value`` lines, e.g. ``Authorization: Bearer ...``."""
    found: dict[str, str] = {}
    for number, line in _read_private(path_text, "headers_file"):
        name, sep, value = line.partition(":")
        name, value = name.strip(), value.strip()
        if not sep or not _HEADER_NAME.fullmatch(name):
            raise SecretFileError(f"headers_file {path_text} line {number}: expected 'Name: value' (an HTTP header)")
        found[name] = value
    return found


def read_secret(path_text: str, what: str, missing_hint: str = "") -> str:
    """The one secret in a private file: its first line that is not empty or a ``#`` comment."""
    lines = _read_private(path_text, what, missing_hint)
    if not lines:
        raise SecretFileError(f"the {what} {Path(path_text).expanduser()} is empty: put the secret on its first line")
    return lines[0][1]


class SecretFile:
    """One secret, the first line of a file of mode 0600: looked at (one stat) each time it is used
    and read again when the file changed, so that a new token takes effect without a restart, and a
    file that others can read (a ``chmod 644`` while tarsd runs) stops being used at once, as the
    HTTP token file does."""

    def __init__(self, path: Path, what: str, missing_hint: str):
        self.path = path
        self.what = what
        self.missing_hint = missing_hint
        self._seen: tuple[int, ...] | None = None
        self._value = ""
        self._error = ""

    def get(self) -> str:
        """The secret; SecretFileError saying which file and what to do when it cannot be used."""
        try:
            info = os.stat(self.path)
            key: tuple[int, ...] = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_mode, info.st_uid)
        except OSError:
            key = ()
        if key != self._seen or not key:
            self._seen = key
            try:
                self._value, self._error = read_secret(str(self.path), self.what, self.missing_hint), ""
            except (OSError, SecretFileError) as exc:
                self._value, self._error = "", str(exc)
        if self._error:
            raise SecretFileError(self._error)
        return self._value

    def problem(self) -> str:
        """Why the secret cannot be used now; "" when it can."""
        try:
            self.get()
        except SecretFileError as exc:
            return str(exc)
        return ""
