"""`tarsctl config path | show`: where the config file is, and every effective value with where it
came from (default, file, environment). Reads the config the way tarsd does (tarsd/config_sources.py);
cli.py imports this module for the config command only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

EXIT_OK, EXIT_FAILED = 0, 1


def main(args) -> int:
    from tarsd.config import ConfigError, config_file_path

    if args.config_command == "path":
        path = config_file_path()
        print(path)
        if not path.exists():
            print("(no file there yet: every key has a default; tarsctl config show lists them)", file=sys.stderr)
        return EXIT_OK
    from tarsd.config_sources import config_sources

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
        print(f"# {name:<8} {value}")
    return EXIT_OK


def _derived(config, socket: Path | None) -> dict[str, str]:
    from tarsd.config import ConfigError

    try:
        vault, database = str(config.vault_path), str(config.db_path)
    except ConfigError as exc:
        vault = database = f"(unknown: {exc})"
    return {"vault": vault, "database": database, "socket": str(socket or config.socket_path)}
