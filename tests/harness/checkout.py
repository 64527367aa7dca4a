"""A copy of the checkout as a fresh clone has it, for the tests that run the scripts in it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from harness.paths import REPO


def clean_clone(tmp_path: Path) -> Path:
    """The checkout's files as they are now (committed or not, without .venv and other ignored
    files), in a git repository of their own so that `git status` shows what a run changed."""
    clone = tmp_path / "clone"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO, capture_output=True, check=True
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        if (REPO / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, clone / name)
    commit = ["git", "-c", "user.name=test", "-c", "user.email=test@example.org", "commit", "-qm", "snapshot"]
    for command in (["git", "init", "-q"], ["git", "add", "-A"], commit):
        subprocess.run(command, cwd=clone, capture_output=True, check=True)
    return clone
