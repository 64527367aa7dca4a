"""crontab(5)'s five fields, read as Vixie/Debian cron reads them: each field an explicit set.

    minute  hour  day-of-month  month  day-of-week
    0-59    0-23  1-31          1-12   0-7 (0 and 7 are Sunday)

A field is ``*`` or a list of items separated by commas; an item is a number, a name (months
``jan``..``dec``, days ``sun``..``sat``, any case), a range ``a-b``, and any of ``*``, a range or
a number may be followed by ``/step`` (``*/15``: every 15th from the first; ``9-17/2``;
``5/10`` as cronie and APScheduler read it, 5 to the field's last value every 10th).
``@hourly``, ``@daily`` (``@midnight``), ``@weekly``, ``@monthly``, ``@yearly`` (``@annually``)
stand for ``0 * * * *``, ``0 0 * * *``, ``0 0 * * 0``, ``0 0 1 * *`` and ``0 0 1 1 *``.

Two rules of cron that people trip on, kept as cron has them:

- **Day of month or day of week.** When both fields are restricted (neither begins with ``*``), a
  day matching *either* runs: ``0 9 1 * 1`` is 09:00 on the 1st and on every Monday. When one of
  them begins with ``*`` (``*``, and also ``*/2``), a day must match both.
- **Fixed times and wildcards at a daylight-saving change** (tarsd/routines/schedule.py applies it):
  a job whose minute and hour fields both begin with something other than ``*`` runs at a fixed
  time; any other job (``*/15 * * * *``, ``0 * * * *``) is a wildcard job. The difference
  matters only on the nights the clocks change.

Refused, with the reason: values out of a field's range, a range that runs backwards (``5-2``:
write ``5-7,0-2``), a step of 0, and what crontab(5) does not have (``?``, ``L``, ``W``, ``#``,
a sixth field for seconds or years).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
# (what the user calls it, lowest, highest, names in order from the lowest value)
_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, MONTH_NAMES),
    ("day of week", 0, 7, DAY_NAMES),
)
_ITEM = re.compile(r"(?P<start>\*|[0-9a-z]+)(?:-(?P<end>[0-9a-z]+))?(?:/(?P<step>[0-9]+))?")
_MAX_DIGITS = 4  # no field has a value of more than 2 digits; more is refused before int() sees it


class CrontabError(ValueError):
    """A crontab that cannot be read; the message says which field and why."""


class NotFiveFields(CrontabError):
    """Not a crontab's shape at all (perhaps not meant as one): the hint names every form of schedule."""


class NeverFires(CrontabError):
    """A crontab that reads well but names no day that comes (the 30th of February)."""


@dataclass(frozen=True)
class Crontab:
    """The five fields as sets; ``weekdays`` counts 0 as Sunday, 1 Monday .. 6 Saturday."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_restricted: bool  # the day-of-month field does not begin with "*"
    weekdays_restricted: bool  # the day-of-week field does not begin with "*"
    wildcard: bool  # the minute or the hour field begins with "*": not a job at a fixed time of day

    @property
    def either_day(self) -> bool:
        """Both day fields restricted: a day matching either one runs (crontab(5)'s OR rule)."""
        return self.days_restricted and self.weekdays_restricted

    @property
    def days_exist(self) -> bool:
        """Some month chosen has some day of the month chosen (the 30th of February never comes)."""
        return any(day <= _LONGEST[month] for month in self.months for day in self.days)


def parse_crontab(text: str) -> Crontab:
    """The crontab ``text`` (five fields, or one of the @ names). CrontabError says what is wrong."""
    expression = MACROS.get(text.strip().lower(), text)
    if expression.startswith("@"):
        raise CrontabError(f"{text.strip()!r} is not one of cron's names: {', '.join(MACROS)}")
    fields = expression.lower().split()
    if len(fields) != 5:
        raise NotFiveFields(f"a crontab has 5 fields (minute hour day-of-month month day-of-week), this has {len(fields)}")
    minutes, hours, days, months, weekdays = (_field(field, *spec) for field, spec in zip(fields, _FIELDS, strict=True))
    if 7 in weekdays:
        weekdays = (weekdays - {7}) | {0}  # 7 is Sunday too
    crontab = Crontab(
        minutes=frozenset(minutes),
        hours=frozenset(hours),
        days=frozenset(days),
        months=frozenset(months),
        weekdays=frozenset(weekdays),
        days_restricted=not fields[2].startswith("*"),
        weekdays_restricted=not fields[4].startswith("*"),
        wildcard=fields[0].startswith("*") or fields[1].startswith("*"),
    )
    if not crontab.either_day and not crontab.days_exist:  # a day must match both fields: it never comes
        raise NeverFires("no month chosen has the day of the month chosen (a day must match both)")
    return crontab


_LONGEST = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}


def _field(text: str, what: str, lowest: int, highest: int, names: tuple[str, ...]) -> set[int]:
    values: set[int] = set()
    for item in text.split(","):
        match = _ITEM.fullmatch(item)
        if match is None:
            raise CrontabError(f"the {what} field {text!r}: {item!r} is not a number, a name, a range or a step{_unlike(item)}")
        if match["start"] == "*":
            if match["end"] is not None:
                raise CrontabError(f"the {what} field {text!r}: '*' cannot start a range")
            start, end = lowest, highest
        else:
            start = _value(match["start"], what, lowest, highest, names)
            if match["end"] is not None:
                end = _value(match["end"], what, lowest, highest, names)
                if names is DAY_NAMES and match["end"] == "sun" and start > 0:
                    end = 7  # "mon-sun", "fri-sun": Sunday ending a range is its 7, the end of the week
            else:
                end = highest if match["step"] is not None else start  # "5/10": from 5 to the last, every 10th
            if end < start:
                raise CrontabError(
                    f"the {what} field {text!r}: the range {item!r} runs backwards; cron's ranges do not wrap around",
                )
        step = 1
        if match["step"] is not None:
            if len(match["step"]) > _MAX_DIGITS or int(match["step"]) < 1:
                raise CrontabError(f"the {what} field {text!r}: a step must be a whole number from 1 to {highest}")
            step = int(match["step"])
        values.update(range(start, end + 1, step))
    return values


def _value(word: str, what: str, lowest: int, highest: int, names: tuple[str, ...]) -> int:
    if word.isdigit() and len(word) <= _MAX_DIGITS and lowest <= int(word) <= highest:
        return int(word)
    if word in names:
        return lowest + names.index(word)
    if word.isdigit():
        raise CrontabError(f"the {what} must be from {lowest} to {highest}, not {word}")
    if word in ("l", "w", "lw") or word.endswith(("l", "w")) and word[:-1].isdigit():
        raise CrontabError(f"{word.upper()!r} is Quartz's, not crontab(5)'s: give a {what} from {lowest} to {highest}")
    said = f" or a name ({names[0]}..{names[-1]})" if names else ""
    raise CrontabError(f"{word!r} is not a {what}: give a number from {lowest} to {highest}{said}")


def _unlike(item: str) -> str:
    """Why an item is not cron's, when it comes from another scheduler's dialect."""
    if any(mark in item for mark in "?LW#"):
        return " (?, L, W and # are Quartz's, not crontab(5)'s)"
    return ""
