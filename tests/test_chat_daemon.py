"""Chat through a real tarsd and tarsctl, against the fake Ollama server."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import write
from daemon_harness import wait_for
from tarsctl.protocol import Cancel, Chat, ChatDelta, ChatDone, Error


@pytest.fixture
def chat_daemon(start_daemon, fake_ollama):
    def factory(**extra):
        env = {"TARS_CHAT_OLLAMA_HOST": fake_ollama.url, "TARS_CHAT_OLLAMA_MODEL": "fake-chat", **extra}
        return start_daemon(**env)

    return factory


def test_one_shot_chat_streams_and_logs_the_session(chat_daemon, vault, fake_ollama):
    fake_ollama.script = [{"text": "Perry is your beagle."}, {"text": "Dog question\n- Sam asked about his dog Perry"}]
    daemon = chat_daemon()
    done = daemon.tarsctl("chat", "who is Perry?")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Perry is your beagle.\n"
    assert "session log: sessions/" in done.stderr
    wait_for(lambda: daemon.search("Perry", mode="fts") == [done.stderr.split("session log: ")[1].strip()], "the session log in the index")


def test_chat_from_stdin_and_json(chat_daemon, fake_ollama):
    fake_ollama.script = [{"text": "Four."}, {"text": "Maths\n- two and two"}]
    daemon = chat_daemon()
    reply = subprocess.run(
        [sys.executable, "-m", "tarsctl.cli", "chat", "--json"],
        input="what is two and two?",
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert reply.returncode == 0, reply.stderr
    assert '"text":"Four."' in reply.stdout and '"type":"chat_done"' in reply.stdout
    assert "what is two and two?" in str(fake_ollama.bodies("/api/chat")[0]["messages"])


def test_remember_from_the_command_line(chat_daemon, vault):
    write(vault, "Memory.md", "# Pets\n- Dog: Perry (beagle)\n")
    daemon = chat_daemon()
    first = daemon.tarsctl("remember", "my", "cat", "is", "called", "Luna")
    assert first.returncode == 0 and "remembered in Memory.md" in first.stdout
    again = daemon.tarsctl("remember", "My cat is called Luna")
    assert "already remembered" in again.stdout
    assert "- my cat is called Luna" in (vault / "Memory.md").read_text()
    wait_for(lambda: daemon.search("Luna") == ["Memory.md"], "the new fact to be searchable")


def test_repl_commands(chat_daemon, vault, fake_ollama):
    write(vault, "garden.md", "# Garden\n\ntomatoes need sun\n")
    fake_ollama.script = [
        {"text": "Water them daily."},
        {"text": "- Ask about the climate before giving watering advice"},
        {"text": "Garden chat\n- Sam asked about watering tomatoes"},
    ]
    daemon = chat_daemon()
    lines = [
        "/help",
        "/sgrep tomatoes",
        "/remember Has a vegetable garden",
        "how often should I water tomatoes?",
        "/w too often",
        "/review",
        "y",
        "/bogus",
        "/exit",
    ]
    run = subprocess.run(
        [sys.executable, "-m", "tarsctl.cli", "chat", "--repl"],
        input="\n".join(lines) + "\n",
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "/sgrep QUERY" in out and "garden.md:1" in out and "remembered in Memory.md" in out
    assert "Water them daily." in out and "noted in corrections.md" in out
    assert "1. Ask about the climate before giving watering advice" in out and "1 rule(s) added" in out
    assert "unknown command /bogus" in run.stderr and "session log: sessions/" in run.stderr
    assert "- Ask about the climate" in (vault / "Procedural.md").read_text()


def test_cancel_and_a_restart_in_the_middle_of_a_conversation(chat_daemon, fake_ollama):
    fake_ollama.script = [{"text": "one two three four five six seven eight nine ten", "delay": 0.2}]
    daemon = chat_daemon()
    with daemon.client() as client:
        client.send(Chat(id=5, conversation="nvim", message="count to ten slowly"))
        first = client.receive()
        assert isinstance(first, ChatDelta)
        client.send(Cancel(id=5))
        replies = [client.receive()]
        while not isinstance(replies[-1], (ChatDone, Error)):
            replies.append(client.receive())
        assert isinstance(replies[-1], ChatDone) and replies[-1].cancelled

    assert daemon.stop() == 0
    daemon.start()
    fake_ollama.script = [{"text": "You asked me to count."}]
    with daemon.client() as client:
        done = client.call(Chat(id=6, conversation="nvim", message="what did I ask before?"))
    assert done.text == "You asked me to count."
    history = str(fake_ollama.bodies("/api/chat")[-1]["messages"])
    assert "count to ten slowly" in history and "[cancelled]" in history


def test_provider_errors_reach_the_client_with_a_hint(chat_daemon):
    daemon = chat_daemon(TARS_CHAT_OLLAMA_HOST="http://127.0.0.1:9")
    failed = daemon.tarsctl("chat", "hello")
    assert failed.returncode == 1
    assert "cannot reach Ollama at http://127.0.0.1:9" in failed.stderr and "hint: start it with `ollama serve`" in failed.stderr
    assert daemon.ping()


def test_scheduled_snapshot_of_an_idle_conversation(chat_daemon, vault, fake_ollama):
    fake_ollama.script = [{"text": "Noted."}, {"text": "Bike repair\n- Sam's bike needs a new chain"}]
    daemon = chat_daemon(TARS_CHAT_IDLE_MINUTES="0", TARS_CHAT_SNAPSHOT_MINUTES="0.01")
    with daemon.client() as client:
        client.call(Chat(id=1, conversation="cli", message="my bike needs a new chain"))
    log = wait_for(lambda: list((vault / "sessions").glob("*-bike-repair.md")), "the idle snapshot to write a session log")
    assert "Sam's bike needs a new chain" in log[0].read_text()


def test_ending_a_conversation_twice_in_a_second_with_the_provider_down(start_daemon, vault):
    daemon = start_daemon(TARS_CHAT_OLLAMA_HOST="http://127.0.0.1:9", TARS_CHAT_MAX_RETRIES="0")
    from tarsctl.protocol import Chat, EndConversation

    with daemon.client() as client:
        for _ in range(3):
            failed = list(client.stream(Chat(id=1, conversation="quick", message="hello")))
            assert failed[-1].code == "unreachable"
            ended = client.call(EndConversation(id=2, conversation="quick"))
            assert "retried in the background" in ended.warnings[0]
    assert "Traceback" not in daemon.log.read_text()
