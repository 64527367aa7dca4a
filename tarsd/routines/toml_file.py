"""A TOML file the user owns and tars writes too (the routines file): read only when it is a
regular file, written in one step through a symlink, each write a compare and swap with any other
writer (an editor, a second tarsctl) that keeps what they wrote.

- Read: through a symlink, from a regular file only, never blocking (a FIFO, a folder or a device
  there is a FileProblem that names it), at most MAX_FILE_BYTES.
- Write: the whole file as TOML into a temp file beside the file a symlink points to (0600,
  fsynced), renamed over it; a failed write (a full disk) leaves the old file as it was.
- Compare and swap: right before the rename the file is read again; when it changed since it
  was read, the change is made again on what is there now. An edit written into the old file
  just after the rename (an editor appending to the file it had open) is noticed on that file and
  brought in, entry by entry.
"""

from __future__ import annotations

import os
import secrets
import stat
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import tomli_w

MAX_FILE_BYTES = 16 * 1024 * 1024  # a file larger than this is not read (10,000 routines are ~2 MB)
_TRIES = 50  # a write made again this often because the file kept changing under it gives up
Result = TypeVar("Result")


class FileProblem(ValueError):
    """The file cannot be read, parsed or written; ``hint`` says what to do."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.hint = hint


@dataclass
class _Read:
    """The file as one read saw it: its bytes, its identity, and the open file (to
    notice a write into it after it was replaced)."""

    data: bytes
    stamp: tuple[int, int, int] | None  # (inode, mtime_ns, size); None: there was no file
    fd: int | None

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class TomlFile:
    """The file at ``path``; ``entry_tables`` are the tables whose entries an edit caught late is
    merged by ([routine.NAME], [reminder.NAME]); ``redone`` counts the writes made again."""

    def __init__(self, path: Path, entry_tables: tuple[str, ...]):
        self.path = Path(path)
        self.entry_tables = entry_tables
        self.redone = 0

    def read(self) -> dict:
        """The file as TOML; {} when it is not there."""
        read = self._read()
        read.close()
        return self._parse(read.data)

    def _read(self) -> _Read:
        """The file's bytes, read only from a regular file (through a symlink), never blocking: a
        FIFO, a folder or a device there is a FileProblem that says so."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return _Read(b"", None, None)
        except OSError as exc:
            raise FileProblem(f"cannot read {self.path}: {exc.strerror or exc}", "check the file's permissions") from exc
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise FileProblem(f"{self.path} is not a regular file ({_kind(info.st_mode)})", _NOT_A_FILE)
            data = _read_all(fd)
            if max(info.st_size, len(data)) > MAX_FILE_BYTES:
                raise FileProblem(f"{self.path} is over {MAX_FILE_BYTES:,} bytes, more than this file may be", _TOO_LARGE)
        except OSError as exc:
            os.close(fd)
            raise FileProblem(f"cannot read {self.path}: {exc.strerror or exc}", "check the file") from exc
        except BaseException:
            os.close(fd)
            raise
        return _Read(data, (info.st_ino, info.st_mtime_ns, info.st_size), fd)

    def _parse(self, data: bytes) -> dict:
        try:
            return tomllib.loads(data.decode("utf-8", errors="replace"))
        except tomllib.TOMLDecodeError as exc:
            raise FileProblem(f"{self.path} is not valid TOML: {exc}", "fix the line named, or restore the file") from exc

    def change(self, apply: Callable[[dict], Result]) -> Result:
        """Read the file, ``apply`` a change to it (what it raises changes nothing), write it
        back: a compare and swap with any other writer (the module's docstring). The caller keeps
        its own threads to one change at a time."""
        late: dict | None = None  # an edit that reached the replaced file after our write: still to bring in
        result: Result | None = None
        for _ in range(_TRIES):
            read = self._read_for_writing()
            try:
                raw = self._parse_for_writing(read.data)
                if late is None:
                    result = apply(raw)
                else:
                    _merge(raw, late)  # our change is in the file already
                outcome, replaced = self._write(raw, read)
            finally:
                read.close()
            if outcome == _WRITTEN:
                return result  # type: ignore[return-value]  # apply ran in the first round that got this far
            self.redone += 1
            if outcome == _LATE:
                late = _merged_edits(self.entry_tables, late, self._parse_quietly(read.data), self._parse_quietly(replaced))
        raise FileProblem(f"{self.path} kept changing while tars wrote it; nothing was changed", "try again once it is still")

    def _parse_quietly(self, data: bytes) -> dict:
        try:
            return self._parse(data)
        except FileProblem:
            return {}  # half an edit: nothing of it can be brought in

    def _read_for_writing(self) -> _Read:
        """The file as it is now; a file that cannot be read is never written over."""
        try:
            return self._read()
        except FileProblem as exc:
            raise FileProblem(f"nothing was changed: {exc}", exc.hint) from exc

    def _parse_for_writing(self, data: bytes) -> dict:
        try:
            return self._parse(data)
        except FileProblem as exc:
            raise FileProblem(f"nothing was changed: {exc}", exc.hint) from exc

    def _write(self, raw: dict, read: _Read) -> tuple[str, bytes]:
        """The whole file at once, through a symlink to the file it points to: a temp file beside
        that (0600, fsynced), renamed over it, unless the file is no longer what ``read`` saw
        (_CHANGED). After the rename, a write into the file replaced (an editor appending to it)
        is _LATE, with that file's bytes. On any failure the temp file goes and the old file stays
        as it was."""
        raw = {table: entries for table, entries in raw.items() if not (table in self.entry_tables and entries == {})}
        data = tomli_w.dumps(raw).encode("utf-8")
        target = Path(os.path.realpath(self.path))
        temp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                if not self._unchanged(read):
                    temp.unlink()
                    return _CHANGED, b""
                os.replace(temp, target)
            except BaseException:
                temp.unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise FileProblem(
                f"cannot write {self.path}: {exc.strerror or exc}; nothing was changed",
                "free some disk space or fix the folder's permissions, then try again",
            ) from exc
        _sync_folder(target.parent)
        if read.fd is not None and read.stamp is not None:
            info = os.fstat(read.fd)
            if (info.st_mtime_ns, info.st_size) != read.stamp[1:]:
                return _LATE, _read_all(read.fd)
        return _WRITTEN, b""

    def _unchanged(self, read: _Read) -> bool:
        """The file is still what ``read`` saw (the same file, the same bytes)."""
        try:
            now = self._read()
        except FileProblem:
            return False  # swapped for something that is not a file: the next try says what
        now.close()
        return now.stamp == read.stamp and now.data == read.data


_WRITTEN, _CHANGED, _LATE = "written", "changed", "late"
_NOT_A_FILE = "put a TOML file there (a symlink to one is fine), or set [routines] file to where it is"
_TOO_LARGE = "move what does not belong in it out of it"


def _merged_edits(tables: tuple[str, ...], earlier: dict | None, before: dict, after: dict) -> dict:
    """What an edit changed from ``before`` to ``after``, entry by entry in ``tables`` (other keys
    whole), added to ``earlier`` such edits: {(table, name): entry, or None when removed; (key,): value}."""
    edits = dict(earlier or {})
    for key in before.keys() | after.keys():
        if key in tables and isinstance(before.get(key, {}), dict) and isinstance(after.get(key, {}), dict):
            old, new = before.get(key, {}), after.get(key, {})
            for name in old.keys() | new.keys():
                if old.get(name) != new.get(name):
                    edits[(key, name)] = new.get(name)
        elif before.get(key) != after.get(key):
            edits[(key,)] = after.get(key)
    return edits


def _merge(raw: dict, edits: dict) -> None:
    for where, value in edits.items():
        if len(where) == 2:
            table = raw.setdefault(where[0], {})
            if isinstance(table, dict):
                if value is None:
                    table.pop(where[1], None)
                else:
                    table[where[1]] = value
        elif value is None:
            raw.pop(where[0], None)
        else:
            raw[where[0]] = value


def _read_all(fd: int) -> bytes:
    chunks, offset = [], 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
        if offset > MAX_FILE_BYTES:
            break
    return b"".join(chunks)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO: reading it would wait for a writer"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"


def _sync_folder(folder: Path) -> None:
    """The rename itself survives a power cut once the folder is synced (where the system allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
