"""scripts/test.sh from a clean clone: its own editable .venv (scripts/demo.sh has .venv-demo),
installed once and again only when pyproject.toml changes, each step said, no setuptools warning
block, the test count first, a line for each long test file with its CPU, and the run's CPU. Real bash, a real venv, real pip."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from harness.checkout import clean_clone

BASE_PYTHON = os.path.realpath(getattr(sys, "_base_executable", "") or sys.executable)


def test_test_sh_installs_once_shows_progress_and_no_setuptools_warning(tmp_path: Path):
    clone = clean_clone(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PYTHON"] = BASE_PYTHON
    # One quick test of the clone's own suite, on one process; every file gets its line (0 s).
    command = ["bash", str(clone / "scripts" / "test.sh"), "-q", "-n", "0", "--file-seconds", "0"]
    command += ["tests/install/test_scripts.py", "-k", "without_a_suitable_python"]
    first = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    shown = first.stdout + first.stderr
    assert first.returncode == 0, shown
    said = [line for line in first.stderr.splitlines() if line.startswith("test: ")]
    assert said[:4] == [
        "test: checking the Python and ./.venv",
        "test: upgrading pip in .venv",
        "test: installing tars (editable) with its test extras into .venv (a minute or two the first time)",
        "test: running the tests: .venv/bin/python -m pytest " + " ".join(command[2:]),
    ], said
    # The install said nothing more (a recent pip shows setuptools' warnings about an editable install).
    assert "Editable installation" not in shown and "*****" not in shown and "BuildBackendWarning" not in shown, shown
    lines = first.stdout.splitlines()
    assert "1 test in 1 file; a line for each file that takes over 0 s" in lines, first.stdout
    assert any(line.startswith("tests/install/test_scripts.py: 1 test in ") and line.endswith("; 1/1 tests done") for line in lines)
    # With the CPU the file spent (its test runs the script: a bash and a Python at least), and the run's.
    [file_line] = [line for line in lines if line.startswith("tests/install/test_scripts.py: ")]
    assert re.search(r" in \d+ s, \d+ s of CPU; ", file_line), file_line
    [cpu_line] = [line for line in lines if line.startswith("CPU spent by the tests and the processes they ran: ")]
    assert "the most: tests/install/test_scripts.py " in cpu_line, cpu_line
    assert lines[-1].startswith("1 passed"), first.stdout  # pytest's closing line, as CI reads it
    assert not (clone / ".venv-demo").exists()

    again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "test: tars with its test extras is installed in .venv (editable; pyproject.toml unchanged): nothing to install" in again.stderr
    assert "pip" not in again.stderr, again.stderr
