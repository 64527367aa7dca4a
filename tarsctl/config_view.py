"""`tarsctl config path | show`: where the config file is, and every effective value with where it
came from (default, file, environment). Reads the config the way tarsd does (tarsd/config/sources.py);
a tarsd answering on the socket is asked what it serves, so a shell with no vault of its own (the demo's
second shell) shows the running one's. cli.py imports this module for the config command only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tarsctl.client import Client, DaemonNotRunning, ProtocolError, RemoteError
from tarsctl.protocol import Status, StatusReply

EXIT_OK, EXIT_FAILED = 0, 1
ASK_TIMEOUT = 5.0


def main(args) -> int:
    from tarsd.config.settings import ConfigError, config_file_path

    if args.config_command == "path":
        path = config_file_path()
        print(path)
        if not path.exists():
            print("(no file there yet: every key has a default; tarsctl config show lists them)", file=sys.stderr)
        return EXIT_OK
    from tarsd.config.sources import config_sources

    try:
        sources = config_sources()
    except ConfigError as exc:
        print(f"tarsctl: {exc}", file=sys.stderr)
        return EXIT_FAILED
    derived = _derived(sources.config, Path(args.socket) if args.socket else None)
    if args.json:
        settings = [{"section": s.section, "key": s.key, "value": s.value, "source": s.source} for s in sources.settings]
        print(json.dumps({"file": str(sources.file), "file_exists": sources.file_exists, "settings": settings, "derived": derived}))
        return EXIT_OK
    print(f"# config file: {sources.file}" + ("" if sources.file_exists else " (does not exist: defaults apply)"))
    print("# each line: the effective value, then where it came from (default, file, env VARIABLE)")
    width = max(len(s.key) for s in sources.settings)
    section = None
    for setting in sources.settings:
        if setting.section != section:
            section = setting.section
            print(f"\n[{section}]")
        value = json.dumps(setting.value, ensure_ascii=False)  # also valid TOML for strings, numbers and lists
        print(f"{setting.key:<{width}} = {value:<40}  # {setting.source}")
    print("\n# derived")
    for name, value in derived.items():
        print(f"# {name:<10} {value}")
    return EXIT_OK


def _derived(config, socket: Path | None) -> dict[str, str]:
    from tarsd.config.settings import ConfigError

    socket = socket or config.socket_path
    served = _served(socket)
    derived = {}
    try:
        derived.update(vault=str(config.vault_path), database=str(config.db_path))
    except ConfigError as exc:
        if served is not None:
            # No vault here, but a tarsd serves one (started with --vault): that is the one in use.
            derived.update(vault=served.vault, database=served.database, vault_from="the running tarsd (this config names no vault)")
        else:
            derived.update(vault=f"(unknown: {exc})", database=f"(unknown: {exc})")
    derived["socket"] = str(socket)
    if served is not None:
        embedder = served.embedder
        derived["tarsd"] = f"answers: serves {served.vault}; embedder {embedder.model} ({embedder.kind}, {embedder.state})"
    else:
        derived["tarsd"] = f"does not answer on {socket}"
    return derived


def _served(socket: Path) -> StatusReply | None:
    try:
        with Client(socket, timeout=ASK_TIMEOUT) as client:
            reply = client.call(Status(id=client.next_id()))
    except (DaemonNotRunning, ProtocolError, RemoteError, TimeoutError, OSError):
        return None
    return reply if isinstance(reply, StatusReply) else None
