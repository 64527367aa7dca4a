"""The socket directory rule (tarsctl.protocol.socket_dir_problem) on real directories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tarsctl.socket_path import socket_dir_problem


@pytest.fixture
def base(tmp_path: Path) -> Path:
    folder = tmp_path / "base"
    folder.mkdir(mode=0o755)
    return folder


def folder(parent: Path, name: str, mode: int) -> Path:
    path = parent / name
    path.mkdir()
    path.chmod(mode)  # mkdir's mode is filtered by the umask
    return path


def test_a_private_folder_of_ours_is_fine(base: Path):
    assert socket_dir_problem(folder(base, "run", 0o700) / "tarsd.sock") is None
    assert socket_dir_problem(folder(base, "readable", 0o755) / "tarsd.sock") is None  # others may read, not write


def test_a_folder_that_does_not_exist_yet_is_fine_tarsd_creates_it(base: Path):
    assert socket_dir_problem(base / "later" / "deeper" / "tarsd.sock") is None


def test_group_or_world_writable_folders_are_refused_with_chmod(base: Path):
    for mode, who in ((0o770, "its group"), (0o777, "everyone")):
        run = folder(base, f"run-{mode:o}", mode)
        problem = socket_dir_problem(run / "tarsd.sock")
        assert problem is not None and f"writable by {who}" in problem and f"chmod 700 {run}" in problem


def test_sticky_shared_folders_only_above_a_private_folder(base: Path):
    shared = folder(base, "shared", 0o1777)
    problem = socket_dir_problem(shared / "tarsd.sock")
    assert problem is not None and "private subdirectory" in problem and f"{shared}/tars-{os.getuid()}/tarsd.sock" in problem
    assert socket_dir_problem(folder(shared, "mine", 0o700) / "tarsd.sock") is None
    assert socket_dir_problem(shared / "not yet" / "tarsd.sock") is None


def test_a_world_writable_parent_without_the_sticky_bit_lets_others_swap_the_folder(base: Path):
    open_parent = folder(base, "open", 0o777)
    mine = folder(open_parent, "mine", 0o700)
    problem = socket_dir_problem(mine / "tarsd.sock")
    assert problem is not None and "without the sticky bit" in problem
    assert socket_dir_problem(open_parent / "missing" / "tarsd.sock") is not None


def test_not_a_folder(base: Path):
    (base / "file").write_text("x")
    problem = socket_dir_problem(base / "file" / "tarsd.sock")
    assert problem is not None and "is not a directory" in problem


def test_folders_and_symlinks_owned_by_someone_else(base: Path):
    if os.geteuid() != 0:  # an ordinary account cannot give folders away, but system folders are not its own
        problem = socket_dir_problem(Path("/usr/share/tarsd.sock"))
        assert problem is not None and "belongs to uid 0" in problem
        return
    theirs = folder(base, "theirs", 0o700)
    os.chown(theirs, 65534, 65534)
    problem = socket_dir_problem(theirs / "tarsd.sock")
    assert problem is not None and "belongs to uid 65534" in problem

    target = folder(base, "target", 0o700)
    link = base / "planted"
    link.symlink_to(target)
    assert socket_dir_problem(link / "tarsd.sock") is None  # our own link to our own folder
    os.lchown(link, 65534, 65534)
    problem = socket_dir_problem(link / "tarsd.sock")
    assert problem is not None and "symlink owned by uid 65534" in problem
