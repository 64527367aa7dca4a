"""`tarsctl service install | status | uninstall | logs`: tarsd always on, under systemd --user
(Linux, Raspberry Pi) or launchd (macOS).

install renders the template (tarsctl/service_files.py) with the installed tarsd, the vault and the
TARS_* settings of this shell, writes it, has the service manager enable and (re)start it, and
waits until tarsd answers on its socket. Nothing here runs at tarsctl start-up: cli.py imports
this module only for the service command.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tarsctl.service_files import (
    LABEL,
    UNIT_NAME,
    ServiceError,
    ServiceSpec,
    extra_writable,
    interpreter_of,
    protected_folder,
    render_launchd,
    render_systemd,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_RUNNING = 0, 1, 2, 3
# TARS_* variables that name files: made absolute, since the service does not start in this directory.
_PATH_SUFFIXES = ("_DIR", "_PATH", "_FILE", "_SOCKET")
_PATH_NAMES = {"TARS_CONFIG", "TARS_DB", "TARS_SOCKET"}
# The vault goes into the command line (--vault), never twice.
_NOT_FORWARDED = {"TARS_VAULT", "TARS_VAULT_PATH"}
_PRIVATE_TMP = (Path("/tmp"), Path("/var/tmp"))


def manager() -> str:
    if sys.platform == "darwin":
        return "launchd"
    if sys.platform.startswith("linux"):
        return "systemd"
    raise ServiceError(f"tarsctl service knows systemd (Linux) and launchd (macOS), not {sys.platform}: run `tarsd --vault PATH` yourself")


def service_file() -> Path:
    if manager() == "launchd":
        return Path.home() / "Library" / "LaunchAgents" / f"{LABEL}.plist"
    config_home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config_home) / "systemd" / "user" / UNIT_NAME


def launchd_log() -> Path:
    return Path.home() / "Library" / "Logs" / "tarsd.log"


def find_tarsd() -> Path | None:
    """The tarsd installed with this tarsctl (same folder, or beside this Python), else the one on PATH."""
    candidates = [Path(sys.executable).absolute().parent / "tarsd"]
    if sys.argv and sys.argv[0]:
        candidates.insert(0, Path(sys.argv[0]).absolute().parent / "tarsd")
    found = shutil.which("tarsd")
    if found:
        candidates.append(Path(found).absolute())
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def forwarded_environment(env: dict[str, str]) -> dict[str, str]:
    """The TARS_* settings of this shell, file paths made absolute, for the service to see the same."""
    out = {}
    for name, value in env.items():
        if not name.startswith("TARS_") or name in _NOT_FORWARDED:
            continue
        if value and (name in _PATH_NAMES or name.endswith(_PATH_SUFFIXES)):
            value = os.path.abspath(os.path.expanduser(value))
        out[name] = value
    return out


def linger_enabled() -> bool:
    """loginctl enable-linger writes this flag file; reading it needs no D-Bus."""
    return (Path("/var/lib/systemd/linger") / pwd.getpwuid(os.getuid()).pw_name).exists()


def linger_hint() -> tuple[str, str]:
    """(what lingering off means, the fix)"""
    return (
        "lingering is off: tarsd runs while you are logged in and stops at logout",
        f"to keep it running after a reboot or without a login: sudo loginctl enable-linger {pwd.getpwuid(os.getuid()).pw_name}",
    )


def full_disk_access_hint(vault: Path, tarsd: Path) -> str | None:
    folder = protected_folder(vault, Path.home())
    if folder is None:
        return None
    python = interpreter_of(tarsd)
    return (
        f"the vault is in {folder}, which macOS protects: give Full Disk Access to {python} "
        "(System Settings > Privacy & Security > Full Disk Access > +, then Cmd-Shift-G and paste that path), "
        f"then restart tarsd: launchctl kickstart -k gui/{os.getuid()}/{LABEL}"
    )


# ---- what is installed ----


@dataclass
class ServiceState:
    manager: str
    file: Path
    installed: bool
    arguments: list[str]  # the tarsd command line in the file
    enabled: bool | None = None  # None: the service manager could not be asked
    active: str = ""
    manager_error: str = ""

    @property
    def tarsd(self) -> Path | None:
        return Path(self.arguments[0]) if self.arguments else None

    @property
    def vault(self) -> Path | None:
        if "--vault" in self.arguments[:-1]:
            return Path(self.arguments[self.arguments.index("--vault") + 1])
        return None


def inspect() -> ServiceState:
    kind, path = manager(), service_file()
    state = ServiceState(kind, path, path.is_file(), [])
    if not state.installed:
        return state
    state.arguments = _read_arguments(kind, path)
    if kind == "systemd":
        # is-enabled reads the unit files, so it answers even without a running systemd --user; is-active needs it.
        enabled = _run(["systemctl", "--user", "is-enabled", UNIT_NAME])
        if enabled.stdout.strip():
            state.enabled = enabled.returncode == 0
        active = _run(["systemctl", "--user", "is-active", UNIT_NAME])
        state.active = active.stdout.strip()
        if not state.active or state.enabled is None:
            state.manager_error = _output(active if not state.active else enabled) or "systemctl --user gave no answer"
    else:
        printed = _run(["launchctl", "print", f"gui/{os.getuid()}/{LABEL}"])
        state.enabled = printed.returncode == 0  # loaded; RunAtLoad starts it
        for line in printed.stdout.splitlines():
            if line.strip().startswith("state ="):
                state.active = line.split("=", 1)[1].strip()
    return state


def installed_vault() -> Path | None:
    path = service_file()
    if not path.is_file():
        return None
    return ServiceState(manager(), path, True, _read_arguments(manager(), path)).vault


def _read_arguments(kind: str, path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    if kind == "launchd":
        import plistlib

        try:
            return [str(a) for a in plistlib.loads(text.encode()).get("ProgramArguments", [])]
        except Exception:  # a hand-edited, broken plist
            return []
    for line in text.splitlines():
        if line.startswith("ExecStart="):
            try:
                # systemd's quoting is the shell's double quoting plus %% and, after the executable, $$.
                words = [word.replace("%%", "%") for word in shlex.split(line.removeprefix("ExecStart="))]
                return words[:1] + [word.replace("$$", "$") for word in words[1:]]
            except ValueError:
                return []
    return []


# ---- the commands ----


def main(args) -> int:
    try:
        handler = {"install": install, "status": status, "uninstall": uninstall, "logs": logs}[args.service_command]
        return handler(args)
    except ServiceError as exc:
        print(f"tarsctl: {exc}", file=sys.stderr)
        return EXIT_FAILED


def install(args) -> int:
    from tarsd.config.settings import ConfigError, load_config

    kind = manager()
    try:
        config = load_config(vault_path=args.vault)
        previous = installed_vault()
        if not config.vault.path and previous is not None:
            # Running it again (after an upgrade) keeps the vault the service already has.
            config = load_config(vault_path=previous)
        vault = config.vault_path
    except ConfigError as exc:
        print(f"tarsctl: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not vault.is_dir():
        print(f"tarsctl: the vault {vault} is not a folder: create it, or pass --vault PATH to your vault", file=sys.stderr)
        return EXIT_USAGE
    tarsd = find_tarsd()
    if tarsd is None:
        print(
            "tarsctl: no tarsd next to this tarsctl or on PATH: install tars with `uv tool install PATH-OR-URL` (or pipx install)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    home = Path.home()
    environment = forwarded_environment(dict(os.environ))
    socket = Path(args.socket).absolute() if args.socket else config.socket_path
    chosen_socket = bool(args.socket or os.environ.get("TARS_SOCKET") or config.daemon.socket)
    notes = _install_notes(kind, config, vault, tarsd, socket if chosen_socket else None, environment)
    extra_arguments = ["--socket", str(socket)] if args.socket else []
    database_dir = config.db_path.parent
    if kind == "systemd":
        spec = ServiceSpec(tarsd, vault, home, extra_arguments, environment, extra_writable([vault, database_dir], home))
        text = render_systemd(spec)
    else:
        spec = ServiceSpec(tarsd, vault, home, extra_arguments, environment, log_file=launchd_log())
        text = render_launchd(spec)
    if args.print:
        sys.stdout.write(text)
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        return EXIT_OK

    path = service_file()
    replaced = path.exists()
    database_dir.mkdir(parents=True, exist_ok=True)  # a ReadWritePaths entry must exist when the service starts
    _write(path, text)
    print(f"{'replaced' if replaced else 'wrote'} {path}")
    print(f"  runs      {shlex.join(spec.arguments)}")
    for name, value in sorted(environment.items()):
        print(f"  env       {name}={value}")
    if kind == "systemd":
        print(f"  writable  {', '.join(str(p) for p in [home, *spec.writable])} (the rest of the system is read-only to tarsd)")
        print(f"  logs      journalctl --user-unit {UNIT_NAME} (or: tarsctl service logs -f)")
    else:
        print(f"  logs      {spec.log_file} (or: tarsctl service logs)")
    for note in notes:
        print(f"note: {note}")
    if args.no_start:
        print("not started (--no-start); to start it:")
        for command in _start_commands(kind, path):
            print(f"  {shlex.join(command)}")
        print("undo: tarsctl service uninstall")
        return EXIT_OK

    for command in _start_commands(kind, path):
        result = _run(command)
        if command[:2] == ["launchctl", "bootout"]:
            _wait_unloaded(result)  # it fails when nothing was loaded: fine
            continue
        if result.returncode != 0:
            print(f"tarsctl: `{shlex.join(command)}` failed: {_output(result) or f'exit code {result.returncode}'}", file=sys.stderr)
            print(_manager_unreachable_hint(kind, path), file=sys.stderr)
            return EXIT_FAILED
    print(f"started; waiting up to {args.wait:.0f} s for tarsd to answer on {socket}")
    answer = _wait_for_answer(socket, args.wait)
    if answer is None:
        print(f"tarsctl: tarsd did not answer within {args.wait:.0f} s; see what it says: tarsctl service logs", file=sys.stderr)
        return EXIT_NOT_RUNNING
    print(f"tarsd answers ({answer}); from now on it starts at login and restarts after a crash")
    print("undo: tarsctl service uninstall")
    return EXIT_OK


def _install_notes(kind: str, config, vault: Path, tarsd: Path, socket: Path | None, environment: dict[str, str]) -> list[str]:
    """What the user should know about this install. ``socket``: the one they chose, None for the default."""
    notes = []
    checkout = tarsd.parent.parent.parent
    venv = tarsd.parent.parent.name
    # .venv: scripts/test.sh's editable install; .venv-demo: scripts/demo.sh's.
    if venv in (".venv", ".venv-demo") and (checkout / "pyproject.toml").is_file():
        notes.append(
            f"{tarsd} is the development install in {checkout}: the service stops working if that folder moves or its "
            f"{venv} is rebuilt; for daily use install tars (uv tool install {checkout}) and run this again"
        )
    if "ANTHROPIC_API_KEY" in os.environ:
        notes.append(
            f"ANTHROPIC_API_KEY is not copied into the service file (anyone who can read the file would see it): "
            f"put the key in {config.chat.anthropic_key_file} (mode 600) instead"
        )
    if kind == "launchd":
        hint = full_disk_access_hint(vault, tarsd)
        if hint:
            notes.append(hint)
        return notes
    if not linger_enabled():
        notes.append("{}; {}".format(*linger_hint()))
    # systemd: PrivateTmp=yes gives the service its own /tmp.
    looked_at = {"the vault": vault} | ({"the socket": socket} if socket else {})
    looked_at |= {name: Path(value) for name, value in environment.items() if value.startswith("/")}
    for what, path in looked_at.items():
        if any(path.is_relative_to(tmp) for tmp in _PRIVATE_TMP):
            notes.append(f"{what} ({path}) is under /tmp, but the service has a private /tmp (PrivateTmp=yes) and will not see it: move it")
    if socket is None and not os.environ.get("XDG_RUNTIME_DIR"):
        from tarsctl.socket_path import default_socket_path

        notes.append(
            f"this shell has no XDG_RUNTIME_DIR, so tarsctl looks for tarsd at {default_socket_path()} while the service uses "
            f"/run/user/{os.getuid()}/tars/tarsd.sock; log in normally (not `su`), or export XDG_RUNTIME_DIR=/run/user/$(id -u)"
        )
    return notes


def _start_commands(kind: str, path: Path) -> list[list[str]]:
    if kind == "systemd":
        # restart, not start: a reinstall (new vault, upgraded tarsd) takes effect at once. --no-block: the
        # first reconcile of a big vault may take minutes before READY=1, but the socket answers at once.
        return [
            ["systemctl", "--user", "daemon-reload"],
            ["systemctl", "--user", "enable", UNIT_NAME],
            ["systemctl", "--user", "restart", "--no-block", UNIT_NAME],
        ]
    domain = f"gui/{os.getuid()}"
    return [
        ["launchctl", "bootout", f"{domain}/{LABEL}"],  # unload an older copy
        ["launchctl", "enable", f"{domain}/{LABEL}"],
        ["launchctl", "bootstrap", domain, str(path)],
    ]


def _wait_unloaded(bootout: subprocess.CompletedProcess) -> None:
    """bootstrap right after bootout fails with an I/O error while the old job is still going away."""
    deadline = time.monotonic() + 15
    while bootout.returncode == 0 and time.monotonic() < deadline:
        if _run(["launchctl", "print", f"gui/{os.getuid()}/{LABEL}"]).returncode != 0:
            return
        time.sleep(0.2)


def _manager_unreachable_hint(kind: str, path: Path) -> str:
    if kind == "systemd":
        return (
            f"the unit is written to {path}, but systemd --user did not take it. This happens over `su`/`sudo`, in containers, "
            "or over ssh without a login session. Log in as this user (or run `sudo loginctl enable-linger $USER` and log in "
            "again), then: systemctl --user daemon-reload && systemctl --user enable --now tarsd"
        )
    return f"the LaunchAgent is written to {path}; load it in a logged-in GUI session: launchctl bootstrap gui/$(id -u) {path}"


def _wait_for_answer(socket: Path, seconds: float) -> str | None:
    from tarsctl.client import Client, DaemonNotRunning, ProtocolError, RemoteError
    from tarsctl.protocol import Ping

    deadline = time.monotonic() + seconds
    while True:
        try:
            with Client(socket, timeout=5) as client:
                reply = client.call(Ping(id=client.next_id()))
                return f"{reply.server}, up {reply.uptime:.0f} s"
        except (DaemonNotRunning, ProtocolError, RemoteError, OSError):
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.25)


def status(args) -> int:
    state = inspect()
    where = "systemd user unit" if state.manager == "systemd" else "LaunchAgent"
    if not state.installed:
        print(f"not installed (no {where} at {state.file}); install it: tarsctl service install --vault PATH")
        return EXIT_FAILED
    print(f"installed   {where} {state.file}")
    print(f"runs        {shlex.join(state.arguments) if state.arguments else '(no tarsd command line found in the file)'}")
    if state.tarsd is not None and not state.tarsd.is_file():
        print(f"problem     {state.tarsd} does not exist any more: reinstall tars, then run `tarsctl service install` again")
    enabled = {True: "enabled", False: "not enabled", None: "enabled or not: unknown"}[state.enabled]
    running = f"cannot ask systemd --user whether it runs: {state.manager_error}" if state.manager_error else state.active
    print(f"manager     {enabled}; {running}")
    if state.manager == "systemd" and not linger_enabled():
        print("note        {}; {}".format(*linger_hint()))
    from tarsd.config.settings import ConfigError, load_config

    try:
        socket = Path(args.socket) if args.socket else load_config().socket_path
    except ConfigError:
        from tarsctl.socket_path import default_socket_path

        socket = default_socket_path()
    answer = _wait_for_answer(socket, 0)
    print(f"daemon      {'answers: ' + answer if answer else 'does not answer on ' + str(socket)}")
    print(f"logs        tarsctl service logs{' -f' if state.manager == 'systemd' else ''}")
    return EXIT_OK if answer else EXIT_NOT_RUNNING


def uninstall(args) -> int:
    kind, path = manager(), service_file()
    if not path.exists():
        print(f"nothing to uninstall: no service file at {path}")
        return EXIT_OK
    if kind == "systemd":
        stop = _run(["systemctl", "--user", "disable", "--now", UNIT_NAME])
        # disable removes these links; without systemd --user they would be left dangling.
        for link in path.parent.glob(f"*.wants/{UNIT_NAME}"):
            link.unlink(missing_ok=True)
        path.unlink()
        reload = _run(["systemctl", "--user", "daemon-reload"])
        failed = stop if stop.returncode != 0 else reload if reload.returncode != 0 else None
    else:
        stop = _run(["launchctl", "bootout", f"gui/{os.getuid()}/{LABEL}"])
        path.unlink()
        not_loaded = any(words in _output(stop) for words in ("No such process", "Could not find"))
        failed = stop if stop.returncode != 0 and not not_loaded else None
    print(f"removed {path}")
    if failed is not None:
        who = "systemd --user" if kind == "systemd" else "launchctl"
        print(f"note: {who} could not be asked to stop tarsd ({_output(failed)}); if it still runs: tarsctl stop")
    else:
        print("tarsd is stopped and will not start at login any more")
    if kind == "launchd":
        print(f"its log stays at {launchd_log()}")
    return EXIT_OK


def logs(args) -> int:
    if manager() == "systemd":
        command = ["journalctl", "--user-unit", UNIT_NAME, "--no-pager", "-n", str(args.lines)] + (["-f"] if args.follow else [])
    else:
        log = launchd_log()
        if not log.exists():
            print(f"no log yet at {log}: is the service installed? tarsctl service status", file=sys.stderr)
            return EXIT_FAILED
        command = ["tail", "-n", str(args.lines)] + (["-F"] if args.follow else []) + [str(log)]
    if shutil.which(command[0]) is None:
        print(f"tarsctl: {command[0]} is not installed, so the logs cannot be shown", file=sys.stderr)
        return EXIT_FAILED
    sys.stdout.flush()
    try:
        os.execvp(command[0], command)  # hands over the terminal: Ctrl-C ends the follow
    except OSError as exc:
        print(f"tarsctl: cannot run {command[0]}: {exc}", file=sys.stderr)
    return EXIT_FAILED


# ---- helpers ----


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)


def _run(command: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        return subprocess.CompletedProcess(command, 127, "", f"{command[0]} is not installed")
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(command, 124, "", f"{command[0]} gave no answer within 120 s")


def _output(result: subprocess.CompletedProcess) -> str:
    return " ".join((result.stderr.strip() or result.stdout.strip()).split())
