"""What can go wrong with the index database, in the user's words: StoreError (the database
cannot be used) and explain (an apsw or OS failure turned into what it means and what to do)."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import apsw


class StoreError(Exception):
    """The database cannot be used; the message says why and what to do."""


def explain(exc: BaseException, db_path: Path) -> str:
    """What a database failure means for the user and what to do, instead of apsw's words."""
    if isinstance(exc, apsw.FullError) or (isinstance(exc, OSError) and exc.errno == errno.ENOSPC):
        try:
            free = f"{shutil.disk_usage(db_path.parent).free / 1e6:.1f} MB free"
        except OSError:
            free = "free space unknown"
        return (
            f"the disk holding the index {db_path} is full ({free}): free some space, or set [index] db_path "
            "to another disk; tars retries on its own"
        )
    if isinstance(exc, (apsw.BusyError, apsw.LockedError)):
        return f"the index {db_path} is locked by another program: close it (an open sqlite3 shell?); tars retries on its own"
    if isinstance(exc, apsw.CantOpenError):
        return f"cannot open the index {db_path} (too many open files, or the folder is gone): {exc}; tars retries on its own"
    if isinstance(exc, apsw.ReadOnlyError):
        return f"the index {db_path} is read-only: make it writable or set [index] db_path elsewhere"
    if isinstance(exc, (apsw.CorruptError, apsw.NotADBError)):
        return f"the index {db_path} is damaged ({exc}): stop tarsd, delete the file and start again (it is rebuilt from the vault)"
    return f"{type(exc).__name__}: {exc}"
