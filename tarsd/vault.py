"""The vault on disk: which files count as notes, their memory type, and reading them safely.

The vault is edited by Obsidian, sync tools and people, so nothing here trusts it:
files vanish between listing and reading, may be binary or not UTF-8, or be huge.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .config import VaultConfig

MEMORY_TYPES = ("semantic", "procedural", "episodic", "note")

# Syncthing: "note.sync-conflict-20240101-120000-ABCDEFG.md";
# Dropbox: "note (conflicted copy 2024-01-01).md"; Obsidian Sync / others: "note (Conflicted copy).md".
_CONFLICT = re.compile(r"\.sync-conflict-\d{8}-\d{6}-[A-Z0-9]{7}|\((?:[^()]*'s )?conflicted copy[^()]*\)", re.IGNORECASE)
# Syncthing writes "~syncthing~name.tmp" (and ".syncthing.name.tmp", caught by the dot rule).
_SYNC_TEMP = re.compile(r"^~syncthing~.*\.tmp$")
# A NUL byte in the first block is the usual sign of a binary file.
_BINARY_PROBE_BYTES = 8192


@dataclass(frozen=True, slots=True)
class DiskFile:
    path: str  # relative to the vault, "/"-separated
    mtime_ns: int
    size: int


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
    if _SYNC_TEMP.match(name):
        return True
    return not name.lower().endswith(".md")


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


def walk(root: Path) -> dict[str, DiskFile]:
    """Every note under root with its stat; vanished or unreadable entries are passed over
    (a later sync sees them again)."""
    found: dict[str, DiskFile] = {}
    stack = [(str(root), "")]
    while stack:
        directory, prefix = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            rel = prefix + entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, rel + "/"))
                    continue
                if is_ignored(rel) or not entry.is_file():
                    continue
                st = entry.stat()
            except OSError:
                continue
            found[rel] = DiskFile(rel, st.st_mtime_ns, st.st_size)
    return found


def stat_note(root: Path, rel_path: str) -> DiskFile | None:
    """The stat of one note, or None if it is gone, ignored or not a regular file."""
    if is_ignored(rel_path):
        return None
    try:
        st = os.stat(root / rel_path)
    except OSError:
        return None
    if not os.path.isfile(root / rel_path):
        return None
    return DiskFile(rel_path, st.st_mtime_ns, st.st_size)


def read_note(root: Path, rel_path: str, max_bytes: int) -> NoteContent:
    """Read and decode a note. Never raises for a bad file: the problem is returned instead."""
    try:
        with open(root / rel_path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except FileNotFoundError:
        return NoteContent(None, None, "vanished before it could be read")
    except OSError as exc:
        return NoteContent(None, None, f"unreadable: {exc.strerror or exc}")
    if len(data) > max_bytes:
        return NoteContent(None, None, f"too large: over {max_bytes / 1_000_000:g} MB (raise [vault] max_file_mb to index it)")
    digest = hashlib.sha256(data).hexdigest()
    if b"\x00" in data[:_BINARY_PROBE_BYTES]:
        return NoteContent(None, digest, "binary content (NUL bytes), not a text note")
    try:
        return NoteContent(data.decode("utf-8"), digest)
    except UnicodeDecodeError:
        return NoteContent(data.decode("utf-8", errors="replace"), digest, "invalid UTF-8: bad bytes replaced with U+FFFD")
