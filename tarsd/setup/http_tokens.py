"""The HTTP API's bearer tokens, as files: random, made on first use, kept in a file only its owner
can read.

By default the file is ``http_token`` beside the config file (``[http] token_file`` moves it), and
MCP clients' own token ``mcp_token``. tarsd makes it when the listener first starts; ``tarsctl http
token`` prints it (and makes it when tarsd has not yet), ``--rotate`` writes a new one. tarsd
compares presented tokens with the file's (``tarsd.serve.http_token``). Standard library only:
tarsd and tarsctl both read the files here.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

TOKEN_FILE_NAME = "http_token"
# MCP clients get a token of their own (``tarsctl mcp token``): it reaches what an MCP client may
# do and nothing more (tarsctl/authority.py), while the HTTP token is the user's own.
MCP_TOKEN_FILE_NAME = "mcp_token"
# secrets.token_urlsafe(32) gives 43 characters; a hand-made token must not be much weaker.
MIN_TOKEN_CHARS = 32


class TokenError(Exception):
    """The token file cannot be used; the message says why and what to do."""


def token_path(token_file: str, config_file: Path) -> Path:
    """``[http] token_file``, else http_token beside the config file (the platform config dir by default)."""
    return Path(token_file).expanduser() if token_file else Path(config_file).expanduser().parent / TOKEN_FILE_NAME


def mcp_token_path(mcp_token_file: str, config_file: Path) -> Path:
    """``[http] mcp_token_file``, else mcp_token beside the config file."""
    if mcp_token_file:
        return Path(mcp_token_file).expanduser()
    return Path(config_file).expanduser().parent / MCP_TOKEN_FILE_NAME


def ensure_token(path: Path) -> str:
    """The token in ``path``, made there (mode 0600) when the file does not exist yet."""
    try:
        return read_token(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    try:
        # O_EXCL: if another process (tarsctl, a second start) made it meanwhile, theirs wins.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return read_token(path)
    except OSError as exc:
        raise TokenError(f"cannot create the HTTP token file {path}: {exc.strerror}; set [http] token_file to a writable place") from exc
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token


def rotate_token(path: Path) -> str:
    """A new token in place of the old one (a running tarsd takes it at its next request)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    os.replace(temp, path)
    return token


def read_token(path: Path) -> str:
    """The token, after checking that nobody else can read or replace the file.
    FileNotFoundError when there is none; TokenError when it cannot be used."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))  # FileNotFoundError passes through
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise TokenError(f"the HTTP token file {path} is not a regular file: remove it and restart tarsd to make a new one")
        if info.st_uid != os.getuid():
            raise TokenError(f"the HTTP token file {path} belongs to uid {info.st_uid}, not to you: remove it to make a new one")
        if info.st_mode & 0o077:
            mode = stat.S_IMODE(info.st_mode)
            raise TokenError(
                f"the HTTP token file {path} can be read by others (mode {mode:o}): run `chmod 600 {path}`, "
                "and `tarsctl http token --rotate` if anyone else may have read it"
            )
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    token = data.decode("utf-8", errors="replace").strip()
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
        raise TokenError(
            f"the token in {path} is not usable (at least {MIN_TOKEN_CHARS} characters, no spaces): "
            "`tarsctl http token --rotate` writes a new one"
        )
    return token
