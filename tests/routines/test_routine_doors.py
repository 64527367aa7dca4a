"""Every door a schedule comes in by checks it the same way, against a real tarsd: the socket
(tarsctl and the web page's handler), the model's remind_user and propose_routine tools (the fake
Ollama as the model), and hand edits read from the routines file, even when that file is a FIFO.
A bad schedule is refused with what is allowed, a tool's refusal goes back to the model as a tool
error and its answer still comes, and a bad entry never stops tarsd or the good entries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.daemon import TarsDaemon, wait_for
from harness.fake_llm import FakeOllama
from harness.paths import MODEL_DIR
from tarsctl.client import RemoteError
from tarsctl.protocol import (
    Chat,
    ChatDone,
    PendingRules,
    PendingRulesReply,
    Remind,
    RoutineAction,
    RoutineRan,
    Routines,
    RoutinesReply,
    SaveRoutine,
)
from tarsctl.routine_times import UNITS
from tarsd.routines.schedule import _UNITS as schedule_units

OVERFLOWS = ["every 10000000 d", "9999-12-31T23:59-12:00", "0001-01-01T00:00+14:00"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """tarsd whose routines file is a FIFO when it starts (it once hung reading one)."""
    root = tmp_path_factory.mktemp("doors")
    vault, state = root / "vault", root / "state"
    vault.mkdir()
    state.mkdir()
    os.mkfifo(state / "routines.toml")
    (state / "config.toml").write_text('[routines]\ntimezone = "Europe/Berlin"\nmin_interval_seconds = 60\n')
    with FakeOllama() as ollama:
        env = {"TARS_CHAT_OLLAMA_HOST": ollama.url, "TARS_CHAT_OLLAMA_MODEL": "fake-chat", "TARS_CHAT_MAX_RETRIES": "0"}
        daemon = TarsDaemon(vault, state, MODEL_DIR, "none", env).start()
        try:
            yield daemon, ollama, state
        finally:
            daemon.stop()
            daemon.cleanup()


def call(daemon: TarsDaemon, request):
    with daemon.client() as client:
        return client.call(request)


def refused(daemon: TarsDaemon, request) -> RemoteError:
    with pytest.raises(RemoteError) as caught:
        call(daemon, request)
    return caught.value


def routines(daemon: TarsDaemon) -> RoutinesReply:
    reply = call(daemon, Routines(id=1))
    assert isinstance(reply, RoutinesReply)
    return reply


def test_a_fifo_as_the_routines_file_is_named_and_tarsd_serves(world):
    daemon, _, state = world
    reply = routines(daemon)  # answered: tarsd started and did not block on the FIFO
    assert reply.routines == [] and "not a regular file" in reply.problem and "FIFO" in reply.problem
    error = refused(daemon, SaveRoutine(id=1, name="brief", schedule="30 7 * * *", prompt="hi"))
    assert error.error.code == "bad_request" and "nothing was changed" in error.error.message
    (state / "routines.toml").unlink()  # the user puts a file there: the rest of the module uses it


@pytest.mark.parametrize(
    ("schedule", "said"),
    [
        ("every 10000000 d", "the longest is 366 days"),
        ("9999-12-31T23:59-12:00", "at most 10 years"),
        ("0001-01-01T00:00+14:00", "at most 10 years"),
        ("every 30 s", "at most every 1 min"),
        ("0 9 * * 8", "from 0 to 7"),
    ],
)
def test_the_socket_refuses_a_schedule_that_cannot_be_represented(world, schedule, said):
    daemon, _, state = world
    error = refused(daemon, SaveRoutine(id=1, name="far", schedule=schedule, prompt="hi"))
    assert error.error.code == "bad_request" and said in error.error.message and error.error.hint
    assert "far" not in {r.name for r in routines(daemon).routines}


def test_the_socket_refuses_a_reminder_time_that_cannot_be_represented(world):
    daemon, _, state = world
    for when, said in [("in 99999999999 d", "at most 10 years"), ("9999-12-31T23:59-12:00", "at most 10 years"), ("in 5", "in 5 what?")]:
        error = refused(daemon, Remind(id=1, when=when, text="x"))
        assert error.error.code == "bad_request" and said in error.error.message, when


def test_a_note_target_that_leaves_the_vault_is_refused_when_added_not_at_delivery(world):
    daemon, _, state = world
    for note in ("x/../Other.md#h", "/etc/motd", "../outside"):
        error = refused(daemon, SaveRoutine(id=1, name="noted", schedule="30 7 * * *", prompt="hi", deliver=["note"], note=note))
        assert error.error.code == "bad_request" and "note" in error.error.message, note


def test_a_models_bad_schedule_or_long_text_is_a_tool_error_and_its_answer_still_comes(world):
    daemon, ollama, _ = world
    calls = [{"name": "propose_routine", "arguments": {"name": f"far-{n}", "schedule": s, "prompt": "hi"}} for n, s in enumerate(OVERFLOWS)]
    calls += [
        {"name": "remind_user", "arguments": {"when": "in 99999999999 d", "text": "someday"}},
        {"name": "remind_user", "arguments": {"when": "in 2 h", "text": "x" * 110_000}},
        {"name": "propose_routine", "arguments": {"name": "often", "schedule": "every 10 s", "prompt": "hi"}},
    ]
    ollama.script = [{"tool_calls": calls}, {"text": "I could not set those."}]
    done = call(daemon, Chat(id=1, conversation="cli-doors", message="remind me in a billion days"))
    assert isinstance(done, ChatDone) and done.text == "I could not set those."
    results = [m["content"] for m in ollama.bodies("/api/chat")[-1]["messages"] if m["role"] == "tool"]
    assert len(results) == len(calls) and all(result.startswith("error:") for result in results), results
    for result, said in zip(results, ["366 days", "10 years", "10 years", "10 years", "at most 1,000", "at most every 1 min"], strict=True):
        assert said in result, result
    assert routines(daemon).routines == []
    pending = call(daemon, PendingRules(id=1))
    assert isinstance(pending, PendingRulesReply) and not [p for p in pending.rules if p.action == "routine"]


def test_bad_hand_edits_are_named_and_skipped_and_the_good_entries_run(world):
    daemon, _, state = world
    path: Path = state / "routines.toml"
    bad = "".join(f'[routine.bad-{n}]\nschedule = "{s}"\nprompt = "hi"\n\n' for n, s in enumerate(OVERFLOWS))
    bad += '[routine."newline\\n"]\nschedule = "every 1h"\nprompt = "hi"\n\n'
    bad += '[routine.redirect]\nschedule = "every 1h"\nprompt = "hi"\ndeliver = ["note"]\nnote = "x/../Other.md#h"\n\n'
    good = '[reminder.soon]\nschedule = "every 1 min"\ntext = "still here"\ncreated = ' + str(int(time.time()) - 55) + "\n"
    path.write_text(bad + good, encoding="utf-8")
    reply = routines(daemon)
    assert [r.name for r in reply.routines] == ["soon"]
    for name in ("[routine.bad-0]", "[routine.bad-1]", "[routine.bad-2]", '[routine."newline\\n"]', "[routine.redirect]"):
        assert name in reply.problem, name
    # The clock goes on: the good reminder is sent at its minute (the bad entries never reach it).
    wait_for(lambda: routines(daemon).routines[0].last_run is not None, "the good reminder to be sent", deadline=120)
    assert json.dumps(reply.problem).count("[routine.") == 5


# ---- tarsctl remind: a WHEN it cannot use is a usage error (exit 2), said before anything is sent ----


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (["in", "5"], 'in 5 what? say "in 5 min"'),
        (["in", "5", "tea"], 'in 5 what? say "in 5 min"'),
        (["in", "the", "evening"], "in how long?"),
        (["soon", "tea"], "'soon' is not a time"),
        (["in", "1.5", "h", "tea"], "whole number"),
        (["in", "20", "min"], "say what to remind you of"),
    ],
)
def test_a_reminder_time_typed_wrong_is_a_usage_error_at_the_client(tmp_path, words, said):
    nowhere = {**os.environ, "TARS_SOCKET": str(tmp_path / "no.sock"), "TARS_CONFIG": str(tmp_path / "config.toml")}
    done = subprocess.run([sys.executable, "-m", "tarsctl", "remind", *words], env=nowhere, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done  # not 3 (no tarsd): refused before connecting
    assert said in done.stderr and "tarsctl remind in 20 min tea" in done.stderr


def test_a_reminder_time_tarsd_refuses_is_a_usage_error_too(world):
    daemon, _, _ = world
    for words, said in [(["2020-01-01", "10:00", "x"], "passed already"), (["in", "99999999999", "d", "x"], "at most 10 years")]:
        done = daemon.tarsctl("remind", *words)
        assert done.returncode == 2 and said in done.stderr, done


def test_the_client_knows_the_units_tarsd_knows():
    assert UNITS == set(schedule_units)


def test_a_heading_with_a_hash_gets_every_message_under_it(world):
    """'C# notes' once split the note's target at its '#': the messages went to a note 'X.md#C'."""
    daemon, ollama, _ = world
    ollama.script = [{"text": "the answer"}] * 50  # a run may ask the model more than once (its session log's summary)
    saved = SaveRoutine(
        id=1, name="csharp", schedule="0 6 1 1 *", prompt="hi", deliver=["note"], note="Notes/{date}.md", heading="C# notes"
    )
    call(daemon, saved)
    for _ in range(2):
        assert isinstance(call(daemon, RoutineAction(id=1, name="csharp", action="run")), RoutineRan)
    [note] = (daemon.vault / "Notes").glob("*.md")
    wait_for(lambda: note.read_text(encoding="utf-8").count("the answer") == 2, "the second delivery")
    text = note.read_text(encoding="utf-8")
    assert text.count("## C# notes") == 1 and text.startswith("## C# notes\n") and text.count("**") == 4  # two entries under it
    assert list((daemon.vault / "Notes").iterdir()) == [note] and not [p for p in daemon.vault.rglob("*#*")]  # none named after the heading
    call(daemon, RoutineAction(id=1, name="csharp", action="remove"))
