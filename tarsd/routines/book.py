"""The routines file: what runs when, in a TOML file the user owns (``routines.toml`` beside the
config, outside the vault), written by tars (tarsctl routines, a reminder the model set) and by
hand alike:

    [routine.morning-brief]
    schedule = "30 7 * * *"
    prompt = "What is on today?"
    deliver = ["telegram"]
    tools = ["todoist__get_tasks"]
    quiet = true
    created = 2026-11-26T17:00:00Z

    [reminder.remind-1127-1500]
    schedule = "2026-11-27 15:00"
    text = "Call the dentist"
    created = 2026-11-26T17:02:00Z

``created`` is a TOML date-time (UTC when tars writes it; one without an offset is in the user's
time zone; a number is read as unix time); an entry without it counts from the file's last
change. It anchors an ``every`` series and is where catching up on missed runs starts.

Nothing the user wrote is lost: a writer changes only the entry concerned (entries tars cannot
read, and keys it does not know, are written back as they were), refuses to write over a file
that is not valid TOML or not a regular file, and replaces the file in one step, as a compare and
swap with any other writer, through a symlink to the file it points to (tarsd/routines/toml_file.py).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TypeVar, get_args
from zoneinfo import ZoneInfo

from tarsd.config.settings import DeliveryTarget
from tarsd.routines.note_target import NOTE_HINT, heading_problem, note_problem
from tarsd.routines.schedule import ScheduleError, parse_schedule
from tarsd.routines.toml_file import FileProblem, TomlFile

ROUTINES_FILE_NAME = "routines.toml"
NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")  # whole names only: fullmatch (a name ending in a newline is not one)
NAME_HINT = "a name is 1 to 64 lower-case letters, digits, '-' and '_', starting with a letter or digit: morning-brief"
TARGETS: tuple[str, ...] = get_args(DeliveryTarget)
CHANNEL_TARGETS = ("telegram", "whatsapp")  # the targets that are messengers: a message there reaches the user's phone
AUTHORS = ("user", "model")
REVIEWS = ("memory",)  # built-in runs a routine may have instead of a prompt
ROUTINE_TABLE, REMINDER_TABLE = "routine", "reminder"
_NOT_CHANGED = ("name", "created")
_OPTIONAL_NUMBERS = {"runs_per_day": 1, "tokens_per_run": 1, "grace_minutes": 0}  # the least each may be
MAX_FILE_BYTES = 16 * 1024 * 1024  # a routines file larger than this is not read (10,000 routines are ~2 MB)
_TRIES = 50  # a write redone this often because the file kept changing under it gives up
_FUTURE_SLACK = 86400.0  # a creation time this far ahead is still read (clocks of two machines)
Result = TypeVar("Result")


class RoutineError(ValueError):
    """A routine that cannot be added, changed or found; ``hint`` says what to do."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True)
class Routine:
    name: str
    schedule: str
    created: float  # unix time; the anchor of an `every` series
    prompt: str = ""  # what the model is asked (a routine)
    text: str = ""  # a reminder's message (no model run); exactly one of prompt/text is non-empty
    deliver: tuple[str, ...] = ()  # empty: [routines] deliver
    tools: tuple[str, ...] = ()  # tools the run may use without asking (names as `tarsctl tools` shows)
    quiet: bool = False  # speak only when there is something to say
    paused: bool = False
    runs_per_day: int | None = None
    tokens_per_run: int | None = None
    grace_minutes: int | None = None
    note: str = ""  # for the note target; empty: the config's
    heading: str = ""
    by: str = "user"  # who wrote it: "user" | "model"
    # A built-in run instead of a prompt: "memory" runs the memory review (docs/memory.md#the-memory-review),
    # which proposes and changes nothing; tarsd/speaking/memory_review.py runs it.
    review: str = ""

    @property
    def is_reminder(self) -> bool:
        return self.text != ""

    def grace(self, reminder_default: timedelta, routine_default: timedelta) -> timedelta:
        """How late a missed occurrence may still run: its own grace_minutes, else the default for its kind."""
        if self.grace_minutes is not None:
            return timedelta(minutes=self.grace_minutes)
        return reminder_default if self.is_reminder else routine_default

    def targets(self, default: list[str] | tuple[str, ...]) -> tuple[str, ...]:
        """Where its messages go: its own targets, else ``default`` ([routines] deliver)."""
        return self.deliver or tuple(default)


_CREATED_HINT = "created is when the routine was written (2026-11-26T17:00:00Z); without it, tars counts from the file's last change"


def routines_path(routines_file: str, config_file: Path) -> Path:
    return Path(routines_file).expanduser() if routines_file else Path(config_file).expanduser().parent / ROUTINES_FILE_NAME


class Book:
    """The routines of the routines file. ``load`` is cheap when the file did not change (a stat);
    ``version`` goes up each time it was read again, so a caller can tell that it changed.

    ``min_interval_seconds``: the shortest ``every`` a routine or repeating reminder may have
    ([routines] min_interval_seconds; None: no least). ``vault``: where note targets must stay."""

    def __init__(self, path: Path, tz: ZoneInfo, min_interval_seconds: float | None = None, vault: Path | None = None):
        self.path = Path(path)
        self.tz = tz
        self.min_interval_seconds = min_interval_seconds
        self.vault = Path(vault) if vault is not None else None
        self.problem = ""
        self.version = 0
        self.file = TomlFile(self.path, (ROUTINE_TABLE, REMINDER_TABLE))
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._routines: list[Routine] = []
        self._loaded = False
        self._listeners: list[Callable[[], None]] = []

    def on_written(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (from the writing thread) after each write tars makes to the file: the
        clock re-arms at once for a routine or reminder added, changed or removed, whoever wrote it."""
        self._listeners.append(listener)

    def forget(self, listener: Callable[[], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    # Reading

    def load(self) -> list[Routine]:
        """The routines, reading the file again only when it changed (inode, mtime_ns, size). A missing
        file is none. A file that is not valid TOML keeps the last good list, and ``problem`` says
        what and where; entries that cannot be used are left out and named in ``problem``."""
        with self._lock:
            stamp = self._stat()
            if self._loaded and stamp == self._stamp:
                return list(self._routines)
            self._stamp = stamp
            self._loaded = True
            self.version += 1
            try:
                raw = self._read_raw()
            except RoutineError as exc:
                self.problem = f"{exc} ({exc.hint}); the routines read before are kept until it is fixed"
                return list(self._routines)
            routines, bad = self._decode_all(raw)
            self._routines = routines
            self.problem = "; ".join(bad)
            if bad:
                self.problem += f" (in {self.path}): fix or remove those entries"
            return list(self._routines)

    def get(self, name: str) -> Routine | None:
        return next((r for r in self.load() if r.name == name), None)

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            info = self.path.stat()
        except OSError:
            return None
        return (info.st_ino, info.st_mtime_ns, info.st_size)

    def _read_raw(self) -> dict:
        """The file as TOML; {} when it is not there. RoutineError when it cannot be read or parsed."""
        try:
            return self.file.read()
        except FileProblem as exc:
            raise RoutineError(str(exc), exc.hint) from exc

    def _change(self, apply: Callable[[dict], Result]) -> Result:
        """Read the file, ``apply`` a change to it (a RoutineError from it changes nothing), write
        it back (toml_file.py: a compare and swap with any other writer)."""

        def apply_and_date(raw: dict) -> Result:
            result = apply(raw)
            # An entry written without `created` counts from the file's last change; this write changes
            # the file, so it gets the time it had until now written in (else a one-shot reminder due
            # meanwhile would read as set after its own time, and be refused before it was sent).
            fallback = None
            for table in (ROUTINE_TABLE, REMINDER_TABLE):
                for entry in _entries(raw, table).values():
                    if isinstance(entry, dict) and "created" not in entry:
                        fallback = fallback if fallback is not None else datetime.fromtimestamp(self._file_time(), UTC)
                        entry["created"] = fallback
            return result

        with self._lock:
            try:
                result = self.file.change(apply_and_date)
            except FileProblem as exc:
                raise RoutineError(str(exc), exc.hint) from exc
        for listener in list(self._listeners):
            try:
                listener()
            except Exception:  # the file is written: a listener's trouble is its own, never the writer's
                logging.getLogger(__name__).exception("routines: telling of a change of %s failed", self.path)
        return result

    @property
    def redone(self) -> int:
        """Writes made again because another writer changed the file meanwhile."""
        return self.file.redone

    def _decode_all(self, raw: dict) -> tuple[list[Routine], list[str]]:
        routines: list[Routine] = []
        bad: list[str] = []
        seen: set[str] = set()
        fallback = self._file_time()
        for table in (ROUTINE_TABLE, REMINDER_TABLE):
            entries = raw.get(table, {})
            if not isinstance(entries, dict):
                bad.append(f"{table} must be a table of entries ([{table}.NAME])")
                continue
            for name, entry in entries.items():
                where = f"[{table}.{name if NAME.fullmatch(name) else json.dumps(name)}]"  # as TOML quotes an odd key
                if name in seen:
                    bad.append(f"{where}: the name is used twice (routine and reminder names share one list)")
                    continue
                try:
                    routines.append(self._decode(table, name, entry, fallback))
                except RoutineError as exc:
                    bad.append(f"{where}: {exc}")
                    continue
                except (ValueError, OverflowError, TypeError) as exc:  # a date past the calendar: this entry's error only
                    bad.append(f"{where}: cannot be read: {exc}")
                    continue
                seen.add(name)
        return routines, bad

    def _file_time(self) -> float:
        try:
            return float(int(self.path.stat().st_mtime))
        except OSError:
            return float(int(time.time()))

    def _decode(self, table: str, name: str, entry: object, fallback_created: float) -> Routine:
        if not isinstance(entry, dict):
            raise RoutineError("must be a table of keys")
        known = {f.name for f in dataclasses.fields(Routine)} - {"name"}
        values = {key: value for key, value in entry.items() if key in known}
        created = values.pop("created", None)
        values["created"] = fallback_created if created is None else self._created(created)
        for key in ("deliver", "tools"):
            if key in values:
                if not isinstance(values[key], list):
                    raise RoutineError(f"{key} must be a list of strings")
                values[key] = tuple(values[key])
        if table == REMINDER_TABLE and "prompt" in values:
            raise RoutineError("a reminder has a text, not a prompt (a routine has a prompt: [routine.NAME])")
        if table == ROUTINE_TABLE and "text" in values:
            raise RoutineError("a routine has a prompt, not a text (a reminder has a text: [reminder.NAME])")
        try:
            routine = Routine(name=name, **values)
        except TypeError as exc:
            raise RoutineError(f"cannot be read: {exc}") from exc
        self._check(routine, None)
        return routine

    def _created(self, value: object) -> float:
        try:
            if isinstance(value, datetime):
                return (value if value.tzinfo is not None else value.replace(tzinfo=self.tz)).timestamp()
            if isinstance(value, date):
                return datetime(value.year, value.month, value.day, tzinfo=self.tz).timestamp()
        except (OverflowError, ValueError) as exc:
            raise RoutineError(f"created = {value} is not a time tars can use: {exc}", _CREATED_HINT) from exc
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise RoutineError("created must be a date and time (2026-11-26T17:00:00Z) or a unix time", _CREATED_HINT)

    def check(self, routine: Routine) -> None:
        """RoutineError when ``routine`` could not be added now (a proposal is checked before it waits)."""
        self._check(routine, datetime.now(self.tz))

    def _check(self, routine: Routine, now: datetime | None) -> None:
        """Every field as it must be; ``now``: a one-shot before it is refused (None: the routine's
        creation, as when reading the file, so a reminder that has passed is still read)."""
        created = routine.created
        if not isinstance(created, (int, float)) or isinstance(created, bool) or not 0 <= created <= time.time() + _FUTURE_SLACK:
            raise RoutineError(f"created ({created!r}) must be a time from 1970 to now: it is when the routine was written", _CREATED_HINT)
        if now is None:
            now = datetime.fromtimestamp(created, UTC)
        if not isinstance(routine.name, str) or not NAME.fullmatch(routine.name):
            raise RoutineError(f"{routine.name!r} cannot be a name", NAME_HINT)
        for key in ("schedule", "prompt", "text", "note", "heading", "by", "review"):
            if not isinstance(getattr(routine, key), str):
                raise RoutineError(f"{key} must be a string in quotes")
        for key in ("schedule", "note", "heading"):
            # One line each: a heading with a line break would write a heading of its own into the note.
            if any(ord(char) < 32 or ord(char) == 127 for char in getattr(routine, key)):
                raise RoutineError(f"{key} must be one line, with no control characters", f"give the {key} on one line")
        if sum(1 for key in ("prompt", "text", "review") if getattr(routine, key) != "") != 1:
            raise RoutineError(
                "needs exactly one of prompt (a routine: the model is asked), text (a reminder: the text is sent as it is) "
                'and review (a built-in run: review = "memory")',
                'e.g. prompt = "What is on my calendar today?"',
            )
        if routine.review and routine.review not in REVIEWS:
            raise RoutineError(f"no built-in review {routine.review!r}", f"review may be {', '.join(map(repr, REVIEWS))}")
        if not routine.review and routine.prompt.strip() == "" and routine.text.strip() == "":
            raise RoutineError("its prompt or text is only blanks", "say what tars should do or say")
        for key in ("deliver", "tools"):
            values = getattr(routine, key)
            if not all(isinstance(value, str) and value for value in values):
                raise RoutineError(f"{key} must be a list of names in quotes")
        unknown = [target for target in routine.deliver if target not in TARGETS]
        if unknown:
            raise RoutineError(f"cannot deliver to {', '.join(map(repr, unknown))}", f"the targets are {', '.join(TARGETS)}")
        for key in ("quiet", "paused"):
            if not isinstance(getattr(routine, key), bool):
                raise RoutineError(f"{key} must be true or false")
        for key, least in _OPTIONAL_NUMBERS.items():
            value = getattr(routine, key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < least):
                raise RoutineError(f"{key} must be a whole number, {least} or more")
        if routine.by not in AUTHORS:
            raise RoutineError(f"by must be one of {', '.join(AUTHORS)}")
        problem = note_problem(routine.note, self.vault)
        if problem:
            raise RoutineError(problem, NOTE_HINT)
        problem = heading_problem(routine.heading)
        if problem:
            raise RoutineError(problem, 'give a heading as it reads in the note, e.g. "tars" or "C# notes"')
        try:
            parse_schedule(routine.schedule, self.tz, now, min_interval=self.min_interval_seconds)
        except ScheduleError as exc:
            raise RoutineError(str(exc), exc.hint) from exc

    # Writing

    def add(self, routine: Routine) -> Routine:
        """Add a routine or reminder (a one-shot must still be to come). RoutineError when the name
        is taken or a field cannot be used."""
        created = routine.created
        if isinstance(created, (int, float)) and not isinstance(created, bool) and math.isfinite(created):
            routine = dataclasses.replace(routine, created=float(int(created)))

        def add_to(raw: dict) -> None:
            if self._entry(raw, routine.name) is not None:
                raise RoutineError(f"there is a routine called {routine.name!r} already", "pick another name, or change that one")
            raw.setdefault(self._table(routine), {})[routine.name] = self._encode(routine, {})

        self._check(routine, datetime.now(UTC))  # what is wrong with the routine first, whatever the file's state
        self._change(add_to)
        return self._written(routine.name)

    def update(self, name: str, **changes: object) -> Routine:
        """Change any field but the name and the creation time. A new schedule must be to come."""
        for key in changes:
            if key in _NOT_CHANGED:
                raise RoutineError(f"the {key} of a routine cannot be changed", "remove it and add it again")
            if key not in {f.name for f in dataclasses.fields(Routine)}:
                raise RoutineError(f"a routine has no field {key!r}")
        changes = {
            key: tuple(value) if key in ("deliver", "tools") and isinstance(value, list) else value for key, value in changes.items()
        }

        def update_in(raw: dict) -> None:
            table, entry = self._found(raw, name)
            new = dataclasses.replace(self._decode(table, name, entry, self._file_time()), **changes)
            # A reminder that has passed may be edited otherwise; a schedule given anew must be to come.
            self._check(new, datetime.now(UTC) if "schedule" in changes else None)
            del raw[table][name]
            raw.setdefault(self._table(new), {})[name] = self._encode(new, entry)

        self._change(update_in)
        return self._written(name)

    def remove(self, name: str) -> Routine:
        def remove_from(raw: dict) -> Routine:
            table, entry = self._found(raw, name)
            try:
                gone = self._decode(table, name, entry, self._file_time())
            except RoutineError:
                # A broken entry can be removed as well: it is what the user would do to fix it.
                gone = Routine(name=name, schedule=str(entry.get("schedule", "")) if isinstance(entry, dict) else "", created=0.0)
            del raw[table][name]
            return gone

        gone = self._change(remove_from)
        self.load()
        return gone

    def set_paused(self, name: str, paused: bool) -> Routine:
        return self.update(name, paused=paused)

    def reminder_name(self, when: datetime) -> str:
        """A free, shell-safe name for a reminder due ``when``: remind-1127-1500, then -2, -3..."""
        base = f"remind-{when.astimezone(self.tz):%m%d-%H%M}"
        with self._lock:
            try:
                raw = self._read_raw()
            except RoutineError:
                raw = {}
        taken = {r.name for r in self.load()} | {name for table in (ROUTINE_TABLE, REMINDER_TABLE) for name in _entries(raw, table)}
        if base not in taken:
            return base
        number = 2
        while f"{base}-{number}" in taken:
            number += 1
        return f"{base}-{number}"

    @staticmethod
    def _entry(raw: dict, name: str) -> dict | None:
        for table in (ROUTINE_TABLE, REMINDER_TABLE):
            entries = _entries(raw, table)
            if name in entries:
                return entries[name]
        return None

    def _found(self, raw: dict, name: str) -> tuple[str, dict]:
        for table in (ROUTINE_TABLE, REMINDER_TABLE):
            entries = _entries(raw, table)
            if name in entries:
                return table, entries[name]
        raise RoutineError(f"there is no routine or reminder called {name!r}", "`tarsctl routines` lists them")

    @staticmethod
    def _table(routine: Routine) -> str:
        return REMINDER_TABLE if routine.is_reminder else ROUTINE_TABLE

    @staticmethod
    def _encode(routine: Routine, old_entry: object) -> dict:
        """The entry as written: keys at their defaults are left out; keys tars does not know are kept."""
        known = {f.name for f in dataclasses.fields(Routine)}
        entry = {key: value for key, value in old_entry.items() if key not in known} if isinstance(old_entry, dict) else {}
        for spec in dataclasses.fields(Routine):
            if spec.name == "name":
                continue
            value = getattr(routine, spec.name)
            if spec.name == "created":
                entry["created"] = datetime.fromtimestamp(value, UTC)
            elif spec.name == "schedule" or value != spec.default:
                entry[spec.name] = list(value) if isinstance(value, tuple) else value
        return entry

    def _written(self, name: str) -> Routine:
        found = self.get(name)
        if found is None:  # only if the file changed again between the write and this read
            raise RoutineError(
                f"{name!r} was written but is not in {self.path} now", "someone changed the file at the same moment; look at it"
            )
        return found


def _entries(raw: dict, table: str) -> dict:
    entries = raw.get(table, {})
    return entries if isinstance(entries, dict) else {}
