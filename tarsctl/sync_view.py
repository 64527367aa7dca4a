"""The part of `tarsctl status` about other machines on the vault (docs/two-machines.md): the sync tools
seen, the tarsd on the vault, conflict copies (tars's own, being merged; yours, left to you, with both
paths), the merges tars made, who polls Telegram. Every line is cleaned by the caller (tarsctl/shown.py)."""

from __future__ import annotations

import time

from tarsctl.protocol import SyncStatus


def status_lines(sync: SyncStatus) -> list[str]:
    others = [m for m in sync.machines if not m.this]
    if not (sync.tools or others or sync.conflicts or sync.merged or sync.put_back or sync.closed_proposals):
        return []
    lines = []
    tools = ", ".join(sync.tools) if sync.tools else "no sync tool's marker seen"
    lines.append(f"sync       {tools}")
    for machine in sync.machines:
        if machine.this:
            state = "this machine"
        elif machine.live:
            state = f"live, beat {ago(machine.beat_at)}"
        else:
            state = "stopped" if machine.stopped else f"silent since {ago(machine.beat_at)}"
        telegram = f", Telegram: {machine.telegram}" if machine.telegram and machine.telegram != "off" else ""
        routines = f", {len(machine.routines)} routine(s)" if machine.routines else ""
        lines.append(f"           tarsd on {machine.name} ({machine.machine[:6]}): {state}{telegram}{routines}")
    if sync.telegram:
        lines.append(f"           Telegram: {sync.telegram}")
    for conflict in sync.conflicts:
        if conflict.state == "yours":
            lines.append(f"           conflict: {conflict.original} and {conflict.path} ({conflict.tool}): yours to merge")
        else:
            lines.append(f"           conflict: {conflict.path} ({conflict.tool}): tars merges it into {conflict.original}")
    if sync.merged:
        lines.append(f"           {sync.merged} conflict cop{'y' if sync.merged == 1 else 'ies'} merged since start; newest:")
    for merge in sync.merges[:3]:
        lines.append(
            f"             {ago(merge.at)}: {merge.copy} into {merge.file}: {merge.added} line(s) added, {len(merge.removed)} left out, "
            f"{len(merge.kept)} kept for you to look at; the copy is at {merge.kept_at}"
        )
        for kept in merge.kept[:3]:
            lines.append(f"               kept: {kept}")
    if sync.put_back:
        lines.append(f"           {sync.put_back} line(s) put back from tars's journal after a sync dropped them")
    for closed in sync.closed_proposals[-3:]:
        lines.append(f"           closed proposal {closed}")
    return lines


def ago(at: float) -> str:
    """When ``at`` was, for a person: seconds or minutes ago, else the local date and time."""
    if not at:
        return "never"
    seconds = max(0, time.time() - at)
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(at))
