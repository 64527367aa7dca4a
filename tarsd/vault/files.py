"""The vault on disk: which files count as notes, their memory type, and reading them safely.

The vault is edited by Obsidian, sync tools and people, so nothing here trusts it: files
vanish between listing and reading, may be binary or not UTF-8, huge, symlinks, FIFOs, or
have names that are not UTF-8.

The rule for what tars reads: only regular files whose real path is inside the vault, opened
below the vault root with no symlink followed in any folder of the path (tarsd/vault/safe_open.py),
so a folder swapped for a symlink after a check cannot redirect the read. A symlink is never
followed: one to a note inside the vault is indexed once, at the note's own path; one that
points outside the vault, a loop, a broken link, a FIFO, socket or device is recorded as
skipped, with the reason, and never opened for reading (a FIFO would block a reader forever).
A file whose name is not valid UTF-8 is skipped with the name shown escaped (rename it to
index it).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tarsd.config.settings import VaultConfig
from tarsd.vault.safe_open import NotRegularFile, SymlinkInPath, TooLarge, lstat_beneath, read_beneath

MEMORY_TYPES = ("semantic", "procedural", "episodic", "note")

# Syncthing: "note.sync-conflict-20240101-120000-ABCDEFG.md";
# Dropbox: "note (conflicted copy 2024-01-01).md"; Obsidian Sync / others: "note (Conflicted copy).md".
_CONFLICT = re.compile(r"\.sync-conflict-\d{8}-\d{6}-[A-Z0-9]{7}|\((?:[^()]*'s )?conflicted copy[^()]*\)", re.IGNORECASE)
# Syncthing writes "~syncthing~name.tmp" (and ".syncthing.name.tmp", caught by the dot rule).
_SYNC_TEMP = re.compile(r"~syncthing~.*\.tmp")
# What read_note says of a note that is no longer there to read: gone, or a symlink in its
# path since it was listed (a folder swapped for one). Neither is the note's own state: the
# indexer drops its rows and the watcher's next event brings it back.
VANISHED = "vanished before it could be read"
REDIRECTED = "a symlink took the place of the file or one of its folders since it was checked: never followed"
# A NUL byte in the first block is the usual sign of a binary file.
_BINARY_PROBE_BYTES = 8192


@dataclass(frozen=True, slots=True)
class DiskFile:
    path: str  # relative to the vault, "/"-separated; undecodable bytes shown escaped
    mtime_ns: int
    size: int
    problem: str | None = None  # set: not to be read; recorded as skipped with this reason


@dataclass(frozen=True, slots=True)
class NoteContent:
    """The bytes of a note decoded for indexing, or the reason it was not."""

    text: str | None
    content_hash: str | None
    problem: str | None = None  # why it was skipped, or what was repaired


def is_ignored(rel_path: str) -> bool:
    """True for anything that is not a note: dot-folders and dot-files (.obsidian, .trash, .git,
    iCloud ``.name.md.icloud`` stubs), sync temp files, and non-markdown files."""
    parts = rel_path.split("/")
    if any(part.startswith(".") for part in parts):
        return True
    name = parts[-1]
    if _SYNC_TEMP.fullmatch(name):
        return True
    return not name.lower().endswith(".md")


class OutsideVault(ValueError):
    """A path a client gave that is not inside the vault (or reaches out of it through a
    symlinked folder); ``hint`` says what to do."""

    def __init__(self, message: str, hint: str = "give paths inside the vault"):
        super().__init__(message)
        self.hint = hint


def vault_relative(vault: Path, path: str) -> str:
    """``path`` (absolute, or relative to the vault) as a "/"-separated path inside the vault.
    Raises OutsideVault for a path outside it, one with a NUL byte, or one inside a symlinked
    folder that leads out of the vault. The file itself is not checked here: stat_note and
    read_note never follow a symlink."""
    if "\0" in path:
        raise OutsideVault(f"the path {path!r} contains a NUL byte")
    candidate = Path(path)
    resolved = Path(os.path.normpath(candidate if candidate.is_absolute() else vault / candidate))
    try:
        rel = resolved.relative_to(vault).as_posix()
    except ValueError:
        raise OutsideVault(f"{path} is not inside the vault {vault}") from None
    real_parent = realpath(resolved.parent)
    if real_parent is None:
        raise OutsideVault(f"{path}: a folder on its path changed while it was checked (swapped for a symlink?)", "try again")
    if not real_parent.is_relative_to(vault):
        raise OutsideVault(
            f"{path} is inside a symlinked folder that leads to {real_parent}, outside the vault", "tars reads only files inside the vault"
        )
    return rel


def realpath(path: Path) -> Path | None:
    """os.path.realpath, or None while the path changes under it: a symlink on it swapped for
    a folder between realpath's lstat and its readlink raises EINVAL (syncs failed on it)."""
    try:
        return Path(os.path.realpath(path))
    except OSError:
        return None


def owned_file(vault: Path, rel: str) -> Path:
    """Where tars reads and writes a file it keeps in the vault (a memory file, a session-log
    folder): through symlinks that stay inside the vault, their target (so a write goes to
    the file, not over the link). Raises OutsideVault when it leads out of the vault: a
    symlinked Memory.md would otherwise put an outside file into every prompt, and copy it in."""
    path = Path(os.path.normpath(vault / rel))
    root = Path(os.path.realpath(vault))
    real = realpath(path)
    if real is None:
        raise OutsideVault(f"{rel}: a folder on its path changed while it was checked (swapped for a symlink?)", "try again")
    if not real.is_relative_to(root):
        raise OutsideVault(
            f"{rel} leads to {real}, outside the vault {vault}",
            f"tars keeps memory inside the vault: put the real file or folder at {path}, not a symlink "
            "(or set [memory] to a path inside the vault)",
        )
    return vault / real.relative_to(root)


def read_owned(vault: Path, path: Path) -> str:
    """The text of a file tars keeps in the vault, at ``path`` as owned_file gave it, read with
    no symlink followed below the vault (one swapped in since owned_file looked is refused,
    not followed out of the vault); "" when there is no such file. Raises OutsideVault for a
    symlink on the way or what is not a regular file (a FIFO would block the reader)."""
    rel = path.relative_to(vault).as_posix()
    try:
        data, _ = read_beneath(vault, rel)
    except FileNotFoundError:
        return ""
    except SymlinkInPath:
        raise OutsideVault(f"{rel}: {REDIRECTED}", "try again; tars reads only files inside the vault") from None
    except NotRegularFile:
        raise OutsideVault(f"{rel} is not a regular file", f"put a text file at {path}") from None
    return data.decode("utf-8", errors="replace")


def is_conflict_copy(rel_path: str) -> bool:
    return bool(_CONFLICT.search(rel_path.rsplit("/", 1)[-1]))


def memory_type(rel_path: str, config: VaultConfig) -> str:
    """Memory type from the path: exact file names, or folder prefixes ending in '/'."""
    for kind, patterns in (("semantic", config.semantic), ("procedural", config.procedural), ("episodic", config.episodic)):
        for pattern in patterns:
            if pattern.endswith("/") and rel_path.startswith(pattern):
                return kind
            if rel_path == pattern:
                return kind
    return "note"


def walk(root: Path, below: str = "") -> dict[str, DiskFile]:
    """Every note under root (or under its folder ``below``, with paths relative to that) with
    its stat, and every note-like entry tars will not read (with the reason). Symlinked folders
    are never entered: each folder is opened without following a symlink and listed only if it
    is the very folder its parent listed (a folder swapped for a symlink in between would have
    the walk list the link's target, outside the vault). Vanished or unreadable entries are
    passed over (a later sync sees them again)."""
    found: dict[str, DiskFile] = {}
    start, listed_as = str(root), None  # the root may be a symlink: the user's choice
    if below:
        try:
            st = lstat_beneath(root, below.rstrip("/"))
        except (OSError, ValueError):
            return found  # not there, or through a symlink
        if not stat.S_ISDIR(st.st_mode):
            return found
        start, listed_as = os.path.join(root, below), (st.st_dev, st.st_ino)
    base = Path(start)
    stack: list[tuple[str, str, tuple[int, int] | None]] = [(start, "", listed_as)]
    while stack:
        directory, prefix, listed_as = stack.pop()
        for name, st in _list_folder(directory, listed_as):
            rel = prefix + name
            if stat.S_ISDIR(st.st_mode):
                stack.append((os.path.join(directory, name), rel + "/", (st.st_dev, st.st_ino)))
                continue
            disk = _classify(base, rel, st)
            if disk is not None:
                found[disk.path] = disk
    return found


def _list_folder(directory: str, listed_as: tuple[int, int] | None) -> Iterator[tuple[str, os.stat_result]]:
    """The entries of a folder with their lstat, dot-entries aside, one at a time; none if it is
    gone, or is no longer the folder (device, inode) its parent listed.

    One at a time: a list of a 90,000-note folder's stat results was 60 MB, made and freed at
    every start, and what tarsd kept meanwhile held much of that memory from going back."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (os.O_NOFOLLOW if listed_as is not None else 0)
    try:
        fd = os.open(directory, flags)
    except OSError:
        return
    try:
        info = os.fstat(fd)
        if listed_as is not None and (info.st_dev, info.st_ino) != listed_as:
            return  # swapped since it was listed: the scan its change brings sees it
        with os.scandir(fd) as listing:
            for entry in listing:
                if entry.name.startswith("."):
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                yield entry.name, st
    except OSError:
        return
    finally:
        os.close(fd)


def stat_note(root: Path, rel_path: str) -> DiskFile | None:
    """The stat of one note (or the reason it is not read), or None if it is gone or not a note."""
    if is_ignored(rel_path):
        return None
    try:
        # Its folders reached without a symlink: a note inside a symlinked folder is not part of
        # the vault (the folder itself is reported), and one swapped in since the path was named
        # must not have an outside entry stat'ed, and recorded, under a vault path.
        st = lstat_beneath(root, rel_path)
    except (OSError, ValueError):
        return None
    return _classify(root, rel_path, st)


def _classify(root: Path, rel: str, st: os.stat_result) -> DiskFile | None:
    """A regular note, a note-like entry to skip with its reason, or None (not a note)."""
    path, name_problem = display_path(rel)
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        return None  # a folder, even one named like a note: the walk goes into it
    if stat.S_ISLNK(mode):
        is_folder = os.path.isdir(root / rel)
        if not is_folder and is_ignored(path):
            return None
        return DiskFile(path, st.st_mtime_ns, st.st_size, name_problem or _symlink_problem(root, rel, is_folder))
    if is_ignored(path):
        return None
    if not stat.S_ISREG(mode):
        kind = "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device or special file"
        return DiskFile(path, st.st_mtime_ns, st.st_size, f"{kind}, not a regular file: never read")
    return DiskFile(path, st.st_mtime_ns, st.st_size, name_problem)


def _symlink_problem(root: Path, rel: str, is_folder: bool) -> str:
    link = root / rel
    what = "a symlinked folder" if is_folder else "a symlink"
    try:
        target = Path(os.path.realpath(link, strict=True))
    except FileNotFoundError:
        try:
            return f"a broken symlink (to {os.readlink(link)}): nothing to read"
        except OSError:
            return "a broken symlink: nothing to read"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symlink loop: never read"
        return f"{what} that changed while it was checked: never read"  # EINVAL: swapped for a folder meanwhile
    if not target.is_relative_to(root):
        return f"{what} to {target}, outside the vault: never read (tars reads only files inside the vault)"
    inside = target.relative_to(root).as_posix()
    if is_folder:
        return f"{what} to {inside}/: not followed (its notes are indexed at their own paths)"
    if is_ignored(inside):
        return f"{what} to {inside}, which tars does not index: not followed"
    return f"{what} to {inside}: indexed there, not twice"


def display_path(rel: str) -> tuple[str, str | None]:
    """A path that can be stored and shown, and a problem when the name is not valid UTF-8
    (its bytes are shown escaped, e.g. caf\\xe9.md)."""
    try:
        rel.encode("utf-8")
        return rel, None
    except UnicodeEncodeError:
        shown = os.fsencode(rel).decode("utf-8", "backslashreplace")
        return shown, f"the file name is not valid UTF-8 ({shown}): rename it to index the note"


# Files tars itself leaves for an instant (memory.atomic_update's temp files, the watcher's
# cookies); one left behind was cut off by a kill -9.
_OWN_LITTER = re.compile(r"\..+\.tars-tmp|\.tars-sync-\d+-\d+")  # whole names (fullmatch): never a user's "x.tars-tmp\n"


def remove_litter(root: Path, older_than: float) -> list[str]:
    """Delete temp files of tars's own patterns left by a killed tarsd: those older than
    ``older_than`` (this tarsd's start; with the vault lock held, no other tarsd writes).
    Returns what was removed, relative to the vault."""
    removed = []
    for directory, folders, files in os.walk(root):
        folders[:] = [f for f in folders if f not in (".git", ".obsidian", ".trash")]
        for name in files:
            if _OWN_LITTER.fullmatch(name):
                path = Path(directory) / name
                try:
                    if path.lstat().st_mtime >= older_than:
                        continue  # being written by this tarsd right now
                    path.unlink()
                except OSError:
                    continue
                removed.append(path.relative_to(root).as_posix())
    return removed


def read_note(root: Path, rel_path: str, max_bytes: int) -> NoteContent:
    """Read and decode a note. Never raises for a bad file: the problem is returned instead.

    The file is opened below the vault root without following a symlink in any folder of its
    path or as the file itself (tarsd/vault/safe_open.py: a folder swapped for a symlink since the
    check is refused, not followed out of the vault), and without blocking (a FIFO swapped in
    since the scan opens at once); it is read only if what was opened is a regular file, and
    its size is counted on the open file."""
    try:
        data, _ = read_beneath(root, rel_path, max_bytes)
    except FileNotFoundError:
        return NoteContent(None, None, VANISHED)
    except SymlinkInPath:
        return NoteContent(None, None, REDIRECTED)
    except NotRegularFile:
        return NoteContent(None, None, "not a regular file: never read")
    except TooLarge:
        return NoteContent(None, None, f"too large: over {max_bytes / 1_000_000:g} MB (raise [vault] max_file_mb to index it)")
    except OSError as exc:
        return NoteContent(None, None, f"unreadable: {exc.strerror or exc}")
    digest = hashlib.sha256(data).hexdigest()
    if b"\x00" in data[:_BINARY_PROBE_BYTES]:
        return NoteContent(None, digest, "binary content (NUL bytes), not a text note")
    try:
        return NoteContent(data.decode("utf-8"), digest)
    except UnicodeDecodeError:
        return NoteContent(data.decode("utf-8", errors="replace"), digest, "invalid UTF-8: bad bytes replaced with U+FFFD")
