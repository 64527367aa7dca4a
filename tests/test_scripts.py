"""scripts/venv.sh (used by demo.sh and test.sh): a .venv made by another Python is rebuilt, and a
missing Python is named with how to get it. Real bash, real venvs, in a temp folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO

VENV_SH = REPO / "scripts" / "venv.sh"
BASE_PYTHON = os.path.realpath(getattr(sys, "_base_executable", "") or sys.executable)
WANT = f"{sys.version_info[0]}.{sys.version_info[1]} {BASE_PYTHON}"


def tars_venv(folder: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["/bin/bash", "-c", f'set -euo pipefail; source "{VENV_SH}"; tars_venv'],
        cwd=folder,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def identity(python: Path) -> str:
    code = 'import os, sys; print("%d.%d" % sys.version_info[:2], os.path.realpath(getattr(sys, "_base_executable", "") or sys.executable))'
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def fake_python(path: Path, version: str) -> Path:
    """An interpreter that says it is `version`: what a first run with an old python3 leaves behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        f'case "$2" in *realpath*) echo "{version} /usr/bin/python{version}" ;; *sys.exit*) exit 1 ;; *) echo {version} ;; esac\n'
    )
    path.chmod(0o755)
    return path


def test_a_venv_made_by_an_older_python_is_rebuilt_then_kept(tmp_path: Path):
    fake_python(tmp_path / ".venv" / "bin" / "python", "3.9")
    done = tars_venv(tmp_path, PYTHON=BASE_PYTHON)
    assert done.returncode == 0, done.stderr
    assert f"rebuilding .venv: it was made by 3.9 /usr/bin/python3.9; tars now uses Python {WANT}" in done.stderr
    assert identity(tmp_path / ".venv" / "bin" / "python") == WANT
    assert (tmp_path / ".venv" / "bin" / "pip").exists()

    marker = tmp_path / ".venv" / "kept"
    marker.touch()
    again = tars_venv(tmp_path, PYTHON=BASE_PYTHON)
    assert again.returncode == 0 and "rebuilding" not in again.stderr and marker.exists()


def test_a_venv_whose_python_is_gone_is_rebuilt(tmp_path: Path):
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to("/nonexistent/python3.10")
    done = tars_venv(tmp_path, PYTHON=BASE_PYTHON)
    assert done.returncode == 0, done.stderr
    assert "it was made by a Python that no longer runs" in done.stderr
    assert identity(tmp_path / ".venv" / "bin" / "python") == WANT


def test_without_a_suitable_python_it_says_which_one_is_needed(tmp_path: Path):
    old = fake_python(tmp_path / "bin" / "python3", "3.9")
    done = tars_venv(tmp_path, PATH=str(old.parent))  # nothing else to find
    assert done.returncode == 1
    assert "tars needs Python 3.11 or newer; found: python3=3.9." in done.stderr
    assert "sudo apt install python3 python3-venv" in done.stderr and "brew install python@3.12" in done.stderr
    assert not (tmp_path / ".venv").exists()

    done = tars_venv(tmp_path, PYTHON=str(tmp_path / "no-such-python3.12"))
    assert done.returncode == 1 and f"PYTHON={tmp_path / 'no-such-python3.12'} is not usable" in done.stderr
