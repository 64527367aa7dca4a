"""The routines file: round trips through tars's writes and the user's hand edits, refusals that
say what to fix, and nothing of the user's lost on a broken file or a failed write."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tarsd.routines.book import Book, Routine, RoutineError
from tarsd.routines.toml_file import TomlFile

BERLIN = ZoneInfo("Europe/Berlin")


def brief(**fields) -> Routine:
    return Routine(**{"name": "morning-brief", "schedule": "30 7 * * *", "created": time.time(), "prompt": "What is on today?", **fields})


@pytest.fixture
def book(tmp_path):
    return Book(tmp_path / "routines.toml", BERLIN)


def test_add_update_pause_remove_round_trip(book):
    added = book.add(brief(deliver=("telegram",), tools=("todoist__get_tasks",), quiet=True, runs_per_day=3))
    assert added.deliver == ("telegram",) and added.tools == ("todoist__get_tasks",) and added.quiet and added.runs_per_day == 3
    assert book.path.stat().st_mode & 0o777 == 0o600
    assert Book(book.path, BERLIN).load() == [added]  # another reader sees the same
    changed = book.update("morning-brief", schedule="0 8 * * 1-5", note="Daily/{date}.md")
    assert (changed.schedule, changed.note, changed.created) == ("0 8 * * 1-5", "Daily/{date}.md", added.created)
    assert book.set_paused("morning-brief", True).paused
    assert book.get("morning-brief").paused
    assert book.remove("morning-brief").name == "morning-brief"
    assert book.load() == [] and book.get("morning-brief") is None
    with pytest.raises(RoutineError, match="no routine or reminder called"):
        book.remove("morning-brief")


def test_a_reminder_lives_beside_the_routines_and_gets_a_free_name(book):
    when = datetime(2030, 11, 27, 15, 0, tzinfo=BERLIN)
    name = book.reminder_name(when)
    assert name == "remind-1127-1500"
    book.add(Routine(name=name, schedule="2030-11-27 15:00", created=time.time(), text="Call the dentist", by="model"))
    assert book.reminder_name(when) == "remind-1127-1500-2"
    [reminder] = book.load()
    assert reminder.is_reminder and reminder.by == "model"
    assert "[reminder.remind-1127-1500]" in book.path.read_text(encoding="utf-8")


def test_text_with_newlines_quotes_and_controls_round_trips_in_every_field(book):
    odd = 'line one\nline "two"\r\n\ttab \\ back\u00e9\u2028end'
    heading = 'line "two" \\ back\u00e9 [x] # not a comment'  # the note and its heading are one line each
    note = "Notes/d\u00e9j\u00e0 vu 'quoted' \"too\" [x] {date}.md"
    added = book.add(brief(prompt=odd, note=note, heading=heading, tools=(odd,)))
    again = Book(book.path, BERLIN).get("morning-brief")
    assert again == added
    assert (again.prompt, again.note, again.heading, again.tools) == (odd, note, heading, (odd,))


def test_a_hand_edit_made_since_the_last_load_is_kept(book):
    book.add(brief())
    with book.path.open("a", encoding="utf-8") as handle:
        handle.write('\n[routine.by-hand]\nschedule = "every 2h"\nprompt = "Anything new?"\nmine = "a key tars does not know"\n')
    book.add(brief(name="second"))  # no load in between
    names = {r.name for r in book.load()}
    assert names == {"morning-brief", "second", "by-hand"}
    book.update("by-hand", quiet=True)
    assert 'mine = "a key tars does not know"' in book.path.read_text(encoding="utf-8")


def test_a_broken_file_keeps_the_last_good_list_and_says_what_is_wrong(book):
    book.add(brief())
    good = book.load()
    book.path.write_text('[routine.morning-brief\nschedule = "30 7 * * *"\n', encoding="utf-8")
    assert book.load() == good
    assert "is not valid TOML" in book.problem and "line 1" in book.problem
    with pytest.raises(RoutineError, match="nothing was changed"):
        book.add(brief(name="other"))
    assert book.path.read_text(encoding="utf-8").startswith("[routine.morning-brief\n")  # not written over


def test_bad_entries_are_skipped_and_named_the_good_ones_used(book):
    book.path.write_text(
        '[routine.good]\nschedule = "every 1h"\nprompt = "hi"\n'
        '[routine.bad-schedule]\nschedule = "every fortnight"\nprompt = "hi"\n'
        '[routine.Bad_Name]\nschedule = "every 1h"\nprompt = "hi"\n'
        '[routine.both]\nschedule = "every 1h"\nprompt = "hi"\ndeliver = ["pigeon"]\n'
        '[reminder.good]\nschedule = "2030-01-01 10:00"\ntext = "twice"\n',
        encoding="utf-8",
    )
    assert [r.name for r in book.load()] == ["good"]
    for name in ("bad-schedule", "Bad_Name", "both", "[reminder.good]", "pigeon", "used twice"):
        assert name in book.problem
    book.update("good", quiet=True)  # writing keeps the entries tars could not read
    text = book.path.read_text(encoding="utf-8")
    assert "every fortnight" in text and "Bad_Name" in text and "pigeon" in text


@pytest.mark.parametrize(
    ("routine", "said"),
    [
        (brief(name="Morning Brief"), "cannot be a name"),
        (brief(name="x; rm -rf ~"), "cannot be a name"),
        (brief(text="also a text"), "exactly one of prompt"),
        (brief(prompt=""), "exactly one of prompt"),
        (brief(schedule="every blue moon"), "not an interval"),
        (brief(schedule="2020-01-01 10:00"), "passed already"),
        (brief(deliver=("sms",)), "cannot deliver to 'sms'"),
        (brief(runs_per_day=0), "runs_per_day must be a whole number, 1 or more"),
        (brief(by="stranger"), "by must be one of"),
    ],
)
def test_invalid_routines_are_refused_with_what_to_do(book, routine, said):
    with pytest.raises(RoutineError) as refused:
        book.add(routine)
    assert said in str(refused.value)
    assert not book.path.exists()


def test_a_duplicate_name_is_refused_routine_or_reminder(book):
    book.add(brief())
    with pytest.raises(RoutineError, match="already") as refused:
        book.add(Routine(name="morning-brief", schedule="2030-01-01 10:00", created=time.time(), text="x"))
    assert refused.value.hint
    with pytest.raises(RoutineError, match="cannot be changed"):
        book.update("morning-brief", created=0.0)
    with pytest.raises(RoutineError, match="no field"):
        book.update("morning-brief", colour="red")


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path):
    """A full disk, for real: the writer runs with a file size limit (RLIMIT_FSIZE) below the new file's size."""
    path = tmp_path / "routines.toml"
    book = Book(path, BERLIN)
    book.add(brief())
    before = path.read_bytes()
    script = f"""
import resource, signal, sys, time
from pathlib import Path
from zoneinfo import ZoneInfo
from tarsd.routines.book import Book, Routine, RoutineError
from tarsd.routines.toml_file import TomlFile
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, ({len(before) + 50}, resource.RLIM_INFINITY))
book = Book(Path({str(path)!r}), ZoneInfo("Europe/Berlin"))
try:
    book.add(Routine(name="big", schedule="every 1h", created=time.time(), prompt="x" * 100_000))
except RoutineError as exc:
    print("refused:", exc, "|", exc.hint)
    sys.exit(0)
sys.exit("written")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "cannot write" in done.stdout and "nothing was changed" in done.stdout and "disk space" in done.stdout
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["routines.toml"]


def test_load_reads_again_only_when_the_file_changed(book):
    book.add(brief())
    version = book.version
    book.load()
    assert book.version == version
    book.path.write_text(book.path.read_text(encoding="utf-8").replace("30 7", "45 7"), encoding="utf-8")
    assert book.get("morning-brief").schedule == "45 7 * * *"
    assert book.version == version + 1


def test_created_is_read_as_a_date_time_or_a_number(book):
    book.path.write_text(
        '[routine.a]\nschedule = "every 1h"\nprompt = "p"\ncreated = 2026-11-26T17:00:00Z\n'
        '[routine.b]\nschedule = "every 1h"\nprompt = "p"\ncreated = 2026-11-26T18:00:00\n'
        '[routine.c]\nschedule = "every 1h"\nprompt = "p"\ncreated = 1790000000\n',
        encoding="utf-8",
    )
    a, b, c = book.load()
    assert a.created == datetime(2026, 11, 26, 17, tzinfo=ZoneInfo("UTC")).timestamp()
    assert b.created == a.created  # naive: Berlin time, 18:00 there is 17:00 UTC
    assert c.created == 1790000000.0
    assert b.created - a.created == timedelta(0).total_seconds()


# ---- every door's checks, on the file itself ----


def test_one_bad_entry_of_each_kind_is_named_and_skipped_and_the_good_ones_kept(tmp_path):
    book = Book(tmp_path / "routines.toml", BERLIN, min_interval_seconds=60, vault=tmp_path / "vault")
    bad = {
        "far": 'schedule = "every 10000000 d"',
        "west": 'schedule = "9999-12-31T23:59-12:00"',
        "east": 'schedule = "0001-01-01T00:00+14:00"',
        "often": 'schedule = "every 10 s"',
        "quartz": 'schedule = "0 9 ? * mon"',
        "early": 'schedule = "every 1h"\ncreated = -5',
        "endless": 'schedule = "every 1h"\ncreated = inf',
        "future": 'schedule = "every 1h"\ncreated = 9999-12-31T23:59:59-12:00',
        "ancient": 'schedule = "every 1h"\ncreated = 0001-01-01T00:00:00+14:00',
        "redirect": 'schedule = "every 1h"\ndeliver = ["note"]\nnote = "x/../Other.md#h"',
        "absolute": 'schedule = "every 1h"\nnote = "/etc/passwd"',
        "closing": 'schedule = "every 1h"\nheading = "notes ##"',
    }
    text = "".join(f'[routine.{name}]\n{fields}\nprompt = "p"\n\n' for name, fields in bad.items())
    text += '[routine."newline\\n"]\nschedule = "every 1h"\nprompt = "p"\n\n'
    text += "".join(f'[routine.good-{n}]\nschedule = "{n} 7 * * *"\nprompt = "p"\n\n' for n in range(5))
    book.path.write_text(text, encoding="utf-8")
    assert [r.name for r in book.load()] == [f"good-{n}" for n in range(5)]
    for name in [*bad, '"newline\\n"']:
        assert f"[routine.{name}]" in book.problem, name
    for said in ("366 days", "10 years", "at most every 1 min", "Quartz", "from 1970 to now", "'..'", "not a path inside", "read back"):
        assert said in book.problem, said


def test_a_name_ending_in_a_newline_is_refused(book):
    for name in ("brief\n", "brief\r\n", "\nbrief", "brief\x00"):
        with pytest.raises(RoutineError, match="cannot be a name"):
            book.add(brief(name=name))
    assert not book.path.exists()


@pytest.mark.parametrize(
    ("note", "said"),
    [
        ("x/../Other.md#h", "'..'"),
        ("../outside.md", "'..'"),
        ("Daily/{date}.md#Heading", "'#'"),
        ("Daily^block.md", "'^'"),
        ("Daily|alias.md", "'|'"),
        ("[[Daily]]", "'[['"),
        ("/etc/cron.d/x", "not a path inside the vault"),
        ("~/notes.md", "not a path inside the vault"),
        ("Linked/{date}.md", "outside the vault"),
        pytest.param("a" * 1_000_000, "at most 500", id="a megabyte"),
    ],
)
def test_a_note_path_that_leaves_or_redirects_is_refused_when_written(tmp_path, note, said):
    vault = tmp_path / "vault"
    vault.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (vault / "Linked").symlink_to(tmp_path / "elsewhere")
    book = Book(tmp_path / "routines.toml", BERLIN, vault=vault)
    with pytest.raises(RoutineError) as refused:
        book.add(brief(deliver=("note",), note=note))
    assert said in str(refused.value)
    assert "Daily/{date}.md" in refused.value.hint
    book.add(brief(deliver=("note",), note="Daily/{date}.md", heading="C# notes"))  # a heading may hold a '#'


# ---- the file itself: not a file, a symlink, two writers ----


def test_a_fifo_in_place_of_the_file_is_a_problem_named_not_a_hang(tmp_path):
    path = tmp_path / "routines.toml"
    os.mkfifo(path)
    book = Book(path, BERLIN)
    assert book.load() == []  # returns at once: nothing opened it for writing
    assert "not a regular file" in book.problem and "FIFO" in book.problem
    with pytest.raises(RoutineError, match="nothing was changed"):
        book.add(brief())
    assert stat.S_ISFIFO(path.lstat().st_mode)  # left as it was
    folder = Book(tmp_path, BERLIN)
    assert folder.load() == [] and "a folder" in folder.problem


def test_a_symlinked_file_stays_a_link_and_the_file_it_points_to_is_written(tmp_path):
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "routines.toml"
    real.write_text('[routine.by-hand]\nschedule = "every 2h"\nprompt = "hi"\n', encoding="utf-8")
    link = tmp_path / "config" / "routines.toml"
    link.parent.mkdir()
    link.symlink_to(real)
    book = Book(link, BERLIN)
    book.add(brief())
    assert link.is_symlink() and link.resolve() == real
    assert {r.name for r in Book(real, BERLIN).load()} == {"by-hand", "morning-brief"}
    assert sorted(p.name for p in dotfiles.iterdir()) == ["routines.toml"]  # no temp file left beside it
    assert sorted(p.name for p in link.parent.iterdir()) == ["routines.toml"]


EDITOR = """
import random, sys, time
rng = random.Random(7)
for line in sys.stdin:
    # Told a file tars is writing to now: a moment later, a hand edit as `cat >> routines.toml` makes it.
    time.sleep(rng.uniform(0, 0.004))
    with open(line.strip(), "a", encoding="utf-8") as handle:
        handle.write('\\n[routine.by-hand]\\nschedule = "every 2h"\\nprompt = "mine"\\n')
"""
TRIALS = 200


def test_a_hand_editor_racing_adds_loses_no_entry(tmp_path):
    """200 trials, each an add racing an append by another process: before, 1 write in 40 lost the
    edit made between its read and its rename; now each such write is made again on what is there."""
    editor = subprocess.Popen([sys.executable, "-c", EDITOR], stdin=subprocess.PIPE, text=True)
    redone = 0
    try:
        for trial in range(TRIALS):
            path = tmp_path / f"routines-{trial}.toml"
            path.write_text('[routine.first]\nschedule = "every 2h"\nprompt = "hi"\n', encoding="utf-8")
            editor.stdin.write(f"{path}\n")
            editor.stdin.flush()
            book = Book(path, BERLIN)
            book.add(brief())
            redone += book.redone
    finally:
        editor.stdin.close()
        assert editor.wait(timeout=120) == 0
    lost = []
    for trial in range(TRIALS):
        names = {r.name for r in Book(tmp_path / f"routines-{trial}.toml", BERLIN).load()}
        lost += [f"{trial}: {name}" for name in ("first", "morning-brief", "by-hand") if name not in names]
    assert lost == [], f"{len(lost)} lost: {lost[:5]}"
    print(f"{redone} of {TRIALS} writes made again because the editor had changed the file")


class EditedAt(TomlFile):
    """A routines file another writer appends to at a chosen moment of a write: ``before``, just
    before the check that precedes the rename; ``after``, between that check and the rename."""

    def __init__(self, path, moment: str):
        super().__init__(path, ("routine", "reminder"))
        self.moment, self.edits = moment, 0

    def _append(self) -> None:
        self.edits += 1
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(f'\n[routine.by-hand-{self.edits}]\nschedule = "every 2h"\nprompt = "hand"\n')

    def _unchanged(self, read) -> bool:
        if self.moment == "before" and self.edits == 0:
            self._append()
        same = super()._unchanged(read)
        if self.moment == "after" and self.edits == 0:
            self._append()  # lands in the file about to be replaced
        return same


@pytest.mark.parametrize("moment", ["before", "after"])
def test_an_edit_made_during_a_write_is_kept(tmp_path, moment):
    path = tmp_path / "routines.toml"
    path.write_text('[routine.first]\nschedule = "every 2h"\nprompt = "hi"\n', encoding="utf-8")
    book = Book(path, BERLIN)
    book.file = edited = EditedAt(path, moment)
    book.add(brief())
    assert {r.name for r in Book(path, BERLIN).load()} == {"first", "by-hand-1", "morning-brief"}
    assert book.redone == 1 and edited.edits == 1
