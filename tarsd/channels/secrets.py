"""A channel's secrets, each the first line of a file of mode 0600 (never the config): looked at
(one stat) each time it is used and read again when the file changed, so that a new token takes
effect without a restart, and a file that others can read (a ``chmod 644`` while tarsd runs) stops
being used at once, as the HTTP token file does."""

from __future__ import annotations

import os
from pathlib import Path

from tarsd.tools.secret_files import SecretFileError, read_secret


class SecretFile:
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
