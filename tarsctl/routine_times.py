"""How routines' times are read from a user's words and said back, the same in tarsctl, the REPL
and the messengers (the relay): a reminder's WHEN typed as several words, and a run's time in the
routines' time zone ("Thu 07:30", "Thu 26 Nov 15:00"). Standard library only."""

from __future__ import annotations

import re
import time
from datetime import datetime, tzinfo

_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_NUMBER_AND_UNIT = re.compile(r"(\d+(?:\.\d+)?)([a-z]+)", re.IGNORECASE)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_CLOCK = re.compile(r"\d{1,2}:\d{2}(?::\d{2})?")
# The forms tarsd reads (tarsd/routines/schedule.py, parse_when): checked here for their shape, so
# a WHEN typed wrong is a usage error said before anything is sent; tarsd checks the rest.
_TIME_OF_DAY = re.compile(r"\d{1,2}:\d{2}")
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?")
UNITS = frozenset(
    ("s", "sec", "secs", "second", "seconds", "m", "min", "mins", "minute", "minutes")
    + ("h", "hr", "hrs", "hour", "hours", "d", "day", "days")
)  # the same words as tarsd's (a test holds them equal)
WEEK_SECONDS = 6 * 86400  # within this, a day's name says which day it is
WHEN_FORMS = 'HH:MM, a date and time (2026-11-27 15:00, or 2026-11-27T15:00), or "in N s|min|h|d" (in 20 min)'


def split_when(words: list[str]) -> tuple[str, list[str]]:
    """A reminder's WHEN and its text, from the words typed: ``in 20 min tea`` is "in 20 min" and
    ["tea"] (a shell splits "in N unit" into three words; "in 20min" is two), ``in 5 tea`` is "in 5"
    and ["tea"] (a unit forgotten, which when_problem names), ``2026-11-27 15:00 call`` is
    "2026-11-27 15:00" and ["call"]; otherwise the first word is WHEN."""
    if not words:
        return "", []
    first, rest = words[0], list(words[1:])
    if " " in first.strip():
        return first.strip(), rest  # quoted whole: "in 20 min"
    if first.lower() == "in" and rest:
        if _NUMBER.fullmatch(rest[0]) and len(rest) > 1 and rest[1].lower() in UNITS:
            return f"in {rest[0]} {rest[1]}", rest[2:]
        if _NUMBER.fullmatch(rest[0]) or _NUMBER_AND_UNIT.fullmatch(rest[0]):
            return f"in {rest[0]}", rest[1:]
    if _DATE.fullmatch(first) and rest and _CLOCK.fullmatch(rest[0]):
        return f"{first} {rest[0]}", rest[1:]
    return first, rest


def when_problem(when: str) -> str:
    """What is wrong with the shape of a reminder's WHEN ("" when tarsd can read it; tarsd still
    says when the time has passed, or is too far ahead, or the clocks skip it)."""
    words = when.lower().split()
    if not words:
        return f"say when: {WHEN_FORMS}"
    if words[0] == "in":
        if len(words) == 1 or not (_NUMBER.fullmatch(words[1]) or _NUMBER_AND_UNIT.fullmatch(words[1])):
            return 'in how long? say "in 20 min", "in 2 h", "in 1 d" or "in 30 s"'
        glued = _NUMBER_AND_UNIT.fullmatch(words[1])
        number, unit = (glued.group(1), glued.group(2)) if glued else (words[1], " ".join(words[2:]))
        if "." in number:
            return f"in {number}{' ' + unit if unit else ''}: give a whole number (in 90 min rather than in 1.5 h)"
        if not unit:
            return f'in {number} what? say "in {number} min", "in {number} h", "in {number} d" or "in {number} s"'
        if unit not in UNITS or len(words) > 3 or glued and len(words) > 2:
            return f"{unit!r} is not a unit of time: say s, min, h or d (in {number} min)"
        return ""
    if _TIME_OF_DAY.fullmatch(when.strip()) or _DATE_TIME.fullmatch(" ".join(when.split())):
        return ""
    return f"{when.strip()!r} is not a time: WHEN is {WHEN_FORMS}"


def zone(name: str) -> tzinfo | None:
    """The routines' time zone by its IANA name; None (this machine's local time) when unknown."""
    if not name:
        return None
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(name)
    except (ValueError, KeyError, OSError, ImportError):
        return None  # zoneinfo raises ZoneInfoNotFoundError, a KeyError, for an unknown name


def _local(timestamp: float, timezone: str) -> datetime:
    where = zone(timezone)
    return datetime.fromtimestamp(timestamp, where) if where is not None else datetime.fromtimestamp(timestamp)


def day_and_time(timestamp: float, timezone: str = "") -> str:
    """ "Thu 26 Nov 15:00" (and the year when it is not this year's)."""
    moment = _local(timestamp, timezone)
    year = f" {moment.year}" if moment.year != _local(time.time(), timezone).year else ""
    return f"{moment:%a} {moment.day} {moment:%b}{year} {moment:%H:%M}"


def soon(timestamp: float, timezone: str = "", now: float | None = None) -> str:
    """A time near now, as short as says it: "Thu 07:30" within a week either way, else "Thu 26 Nov 07:30"."""
    now = time.time() if now is None else now
    if abs(timestamp - now) < WEEK_SECONDS:
        return f"{_local(timestamp, timezone):%a %H:%M}"
    return day_and_time(timestamp, timezone)


def clock(timestamp: float, timezone: str = "") -> str:
    """ "14:05": a time today or about now (a delivery's next attempt)."""
    return f"{_local(timestamp, timezone):%H:%M}"
