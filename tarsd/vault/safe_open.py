"""Opening a file inside the vault so that no symlink is followed on the way, in any folder of
its path, however the vault changes meanwhile.

Checking a path and then opening it leaves a gap: a vault folder swapped for a symlink out of
the vault between the two made read_note return the outside file (20 of 2,199 reads during 30 s
of swaps), and O_NOFOLLOW guards only the last component. So the file is opened relative to the
vault root, by steps that refuse a symlink: in one call with Linux's openat2 (RESOLVE_BENEATH |
RESOLVE_NO_SYMLINKS, kernel 5.6 and later); elsewhere (macOS, older kernels, a sandbox that
hides the call) folder by folder with O_NOFOLLOW | O_DIRECTORY, then the file with O_NOFOLLOW.
Either way what is read is checked on the open file (fstat), not on the path.

The root itself is opened by its path: it is the user's choice and may be a symlink
(~/Notes -> /Volumes/Notes); only what lies below it must not be.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import sys
from pathlib import Path

# Always: a symlink as the last component is refused, a FIFO opens at once instead of blocking
# the reader until a writer comes (it is then refused as not a regular file).
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class SymlinkInPath(OSError):
    """A symlink stands somewhere on the path below the root: never followed."""

    def __init__(self, rel: str):
        super().__init__(errno.ELOOP, "a symlink in its path: never followed", rel)


class NotRegularFile(OSError):
    """What the path names is a folder, FIFO, socket or device, not a regular file."""

    def __init__(self, rel: str):
        super().__init__(errno.EINVAL, "not a regular file", rel)


class TooLarge(OSError):
    """The file holds more than the bytes allowed (counted on the open file, not its stat)."""

    def __init__(self, rel: str, limit: int):
        super().__init__(errno.EFBIG, f"over {limit:,} bytes", rel)
        self.limit = limit


def parts_of(rel: str) -> list[str]:
    """The components of a "/"-separated path below the root; ValueError for one that could
    leave it or is not normalised (absolute, "..", ".", empty)."""
    parts = rel.split("/")
    if not rel or any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"not a normalised path below the vault root: {rel!r}")
    return parts


def open_beneath(root: Path | str, rel: str) -> int:
    """A read-only descriptor of ``rel`` below ``root``, opened without following a symlink
    in any of its components. Raises SymlinkInPath, FileNotFoundError, NotADirectoryError (a
    folder of the path is a file) or another OSError; the caller closes the descriptor."""
    parts = parts_of(rel)
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if _openat2 is not None:
            return _openat2(root_fd, rel)
        return _open_stepwise(root_fd, parts, rel)
    finally:
        os.close(root_fd)


def _open_stepwise(root_fd: int, parts: list[str], rel: str) -> int:
    """open_beneath one component at a time: each folder opened with O_NOFOLLOW relative to the
    one before, so a symlink swapped in anywhere makes an open fail rather than lead elsewhere."""
    dir_fd = root_fd
    try:
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            try:
                fd = os.open(part, _FLAGS if last else _FOLDER_FLAGS, dir_fd=dir_fd)
            except OSError as exc:
                # A symlink met with O_NOFOLLOW: ELOOP on Linux and macOS, EMLINK on FreeBSD, and
                # ENOTDIR on Linux with O_DIRECTORY. ENOTDIR is a symlink too unless a file stands
                # there (a swapped folder may be back by now, so it is not asked to be a link).
                if exc.errno in (errno.ELOOP, errno.EMLINK) or (exc.errno == errno.ENOTDIR and not _is_file(part, dir_fd)):
                    raise SymlinkInPath(rel) from None
                raise OSError(exc.errno, exc.strerror, rel) from None  # named by the whole path
            if dir_fd != root_fd:
                os.close(dir_fd)
            dir_fd = fd
        return dir_fd
    except BaseException:
        if dir_fd != root_fd:
            os.close(dir_fd)
        raise


def _is_file(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def lstat_beneath(root: Path | str, rel: str) -> os.stat_result:
    """The lstat of ``rel`` below ``root`` (a symlink there is described, not followed), its
    folders reached as open_beneath reaches them. Raises as open_beneath does."""
    parts = parts_of(rel)
    folder = "/".join(parts[:-1])
    fd = open_beneath(root, folder) if folder else os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)  # ENOTDIR when the folder is a file
    finally:
        os.close(fd)


def read_beneath(root: Path | str, rel: str, max_bytes: int | None = None) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file ``rel`` below ``root`` and the stat of the file read,
    opened as open_beneath opens it. Raises what open_beneath raises, NotRegularFile, or
    TooLarge when the file holds more than ``max_bytes`` (None: no limit)."""
    fd = open_beneath(root, rel)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(rel)
        limit = sys.maxsize - 1 if max_bytes is None else max_bytes
        # The first read asks for the size fstat gave and one byte more: a file that grew since
        # is read on, a block at a time, until its end or past the limit.
        data = bytearray()
        want = min(info.st_size, limit) + 1
        while len(data) <= limit and (chunk := os.read(fd, want)):
            data += chunk
            want = min(1 << 16, limit + 1 - len(data))
        if len(data) > limit:
            raise TooLarge(rel, limit)
        return bytes(data), info
    finally:
        os.close(fd)


# ---- openat2, where the kernel has it ----

_SYS_OPENAT2 = 437  # the same number on every Linux architecture (added after their tables were unified)
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _load_openat2():
    """openat2(dir_fd, rel) -> a descriptor; None where the system does not offer the call."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        syscall = ctypes.CDLL(None, use_errno=True).syscall  # CDLL: the GIL is released during the call
    except (OSError, AttributeError):
        return None
    syscall.restype = ctypes.c_long
    how = _OpenHow(_FLAGS, 0, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS)

    def call(dir_fd: int, path: bytes) -> tuple[int, int]:
        fd = syscall(ctypes.c_long(_SYS_OPENAT2), ctypes.c_int(dir_fd), path, ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
        return fd, 0 if fd >= 0 else ctypes.get_errno()

    def openat2(dir_fd: int, rel: str) -> int:
        path = os.fsencode(rel)
        for _ in range(3):  # EAGAIN: a rename elsewhere raced the lookup, and the kernel asks to retry
            fd, code = call(dir_fd, path)
            if fd >= 0:
                return fd
            if code != errno.EAGAIN:
                break
        if code == errno.ELOOP:
            raise SymlinkInPath(rel)
        raise OSError(code, os.strerror(code), rel)  # of its errno's class: FileNotFoundError, ...

    # Asked once: a kernel before 5.6 has no such call (ENOSYS), and a seccomp filter in some
    # containers refuses it (ENOSYS or EPERM). Then the stepwise walk does the same work.
    probe = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd, code = call(probe, b".")
    finally:
        os.close(probe)
    if fd >= 0:
        os.close(fd)
    elif code in (errno.ENOSYS, errno.EPERM):
        return None
    return openat2


_openat2 = _load_openat2()
