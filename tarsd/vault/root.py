"""Is the vault folder still there? A vault can be moved away, deleted, or sit on a drive that
is unmounted while tarsd runs. Then the index still answers (it is all there is), but a reply
says the vault is missing, nothing is written, and the index keeps its rows: a scan of the
missing or emptied folder would otherwise delete every note from it.

The vault folder is never created by tars: writes go only into a vault folder that exists
(the folders inside it are made as needed). An unmounted drive leaves its empty mount point
behind, which exists; a vault that was a mount point when tarsd started and no longer is one
counts as missing. When the folder comes back (moved back, recreated, remounted) it is
served again: the watcher is re-armed on it and the vault rescanned (tarsd/index/watcher.py)."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

# The vaults served by this process that were mount points at start (the memory and
# session writers know only the vault's path).
_mount_points: set[str] = set()
_lock = threading.Lock()


class VaultMissing(Exception):
    """The vault folder is not there: nothing was read from it or written into it."""

    def __init__(self, message: str):
        super().__init__(message)
        self.hint = "move the vault folder back, recreate it, or mount its drive: tars serves it again on its own"


def vault_problem(vault: Path) -> str:
    """Why the vault folder cannot be used now; "" when it can."""
    try:
        st = os.stat(vault)
    except FileNotFoundError:
        return f"the vault folder {vault} is missing (moved away or deleted)"
    except OSError as exc:
        return f"the vault folder {vault} cannot be reached: {exc.strerror}"
    if not stat.S_ISDIR(st.st_mode):
        return f"the vault {vault} is no longer a folder"
    with _lock:
        was_mounted = str(vault) in _mount_points
    if was_mounted and not os.path.ismount(vault):
        return f"the vault {vault} was a mounted drive and nothing is mounted there now"
    return ""


def require_vault(vault: Path) -> None:
    """Before any write into the vault: raise VaultMissing when its folder is not there."""
    problem = vault_problem(vault)
    if problem:
        raise VaultMissing(f"{problem}: nothing was written")


def make_folders(vault: Path, folder: Path) -> None:
    """Create ``folder`` (inside the vault) and the folders above it, but never the vault
    itself: a missing vault raises VaultMissing."""
    require_vault(vault)
    current = vault
    for part in folder.relative_to(vault).parts:
        current = current / part
        try:
            current.mkdir()
        except FileExistsError:
            pass


class VaultRoot:
    """The vault folder as tarsd found it at start, checked again on demand."""

    def __init__(self, path: Path):
        self.path = path
        self.identity = _identity(path)  # (st_dev, st_ino); None while missing
        self.error = vault_problem(path)
        if os.path.ismount(path):
            with _lock:
                _mount_points.add(str(path))

    def check(self) -> str:
        """Look again: "missing" when it went away now, "back" when it is there again (the same
        folder or a new one at the path: either way its events and files must be looked at
        afresh), "" when nothing changed."""
        problem = vault_problem(self.path)
        identity = None if problem else _identity(self.path)
        was_missing, self.error = bool(self.error), problem
        if problem:
            return "" if was_missing else "missing"
        changed = identity != self.identity
        self.identity = identity
        return "back" if was_missing or changed else ""


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino
