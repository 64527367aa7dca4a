"""Writing notes into a temp vault, and a small real file system to fill (a real "disk full")."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest


def write(vault: Path, rel: str, text: str) -> Path:
    """Write a note (dedented), creating folders; returns its path."""
    path = vault / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


@contextlib.contextmanager
def tmpfs(mount_point: Path, size: str = "4m"):
    """A small tmpfs mounted at ``mount_point``: a real "disk full" that a test can fill and free."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root (CI runs as root): the disk-full behaviour is not tested here")
    mount_point.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)], capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({result.stderr.strip()}): the disk-full behaviour is not tested here")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(directory: Path) -> Path:
    """Fill the file system holding ``directory`` to the last byte; returns the filler file."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 16, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler
