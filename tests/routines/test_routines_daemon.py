"""Routines and reminders against a real tarsd: the routines file, the clock, the runner and the
deliveries, with the fake Ollama as the model, the fake Bot API as Telegram, and a real MCP tool
server whose tool asks before it runs. One daemon serves the module's first tests; the tests that
stop and start tarsd (a reminder across a restart, runs missed while it was stopped) have their own.
"""

from __future__ import annotations

import json
import re
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from harness.daemon import TarsDaemon, wait_for
from harness.fake_llm import FakeOllama
from harness.fake_telegram import FakeTelegram
from harness.paths import MODEL_DIR
from harness.tool_servers import Journal, stdio_server, toml_config
from harness.vault_files import write
from tarsctl.client import RemoteError
from tarsctl.protocol import (
    Chat,
    ChatDone,
    DecideRule,
    Inbox,
    InboxReply,
    PendingRules,
    PendingRulesReply,
    Remind,
    RoutineAction,
    RoutineRan,
    Routines,
    RoutineSaved,
    RoutinesReply,
    RuleDecided,
    SaveRoutine,
)

TOKEN = "7700112233:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
ME = 4_200_000_001


def private(path: Path, text: str) -> None:
    path.write_text(text + "\n")
    path.chmod(0o600)


def routine_turn(body: dict) -> dict:
    """The model: a routine's run is answered by what its prompt asks for ("Say: X" -> X), so each
    test's routine gets its own answer whatever else runs meanwhile."""
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    if match := re.search(r"Say: (.+)", users[-1] if users else ""):
        return {"text": match.group(1)}
    return {"text": "ok"}


def say_hello(telegram: FakeTelegram) -> None:
    """The user's first message to the bot: /start, what Telegram sends when a user opens a bot the first
    time (answered with the commands). Telegram lets a bot write to a user only once the user has written."""
    start = time.time()
    telegram.text(ME, "/start")
    [answer] = telegram.wait_texts(ME, 1, start)
    assert answer.startswith("Commands:") and "/remind" in answer


def start_daemon(root: Path, telegram: FakeTelegram, ollama: FakeOllama, extra: str = "", tools: str = "") -> TarsDaemon:
    vault, state = root / "vault", root / "state"
    vault.mkdir(exist_ok=True)
    state.mkdir(exist_ok=True)
    write(vault, "Bike.md", "# Bike\n\nThe chain was replaced in May.\n")
    private(state / "telegram_token", TOKEN)
    config = tools
    config += f"\n[telegram]\nenabled = true\nallowed_users = [{ME}]\napi_url = {json.dumps(telegram.url)}\npoll_timeout_seconds = 1\n"
    config += '\n[routines]\ntimezone = "Europe/Berlin"\nmin_interval_seconds = 1\n' + extra
    (state / "config.toml").write_text(config)
    env = {"TARS_CHAT_OLLAMA_HOST": ollama.url, "TARS_CHAT_OLLAMA_MODEL": "fake-chat", "TARS_CHAT_MAX_RETRIES": "0"}
    return TarsDaemon(vault, state, MODEL_DIR, "none", env).start()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("routines")
    journal = Journal(root / "journal.jsonl")
    with FakeOllama() as ollama, FakeTelegram(TOKEN) as telegram:
        ollama.script = [routine_turn] * 10_000
        tools = toml_config({"tasks": stdio_server("tasks", journal.path)}, approval_timeout_seconds=30)
        daemon = start_daemon(root, telegram, ollama, tools=tools)
        try:
            wait_for(lambda: all(s.state == "ready" for s in daemon.status().tool_servers), "the MCP server to be ready")
            wait_for(lambda: telegram.called("getUpdates"), "tarsd to poll for updates")
            say_hello(telegram)
            yield daemon, ollama, telegram, journal
        finally:
            daemon.stop()
            daemon.cleanup()


def call(daemon: TarsDaemon, request, expected: type):
    with daemon.client() as client:
        reply = client.call(request)
    assert isinstance(reply, expected), reply
    return reply


def listed(daemon: TarsDaemon, name: str, runs: int = 0):
    reply = call(daemon, Routines(id=1, name=name, runs=runs), RoutinesReply)
    [found] = reply.routines
    return found


def inbox(daemon: TarsDaemon) -> list:
    return call(daemon, Inbox(id=1, limit=100), InboxReply).messages


def sessions_with(daemon: TarsDaemon, text: str) -> list[Path]:
    folder = daemon.vault / "sessions"
    return [p for p in folder.rglob("*.md") if text in p.read_text(encoding="utf-8")] if folder.exists() else []


def test_a_routine_every_few_seconds_delivers_to_telegram_and_is_logged_in_sessions(world):
    daemon, _ollama, telegram, _ = world
    start = time.time()
    saved = call(
        daemon,
        SaveRoutine(id=1, name="pulse", schedule="every 1s", prompt="Say: the pulse is steady", deliver=["telegram"]),
        RoutineSaved,
    )
    assert saved.status == "added" and saved.routine.next_run > start
    texts = telegram.wait_texts(ME, 2, start)  # two runs, two messages
    assert all("the pulse is steady" in text for text in texts[:2])
    call(daemon, RoutineAction(id=1, name="pulse", action="pause"), RoutineSaved)
    found = listed(daemon, "pulse", runs=10)
    assert found.paused and found.next_run == 0.0
    assert found.last_run.outcome == "spoke" and found.last_run.conversation == "routine:pulse"
    assert len([r for r in found.runs if r.outcome == "spoke"]) >= 2
    # Each run is a conversation of its own, logged to sessions/ when it ends.
    assert wait_for(lambda: sessions_with(daemon, "conversation: routine:pulse\nsource: scheduler"), "the runs' session logs")
    # And every message is in the inbox, its Telegram delivery sent.
    mine = [m for m in inbox(daemon) if m.source == "routine:pulse"]
    assert len(mine) >= 2 and all(d.target == "telegram" and d.state == "sent" for m in mine for d in m.deliveries)
    runs_then = len(listed(daemon, "pulse", runs=50).runs)
    time.sleep(1.5)
    assert len(listed(daemon, "pulse", runs=50).runs) == runs_then  # paused: no more runs


def test_speak_only_when_needed_sends_nothing_when_the_model_says_nothing_is_needed(world):
    daemon, _ollama, telegram, _ = world
    start = time.time()
    prompt = "Say: NOTHING_TO_SAY"
    call(daemon, SaveRoutine(id=1, name="watch", schedule="every 1s", prompt=prompt, deliver=["telegram"], quiet=True), RoutineSaved)
    wait_for(lambda: (r := listed(daemon, "watch").last_run) is not None and r.outcome == "quiet", "a quiet run")
    call(daemon, RoutineAction(id=1, name="watch", action="pause"), RoutineSaved)
    assert not [t for t in telegram.texts(ME, start) if "NOTHING" in t]
    assert not [m for m in inbox(daemon) if m.source == "routine:watch"]
    assert wait_for(
        lambda: sessions_with(daemon, "conversation: routine:watch\nsource: scheduler"), "the quiet run's session log"
    )  # the run is still recorded


def test_a_model_proposed_routine_does_nothing_until_approved(world):
    daemon, ollama, telegram, _ = world
    arguments = {"name": "proposed", "schedule": "every 1s", "prompt": "Say: proposed and approved", "deliver": ["telegram"]}
    ollama.script = [{"tool_calls": [{"name": "propose_routine", "arguments": arguments}]}, {"text": "I proposed it."}] + [
        routine_turn
    ] * 10_000
    done = call(daemon, Chat(id=1, conversation="cli-propose", message="set up a check every second"), ChatDone)
    assert done.text == "I proposed it."
    [waiting] = [p for p in call(daemon, PendingRules(id=1), PendingRulesReply).rules if p.action == "routine"]
    assert "[routine.proposed]" in waiting.rule and "proposed and approved" in waiting.rule
    assert waiting.path.endswith("routines.toml")
    assert "proposed" not in {r.name for r in call(daemon, Routines(id=1), RoutinesReply).routines}
    start = time.time()
    time.sleep(1.5)  # a second and a half of a routine due every second
    assert not [t for t in telegram.texts(ME, start) if "proposed and approved" in t]  # nothing ran
    decided = call(daemon, DecideRule(id=1, rule_id=waiting.id, approve=True, rule=waiting.rule), RuleDecided)
    assert decided.approved and decided.action == "routine"
    assert listed(daemon, "proposed").by == "user"  # approved: the user's routine now
    telegram.wait_texts(ME, 1, start)
    call(daemon, RoutineAction(id=1, name="proposed", action="remove"), RoutineSaved)


def test_an_ask_tool_in_a_run_is_asked_on_telegram_and_denied_where_nobody_can_be_asked(world):
    daemon, ollama, telegram, journal = world
    since, start = journal.mark(), time.time()
    add = {"tool_calls": [{"name": "tasks_add_tasks", "arguments": {"tasks_to_add": ["water the plants"]}}]}

    def chores(body: dict) -> dict:
        """Asked for the chores, the model calls the tool; told what came of it, it says so."""
        last = body["messages"][-1]
        if last["role"] == "tool":
            return {"text": "Could not add it." if last["content"].startswith("not run") else "Added the plants."}
        if last["role"] == "user" and "Add my chores." in last["content"]:
            return add
        return routine_turn(body)

    ollama.script = [chores] * 10_000
    call(daemon, SaveRoutine(id=1, name="asker", schedule="0 6 1 1 *", prompt="Add my chores.", deliver=["telegram"]), RoutineSaved)
    ran: list = []
    runner = threading.Thread(target=lambda: ran.append(call(daemon, RoutineAction(id=1, name="asker", action="run"), RoutineRan)))
    runner.start()
    question = telegram.wait_question(ME, start)
    assert "tasks_add_tasks" in question["text"] and "water the plants" in question["text"]
    [[run_it, _dont]] = question["reply_markup"]["inline_keyboard"]
    telegram.tap(ME, question, run_it["callback_data"])
    runner.join(60)
    [result] = ran
    assert result.run.outcome == "spoke" and "Added the plants." in result.text
    assert [c["arguments"] for c in journal.calls(since, tool="add_tasks")] == [{"tasks_to_add": ["water the plants"]}]
    assert any("Added the plants." in t for t in telegram.wait_texts(ME, 2, start))

    # The same routine delivering only to the inbox: nobody can be asked, so the call is not run, and the run says so.
    call(daemon, SaveRoutine(id=1, name="asker", edit=True, deliver=["inbox"]), RoutineSaved)
    since = journal.mark()
    result = call(daemon, RoutineAction(id=1, name="asker", action="run"), RoutineRan)
    assert not journal.calls(since, tool="add_tasks")
    assert "not run: tasks_add_tasks (nobody could be asked)" in result.run.detail
    assert "tasks_add_tasks (nobody could be asked)" in result.text
    call(daemon, RoutineAction(id=1, name="asker", action="remove"), RoutineSaved)


def test_a_failed_delivery_stays_in_the_inbox_and_is_retried(world):
    daemon, _ollama, telegram, _ = world
    start = time.time()
    telegram.fail("sendMessage", 400, "Bad Request: chat not found", times=1)  # refused once, not retried by the channel
    call(daemon, Remind(id=1, when="in 1 s", text="the retried reminder", to=["telegram"]), RoutineSaved)

    def first_failure():
        for message in inbox(daemon):
            if message.text == "the retried reminder" and message.deliveries and message.deliveries[0].attempts >= 1:
                return message
        return None

    failed = wait_for(first_failure, "the first delivery to fail")
    [delivery] = failed.deliveries
    assert delivery.state == "pending" and "chat not found" in delivery.last_error.lower() and delivery.next_attempt_at > time.time() - 1
    assert wait_for(lambda: [t for t in telegram.texts(ME, start) if "the retried reminder" in t], "the retry to deliver it")
    [message] = [m for m in inbox(daemon) if m.text == "the retried reminder"]
    assert message.deliveries[0].state == "sent" and message.deliveries[0].attempts == 2


def test_a_reminder_across_a_restart_arrives_once(tmp_path):
    with FakeOllama() as ollama, FakeTelegram(TOKEN) as telegram:
        daemon = start_daemon(tmp_path, telegram, ollama)
        try:
            wait_for(lambda: telegram.called("getUpdates"), "tarsd to poll for updates")
            say_hello(telegram)
            start = time.time()
            call(daemon, Remind(id=1, when="in 3 s", text="missed while stopped", to=["telegram"]), RoutineSaved)
            call(daemon, Remind(id=1, when="in 8 s", text="due after the restart", to=["telegram"]), RoutineSaved)
            daemon.stop()
            time.sleep(max(0.0, start + 4 - time.time()))  # the first one's time passes while tarsd is stopped
            daemon.start()
            telegram.wait_texts(ME, 2, start, deadline=60)
            daemon.stop()
            daemon.start()
            wait_for(lambda: telegram.called("getUpdates", time.time() - 0.5), "tarsd to poll again")
            time.sleep(1.5)
            texts = telegram.texts(ME, start)
            assert sum("missed while stopped" in t for t in texts) == 1
            assert sum("due after the restart" in t for t in texts) == 1
            # Caught up after the restart, it says it is late, in the inbox and on the phone.
            due = datetime.fromtimestamp(start + 3, ZoneInfo("Europe/Berlin"))
            marks = {
                f"(late: this was due at {due:%H:%M})\nmissed while stopped",
                f"(late: this was due at {due + timedelta(minutes=1):%H:%M})\nmissed while stopped",
            }
            [late] = [m for m in inbox(daemon) if m.source.startswith("reminder:") and "missed while stopped" in m.text]
            assert late.text in marks, late.text  # (its time is "in 3 s": the minute may turn meanwhile)
            assert [t for t in texts if "missed while stopped" in t][0].endswith(late.text)
            assert call(daemon, Routines(id=1), RoutinesReply).routines == []  # said once, they leave the file
        finally:
            daemon.stop()
            daemon.cleanup()


def test_a_run_missed_while_stopped_runs_once_late_and_one_past_its_grace_is_skipped_and_listed(tmp_path):
    now = datetime.now(UTC)
    state = tmp_path / "state"
    state.mkdir()
    stamp = lambda when: when.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    (state / "routines.toml").write_text(
        f"""[routine.hourly]
schedule = "every 1h"
prompt = "Say: caught up"
created = {stamp(now - timedelta(minutes=90))}

[routine.daily]
schedule = "every 1d"
prompt = "Say: never said"
grace_minutes = 60
created = {stamp(now - timedelta(days=3, hours=5))}
"""
    )
    with FakeOllama() as ollama, FakeTelegram(TOKEN) as telegram:
        ollama.script = [routine_turn] * 100
        daemon = start_daemon(tmp_path, telegram, ollama)
        try:
            hourly = wait_for(
                lambda: (r := listed(daemon, "hourly", runs=10)).last_run is not None and r.last_run.outcome != "running" and r,
                "the late run",
            )
            assert [(r.outcome, r.late) for r in hourly.runs] == [("spoke", True)]  # once, marked late
            assert abs(hourly.runs[0].scheduled_at - (now - timedelta(minutes=30)).timestamp()) < 5
            daily = listed(daemon, "daily", runs=10)
            assert [r.outcome for r in daily.runs] == ["skipped"]
            reply = call(daemon, Routines(id=1), RoutinesReply)
            assert any(line.startswith("daily:") and "skipped" in line for line in reply.skipped)
            assert [m.text for m in inbox(daemon) if m.source == "routine:hourly"] == [
                "(late: this was due at " + hourly_local(hourly) + ")\ncaught up"
            ]
            assert not [m for m in inbox(daemon) if m.source == "routine:daily"]
            assert "never said" not in json.dumps(ollama.bodies("/api/chat"))
        finally:
            daemon.stop()
            daemon.cleanup()


def hourly_local(info) -> str:
    from zoneinfo import ZoneInfo

    return datetime.fromtimestamp(info.runs[0].scheduled_at, ZoneInfo("Europe/Berlin")).strftime("%H:%M")


def test_a_reminder_the_model_sets_when_asked_is_shown_with_its_undo_and_goes_back_to_the_messenger(world):
    daemon, ollama, telegram, _ = world
    arguments = {"when": "in 2 h", "text": "stretch your legs"}
    ollama.script = [{"tool_calls": [{"name": "remind_user", "arguments": arguments}]}, {"text": "I will remind you."}] + [
        routine_turn
    ] * 10_000
    with daemon.client() as client:
        replies = list(client.stream(Chat(id=1, conversation="cli-remind", message="remind me in 2 hours to stretch")))
    [activity] = [r for r in replies if getattr(r, "phase", "") == "result" and r.name == "remind_user"]
    name = re.search(r"undo: tarsctl routines rm (remind-[\w-]+)", activity.summary).group(1)
    assert f"undo: tarsctl routines rm {name}" in activity.summary and "stretch your legs" in activity.summary
    found = listed(daemon, name)
    assert found.kind == "reminder" and found.by == "model" and found.text == "stretch your legs"
    assert abs(found.next_run - (time.time() + 7200)) < 60
    call(daemon, RoutineAction(id=1, name=name, action="remove"), RoutineSaved)  # the undo

    # Asked in Telegram, the reminder goes back to Telegram (a model's reminder only ever messages the user).
    ollama.script = [{"tool_calls": [{"name": "remind_user", "arguments": arguments}]}, {"text": "Will do."}] + [routine_turn] * 10_000
    start = time.time()
    telegram.text(ME, "remind me in 2 hours to stretch")
    assert "Will do." in telegram.wait_texts(ME, 1, start)[0]
    [mine] = [r for r in call(daemon, Routines(id=1), RoutinesReply).routines if r.text == "stretch your legs"]
    assert mine.deliver == ["telegram"] and mine.by == "model"
    call(daemon, RoutineAction(id=1, name=mine.name, action="remove"), RoutineSaved)


def test_a_reminder_the_model_sets_is_armed_at_once_without_any_request_about_routines(world):
    """The model's remind_user writes the routines file from a worker thread: the clock must hear of
    it then, not at the next `tarsctl routines` or the ten-minute tick. Only the inbox is asked here
    (a routines request would make the clock look at the file)."""
    daemon, ollama, _telegram, _ = world
    arguments = {"when": "in 3 s", "text": "armed at once"}
    ollama.script = [{"tool_calls": [{"name": "remind_user", "arguments": arguments}]}, {"text": "Set."}] + [routine_turn] * 10_000
    set_at = time.time()
    assert call(daemon, Chat(id=1, conversation="cli-armed", message="remind me in 3 seconds"), ChatDone).text == "Set."
    [message] = wait_for(lambda: [m for m in inbox(daemon) if m.text == "armed at once"], "the reminder to arrive", deadline=45)
    assert message.created_at >= set_at + 2  # at its time, not at once


def test_a_repeating_reminder_is_limited_per_day(world):
    """A reminder every second written by hand, its runs_per_day 2: two messages, then none (the runs say why)."""
    daemon, _ollama, _telegram, _ = world
    path = Path(daemon.env["TARS_CONFIG"]).parent / "routines.toml"
    # A reminder of an earlier test still leaving the file: this test's counts start once none is left.
    wait_for(
        lambda: not [r for r in call(daemon, Routines(id=1), RoutinesReply).routines if r.kind == "reminder"], "earlier reminders to leave"
    )
    with path.open("a", encoding="utf-8") as handle:
        handle.write('\n[reminder.nag]\nschedule = "every 1s"\ntext = "nag nag"\nruns_per_day = 2\n')
    # Four occurrences recorded to their end (the newest may be still running when first seen).
    found = wait_for(
        lambda: len((r := listed(daemon, "nag", runs=10)).runs) >= 4 and all(run.outcome != "running" for run in r.runs) and r,
        "four occurrences of the reminder, ended",
    )
    call(daemon, RoutineAction(id=1, name="nag", action="remove"), RoutineSaved)
    outcomes = [run.outcome for run in reversed(found.runs)]
    assert outcomes[:2] == ["reminded", "reminded"] and set(outcomes[2:]) == {"limited"}, outcomes
    assert "2 messages a day is this reminder's limit (runs_per_day)" in found.runs[0].detail
    assert len([m for m in inbox(daemon) if m.text == "nag nag"]) == 2


def test_status_shows_each_routines_latest_outcome_once(world):
    """Two failures are one line; a success after them clears it (a failure made good is no longer news)."""
    daemon, ollama, _telegram, _ = world
    answers = iter([{"status": 500, "message": "the model broke"}, {"status": 500, "message": "the model broke"}, {"text": "fine"}])

    def flaky(body: dict) -> dict:
        return next(answers) if "Say: flaky" in json.dumps(body) else routine_turn(body)

    ollama.script = [flaky] * 10_000
    call(daemon, SaveRoutine(id=1, name="flaky", schedule="0 6 1 1 *", prompt="Say: flaky"), RoutineSaved)
    for _ in range(2):
        assert call(daemon, RoutineAction(id=1, name="flaky", action="run"), RoutineRan).run.outcome == "failed"
    errors = daemon.status().routines.errors
    assert len([line for line in errors if line.startswith("flaky:")]) == 1, errors
    assert call(daemon, RoutineAction(id=1, name="flaky", action="run"), RoutineRan).run.outcome == "spoke"
    assert not [line for line in daemon.status().routines.errors if line.startswith("flaky:")]
    # The failure left one notice in the inbox (not two: one an hour).
    assert len([m for m in inbox(daemon) if m.source == "notice:flaky"]) == 1
    call(daemon, RoutineAction(id=1, name="flaky", action="remove"), RoutineSaved)


def test_a_routine_writes_under_a_heading_of_the_days_note(world):
    daemon, _ollama, _telegram, _ = world
    today = datetime.now(ZoneInfo("Europe/Berlin")).strftime("%Y-%m-%d")
    write(daemon.vault, f"Daily/{today}.md", "# Today\n\n## Tasks\n- milk\n\n## Evening\nread\n")
    request = SaveRoutine(
        id=1,
        name="journal",
        schedule="0 6 1 1 *",
        prompt="Say: all quiet on the server",
        deliver=["note"],
        note="Daily/{date}.md",
        heading="Tasks",
    )
    call(daemon, request, RoutineSaved)
    ran = call(daemon, RoutineAction(id=1, name="journal", action="run"), RoutineRan)
    assert ran.run.outcome == "spoke"
    note = daemon.vault / f"Daily/{today}.md"
    wait_for(lambda: "all quiet on the server" in note.read_text(), "the note to hold the message")
    text = note.read_text()
    assert re.fullmatch(r"# Today\n\n## Tasks\n- milk\n\n\*\*\d\d:\d\d journal\*\*\nall quiet on the server\n\n## Evening\nread\n", text), (
        text
    )
    [message] = [m for m in inbox(daemon) if m.source == "routine:journal"]
    assert message.deliveries[0].target == f"note:Daily/{today}.md#Tasks" and message.deliveries[0].state == "sent"
    call(daemon, RoutineAction(id=1, name="journal", action="remove"), RoutineSaved)


def test_a_machine_with_routines_off_runs_none_and_refuses_a_reminder(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "routines.toml").write_text('[routine.pulse]\nschedule = "every 1s"\nprompt = "Say: should not run"\n')
    with FakeOllama() as ollama, FakeTelegram(TOKEN) as telegram:
        daemon = start_daemon(tmp_path, telegram, ollama, extra="enabled = false\n")
        try:
            reply = call(daemon, Routines(id=1), RoutinesReply)
            assert not reply.enabled and [r.name for r in reply.routines] == ["pulse"] and reply.routines[0].next_run == 0.0
            with daemon.client() as client, pytest.raises(RemoteError) as refused:
                client.call(Remind(id=1, when="in 1 min", text="x"))
            assert refused.value.error.code == "unavailable" and "enabled = false" in refused.value.error.message
            time.sleep(1.5)
            assert listed(daemon, "pulse", runs=10).runs == [] and not ollama.bodies("/api/chat")
            assert "enabled = false" in daemon.status().routines.problem
        finally:
            daemon.stop()
            daemon.cleanup()


def test_a_routines_limits_protect_the_bill(world):
    daemon, ollama, _telegram, _ = world
    call(daemon, SaveRoutine(id=1, name="once-a-day", schedule="0 6 1 1 *", prompt="Say: first of the day", runs_per_day=1), RoutineSaved)
    first = call(daemon, RoutineAction(id=1, name="once-a-day", action="run"), RoutineRan)
    assert first.run.outcome == "spoke" and first.text == "first of the day"
    chats = len(ollama.bodies("/api/chat"))
    second = call(daemon, RoutineAction(id=1, name="once-a-day", action="run"), RoutineRan)
    assert second.run.outcome == "limited" and "runs_per_day" in second.run.detail and second.text == ""
    assert len(ollama.bodies("/api/chat")) == chats  # the model was not called

    # A run whose prompt alone is past its tokens is stopped before the model is called, and says so.
    long = "Say: never sent. " + "the same words again and again " * 200
    call(daemon, SaveRoutine(id=1, name="thrifty", schedule="0 6 1 1 *", prompt=long, tokens_per_run=100), RoutineSaved)
    chats = len(ollama.bodies("/api/chat"))
    ran = call(daemon, RoutineAction(id=1, name="thrifty", action="run"), RoutineRan)
    assert "limit of 100 model tokens" in ran.text and "limit of 100 model tokens" in ran.run.detail
    assert not [b for b in ollama.bodies("/api/chat")[chats:] if "never sent" in json.dumps(b)]
    for name in ("once-a-day", "thrifty"):
        call(daemon, RoutineAction(id=1, name=name, action="remove"), RoutineSaved)
