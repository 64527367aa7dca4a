"""Install for daily use, as the README says: `uv tool install` from a clean clone (uv from PyPI,
the test extras), into temporary UV_TOOL_DIR / UV_TOOL_BIN_DIR; then the installed tarsd serves a
temp vault and the installed tarsctl searches it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from harness.daemon import wait_for
from harness.paths import REPO
from harness.user_env import isolated_env
from harness.uv_env import pip_settings, uv_env_from_pip, uv_env_from_pip_settings
from harness.vault_files import write


def run(command: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)


def test_uv_tool_install_from_a_clean_clone_gives_a_working_tarsd_and_tarsctl(tmp_path: Path, vault: Path, model_dir: Path):
    from uv import find_uv_bin

    if not (REPO / ".git").exists():
        pytest.fail(f"{REPO} is not a git checkout: this test installs from a clean clone of it")
    clone = tmp_path / "clone of tars"
    cloned = subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], capture_output=True, text=True, timeout=120)
    assert cloned.returncode == 0, cloned.stderr

    tools, bin_dir = tmp_path / "tools", tmp_path / "bin"
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env.update(uv_env_from_pip(env))
    env.update(UV_TOOL_DIR=str(tools), UV_TOOL_BIN_DIR=str(bin_dir), UV_PYTHON_DOWNLOADS="never", UV_NO_PROGRESS="1")
    uv = find_uv_bin()
    installed = run([uv, "tool", "install", "--python", sys.executable, str(clone)], env)
    assert installed.returncode == 0, installed.stderr
    tarsd, tarsctl = bin_dir / "tarsd", bin_dir / "tarsctl"
    # Both commands, in an environment of their own (not this test's venv).
    for program in (tarsd, tarsctl):
        assert program.is_file() and os.access(program, os.X_OK)
        assert program.resolve().is_relative_to(tools.resolve())

    run_dir = Path(tempfile.mkdtemp(prefix="tars-", dir="/tmp"))
    user = isolated_env(
        tmp_path,
        {k: v for k, v in env.items() if not k.startswith("UV_")},
        TARS_SOCKET=str(run_dir / "tarsd.sock"),
        TARS_DB=str(tmp_path / "state" / "index.sqlite3"),
        TARS_MODEL_DIR=str(model_dir),
        TARS_EMBEDDER="local",
        TARS_VAULT=str(vault),
    )
    assert run([str(tarsctl), "--version"], user).stdout.strip() == "tarsctl 0.1.0"
    # The service templates came with the wheel: the installed tarsctl renders a unit for the installed tarsd.
    unit = run([str(tarsctl), "service", "install", "--print"], user)
    assert unit.returncode == 0, unit.stderr
    assert f'ExecStart="{tarsd}" "--vault" "{vault}"' in unit.stdout

    write(vault, "Sourdough.md", "# Sourdough\n\nBake the loaf at 250 C for 20 minutes with steam, then 220 C.\n")
    write(vault, "Garden.md", "# Garden\n\nTomatoes need staking in June.\n")
    log = open(tmp_path / "tarsd.log", "wb")  # noqa: SIM115 - closed below
    daemon = subprocess.Popen([str(tarsd), "--vault", str(vault)], env=user, stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_for(lambda: run([str(tarsctl), "ping"], user, 10).returncode == 0 or daemon.poll() is not None, "the installed tarsd")
        assert daemon.poll() is None, (tmp_path / "tarsd.log").read_text()
        indexed = run([str(tarsctl), "index", "--wait"], user)  # keywords at once; --wait also waits for the vectors
        assert indexed.returncode == 0 and "0 pending" in indexed.stdout, indexed.stdout + indexed.stderr
        found = run([str(tarsctl), "search", "--mode", "vec", "what temperature for baking bread"], user)
        assert found.returncode == 0, found.stderr
        assert found.stdout.splitlines()[0].startswith("Sourdough.md:1")
        keyword = run([str(tarsctl), "search", "tomatoes"], user)
        assert keyword.stdout.startswith("Garden.md:1")
        assert run([str(tarsctl), "stop"], user).returncode == 0
        assert daemon.wait(timeout=60) == 0
    finally:
        if daemon.poll() is None:
            daemon.send_signal(signal.SIGKILL)
            daemon.wait()
        log.close()
        shutil.rmtree(run_dir, ignore_errors=True)

    removed = run([uv, "tool", "uninstall", "tars"], env)
    assert removed.returncode == 0, removed.stderr
    assert not tarsd.exists() and not tarsctl.exists()


def test_pip_settings_become_uv_settings():
    listing = """\
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/wheels'
global.index-url='https://global.example/simple'
install.index-url='https://install.example/simple'
:env:.find-links='/opt/wheels /srv/wheels'
:env:.default-timeout='180'
user.trusted-host='mirror.local\\nother.local'
"""
    settings = pip_settings(listing)
    assert settings["index-url"] == "https://install.example/simple"  # install's section beats global
    assert settings["find-links"] == "/opt/wheels /srv/wheels"  # PIP_FIND_LINKS beats the files
    uv = uv_env_from_pip_settings(settings, env={"UV_INSECURE_HOST": "mine"})
    assert uv == {
        "UV_DEFAULT_INDEX": "https://install.example/simple",
        "UV_INDEX": "file:///opt/pypi/simple file:///opt/pypi-more/simple",
        "UV_INDEX_STRATEGY": "unsafe-best-match",
        "UV_FIND_LINKS": "/opt/wheels,/srv/wheels",
        "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
    }
    assert uv_env_from_pip_settings({}, env={}) == {}
