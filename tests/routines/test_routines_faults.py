"""A routines file kept for months, against a real tarsd: one entry of each bad kind (issue 43,
items 2 and 10) beside 50 good reminders, and no model reachable (its port is closed). tarsd must
start, every good reminder must arrive on time, each bad entry must be named in status, `tarsctl
routines` and doctor, and a routine that fails for want of a model must say so where the user looks
(the inbox and its messenger, once an hour), with doctor warning that routines need the model.

The bad entries are of two kinds: the book names what it cannot read (a date past the calendar, a
heading with a line break, a creation time out of range, a name ending in a newline, a note path that
leaves its folder or the vault), and the clock sets aside what it cannot compute, should a schedule
the book let through have no next time it can hold (the year 9999).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.daemon import TarsDaemon, wait_for
from harness.fake_telegram import FakeTelegram
from harness.paths import MODEL_DIR
from harness.user_env import closed_port_url
from harness.vault_files import write
from tarsctl.protocol import Inbox, InboxReply, Routines, RoutinesReply

TOKEN = "7700112233:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
ME = 4_200_000_001
GOOD = 50
LEAD_SECONDS = 20.0  # the good reminders are due this long after the file is written: tarsd is up by then

# One entry of each bad kind: the book leaves these out and names them, or the clock sets them aside and names them.
BAD = {
    "big": '[routine.big]\nschedule = "every 10000000 d"\nprompt = "Say: once in 27,000 years"\n',
    "last-minute": '[reminder.last-minute]\nschedule = "9999-12-31T23:59-12:00"\ntext = "past the calendar in UTC"\n',
    "first-minute": '[reminder.first-minute]\nschedule = "0001-01-01T00:00+14:00"\ntext = "before the calendar in UTC"\n',
    "from-the-far-future": '[routine.from-the-far-future]\nschedule = "every 1h"\nprompt = "x"\ncreated = 9999-12-31T23:30:00Z\n',
    "huge-created": '[reminder.huge-created]\nschedule = "every 1h"\ntext = "x"\ncreated = 1e300\n',
    "line-break": '[routine.line-break]\nschedule = "0 6 1 1 *"\nprompt = "x"\ndeliver = ["note"]\nnote = "Daily.md"\n'
    'heading = "tars\\n## injected"\n',
    "newline": '[reminder."newline\\n"]\nschedule = "0 6 1 1 *"\ntext = "a name ending in a newline"\n',
    "redirect": '[routine.redirect]\nschedule = "0 6 1 1 *"\nprompt = "x"\ndeliver = ["note"]\nnote = "x/../Other.md#h"\n',
    "outside": '[routine.outside]\nschedule = "0 6 1 1 *"\nprompt = "x"\ndeliver = ["note"]\nnote = "../outside.md"\n',
}


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("faults")
    vault, state = root / "vault", root / "state"
    vault.mkdir()
    state.mkdir()
    write(vault, "Note.md", "# Note\n\nA note.\n")
    (state / "telegram_token").write_text(TOKEN + "\n")
    (state / "telegram_token").chmod(0o600)
    due = time.time() + LEAD_SECONDS
    good = {f"good-{k:02d}": int(due) + k % 5 for k in range(GOOD)}
    entries = [f'[reminder.{name}]\nschedule = "{iso(at)}"\ntext = "{name}"\n' for name, at in good.items()]
    # A routine due with the good ones: without a model it fails, and must say so.
    # (With its creation written: an entry without one counts from the file's last change, and the
    # reminders leaving the file would make this one-shot, once run, look written after its time.)
    entries.append(
        f'[routine.brief]\nschedule = "{iso(int(due))}"\nprompt = "Say: hi"\ndeliver = ["telegram"]\ncreated = {iso(time.time())}\n'
    )
    entries += list(BAD.values())
    (state / "routines.toml").write_text("\n".join(entries))
    with FakeTelegram(TOKEN) as telegram:
        config = f"[telegram]\nenabled = true\nallowed_users = [{ME}]\napi_url = {json.dumps(telegram.url)}\npoll_timeout_seconds = 1\n"
        (state / "config.toml").write_text(config + '\n[routines]\ntimezone = "Europe/Berlin"\n')
        env = {"TARS_CHAT_OLLAMA_HOST": closed_port_url(), "TARS_CHAT_OLLAMA_MODEL": "fake-chat", "TARS_CHAT_MAX_RETRIES": "0"}
        daemon = TarsDaemon(vault, state, MODEL_DIR, "none", env).start()
        try:
            wait_for(lambda: telegram.called("getUpdates"), "tarsd to poll for updates")
            started = time.time()
            telegram.text(ME, "/start")  # Telegram lets a bot write to a user only once the user has written
            telegram.wait_texts(ME, 1, started)
            yield daemon, telegram, good
        finally:
            daemon.stop()
            daemon.cleanup()


def inbox(daemon: TarsDaemon) -> list:
    with daemon.client() as client:
        reply = client.call(Inbox(id=1, limit=500))
    assert isinstance(reply, InboxReply)
    return reply.messages


def doctor(daemon: TarsDaemon) -> list[dict]:
    ran = daemon.tarsctl("doctor", "--json", timeout=120)
    return [check for check in json.loads(ran.stdout)["checks"] if check["name"] == "routines"]


def all_good_arrived(daemon: TarsDaemon) -> dict:
    """The good reminders' messages, by text, once all have arrived and left the routines file."""

    def arrived():
        found = {m.text: m for m in inbox(daemon) if m.source.startswith("reminder:good-")}
        if len(found) < GOOD:
            return None
        with daemon.client() as client:
            left = [r.name for r in client.call(Routines(id=1)).routines if r.name.startswith("good-")]
        return found if not left else None

    return wait_for(arrived, f"the {GOOD} good reminders", deadline=LEAD_SECONDS + 90)


def test_tarsd_starts_and_all_fifty_good_reminders_arrive_on_time(world):
    daemon, _telegram, good = world
    arrived = all_good_arrived(daemon)
    for name, due in good.items():
        message = arrived[name]
        assert message.created_at >= due  # not early
        assert not message.text.startswith("(late")  # on time: the clock did not find it late (a minute past due)


def test_each_bad_entry_is_named_in_status_routines_and_doctor(world):
    daemon, _telegram, _good = world
    all_good_arrived(daemon)  # (the tests of this module may run in any order, on a daemon each)
    problem = daemon.status().routines.problem
    with daemon.client() as client:
        listed = client.call(Routines(id=1))
    assert isinstance(listed, RoutinesReply)
    checks = doctor(daemon)
    named = " ".join(check["summary"] for check in checks if check["status"] == "problem")
    for name in BAD:
        assert name in problem, (name, problem)
        assert name in listed.problem, (name, listed.problem)
        assert name in named, (name, checks)
    # The good ones are not (they left the file once sent).
    assert "good-" not in problem and "good-" not in named


def test_a_routine_that_fails_without_a_model_says_so_once_in_the_inbox_and_on_telegram(world):
    daemon, telegram, _good = world
    notice = wait_for(lambda: [m for m in inbox(daemon) if m.source == "notice:brief"], "the notice of the failed run", deadline=90)
    [message] = notice
    assert message.text.startswith("brief did not run: ") and "Ollama" in message.text
    assert [d.target for d in message.deliveries] == ["telegram"]
    wait_for(lambda: [t for t in telegram.texts(ME) if "brief did not run" in t], "the notice on Telegram")
    # Run again by hand, it fails again: the reason on stderr, nothing on stdout, and no second notice within the hour.
    ran = daemon.tarsctl("routines", "run", "brief")
    assert (ran.returncode, ran.stdout) == (1, "") and "brief failed: " in ran.stderr
    time.sleep(0.5)
    assert len([m for m in inbox(daemon) if m.source == "notice:brief"]) == 1
    assert len([t for t in telegram.texts(ME) if "brief did not run" in t]) == 1
    # Status names the failure once, however often it failed.
    errors = daemon.status().routines.errors
    assert len([line for line in errors if line.startswith("brief:")]) == 1
    # And doctor says that routines need the model.
    [warning] = [check for check in doctor(daemon) if check["status"] == "warn"]
    assert "run the chat model" in warning["summary"] and "not reachable" in warning["summary"]


def test_doctor_names_a_routines_file_that_is_not_toml(tmp_path):
    """Without a tarsd: the file is read as tarsd reads it (a broken file was `0 problems`)."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "config.toml").write_text('[routines]\ntimezone = "UTC"\n')
    (state / "routines.toml").write_text('[routine.brief\nschedule = "30 7 * * *"\n')
    daemon = TarsDaemon(tmp_path / "vault", state, MODEL_DIR, "none", {"TARS_CHAT_OLLAMA_HOST": closed_port_url()})
    try:
        [check] = [c for c in doctor(daemon) if c["status"] == "problem"]
        assert "is not valid TOML" in check["summary"] and str(Path(state / "routines.toml")) in check["summary"]
    finally:
        daemon.cleanup()
