"""The history of what the memory review changed, as notes in the vault the user can read:
``Memory history/2026-11.md`` ([memory] history_folder, a note per month).

Each applied change is one entry: when, who approved it, every line it took out of Memory.md as it
read there (its provenance stamp too), why, and where that came from, what it added and from where,
and the command that undoes it; an undo adds an entry of its own. Entries are only ever appended,
each opening with a heading and a marker naming its change and the index that numbered it
(``<!-- tars:memory-change 12@3f9a0c1e -->``), so
a note a sync tool forked on two machines is merged by taking the entries of both, and an entry is
never written twice (the marker is looked for first: a start that finishes an interrupted approval
records it once).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from tarsd.memory.review_store import UNDONE, Change
from tarsd.vault.atomic import atomic_update
from tarsd.vault.files import owned_file, read_owned
from tarsd.vault.root import make_folders

_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")


def history_path(folder: str, when: float) -> str:
    """The note an entry made at ``when`` goes into (relative to the vault)."""
    return f"{folder.strip('/')}/{time.strftime('%Y-%m', time.localtime(when))}.md"


def marker(change: Change, machine: str) -> str:
    """The entry's mark. A change's number is its index's own, and each machine has its index: with
    the index's name (``machine``, random, made once) two machines' entries in one synced note never
    share one."""
    return f"<!-- tars:memory-{'undo' if change.state == UNDONE else 'change'} {change.id}@{machine} -->"


def entry(change: Change, undo_command: str, tag: str) -> str:
    """The entry for a change (applied, or undone), in markdown."""
    summary = change.summary
    when = change.undone_at if change.state == UNDONE and change.undone_at else change.applied_at
    stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(when))
    who = _one_line(summary.get("who", ""))
    lines = []
    if change.state == UNDONE:
        lines += [f"## {stamp} · change {change.id} undone", tag, ""]
        lines += (
            [f"Put back into {change.path}:"] + [f"- {_one_line(_bare(item['raw']))}" for item in summary.get("removed", [])]
            if summary.get("removed")
            else []
        )
        if summary.get("added"):
            lines += [f"Taken out of {change.path} again:"] + [f"- {_one_line(_bare(item['raw']))}" for item in summary["added"]]
        return "\n".join(lines) + "\n"
    lines += [f"## {stamp} · change {change.id}" + (f" · approved {who}" if who else ""), tag, ""]
    if summary.get("removed"):
        lines.append(f"Taken out of {change.path}:")
        for item in summary["removed"]:
            lines.append(f"- {_one_line(_bare(item['raw']))}")
            lines.append(f"  {_one_line(item.get('kind', ''))}: {_one_line(item.get('why', ''))} (proposal #{item.get('proposal', '?')})")
    if summary.get("added"):
        lines.append(f"Added to {change.path}:")
        for item in summary["added"]:
            lines.append(f"- {_one_line(_bare(item['raw']))}")
            lines.append(f"  from {_one_line(item.get('source', ''))} (proposal #{item.get('proposal', '?')})")
    if summary.get("moved"):
        moved = summary["moved"]
        lines.append(f"Moved the section {_one_line(moved['section'])} ({len(moved['lines'])} lines) to [[{_one_line(moved['note'])}]].")
    lines += ["", f"Undo: `{undo_command}`"]
    return "\n".join(lines) + "\n"


def record(vault: Path, folder: str, change: Change, undo_command: str, machine: str) -> str:
    """Append the change's entry to its month's note, once; the note's path (relative to the vault)."""
    when = change.undone_at if change.state == UNDONE and change.undone_at else change.applied_at
    rel = history_path(folder, when)
    path = owned_file(vault, rel)
    make_folders(vault, path.parent)
    tag = marker(change, machine)
    text = entry(change, undo_command, tag)

    def append(current: str) -> str | None:
        if tag in current:
            return None  # recorded already (an approval finished at a start)
        head = (
            ""
            if current.strip()
            else "# Memory history\n\nWhat the memory review changed in Memory.md, newest last. Each entry says how to undo it.\n"
        )
        return (current.rstrip("\n") + "\n\n" if current.strip() else head + "\n") + text

    atomic_update(path, append)
    return rel


def recorded(vault: Path, folder: str, change: Change, machine: str) -> bool:
    when = change.undone_at if change.state == UNDONE and change.undone_at else change.applied_at
    return marker(change, machine) in read_owned(vault, owned_file(vault, history_path(folder, when)))


def _bare(raw: str) -> str:
    """A line of Memory.md without its list marker: the history lists it under its own."""
    return raw[2:] if raw.startswith(("- ", "* ", "+ ")) else raw


def _one_line(text: object) -> str:
    return " ".join(_CONTROL.sub(" ", str(text)).split())
