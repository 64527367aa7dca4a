"""The HTTP API's bearer token, checked: each presented token compared with the token file's
(``tarsd.setup.http_tokens`` makes, rotates and reads the file; ``tarsctl http token`` prints it).

tarsd looks at the file on every request that presents a token and re-reads it when it changes,
so ``tarsctl http token --rotate`` takes effect at once, and a file that others can read (or that
changed owner) stops every token at once.
"""

from __future__ import annotations

import hmac
import os
from pathlib import Path

from tarsd.setup.http_tokens import TokenError, read_token


class TokenCheck:
    """Compares presented tokens with the file's, in constant time.

    The file is looked at (one stat) on every check: its mode and owner are judged each time, and
    the token is re-read when anything about the file changed (a chmod or chown changes its
    ctime, a rotation its inode)."""

    def __init__(self, path: Path, what: str = "HTTP"):
        self.path = path
        self.what = what
        self._seen: tuple[int, ...] | None = None  # what the stat of the file last read said
        self._token: bytes | None = None
        self.error = ""  # why the file cannot be used now; "" when it can
        self._load()

    def _load(self) -> None:
        try:
            info = os.stat(self.path)
        except OSError:
            self._seen, self._token = None, None
            command = "tarsctl mcp token" if self.what == "MCP" else "tarsctl http token"
            self.error = f"the {self.what} token file {self.path} is gone: `{command}` makes a new one"
            return
        key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_mode, info.st_uid)
        if key == self._seen:
            return
        try:
            self._token = read_token(self.path).encode()
            self.error = ""
        except (OSError, TokenError) as exc:
            self._token = None  # a token that cannot be trusted lets nobody in
            self.error = str(exc)
        self._seen = key

    def check(self, presented: str) -> bool | None:
        """True for the right token, False for a wrong one, None when the file cannot be used
        now (``error`` says why): then no token is right."""
        self._load()
        if self._token is None:
            return None
        return hmac.compare_digest(presented.encode("utf-8", errors="replace"), self._token)

    def matches(self, presented: str) -> bool:
        return bool(presented) and self.check(presented) is True
