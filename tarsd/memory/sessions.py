"""Session logs, the episodic memory: which logs there are and when each conversation took
place, for the sessions request (newest first; with a query, the search hits among them).

A log is sorted by its file name's date (tars writes sessions/YYYY-MM-DD-HHMM-<slug>.md, in
local time); a log named otherwise by the ``started`` (or ``date``) of its front matter, else
by when the file last changed. The time shown is the front matter's when there is one (it
carries the time zone). Logs are listed from the disk, not the index, so a log written a
moment ago is there at once.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from tarsctl.protocol import Hit, SessionLog
from tarsd.config.settings import VaultConfig
from tarsd.markdown.chunker import parse_front_matter
from tarsd.markdown.note_dates import front_time, name_time
from tarsd.vault.files import stat_note, walk
from tarsd.vault.notes import NoteError, read_lines

# What a listing shows of each log: the text after its title, up to this many characters.
SUMMARY_CHARS = 1500
# A log is read up to this many characters (front matter, title and summary fit easily).
READ_CHARS = 20_000


def episodic_paths(vault: Path, config: VaultConfig, max_bytes: int) -> dict[str, float]:
    """Every session log on disk (the vault's episodic folders and files) with its date: the
    file name's; for a log named otherwise, its front matter's (read), else its modification time."""
    found: dict[str, float] = {}
    for pattern in config.episodic:
        if pattern.endswith("/"):
            # A symlinked episodic folder may lead out of the vault: never entered (as the index does).
            disks = {pattern + rel: disk for rel, disk in walk(vault, below=pattern).items()}
        else:
            disk = stat_note(vault, pattern)
            disks = {} if disk is None else {pattern: disk}
        for path, disk in disks.items():
            if disk.problem is None:
                named = name_time(path)
                found[path] = named if named is not None else read_session(vault, path, disk.mtime_ns / 1e9, max_bytes).started_at
    return found


def recent(vault: Path, config: VaultConfig, limit: int, max_bytes: int) -> tuple[list[SessionLog], int]:
    """The ``limit`` newest session logs, newest first, and how many there are in all."""
    paths = episodic_paths(vault, config, max_bytes)
    newest = sorted(paths.items(), key=lambda item: (-item[1], item[0]))[:limit]
    logs = [read_session(vault, path, when, max_bytes) for path, when in newest]
    return logs, len(paths)


def dated_hits(vault: Path, hits: list[Hit], max_bytes: int) -> list[SessionLog]:
    """Search hits among the logs, each with its log's title and date, in the hits' order."""
    logs = []
    for hit in hits:
        log = read_session(vault, hit.path, 0.0, max_bytes)
        logs.append(
            SessionLog(
                hit.path,
                log.title or hit.title,
                log.started,
                log.started_at,
                snippet=hit.snippet,
                score=hit.score,
                band=hit.band,
                start_line=hit.start_line,
                end_line=hit.end_line,
            )
        )
    return logs


def read_session(vault: Path, path: str, fallback: float, max_bytes: int) -> SessionLog:
    """A log's title, start time and summary; a log that cannot be read is listed by its path
    and the reason."""
    try:
        note = read_lines(vault, path, max_chars=READ_CHARS, max_bytes=max_bytes)
    except NoteError as exc:
        return SessionLog(path, started=iso(fallback), started_at=fallback, summary=f"(cannot be read: {exc.message})")
    front, body_start = parse_front_matter(note.lines)
    started = _known(front_time(front.get("started")), front_time(front.get("date")), name_time(path), fallback)
    body = [line for line in note.lines[body_start:] if line.strip()]
    if body and body[0].startswith("# "):
        body = body[1:]  # the title, shown apart
    summary = "\n".join(body)
    if len(summary) > SUMMARY_CHARS:
        summary = summary[: SUMMARY_CHARS - 1] + "…"
    return SessionLog(path, note.title or Path(path).stem, iso(started), started, summary=summary)


def iso(when: float) -> str:
    """Local time, to the minute ("2026-11-20T19:30+01:00"); "" when not known."""
    return datetime.fromtimestamp(when).astimezone().isoformat(timespec="minutes") if when else ""


def _known(*times: float | None) -> float:
    """The first time that is known."""
    return next(t for t in times if t is not None)
