"""tarsctl service install | status | uninstall | logs as a user runs them, in a temporary home.

No systemd runs as PID 1 here (nor in CI containers), so `systemctl --user` cannot take the unit:
XDG_RUNTIME_DIR points at an empty folder so it fails the same way on every machine, and the tests
check that tarsctl writes the unit, says what failed and how to go on. Starting the service for
real needs a machine with systemd --user or launchd.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.user_env import isolated_env
from harness.vault_files import write
from tarsctl.service import _read_arguments

TARSD = Path(sys.executable).parent / "tarsd"


def tarsctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tarsctl.cli", *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def user(tmp_path: Path, vault: Path, model_dir: Path) -> dict[str, str]:
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    return isolated_env(tmp_path, XDG_RUNTIME_DIR=str(runtime), TARS_VAULT=str(vault), TARS_MODEL_DIR=str(model_dir))


def unit_path(env: dict[str, str]) -> Path:
    return Path(env["XDG_CONFIG_HOME"]) / "systemd" / "user" / "tarsd.service"


def test_install_writes_the_unit_and_says_how_to_start_and_undo(user: dict[str, str], vault: Path, model_dir: Path):
    done = tarsctl(user, "service", "install", "--no-start")
    assert done.returncode == 0, done.stderr
    unit = unit_path(user)
    assert f"wrote {unit}" in done.stdout
    assert "systemctl --user enable tarsd.service" in done.stdout and "undo: tarsctl service uninstall" in done.stdout
    # The vault from TARS_VAULT goes on the command line; the other TARS_* settings come along.
    assert _read_arguments("systemd", unit) == [str(TARSD), "--vault", str(vault)]
    text = unit.read_text()
    assert f'Environment="TARS_MODEL_DIR={model_dir}"' in text and "TARS_VAULT" not in text
    # The vault is under /tmp here, which the unit's private /tmp hides: said, not silently broken.
    assert "is under /tmp" in done.stdout
    if not Path("/var/lib/systemd/linger", pwd.getpwuid(os.getuid()).pw_name).exists():
        assert "sudo loginctl enable-linger" in done.stdout

    # Run again later without naming the vault (after an upgrade): the service keeps its vault.
    without_vault = {k: v for k, v in user.items() if k != "TARS_VAULT"}
    again = tarsctl(without_vault, "service", "install", "--no-start")
    assert again.returncode == 0 and f"replaced {unit}" in again.stdout
    assert _read_arguments("systemd", unit) == [str(TARSD), "--vault", str(vault)]
    assert tarsctl(without_vault, "service", "uninstall").returncode == 0
    refused = tarsctl(without_vault, "service", "install", "--no-start")
    assert refused.returncode == 2 and "no vault configured" in refused.stderr


def test_install_with_a_hostile_vault_outside_home(user: dict[str, str], tmp_path: Path):
    vault = tmp_path / "data" / 'My "Notes" 100% $x'
    vault.mkdir(parents=True)
    done = tarsctl(user, "service", "install", "--print", "--vault", str(vault))
    assert done.returncode == 0, done.stderr
    assert not unit_path(user).exists()  # --print writes nothing
    assert 'ReadWritePaths=%h %t "-' + str(vault).replace('"', '\\"').replace("%", "%%") + '"' in done.stdout
    assert '--vault" "' + str(vault).replace('"', '\\"').replace("%", "%%").replace("$", "$$") + '"' in done.stdout


def test_install_refuses_a_missing_vault(user: dict[str, str], tmp_path: Path):
    done = tarsctl(user, "service", "install", "--vault", str(tmp_path / "nope"))
    assert done.returncode == 2 and "is not a folder" in done.stderr
    assert not unit_path(user).exists()


def test_without_systemd_the_unit_is_written_and_the_failure_explained(user: dict[str, str]):
    done = tarsctl(user, "service", "install")
    assert done.returncode == 1
    assert unit_path(user).is_file()
    assert "`systemctl --user daemon-reload` failed" in done.stderr
    assert "systemctl --user daemon-reload && systemctl --user enable --now tarsd" in done.stderr


def test_status_doctor_and_uninstall(user: dict[str, str], vault: Path, start_daemon):
    assert tarsctl(user, "service", "status").returncode == 1  # not installed yet
    assert tarsctl(user, "service", "install", "--no-start").returncode == 0
    unit = unit_path(user)

    status = tarsctl(user, "service", "status")
    assert status.returncode == 3, status.stdout  # installed, but no daemon answers
    assert f"installed   systemd user unit {unit}" in status.stdout
    assert f"runs        {TARSD} --vault {vault}" in status.stdout
    assert "cannot ask systemd --user" in status.stdout and "does not answer" in status.stdout

    write(vault, "note.md", "# Note\n")
    daemon = start_daemon()
    status = tarsctl({**user, "TARS_SOCKET": str(daemon.socket)}, "service", "status")
    assert status.returncode == 0 and "daemon      answers: tarsd" in status.stdout

    doctor = tarsctl(user, "doctor")
    assert "cannot be asked" in doctor.stdout
    # The vault named only by `service install --vault`: doctor checks that one, and says where it came from.
    without_vault = {k: v for k, v in user.items() if k != "TARS_VAULT"}
    report = json.loads(tarsctl(without_vault, "doctor", "--json").stdout)
    vault_check = next(c for c in report["checks"] if c["name"] == "vault")
    assert vault_check["status"] == "ok" and f"{vault}: 1 note," in vault_check["summary"]
    assert "named by the service file" in vault_check["summary"]
    # The installed tarsd went away (uv tool uninstall): doctor says the unit is stale.
    unit.write_text(unit.read_text().replace(str(TARSD), "/nonexistent/bin/tarsd"))
    doctor = tarsctl(user, "doctor")
    assert doctor.returncode == 1
    assert "problem  service   " in doctor.stdout and "/nonexistent/bin/tarsd, which does not exist" in doctor.stdout

    # systemctl enable leaves this link; without systemd --user, uninstall removes it itself.
    wants = unit.parent / "default.target.wants"
    wants.mkdir()
    (wants / "tarsd.service").symlink_to(unit)
    gone = tarsctl(user, "service", "uninstall")
    assert gone.returncode == 0 and f"removed {unit}" in gone.stdout
    assert not unit.exists() and not (wants / "tarsd.service").is_symlink()
    assert "if it still runs: tarsctl stop" in gone.stdout
    assert "nothing to uninstall" in tarsctl(user, "service", "uninstall").stdout


def test_logs_runs_journalctl_for_the_unit(user: dict[str, str]):
    if shutil.which("journalctl") is None:
        pytest.skip("journalctl is not installed")
    done = tarsctl(user, "service", "logs", "-n", "5")
    # No journal in a container: journalctl still ran, for this unit, and said so.
    assert done.returncode == 0, done.stderr
    assert "No journal files" in done.stderr or "No entries" in done.stdout or "tarsd" in done.stdout


def test_macos_install_writes_a_launch_agent_and_names_the_binary_for_full_disk_access(
    tmp_path: Path, model_dir: Path, monkeypatch, capsys
):
    """launchd cannot run here: this runs the macOS branch in-process with sys.platform set to darwin,
    up to the point where launchctl would be called (--no-start), then uninstalls."""
    import plistlib

    from tarsctl.cli import main
    from tarsctl.service_files import interpreter_of

    home = tmp_path / "home"
    vault = home / "Documents" / "Obsidian Vault"
    vault.mkdir(parents=True)
    for name, value in isolated_env(tmp_path, TARS_MODEL_DIR=str(model_dir)).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("TARS_VAULT", raising=False)
    monkeypatch.setattr(sys, "platform", "darwin")

    assert main(["service", "install", "--no-start", "--vault", str(vault)]) == 0
    out = capsys.readouterr().out
    agent = home / "Library" / "LaunchAgents" / "com.github.tars.tarsd.plist"
    plist = plistlib.loads(agent.read_bytes())
    assert plist["ProgramArguments"] == [str(TARSD), "--vault", str(vault)]
    assert plist["EnvironmentVariables"]["TARS_MODEL_DIR"] == str(model_dir)
    assert plist["StandardErrorPath"] == str(home / "Library" / "Logs" / "tarsd.log")
    assert f"the vault is in {home / 'Documents'}, which macOS protects: give Full Disk Access to {interpreter_of(TARSD)}" in out
    assert f"launchctl bootstrap gui/{os.getuid()} {agent}" in out

    assert main(["service", "uninstall"]) == 0
    out = capsys.readouterr().out
    assert not agent.exists() and f"its log stays at {home / 'Library' / 'Logs' / 'tarsd.log'}" in out
    assert "launchctl could not be asked to stop tarsd (launchctl is not installed)" in out
