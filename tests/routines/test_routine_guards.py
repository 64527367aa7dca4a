"""What keeps routines and reminders within bounds, on real parts (a real routines file, a real
index database, a real vault folder): a note target stays in the vault and writes under its heading
only; one-line fields; the model's reminders are capped, and refused where routines do not run."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from tarsd.chat.routine_tools import MAX_MODEL_REMINDERS, MAX_REMINDER_TEXT, RoutineTools
from tarsd.memory.pending_rules import PendingRules
from tarsd.routines.book import Book, Routine, RoutineError
from tarsd.speaking.vault_note import NoteTargetError, append_to_note, entry, insert_under, note_path
from tarsd.store.database import Store

BERLIN = ZoneInfo("Europe/Berlin")


def test_a_message_goes_at_the_end_of_its_headings_section_and_nowhere_else():
    note = "# Day\n\n## Tasks\n- a\n\n## tars\n\nfirst\n\n### sub\nx\n\n## Later\nkeep\n"
    written = insert_under(note, "tars", "**07:30 brief**\nsecond\n")
    assert written == "# Day\n\n## Tasks\n- a\n\n## tars\n\nfirst\n\n### sub\nx\n\n**07:30 brief**\nsecond\n\n## Later\nkeep\n"
    assert insert_under("# Day\n", "tars", "hi\n") == "# Day\n\n## tars\n\nhi\n"  # no such heading: a new section at the end
    assert insert_under("", "tars", "hi\n") == "## tars\n\nhi\n"
    assert insert_under("## TARS\nold\n", "tars", "hi\n") == "## TARS\nold\n\nhi\n"  # the last section: appended


def test_the_note_target_stays_inside_the_vault(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, vault / "Daily")
    when = datetime(2026, 11, 26, 7, 30, tzinfo=BERLIN)
    assert note_path("Daily/{date}", when) == "Daily/2026-11-26.md"
    with pytest.raises(NoteTargetError):
        append_to_note(vault, "Daily/2026-11-26.md", "tars", entry("brief", "hi", when))  # through a symlink out
    with pytest.raises(NoteTargetError):
        append_to_note(vault, "../escape.md", "tars", "hi\n")
    assert list(outside.iterdir()) == [] and not (tmp_path / "escape.md").exists()
    assert append_to_note(vault, "Journal/2026-11-26.md", "tars", entry("brief", "all fine", when)) == "Journal/2026-11-26.md"
    assert (vault / "Journal/2026-11-26.md").read_text() == "## tars\n\n**07:30 brief**\nall fine\n"
    with pytest.raises(NoteTargetError):
        note_path("  ", when)  # no note named: says which setting names one


@pytest.mark.parametrize("field", ["heading", "note", "schedule"])
def test_one_line_fields_refuse_a_line_break(tmp_path, field):
    book = Book(tmp_path / "routines.toml", BERLIN)
    fields = {"heading": "tars", "note": "Daily/{date}.md", "schedule": "every 1h"}
    fields[field] += "\n# Injected"
    with pytest.raises(RoutineError):
        book.add(Routine(name="brief", created=time.time(), prompt="hi", **fields))
    assert book.load() == []


def test_the_models_reminders_are_capped_and_refused_where_routines_do_not_run(tmp_path):
    store = Store(tmp_path / "index.sqlite3")
    try:
        book = Book(tmp_path / "routines.toml", BERLIN)
        tools = RoutineTools(book, PendingRules(store), ["inbox"])
        for n in range(MAX_MODEL_REMINDERS):
            assert json.loads(tools.remind({"when": f"in {n + 1} h", "text": f"reminder {n}"}, "cli"))["status"] == "set"
        refused = tools.remind({"when": "in 30 h", "text": "one too many"}, "cli")
        assert refused.startswith("error:") and "wait already" in refused
        book.add(Routine(name="mine", schedule="every 1h", created=time.time(), text="the user's own"))  # the user's: not counted
        assert len(book.load()) == MAX_MODEL_REMINDERS + 1
        from_telegram = RoutineTools(Book(tmp_path / "other.toml", BERLIN), PendingRules(store), ["inbox"])
        assert json.loads(from_telegram.remind({"when": "in 1 h", "text": "x"}, "telegram:42"))["to"] == ["telegram"]
        disabled = RoutineTools(Book(tmp_path / "third.toml", BERLIN), PendingRules(store), ["inbox"], enabled=False)
        assert "enabled = false" in disabled.remind({"when": "in 1 h", "text": "x"}, "cli")
        assert disabled.book.load() == []
    finally:
        store.close()


def test_a_heading_is_matched_as_a_whole_heading_line_outside_code():
    fenced = "# Day\n\n```markdown\n## tars\nnot here\n```\n\n~~~\n## tars\n~~~\n\n## Later\nkeep\n"
    assert insert_under(fenced, "tars", "hi\n") == fenced.rstrip("\n") + "\n\n## tars\n\nhi\n"  # in code: not a heading
    assert insert_under("## C#\nold\n\n## Next\n", "C#", "hi\n") == "## C#\nold\n\nhi\n\n## Next\n"  # "#" kept in the text
    assert insert_under("## C# notes\nold\n", "C# notes", "hi\n") == "## C# notes\nold\n\nhi\n"
    assert insert_under("## tars log\nold\n", "tars", "hi\n") == "## tars log\nold\n\n## tars\n\nhi\n"  # whole text only
    assert insert_under("    ## tars\ncode\n", "tars", "hi\n") == "    ## tars\ncode\n\n## tars\n\nhi\n"  # indented 4: code
    assert insert_under("## tars ##\nold\n", "tars", "hi\n") == "## tars ##\nold\n\nhi\n"  # a closing run is not text


def test_the_models_reminder_text_is_capped(tmp_path):
    store = Store(tmp_path / "index.sqlite3")
    try:
        tools = RoutineTools(Book(tmp_path / "routines.toml", BERLIN), PendingRules(store), ["inbox"])
        refused = tools.remind({"when": "in 1 h", "text": "x" * (MAX_REMINDER_TEXT + 1)}, "telegram:42")
        assert refused.startswith("error:") and f"at most {MAX_REMINDER_TEXT:,}" in refused
        assert json.loads(tools.remind({"when": "in 1 h", "text": "y" * MAX_REMINDER_TEXT}, "cli"))["status"] == "set"
        assert [r.text for r in tools.book.load()] == ["y" * MAX_REMINDER_TEXT]
    finally:
        store.close()
