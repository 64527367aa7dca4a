"""`tarsctl http token | url`: the HTTP listener's bearer token, and the web page's address with
the token in its #fragment (a fragment never reaches the server, so it is in no log). Works
without the daemon; cli.py imports this module for the http command only.
"""

from __future__ import annotations

import sys
from pathlib import Path

EXIT_OK, EXIT_FAILED = 0, 1


def main(args) -> int:
    from tarsd.config import ConfigError, config_file_path, load_config
    from tarsd.http_token import TokenError, ensure_token, rotate_token, token_path

    try:
        config = load_config()
    except ConfigError as exc:
        print(f"tarsctl: {exc}", file=sys.stderr)
        return EXIT_FAILED
    path = token_path(config.http.token_file, config_file_path())
    try:
        token = rotate_token(path) if getattr(args, "rotate", False) else ensure_token(path)
    except (OSError, TokenError) as exc:
        print(f"tarsctl: {exc}", file=sys.stderr)
        return EXIT_FAILED
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
    print(f"{page_url(config, getattr(args, 'socket', None))}#token={token}")
    return EXIT_OK


def page_url(config, socket: Path | None) -> str:
    """Where the page is: from tarsd itself when it runs (the port it really got), else from the config."""
    from tarsd.http_guard import page_url as configured

    from .client import Client
    from .protocol import Status

    try:
        with Client(socket, timeout=5) as client:
            url = client.call(Status(id=client.next_id())).http.url
        if url:
            return url
    except Exception:
        pass  # not running (or an older tarsd): the configured address
    return configured(config.http.host, config.http.port)
