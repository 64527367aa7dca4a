"""`tarsctl doctor` on a vault kept in step with other machines (docs/two-machines.md): the sync tools
whose markers it sees, the conflict copies they left (tars's own files, which tarsd merges; your
notes, which it never merges: both paths named), and the other tarsd that write the vault, as their
heartbeats in the vault's ``.tars/machines/`` say. Says nothing about a vault no sync tool marks and
no other tarsd writes. Reads files only; the running tarsd's status, when it answers, is preferred
(it has watched the heartbeats move, by its own clock)."""

from __future__ import annotations

import time
from pathlib import Path

from tarsctl.sync_view import ago
from tarsd.vault.conflicts import DROPBOX, ICLOUD, OBSIDIAN_SYNC, SYNCTHING, find_conflict_copies, sync_tools, uses_icloud
from tarsd.vault.heartbeat import STALE_SECONDS, machine_identity, read_beats

Line = tuple[str, str, str]  # (status, summary, fix)

_TOOL_NOTES = {
    SYNCTHING: "tars merges its conflict copies (NAME.sync-conflict-DATE-TIME-DEVICE.md) of the files it writes",
    DROPBOX: "tars merges its conflicted copies (NAME (... conflicted copy ...).md, NAME (Case Conflict).md) of the files it writes",
    ICLOUD: "tars takes NAME 2.md beside NAME.md for iCloud's conflict copy, and merges those of the files it writes",
}


def check_sync(config, served) -> list[Line]:
    """The doctor's sync lines for the vault of ``config``; ``served``: the running tarsd's status reply, or None."""
    vault = config.vault_path
    if not vault.is_dir():
        return []
    lines: list[Line] = []
    tools = sync_tools(vault)
    for tool in tools:
        if tool.name == OBSIDIAN_SYNC:
            lines.append(
                (
                    "warn",
                    f"Obsidian Sync ({tool.marker}): it merges your notes itself, but never syncs a folder whose name starts "
                    "with a dot, so tars's .tars/ (each machine's heartbeat and journal) stays on each machine: a tarsd "
                    "cannot see another one",
                    "with tarsd on two machines: enable [telegram] on one of them only and run routines on one "
                    "([routines] enabled = false on the other); or sync the vault with Syncthing (docs/two-machines.md)",
                )
            )
        else:
            lines.append(("ok", f"{tool.name} ({tool.marker}): {_TOOL_NOTES[tool.name]}", ""))
    if len(tools) > 1:
        names = " and ".join(tool.name for tool in tools)
        lines.append(("warn", f"{names} both sync this vault: two tools on one folder fight over each change", "keep one of them"))
    lines += _conflicts(config, vault, served, uses_icloud(tools))
    lines += _machines(config, vault, served)
    return lines


def _conflicts(config, vault: Path, served, icloud: bool) -> list[Line]:
    if served is not None and served.vault and Path(served.vault) == vault:
        found = [(c.path, c.original, c.tool, c.state == "merging") for c in served.sync.conflicts]
    else:
        own = {config.memory.semantic_file, config.memory.procedural_file, config.memory.corrections_file, config.memory.rewards_file}
        found = [(c.path, c.original, c.tool, c.original in own) for c in find_conflict_copies(vault, icloud)]
    lines: list[Line] = []
    for path, original, tool, tars in found:
        if tars:
            fix = "" if served is not None else "start tarsd: it merges it at once (docs/two-machines.md)"
            lines.append(("warn", f"{tool}'s conflict copy {path} of {original}: a file tars writes, merged by tarsd", fix))
        else:
            lines.append(
                (
                    "warn",
                    f"{tool} left a conflict copy of your note: {original} and {path}; tars never merges your notes",
                    f"compare {original} with {path}, keep what you want in {original}, then delete {path}",
                )
            )
    return lines


def _machines(config, vault: Path, served) -> list[Line]:
    lines: list[Line] = []
    if served is not None and served.vault and Path(served.vault) == vault and served.sync.machine:
        me = served.sync.machine
        others = [(m.machine, m.name, m.live, m.beat_at, m.telegram, m.routines) for m in served.sync.machines if not m.this]
    else:
        me, _ = machine_identity(config.db_path.with_suffix(".machine"))
        beats, _ = read_beats(vault)
        now = time.time()
        others = [
            (b.machine, b.name, not b.stopped and now - b.beat_at <= STALE_SECONDS, b.beat_at, b.telegram, b.routines)
            for b in beats
            if b.machine != me
        ]
    for machine, name, live, beat_at, telegram, routines in others:
        who = f"tarsd on {name or 'another machine'} ({machine[:6]})"
        if not live:
            last = f"its last heartbeat is from {ago(beat_at)} (stopped, or not synced here since)"
            lines.append(("ok", f"{who} wrote this vault too; {last}", ""))
            continue
        doing = [f"Telegram: {telegram}"] if telegram and telegram != "off" else []
        if routines:
            doing.append(f"routines: {', '.join(routines[:5])}{' ...' if len(routines) > 5 else ''}")
        summary = f"another tarsd writes this vault: {who}, heartbeat {ago(beat_at)}" + (f" ({'; '.join(doing)})" if doing else "")
        lines.append(("ok", summary + ": tars merges what both write, one of them polls Telegram", ""))
    if served is not None:
        lines += [("warn", warning, "") for warning in served.sync.warnings if warning.startswith("routines:")]
    return lines
