"""The date a note is about: a session log's start, a daily note's day.

The front matter's ``started`` or ``date`` (it may carry a time zone), else a date at the start of
the file name (tars names its logs YYYY-MM-DD-HHMM-slug.md, daily notes are YYYY-MM-DD.md), read
as local time. Recall shows it beside what it recalls (tarsd/search/recall.py); the session logs'
list orders by it (tarsd/memory/sessions.py).
"""

from __future__ import annotations

import re
from datetime import date, datetime

_NAME_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:[-_ T](\d{2})(\d{2}))?")


def note_date(path: str, front: dict) -> float | None:
    """When the note took place (seconds since the epoch), or None for a note that says no date."""
    for key in ("started", "date"):
        when = front_time(front.get(key))
        if when is not None:
            return when
    return name_time(path)


def name_time(path: str) -> float | None:
    """The date (and time) at the start of the note's file name, as local time; None when it has none."""
    match = _NAME_DATE.match(path.rsplit("/", 1)[-1])
    if match is None:
        return None
    year, month, day, hour, minute = (int(part) if part else 0 for part in match.groups())
    try:
        return datetime(year, month, day, hour, minute).timestamp()
    except ValueError:
        return None  # 2026-13-45: not a date after all


def front_time(value: object) -> float | None:
    """A front matter time: YAML reads ISO timestamps as datetime (or date), quoted ones stay text."""
    try:
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, date):
            return datetime(value.year, value.month, value.day).timestamp()
        if isinstance(value, str):
            return datetime.fromisoformat(value.strip().replace("Z", "+00:00")).timestamp()
    except (ValueError, OverflowError, OSError):
        return None
    return None
