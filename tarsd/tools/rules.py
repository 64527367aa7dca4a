"""The user's "always" answers: allow rules tars writes when the user says "always" to a call
(after a second confirmation), kept in a small TOML file beside the config (``tool_rules.toml``,
mode 0600) rather than in the config itself, which stays the user's own text:

    [servers.todoist]
    allow = ["add-tasks"]

The user may edit or delete the file; tarsd reads it at start and on every change it makes. A
``deny`` in the config still wins over it (tarsd/tools/policy.py).
"""

from __future__ import annotations

import os
import secrets
import threading
import tomllib
from pathlib import Path

import tomli_w

RULES_FILE_NAME = "tool_rules.toml"
HEADER = (
    '# Tools tars runs without asking, because you answered "always" (tarsctl chat, the web page).\n'
    "# Delete a name (or this file) to be asked again; a deny in the config wins over these.\n\n"
)


class RulesFileError(Exception):
    """The rules file exists but cannot be read: it is not written over (the user's rules in it
    would be lost); the message says what is wrong and what to do."""


def rules_path(rules_file: str, config_file: Path) -> Path:
    return Path(rules_file).expanduser() if rules_file else Path(config_file).expanduser().parent / RULES_FILE_NAME


class AlwaysRules:
    """The allow rules of the rules file, by server. A file that cannot be read counts as none
    (``problem`` says why, for status); writing keeps every rule already there."""

    def __init__(self, path: Path):
        self.path = path
        self.problem = ""
        self._lock = threading.Lock()
        self._seen = self._stamp()
        self._rules = self._read()

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            info = self.path.stat()
        except OSError:
            return None
        return (info.st_ino, info.st_mtime_ns, info.st_size)

    def refresh(self) -> bool:
        """Read the file again when it changed on disk (the user edited or deleted it); True when it did."""
        with self._lock:
            stamp = self._stamp()
            if stamp == self._seen:
                return False
            self._seen = stamp
            self._rules = self._read()
            return True

    def _read(self) -> dict[str, set[str]]:
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            self.problem = ""
            return {}
        except OSError as exc:
            self.problem = f"cannot read {self.path}: {exc.strerror}"
            return {}
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            self.problem = f"{self.path} is not valid TOML ({exc}): its rules are not used; fix or delete it"
            return {}
        self.problem = ""
        found: dict[str, set[str]] = {}
        servers = data.get("servers", {})
        for server, table in servers.items() if isinstance(servers, dict) else ():
            allow = table.get("allow", []) if isinstance(table, dict) else []
            found[server] = {name for name in allow if isinstance(name, str)} if isinstance(allow, list) else set()
        return found

    def allowed(self, server: str) -> set[str]:
        with self._lock:
            return set(self._rules.get(server, ()))

    def add(self, server: str, tool: str) -> None:
        """Allow ``tool`` of ``server`` from now on: the file is rewritten whole (temp file and rename,
        0600). Raises RulesFileError when the file is there but cannot be read: writing it would
        throw away whatever rules it holds."""
        with self._lock:
            rules = self._read()  # the user may have edited it meanwhile: keep what is there
            if self.problem:
                raise RulesFileError(f"not kept as a rule, because {self.problem}")
            rules.setdefault(server, set()).add(tool)
            # tomli_w, not hand-made lines: any tool name (emoji, quotes, control characters) is
            # written so that tomllib reads the same name back.
            text = HEADER + tomli_w.dumps({"servers": {name: {"allow": sorted(rules[name])} for name in sorted(rules)}})
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            temp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}.tmp")
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(temp, self.path)
            self._rules = rules
            self._seen = self._stamp()
            self.problem = ""
