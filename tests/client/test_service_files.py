"""The service files: the systemd unit checked by the real systemd-analyze, the LaunchAgent by
plistlib, both for hostile paths (spaces, quotes, %, $, a backslash) and a vault outside home."""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tarsctl.service import _install_notes, _read_arguments, forwarded_environment
from tarsctl.service_files import (
    ServiceError,
    ServiceSpec,
    extra_writable,
    interpreter_of,
    protected_folder,
    render_launchd,
    render_systemd,
    systemd_quote,
    template_path,
)

HOSTILE = 'My "Notes" 100% $HOME \\ it\'s'
REPO = Path(__file__).resolve().parents[2]


def installed_tarsd(folder: Path) -> Path:
    """A real console script (a copy of this venv's tarsd) at a path of our choosing."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "tarsd"
    shutil.copy2(Path(sys.executable).parent / "tarsd", target)
    return target


def systemd_analyze_verify(unit: Path, home: Path, runtime: Path) -> subprocess.CompletedProcess:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (apt-get install systemd); .ci/run installs it when it can")
    runtime.mkdir(mode=0o700, exist_ok=True)
    env = {**os.environ, "HOME": str(home), "XDG_RUNTIME_DIR": str(runtime)}
    return subprocess.run(["systemd-analyze", "verify", "--user", str(unit)], env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture
def layout(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    tarsd = installed_tarsd(tmp_path / "my bin 50% $y")
    return home, tarsd


def test_unit_for_a_hostile_vault_outside_home_passes_systemd_analyze(tmp_path: Path, layout):
    home, tarsd = layout
    vault = tmp_path / "elsewhere" / HOSTILE
    vault.mkdir(parents=True)
    database_dir = home / ".local" / "share" / "tars"
    database_dir.mkdir(parents=True)
    spec = ServiceSpec(
        tarsd,
        vault,
        home,
        extra_arguments=["--socket", str(tmp_path / "run dir" / "tarsd.sock")],
        environment={"TARS_MODEL_DIR": str(tmp_path / 'models "100%"'), "TARS_CHAT_OLLAMA_MODEL": "llama3.2"},
        writable=extra_writable([vault, database_dir], home),
    )
    assert spec.writable == [vault.resolve()]  # the database under home needs no entry

    text = render_systemd(spec)
    unit = tmp_path / "units" / "tarsd.service"
    unit.parent.mkdir()
    unit.write_text(text, encoding="utf-8")
    result = systemd_analyze_verify(unit, home, tmp_path / "runtime")
    # verify logs parse errors ("Failed to extract first word, ignoring") without failing: both must be clean.
    assert result.returncode == 0 and result.stderr.strip() == "" and result.stdout.strip() == "", result.stderr + result.stdout

    assert "@" not in text.split("[Unit]", 1)[1].replace("@ signs", "")  # no placeholder left
    assert f"ReadWritePaths=%h %t {systemd_quote(f'-{vault.resolve()}')}" in text
    assert 'Environment="TARS_MODEL_DIR=' in text and "100%%" in text
    # The memory limits tarsd reads its budget from (tarsd/config/budget.py); verify above parsed them.
    assert "\nMemoryHigh=60%\nMemoryMax=75%\n" in text
    # What status and doctor read back is what was written.
    assert _read_arguments("systemd", unit) == spec.arguments


def test_systemd_analyze_rejects_a_wrongly_quoted_executable(tmp_path: Path, layout):
    """The check above can fail: the same unit with the executable left unquoted is refused."""
    home, tarsd = layout
    text = render_systemd(ServiceSpec(tarsd, tmp_path, home)).replace(systemd_quote(str(tarsd)), str(tarsd))
    unit = tmp_path / "tarsd.service"
    unit.write_text(text, encoding="utf-8")
    result = systemd_analyze_verify(unit, home, tmp_path / "runtime")
    assert result.returncode != 0 and "not executable" in result.stderr


def test_a_program_path_systemd_cannot_run_is_refused_with_the_reason(tmp_path: Path):
    tarsd = installed_tarsd(tmp_path / 'it\'s "quoted"')
    with pytest.raises(ServiceError, match="quote or a backslash"):
        render_systemd(ServiceSpec(tarsd, tmp_path, tmp_path))


def test_a_vault_under_home_or_a_symlink_into_home_adds_no_writable_path(tmp_path: Path):
    home = tmp_path / "home"
    (home / "Notes").mkdir(parents=True)
    outside = tmp_path / "mnt" / "usb" / "Notes"
    outside.mkdir(parents=True)
    (home / "link to usb").symlink_to(outside)
    assert extra_writable([home / "Notes"], home) == []
    # A symlink in home pointing outside: the real folder must be writable, so it is listed.
    assert extra_writable([home / "link to usb", outside / "sub"], home) == [outside]
    assert extra_writable([outside / "sub", outside], home) == [outside]


def test_control_characters_are_refused_not_written(tmp_path: Path, layout):
    home, tarsd = layout
    with pytest.raises(ServiceError, match="control character"):
        render_systemd(ServiceSpec(tarsd, tmp_path / "evil\nExecStartPre=/bin/rm", home))
    with pytest.raises(ServiceError, match="control character"):
        render_launchd(ServiceSpec(tarsd, tmp_path / "evil\x01", home, log_file=home / "log"))


def test_launch_agent_parses_and_names_existing_absolute_paths(tmp_path: Path, layout):
    home, tarsd = layout
    vault = home / "Documents" / f"{HOSTILE} <&>"
    vault.mkdir(parents=True)
    log = home / "Library" / "Logs" / "tarsd.log"
    spec = ServiceSpec(tarsd, vault, home, environment={"TARS_MODEL_DIR": "/models & <more>"}, log_file=log)
    plist = plistlib.loads(render_launchd(spec).encode())

    assert plist["Label"] == "com.github.tars.tarsd"
    arguments = plist["ProgramArguments"]
    assert arguments == [str(tarsd), "--vault", str(vault)]
    for path in (arguments[0], arguments[2]):
        assert Path(path).is_absolute() and Path(path).exists()
    assert os.access(arguments[0], os.X_OK)
    assert plist["EnvironmentVariables"] == {"TARS_MODEL_DIR": "/models & <more>"}
    assert plist["StandardOutPath"] == plist["StandardErrorPath"] == str(log)
    assert plist["RunAtLoad"] is True and plist["KeepAlive"] == {"SuccessfulExit": False}


def test_templates_are_the_repository_files():
    assert template_path("systemd") == REPO / "systemd" / "tarsd.service"
    assert template_path("launchd") == REPO / "launchd" / "com.github.tars.tarsd.plist"


def test_macos_protected_folders_and_the_binary_that_needs_full_disk_access(tmp_path: Path):
    home = tmp_path / "home"
    for folder in ("Documents/Vault", "Library/Mobile Documents/iCloud~md~obsidian/Documents/V", "Notes"):
        (home / folder).mkdir(parents=True)
    assert protected_folder(home / "Documents" / "Vault", home) == home / "Documents"
    assert protected_folder(home / "Library/Mobile Documents/iCloud~md~obsidian/Documents/V", home) == home / "Library/Mobile Documents"
    assert protected_folder(home / "Notes", home) is None
    # A link from ~/Notes into ~/Desktop is still protected.
    (home / "Desktop" / "Real").mkdir(parents=True)
    (home / "Linked").symlink_to(home / "Desktop" / "Real")
    assert protected_folder(home / "Linked", home) == home / "Desktop"

    # The console script's #! names a venv python, a symlink: Full Disk Access goes to the real binary.
    real = tmp_path / "Python.framework" / "python3.12"
    real.parent.mkdir()
    real.write_bytes(b"")
    venv_python = tmp_path / "tool env" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.symlink_to(real)
    script = tmp_path / "tarsd"
    # uv and pip write a /bin/sh trampoline when the interpreter's path has a space.
    script.write_text("#!/bin/sh\n'''exec' '" + str(venv_python) + "' \"$0\" \"$@\"\n' '''\nimport sys\n")
    assert interpreter_of(script) == real.resolve()
    plain = tmp_path / "plain" / "python"
    plain.parent.mkdir()
    plain.symlink_to(real)
    script.write_text(f"#!{plain}\nimport sys\n")
    assert interpreter_of(script) == real.resolve()
    script.write_text("#!/usr/bin/env python3\n")
    assert interpreter_of(script) == Path(os.path.realpath(shutil.which("python3")))


def test_forwarded_environment_makes_paths_absolute_and_leaves_the_vault_to_the_command_line(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = {
        "TARS_MODEL_DIR": "models",
        "TARS_DB": "~/index.sqlite3",
        "TARS_CHAT_OLLAMA_MODEL": "llama3.2",
        "TARS_VAULT": "/somewhere",
        "HOME": str(tmp_path),
        "PATH": "/usr/bin",
        "ANTHROPIC_API_KEY": "secret",
    }
    assert forwarded_environment(env) == {
        "TARS_MODEL_DIR": str(tmp_path / "models"),
        "TARS_DB": os.path.expanduser("~/index.sqlite3"),
        "TARS_CHAT_OLLAMA_MODEL": "llama3.2",
    }


@pytest.mark.parametrize("venv", [".venv", ".venv-demo"])
def test_a_service_of_a_checkouts_script_venv_says_it_is_a_development_install(tmp_path: Path, venv: str):
    # scripts/test.sh installs into .venv, scripts/demo.sh into .venv-demo: both live and die with the checkout.
    checkout = tmp_path / "tars"
    (checkout / "pyproject.toml").parent.mkdir()
    (checkout / "pyproject.toml").write_text("[project]\n", encoding="utf-8")
    tarsd = installed_tarsd(checkout / venv / "bin")
    notes = _install_notes("launchd", None, tmp_path / "vault", tarsd, None, {})
    assert f"{tarsd} is the development install in {checkout}" in notes[0] and f"its {venv} is rebuilt" in notes[0]
