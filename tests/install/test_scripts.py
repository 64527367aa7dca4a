"""scripts/venv.sh (used by demo.sh and test.sh): a .venv made by another Python is rebuilt, and a
missing Python is named with how to get it. demo.sh from a clean clone: its own .venv-demo, an
install only when the checkout changed (test_test_script.py: test.sh). Real bash, real venvs,
real pip, in a temp folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from harness.checkout import clean_clone
from harness.paths import REPO

VENV_SH = REPO / "scripts" / "venv.sh"
BASE_PYTHON = os.path.realpath(getattr(sys, "_base_executable", "") or sys.executable)
WANT = f"{sys.version_info[0]}.{sys.version_info[1]} {BASE_PYTHON}"


def tars_venv(folder: Path, **env: str) -> subprocess.CompletedProcess:
    # PYTHON only as each test sets it: .ci/run sets it for the whole suite, to pick the Python under test.
    inherited = {name: value for name, value in os.environ.items() if name != "PYTHON"}
    return subprocess.run(
        ["/bin/bash", "-c", f'set -euo pipefail; source "{VENV_SH}"; tars_venv'],
        cwd=folder,
        env={**inherited, **env},
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
    assert "tars needs Python 3.11, 3.12 or 3.13; found: python3=3.9." in done.stderr
    assert "sudo apt install python3 python3-venv" in done.stderr and "brew install python@3.12" in done.stderr
    assert not (tmp_path / ".venv").exists()

    done = tars_venv(tmp_path, PYTHON=str(tmp_path / "no-such-python3.12"))
    assert done.returncode == 1 and f"PYTHON={tmp_path / 'no-such-python3.12'} is not usable" in done.stderr


def test_demo_with_no_reachable_index_fails_fast_and_names_it(tmp_path: Path):
    from harness.user_env import closed_port_url

    clone = clean_clone(tmp_path)
    index = closed_port_url() + "/simple"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    # Only the unreachable index: no pip.conf, no local wheel folders.
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=index, PYTHON=BASE_PYTHON, HOME=str(tmp_path / "home"))
    started = time.monotonic()
    done = subprocess.run(["bash", str(clone / "scripts" / "demo.sh")], env=env, capture_output=True, text=True, timeout=300)
    took = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("demo: ")]
    # Each step is named before it runs: the silent first minute is gone.
    assert said[0] == "demo: checking the Python and ./.venv-demo"
    assert f"demo: upgrading pip in .venv-demo (from {index})" in said
    assert f"demo: installing tars and its dependencies into .venv-demo (from {index}; a minute or two the first time)" in said
    assert said[-2].startswith(f"demo: pip could not install tars: the package index {index} cannot be reached")
    assert "PIP_INDEX_URL" in said[-1]
    assert took < 120, f"pip took {took:.0f} s to give up"  # its defaults: 5 retries with back-off per request


# tarsd's log line once its socket is up ("tarsd 0.1.0 serving VAULT on SOCKET (database ...)").
SERVING = "INFO tarsd: tarsd "


class Demo:
    """scripts/demo.sh running in the background, its stderr lines kept with the time each came."""

    def __init__(self, command: list[str], env: dict[str, str]):
        self.started = time.monotonic()
        self.process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines: list[tuple[float, str]] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stderr:
            self.lines.append((time.monotonic() - self.started, line.rstrip("\n")))

    def said(self, text: str) -> float | None:
        """Seconds from the start until a line with ``text`` came; None: not yet."""
        return next((at for at, line in self.lines if text in line and (text != SERVING or " serving " in line)), None)

    def stop(self) -> str:
        self.process.terminate()
        self.process.wait(timeout=60)
        self.reader.join(timeout=10)
        return "\n".join(line for _, line in self.lines)


def test_demo_serves_a_copy_of_the_example_vault_and_leaves_the_checkout_alone(request, tmp_path: Path, model_dir: Path):
    from harness.daemon import wait_for

    clone = clean_clone(tmp_path)
    run_dir = Path(tempfile.mkdtemp(prefix="tars-demo-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(run_dir, ignore_errors=True))
    cache = tmp_path / "cache"
    env = {
        **os.environ,
        "PYTHON": BASE_PYTHON,
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(cache),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "TARS_SOCKET": str(run_dir / "tarsd.sock"),
        "TARS_MODEL_DIR": str(model_dir),
    }
    command = ["bash", str(clone / "scripts" / "demo.sh")]
    tarsctl = clone / ".venv-demo" / "bin" / "tarsctl"
    copy = cache / "tars" / "demo-vault"
    demo = Demo(command, env)
    try:
        # The first run installs into a new .venv-demo: pip from the machine's indexes, minutes on a slow box.
        wait_for(lambda: demo.process.poll() is not None or demo.said(SERVING), "the demo's tarsd to start", deadline=600)
        assert demo.process.poll() is None, demo.stop()
        answers = lambda: subprocess.run([str(tarsctl), "status"], env=env, capture_output=True).returncode == 0  # noqa: E731
        wait_for(answers, "tarsd to answer")
        status = json.loads(subprocess.run([str(tarsctl), "status", "--json"], env=env, capture_output=True, text=True).stdout)
        assert status["vault"] == str(copy)
        remembered = subprocess.run([str(tarsctl), "remember", "the demo test was here"], env=env, capture_output=True, text=True)
        assert remembered.returncode == 0, remembered.stderr
        assert "the demo test was here" in (copy / "Memory.md").read_text(encoding="utf-8")
        changed = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True).stdout
        assert changed == "", changed  # examples/vault in the checkout is as it was; .venv-demo is ignored
    finally:
        stderr = demo.stop()
    assert f"demo: copying examples/vault to {copy} (the demo never edits the checkout)" in stderr
    assert "demo: installing tars and its dependencies into .venv-demo" in stderr
    assert not (clone / ".venv").exists()  # test.sh's environment is another one: neither undoes the other's install

    # Nothing changed: no pip at all, tarsd starts at once.
    demo = Demo(command, env)
    try:
        wait_for(lambda: demo.process.poll() is not None or demo.said(SERVING), "the demo's second start")
    finally:
        stderr = demo.stop()
    assert "demo: tars in .venv-demo matches the checkout: nothing to install" in stderr, stderr
    assert "pip" not in stderr and "installing" not in stderr, stderr
    assert demo.said(SERVING) is not None, stderr
    print(f"demo.sh second start: serving after {demo.said(SERVING):.2f} s")

    # A change to the code: installed again, and the new code is what runs.
    init = clone / "tarsctl" / "__init__.py"
    init.write_text(init.read_text(encoding="utf-8") + "\n# an edit\n", encoding="utf-8")
    demo = Demo(command, env)
    try:
        wait_for(lambda: demo.process.poll() is not None or demo.said(SERVING), "the demo's start after an edit", deadline=600)
    finally:
        stderr = demo.stop()
    assert "demo: installing tars and its dependencies into .venv-demo" in stderr, stderr
    installed = next((clone / ".venv-demo" / "lib").glob("python3.*/site-packages/tarsctl/__init__.py"))
    assert installed.read_text(encoding="utf-8").endswith("# an edit\n")
