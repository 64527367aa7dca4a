"""A vault kept in step by a sync tool: which tool it is, and the conflict copies each one leaves.

When two machines change a file before the sync tool has carried either change across, the tool
keeps one version at the file's path and the other beside it under a name of its own. Each tool
names that copy its way, and ``conflict_copy`` reads each way back to the file it is a copy of:

- Syncthing: ``Memory.sync-conflict-20261127-101500-ABCDEFG.md`` (date, time, the device's short
  id; versions before 1.x leave out the id);
- Dropbox: ``Memory (conflicted copy).md``, ``Memory (Sam's conflicted copy 2026-11-27).md``; for two
  names differing only in case, ``Memory (Case Conflict).md`` and ``Memory (Case Conflict 1).md``;
- Obsidian Sync: ``Memory (Conflicted copy DEVICE 202611271015).md``, only with its conflict setting
  "create conflict file" (by default it merges Markdown itself);
- iCloud Drive: ``Memory 2.md``, a number after a space: read as a conflict copy only in a vault
  iCloud syncs, and only beside ``Memory.md`` ("Chapter 2.md" alone stays a note).

``sync_tools`` names the tools whose markers it finds: Syncthing's ``.stfolder`` (in the vault or a
folder above it: Syncthing's folder may hold the vault), Obsidian Sync's core plugin switched on
in ``.obsidian/core-plugins.json`` (or a ``.obsidian/sync*`` file), iCloud's place
(``~/Library/Mobile Documents``) or its ``.NAME.icloud`` stubs for files not downloaded yet, and
Dropbox's ``.dropbox`` / ``.dropbox.cache`` markers above the vault. A plain copying tool (rsync,
a newest-wins copy) leaves no marker and no conflict copy: it is named by nothing here.

Pure reading: nothing here changes the vault. Finding copies walks the vault's folders (not
``.git``, ``.obsidian``, ``.trash``, tars's own ``.tars``), never through a symlink.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

SYNCTHING, DROPBOX, OBSIDIAN_SYNC, ICLOUD = "Syncthing", "Dropbox", "Obsidian Sync", "iCloud Drive"

_SYNCTHING = re.compile(r"^(?P<stem>.+?)\.sync-conflict-(?P<date>\d{8})-(?P<time>\d{6})(?:-(?P<device>[A-Z0-9]{7}))?(?P<ext>\.[^./]*)?$")
# Obsidian Sync: "(Conflicted copy DEVICE 202611271015)"; Dropbox: "(conflicted copy)", "(NAME's conflicted copy DATE)".
_OBSIDIAN = re.compile(r"^(?P<stem>.+?) \(Conflicted copy (?P<device>[^()]+?) (?P<date>\d{12})\)(?P<ext>\.[^./]*)?$")
_DROPBOX = re.compile(
    r"^(?P<stem>.+?) \((?:(?P<device>[^()]*?)'s )?conflicted copy(?: (?P<date>[^()]*))?\)(?P<ext>\.[^./]*)?$", re.IGNORECASE
)
_CASE = re.compile(r"^(?P<stem>.+?) \(Case Conflict(?: \d+)?\)(?P<ext>\.[^./]*)?$", re.IGNORECASE)
_ICLOUD = re.compile(r"^(?P<stem>.+) (?P<number>[2-9]|[1-9]\d+)(?P<ext>\.[^./]+)$")
# Folders whose files are never the user's notes nor conflicts tars should list.
_SKIP = {".git", ".obsidian", ".trash", ".tars", ".stfolder", ".stversions", ".dropbox.cache", ".Trash"}


@dataclass(frozen=True, slots=True)
class ConflictCopy:
    path: str  # the copy, relative to the vault, "/"-separated
    original: str  # the file it is a conflict copy of
    tool: str  # which tool's naming it has: SYNCTHING, DROPBOX, OBSIDIAN_SYNC, ICLOUD
    device: str = ""  # the device the name says it came from, when it says one
    when: str = ""  # the date (and time) the name holds, as written


@dataclass(frozen=True, slots=True)
class SyncTool:
    name: str
    marker: str  # what showed it, for people: ".stfolder in /home/sam/Notes"


def conflict_copy(rel: str, icloud: bool = False, exists=None) -> ConflictCopy | None:
    """``rel`` read as a conflict copy (None: it is not one). ``icloud``: the vault is synced by
    iCloud Drive, whose copies ("Memory 2.md") look like ordinary names, so they count only when
    ``exists(original)`` says the file they would be a copy of is there."""
    folder, _, name = rel.rpartition("/")
    prefix = f"{folder}/" if folder else ""
    for pattern, tool in ((_SYNCTHING, SYNCTHING), (_OBSIDIAN, OBSIDIAN_SYNC), (_DROPBOX, DROPBOX), (_CASE, DROPBOX)):
        found = pattern.match(name)
        if found is not None:
            parts = found.groupdict()
            when = " ".join(part for part in (parts.get("date"), parts.get("time")) if part)
            original = prefix + found["stem"] + (found["ext"] or "")
            return ConflictCopy(rel, original, tool, (parts.get("device") or "").strip(), when)
    if icloud and exists is not None:
        found = _ICLOUD.match(name)
        if found is not None:
            original = prefix + found["stem"] + found["ext"]
            if exists(original):
                return ConflictCopy(rel, original, ICLOUD)
    return None


def find_conflict_copies(vault: Path, icloud: bool = False) -> list[ConflictCopy]:
    """Every conflict copy of a Markdown file in the vault, sorted by path."""
    found = []
    for rel in _markdown_files(vault):
        copy = conflict_copy(rel, icloud, lambda original: (vault / original).is_file())
        if copy is not None:
            found.append(copy)
    return sorted(found, key=lambda copy: copy.path)


def _entries(vault: Path):
    """Every entry of the vault's folders as (relative path, entry, st_mode), never through a symlink
    nor into the folders in _SKIP (an entry whose mode cannot be read is left out)."""
    stack = [(str(vault), "")]
    while stack:
        folder, prefix = stack.pop()
        try:
            with os.scandir(folder) as entries:
                listed = list(entries)
        except OSError:
            continue
        for entry in listed:
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode) and entry.name not in _SKIP:
                stack.append((entry.path, prefix + entry.name + "/"))
            yield prefix + entry.name, entry, mode


def _markdown_files(vault: Path):
    """The vault's .md files, relative (see _entries)."""
    for rel, entry, mode in _entries(vault):
        if stat.S_ISREG(mode) and entry.name.lower().endswith(".md") and not entry.name.startswith("."):
            yield rel


def sync_tools(vault: Path, home: Path | None = None) -> list[SyncTool]:
    """The sync tools whose markers are in or above the vault (see the module's docstring)."""
    home = Path.home() if home is None else home
    tools: list[SyncTool] = []
    above = [vault, *vault.parents]
    for folder in above:
        if (folder / ".stfolder").exists():
            tools.append(SyncTool(SYNCTHING, f".stfolder in {folder}"))
            break
    if _obsidian_sync_on(vault):
        tools.append(SyncTool(OBSIDIAN_SYNC, f"the Sync core plugin is on in {vault / '.obsidian'}"))
    mobile = home / "Library" / "Mobile Documents"
    if vault.is_relative_to(mobile):
        tools.append(SyncTool(ICLOUD, f"the vault is in {mobile}"))
    else:
        stub = _icloud_stub(vault)
        if stub is not None:
            tools.append(SyncTool(ICLOUD, f"iCloud's placeholder {stub} (a file not downloaded to this machine)"))
    for folder in above:
        marker = next((folder / name for name in (".dropbox", ".dropbox.cache") if (folder / name).exists()), None)
        if marker is not None:
            tools.append(SyncTool(DROPBOX, f"{marker.name} in {folder}"))
            break
    return tools


def _obsidian_sync_on(vault: Path) -> bool:
    config = vault / ".obsidian"
    try:
        plugins = json.loads((config / "core-plugins.json").read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        plugins = None
    if isinstance(plugins, dict) and plugins.get("sync") is True:
        return True  # Obsidian 1.x: {"sync": true, ...}
    if isinstance(plugins, list) and "sync" in plugins:
        return True  # older: the list of plugins switched on
    try:
        return any(entry.name.startswith("sync") for entry in os.scandir(config))
    except OSError:
        return False


def _icloud_stub(vault: Path, limit: int = 20_000) -> str | None:
    """The first ``.NAME.icloud`` placeholder in the vault (iCloud leaves one for each file it has
    not downloaded yet), looking at no more than ``limit`` entries."""
    for seen, (rel, entry, _) in enumerate(_entries(vault), 1):
        if entry.name.startswith(".") and entry.name.endswith(".icloud"):
            return rel
        if seen >= limit:
            break
    return None


def uses_icloud(tools: list[SyncTool]) -> bool:
    return any(tool.name == ICLOUD for tool in tools)
