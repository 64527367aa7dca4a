"""`tarsctl http token | url`: the HTTP listener's bearer token, and the web page's address with
the token in its #fragment (a fragment never reaches the server, so it is in no log). `token`
works without the daemon; `url` only when tarsd itself says, over its socket, that its listener
is up: otherwise whatever holds the port would be handed the token by the browser. cli.py
imports this module for the http command only. `tarsctl mcp token` prints the MCP clients' own
token, which reaches /mcp with an MCP client's rights and never the user's (tarsctl/authority.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_NOT_RUNNING = 0, 1, 3  # as every tarsctl command: 3, tarsd is not running


def _config_and_token(kind: str, rotate: bool):
    """(the config, its token of ``kind``: "http" or "mcp"), made or rotated as asked; None (and a
    line on stderr saying why) when the config or the token file cannot be used."""
    from tarsd.config.settings import ConfigError, config_file_path, load_config
    from tarsd.setup.http_tokens import TokenError, ensure_token, mcp_token_path, rotate_token, token_path

    try:
        config = load_config()
    except ConfigError as exc:
        print(f"tarsctl: {exc}", file=sys.stderr)
        return None
    if kind == "mcp":
        path = mcp_token_path(config.http.mcp_token_file, config_file_path())
    else:
        path = token_path(config.http.token_file, config_file_path())
    try:
        return config, rotate_token(path) if rotate else ensure_token(path)
    except (OSError, TokenError) as exc:
        print(f"tarsctl: {exc}", file=sys.stderr)
        return None


def main(args) -> int:
    from tarsd.config.settings import config_file_path

    found = _config_and_token("http", getattr(args, "rotate", False))
    if found is None:
        return EXIT_FAILED
    config, token = found
    if not config.http.enabled:
        print(
            f"tarsctl: the HTTP listener is off: set [http] enabled = true in {config_file_path()} (or TARS_HTTP_ENABLED=1) "
            "and restart tarsd",
            file=sys.stderr,
        )
        if args.http_command == "url":
            return EXIT_FAILED
    if args.http_command == "token":
        print(token)
        if args.rotate:
            print("a new token: tarsd takes it at once; pages opened with the old one ask for the new one", file=sys.stderr)
        return EXIT_OK
    url, problem, running = listening_url(getattr(args, "socket", None))
    if not url:
        print(f"tarsctl: no web page address: {problem}", file=sys.stderr)
        return EXIT_FAILED if running else EXIT_NOT_RUNNING
    print(f"{url}#token={token}")
    return EXIT_OK


def mcp_token(args) -> int:
    """``tarsctl mcp token [--rotate]``: the token to give an MCP client that reaches tarsd over HTTP."""
    from tarsd.config.settings import config_file_path

    found = _config_and_token("mcp", args.rotate)
    if found is None:
        return EXIT_FAILED
    config, token = found
    print(token)
    if args.rotate:
        print("a new MCP token: tarsd takes it at once; give it to your MCP clients in place of the old one", file=sys.stderr)
    if not (config.http.enabled and config.http.mcp):
        print(
            f"tarsctl: /mcp is off: set [http] enabled = true (and mcp = true) in {config_file_path()} and restart tarsd; "
            "a client that starts `tarsctl mcp` itself needs no token",
            file=sys.stderr,
        )
    return EXIT_OK


def listening_url(socket: Path | None) -> tuple[str, str, bool]:
    """(the page's address, "", True) from tarsd's own status: the port it really listens on; else
    ("", why not, whether tarsd answered). Never the configured address on trust: when tarsd is
    not listening there, another program may be, and opening the address would give it the token."""
    from tarsctl.client import Client, DaemonNotRunning, ProtocolError, RemoteError
    from tarsctl.protocol import Status

    try:
        with Client(socket, timeout=5) as client:
            http = client.call(Status(id=client.next_id())).http
    except DaemonNotRunning as exc:
        return "", f"{exc} (the page is served by tarsd itself)", False
    except (ProtocolError, RemoteError, OSError) as exc:
        return "", f"tarsd did not say where it listens ({exc})", True
    if http.url:
        return http.url, "", True
    why = http.error or "its HTTP listener is off"
    return "", f"tarsd is not listening for HTTP: {why}", True
