"""Atomic updates of files the user edits too (memory files, feedback, session logs).

An update re-reads the file, applies the change, writes a temp file beside it (fsynced) and
puts it in place in one step, if the file still holds the version (the same bytes) the change was made from;
otherwise the change is made again on the new version. A check followed by a rename leaves
a gap of microseconds in which an editor's save is overwritten unseen. Where the system can
(Linux renameat2 RENAME_EXCHANGE, macOS renamex_np RENAME_SWAP) the temp file is therefore
*swapped* with the original, and the version swapped out is checked: if an editor's save
landed in the gap, it is swapped straight back and the change made again on it, so nothing
of it is lost. For those microseconds our version stood at the path: the caller is told
(``displaced``), and the memory write guard watches that save's lines (tarsd/memory/guard.py).
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal, NamedTuple

log = logging.getLogger(__name__)

Repair = Callable[[str, os.stat_result | None], str]  # (text of a version, its stat) -> text
Written = Callable[[os.stat_result], None]  # the stat of the version written
# (the version a change was made from, an editor's save swapped out for a moment, the version
# that stood in its place meanwhile): see atomic_update
Displaced = Callable[[str, str, str], None]


def read_text(path: Path) -> str:
    """User-managed files are edited outside tars: never fail on their encoding."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def read_version(path: Path) -> tuple[str, os.stat_result | None]:
    """The text of a file and the stat of that very version (one open file): ("", None) if missing."""
    raw, st = _read_raw(path)
    return _decode(raw), st


def _read_raw(path: Path | str) -> tuple[bytes | None, os.stat_result | None]:
    try:
        with open(path, "rb") as handle:
            return handle.read(), os.fstat(handle.fileno())
    except FileNotFoundError:
        return None, None


def _decode(raw: bytes | None) -> str:
    return "" if raw is None else raw.decode("utf-8", errors="replace")


def _exchange_function() -> Callable[[str, str], None] | None:
    """Atomically swap two paths, where the C library offers it."""
    libc = _libc
    if libc is None:
        return None
    if sys.platform.startswith("linux") and hasattr(libc, "renameat2"):
        call = libc.renameat2
        call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        at_fdcwd, rename_exchange = -100, 2

        def exchange(a: str, b: str) -> None:
            if call(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) != 0:
                code = ctypes.get_errno()
                raise OSError(code, os.strerror(code), b)

        return exchange
    if sys.platform == "darwin" and hasattr(libc, "renamex_np"):
        call = libc.renamex_np
        call.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint]
        rename_swap = 0x2

        def exchange(a: str, b: str) -> None:
            if call(os.fsencode(a), os.fsencode(b), rename_swap) != 0:
                code = ctypes.get_errno()
                raise OSError(code, os.strerror(code), b)

        return exchange
    return None


def _open_libc() -> ctypes.PyDLL | None:
    # PyDLL, not CDLL: its calls keep the GIL. From the swap to its check (and the swap back),
    # no other thread of tarsd runs, so the version swapped in is exposed for microseconds,
    # not for a thread switch (5 ms): an editor reading the file then would save without
    # its own last change.
    try:
        libc = ctypes.PyDLL(None, use_errno=True)
    except OSError:
        return None
    libc.open.argtypes, libc.open.restype = [ctypes.c_char_p, ctypes.c_int], ctypes.c_int
    libc.read.argtypes, libc.read.restype = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t], ctypes.c_ssize_t
    libc.close.argtypes, libc.close.restype = [ctypes.c_int], ctypes.c_int
    return libc


def _read_holding_gil(path: str) -> bytes | None:
    """A file's bytes, read without letting another thread run (None: it cannot be opened)."""
    assert _libc is not None
    fd = _libc.open(os.fsencode(path), os.O_RDONLY | os.O_CLOEXEC)
    if fd < 0:
        return None
    try:
        buffer, chunks = ctypes.create_string_buffer(1 << 16), []
        while (count := _libc.read(fd, buffer, len(buffer))) > 0:
            chunks.append(buffer.raw[:count])
        return b"".join(chunks)
    finally:
        _libc.close(fd)


_libc = _open_libc()
_exchange = _exchange_function()
# Filesystems that refused the swap (some network and FUSE mounts): plain renames there.
_NO_EXCHANGE = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EPERM}


# Obsidian (like Node's fs.writeFile) saves in place: it truncates the file, then writes it.
# A read in between sees an empty or half-written file; made the base of a change and swapped
# in, it would take the user's whole file away while the editor's write went to the inode
# swapped out. So a version someone else changed in the last HOT_SECONDS is taken once two
# reads SETTLE_SECONDS apart agree (EMPTY_SETTLE_SECONDS for an empty one), or once the second
# read finds another inode (a save by rename, which is whole); after SETTLE_LIMIT_SECONDS of
# neither, the update fails rather than guess. The version tars last wrote or took is taken at once.
HOT_SECONDS = 2.0
SETTLE_SECONDS = 0.03
EMPTY_SETTLE_SECONDS = 0.5
SETTLE_LIMIT_SECONDS = 10.0
Stamp = tuple[int, int, int]  # (inode, mtime_ns, size)
_last_seen: dict[str, Stamp] = {}  # path -> the version tars last wrote or took as a base


def _stamp(st: os.stat_result) -> Stamp:
    return st.st_ino, st.st_mtime_ns, st.st_size


def _settled(path: Path, raw: bytes | None, st: os.stat_result | None) -> tuple[bytes | None, os.stat_result | None]:
    deadline = time.monotonic() + SETTLE_LIMIT_SECONDS
    while raw is not None and st is not None and _changed_lately_by_someone_else(path, st):
        if time.monotonic() > deadline:  # never build on a version that may be half written
            raise OSError(
                f"{path} kept changing in place for {SETTLE_LIMIT_SECONDS:g} s (another program is saving it "
                "over and over); nothing was written: try again once it stops"
            )
        time.sleep(SETTLE_SECONDS if raw else EMPTY_SETTLE_SECONDS)
        again, st_again = _read_raw(path)
        whole = again == raw or (st_again is not None and st_again.st_ino != st.st_ino)  # unchanged, or a rename
        raw, st = again, st_again
        if whole:
            break
    if st is not None:
        _last_seen[str(path)] = _stamp(st)
    return raw, st


def _changed_lately_by_someone_else(path: Path, st: os.stat_result) -> bool:
    return _last_seen.get(str(path)) != _stamp(st) and time.time() - st.st_mtime < HOT_SECONDS


# An editor saving every few milliseconds can beat a write a few times in a row (each takes an
# fsync, ~4 ms here); after the first collisions a short random pause breaks the rhythm.
ATTEMPTS = 40


def atomic_update(
    path: Path,
    change: Callable[[str], str | None],
    attempts: int = ATTEMPTS,
    *,
    repair: Repair | None = None,
    written: Written | None = None,
    displaced: Displaced | None = None,
) -> str | None:
    """Apply ``change`` to the file's current text and put the result in place atomically.

    ``repair`` (optional) first sees every version read, with its stat, and may change it
    (the write guard puts back lines a write race lost); ``change`` then makes the caller's
    change, or returns None for none. Nothing is written when neither changed anything.
    If the file changed on disk meanwhile, both are applied again to the new version.
    ``written`` gets the stat of the version written. ``displaced`` is told when an editor's
    save landed between the check and the swap and was swapped back: for those microseconds
    our version stood at the path, and an editor that read it then may save a copy without
    its own last change (the write guard watches for that). Returns the text written, or None.
    The file's folder must exist: the caller makes it (vault_root.make_folders never makes the
    vault folder itself)."""
    # A version is known by its bytes, not its stat: on a coarse clock an editor's save can
    # come back with the inode, mtime and size of the version it replaced.
    expected, st = _settled(path, *_read_raw(path))  # what should be at `path` when ours goes in; None: no file
    text = _decode(expected)
    for attempt in range(attempts):
        if attempt >= 2:
            time.sleep(random.uniform(0.0, 0.002 * min(attempt, 5)))
        base = repair(text, st) if repair is not None else text
        new = change(base)
        if new is None:
            if base == text:
                return None
            new = base
        temp = None
        try:
            try:
                # A dot-name keeps the temp file out of the index and the watcher's way.
                fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tars-tmp", dir=path.parent)
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(new)
                    handle.flush()
                    if st is not None:
                        os.fchmod(handle.fileno(), st.st_mode & 0o777)
                    os.fsync(handle.fileno())
                    ours = os.fstat(handle.fileno())
            except OSError as exc:  # name the file the user knows, not the temp file
                raise OSError(exc.errno, exc.strerror, str(path)) from exc
            placed = _put_in_place(temp, path, expected, new.encode("utf-8"))
            if placed is True:
                _last_seen[str(path)] = _stamp(ours)
                if written is not None:
                    written(ours)
                return new
            if placed.displaced is not None and displaced is not None:
                displaced(_decode(expected), _decode(placed.displaced), new)
            expected, st = _settled(path, placed.raw, placed.st)  # someone else's version is there: start again from it
            text = _decode(expected)
        finally:
            if temp is not None and os.path.exists(temp):
                os.unlink(temp)
    raise OSError(f"{path} kept changing while tars tried to update it; try again")


class _Found(NamedTuple):
    """Another version than the one expected, found at the path (and left there)."""

    raw: bytes | None  # its bytes; None: no file
    st: os.stat_result | None
    displaced: bytes | None = None  # an editor's save that our swap put aside for a moment


def _found(path: Path, displaced: bytes | None = None) -> _Found:
    return _Found(*_read_raw(path), displaced)


def _put_in_place(temp: str, path: Path, expected: bytes | None, ours: bytes) -> _Found | Literal[True]:
    """True when ``temp`` (holding ``ours``) replaced the version ``expected`` (None: no file);
    otherwise the version found in its place, which stays in place."""
    global _exchange
    if expected is None:
        try:
            os.link(temp, path)  # create, never overwrite one made meanwhile
            return True
        except FileExistsError:
            return _found(path)
    # Saved meanwhile (most collisions, during our write and fsync): nothing is swapped.
    current = _read_holding_gil(str(path)) if _exchange is not None else _read_raw(path)[0]
    if current != expected:
        return _found(path)
    if _exchange is not None:
        try:
            _exchange(temp, str(path))
        except OSError as exc:
            if exc.errno == errno.ENOENT:  # deleted meanwhile: create it again
                return _Found(None, None)
            if exc.errno not in _NO_EXCHANGE:
                raise
            log.info("atomic swap not supported for %s (%s): using a rename", path, exc.strerror)
            _exchange = None
        else:
            theirs = _read_holding_gil(temp)
            if theirs == expected:
                return True
            # An editor saved in the microseconds between the check and the swap: its version
            # was swapped out. Swap it straight back, and start again from it.
            _exchange(temp, str(path))
            if _read_holding_gil(temp) != ours:
                # It saved once more before the swap back, over ours: that newer save came back
                # to temp. Put it in place instead: the newest save wins, as it would without tars.
                _exchange(temp, str(path))
            return _found(path, displaced=theirs)
    os.replace(temp, path)
    return True
