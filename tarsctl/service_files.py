"""The files tarsd runs under: a systemd user unit (Linux) and a LaunchAgent (macOS).

Both are rendered from the templates in the repository's systemd/ and launchd/ folders (shipped in
the wheel as data files), so there is one source a person can read. Rendering is pure: a spec in,
the file's text out; tarsctl/service.py writes it and talks to the service manager.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape as xml_escape

UNIT_NAME = "tarsd.service"
LABEL = "com.github.tars.tarsd"
TEMPLATES = {"systemd": ("systemd", "tarsd.service"), "launchd": ("launchd", f"{LABEL}.plist")}
_PLACEHOLDER = re.compile(r"@([A-Z_]+)@")
# macOS asks before an app reads these (TCC); a LaunchAgent cannot ask, so it needs Full Disk Access.
_PROTECTED = ("Documents", "Desktop", "Downloads", "Library/Mobile Documents", "Library/CloudStorage")


class ServiceError(Exception):
    """The service cannot be set up; the message says why and what to do."""


@dataclass(frozen=True)
class ServiceSpec:
    tarsd: Path  # the installed tarsd, absolute
    vault: Path  # absolute
    home: Path
    extra_arguments: list[str] = field(default_factory=list)  # e.g. ["--socket", path]
    environment: dict[str, str] = field(default_factory=dict)
    writable: list[Path] = field(default_factory=list)  # folders tarsd writes besides the home directory
    log_file: Path | None = None  # launchd only; systemd logs to the journal

    @property
    def arguments(self) -> list[str]:
        return [str(self.tarsd), "--vault", str(self.vault), *self.extra_arguments]


def template_path(kind: str) -> Path:
    """The template in a source checkout, else the copy installed with the wheel (share/tars/)."""
    folder, name = TEMPLATES[kind]
    candidates = [Path(__file__).resolve().parents[1] / folder / name, Path(sys.prefix) / "share" / "tars" / folder / name]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise ServiceError(
        f"the {kind} template {folder}/{name} is missing from this installation (looked in {', '.join(map(str, candidates))}); "
        "reinstall tars with `uv tool install --reinstall` or `pipx reinstall tars`"
    )


def extra_writable(paths: list[Path], home: Path) -> list[Path]:
    """The folders outside the home directory that the unit must list in ReadWritePaths
    (ProtectSystem=strict makes everything else read-only)."""
    home = home.resolve()
    out: list[Path] = []
    for path in paths:
        real = path.resolve()
        if real.is_relative_to(home) or any(real.is_relative_to(kept) for kept in out):
            continue
        out = [kept for kept in out if not kept.is_relative_to(real)] + [real]
    return out


# ---- systemd ----


def systemd_quote(value: str, exec_argument: bool = False) -> str:
    """One double-quoted word for a unit file: backslash and quote escaped, % doubled (specifiers),
    and in command arguments $ doubled (variable expansion). The executable itself is not
    expanded by systemd, so its $ stays single."""
    _check_printable(value)
    quoted = value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    if exec_argument:
        quoted = quoted.replace("$", "$$")
    return f'"{quoted}"'


def render_systemd(spec: ServiceSpec, template: str | None = None) -> str:
    arguments = spec.arguments
    if any(ch in arguments[0] for ch in "\"'\\"):
        # systemd refuses such executables ("Executable name contains special characters"), quoted or not.
        raise ServiceError(
            f"systemd cannot run a program whose path contains a quote or a backslash: {arguments[0]}; "
            "install tars where the path is plain (uv tool install and pipx use ~/.local/bin)"
        )
    exec_start = " ".join([systemd_quote(arguments[0])] + [systemd_quote(a, exec_argument=True) for a in arguments[1:]])
    environment = [f"Environment={systemd_quote(f'{name}={value}')}" for name, value in sorted(spec.environment.items())]
    # "-": a folder missing at start (an unmounted drive) is skipped, and tarsd then says what is wrong.
    writable = " ".join(systemd_quote(f"-{path}") for path in spec.writable)
    return _fill(
        template if template is not None else template_path("systemd").read_text(encoding="utf-8"),
        {"EXEC_START": exec_start, "EXTRA_WRITABLE_PATHS": writable},
        {"ENVIRONMENT": environment},
    )


# ---- launchd ----


def render_launchd(spec: ServiceSpec, template: str | None = None) -> str:
    import plistlib

    if spec.log_file is None:
        raise ServiceError("a LaunchAgent needs a log file")

    def string(value: str) -> str:
        _check_printable(value)
        return f"<string>{xml_escape(value)}</string>"

    environment = []
    for name, value in sorted(spec.environment.items()):
        environment += [f"<key>{xml_escape(name)}</key>", string(value)]
    text = _fill(
        template if template is not None else template_path("launchd").read_text(encoding="utf-8"),
        {"LOG_FILE": xml_escape(str(spec.log_file))},
        {"PROGRAM_ARGUMENTS": [string(a) for a in spec.arguments], "ENVIRONMENT": environment},
    )
    try:
        plistlib.loads(text.encode())
    except Exception as exc:  # plistlib raises expat errors and ValueErrors
        raise ServiceError(f"the rendered LaunchAgent is not a valid plist ({exc}); is the template damaged? Reinstall tars") from exc
    return text


def protected_folder(vault: Path, home: Path) -> Path | None:
    """The macOS-protected folder the vault is in (~/Documents, iCloud Drive, ...), or None."""
    real = vault.resolve()
    for name in _PROTECTED:
        folder = home / name
        if real.is_relative_to(folder) or real.is_relative_to(folder.resolve()):
            return folder
    return None


def interpreter_of(script: Path) -> Path:
    """The real Python binary a console script runs with (its #! line, symlinks resolved): the
    binary macOS's Full Disk Access must be given to. The script itself when it has no #! line."""
    try:
        with open(script, "rb") as handle:
            first = handle.readline(4096).decode("utf-8", errors="replace").strip()
    except OSError:
        return script
    if not first.startswith("#!"):
        return Path(os.path.realpath(script))
    words = first[2:].split()
    if words == ["/bin/sh"]:
        # Installers write this for an interpreter path with spaces:  '''exec' "/path/python" "$0" "$@"
        import shlex

        try:
            with open(script, encoding="utf-8", errors="replace") as handle:
                handle.readline()
                words = shlex.split(handle.readline())[1:]
        except (OSError, ValueError):
            words = []
        return Path(os.path.realpath(words[0])) if words else Path("/bin/sh")
    if not words:
        return Path(os.path.realpath(script))
    if Path(words[0]).name == "env" and len(words) > 1:  # "#!/usr/bin/env python3"
        import shutil

        found = shutil.which(words[1])
        return Path(os.path.realpath(found)) if found else Path(words[1])
    return Path(os.path.realpath(words[0]))


# ---- the template engine: @NAME@ values, and lines holding only @NAME@ for lists of lines ----


def _fill(template: str, values: dict[str, str], blocks: dict[str, list[str]]) -> str:
    unknown = set(_PLACEHOLDER.findall(template)) - set(values) - set(blocks)
    if unknown:
        raise ServiceError(f"the service template has values tarsctl does not know: {', '.join(sorted(unknown))}; reinstall tars")
    lines: list[str] = []
    for line in template.splitlines():
        match = _PLACEHOLDER.fullmatch(line.strip())
        if match and match.group(1) in blocks:
            indent = line[: len(line) - len(line.lstrip())]
            lines.extend(indent + item for item in blocks[match.group(1)])
            continue
        # One pass, so a value that happens to contain @NAME@ is left alone.
        lines.append(_PLACEHOLDER.sub(lambda m: _value(values, m.group(1)), line).rstrip())
    return "\n".join(lines) + "\n"


def _value(values: dict[str, str], name: str) -> str:
    if name not in values:
        raise ServiceError(f"@{name}@ must stand on a line of its own in the service template; reinstall tars")
    return values[name]


def _check_printable(value: str) -> None:
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ServiceError(f"{value!r} contains a control character (a newline?), which cannot go into a service file: rename it")
