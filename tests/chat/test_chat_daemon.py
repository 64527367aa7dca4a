"""Chat through a real tarsd and tarsctl, against the fake Ollama server."""

from __future__ import annotations

import re

import pytest

from harness.daemon import wait_for
from harness.vault_files import write
from tarsctl.client import RemoteError
from tarsctl.protocol import Cancel, Chat, ChatDelta, ChatDone, ConversationHistory, ConversationMessages, Error


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


def test_chat_explain_says_what_the_opening_context_spent(chat_daemon, vault, fake_ollama):
    write(vault, "sessions/2026-03-02-1830-dog.md", "---\ntype: session\n---\n# Dog\n\n- Perry the beagle loves the beach at Dollymount\n")
    fake_ollama.script = [{"text": "The beach."}, {"text": "Dog question\n- Sam asked where Perry likes to go"}]
    daemon = chat_daemon()
    wait_for(lambda: daemon.search("Dollymount", mode="fts"), "the session log in the index")
    done = daemon.tarsctl("chat", "--explain", "where does Perry love to go?")
    assert done.returncode == 0, done.stderr
    assert re.search(r"^context: \d+ of 4,400 characters, about \d+ tokens: \d+ lines? from 1 note$", done.stderr, re.M), done.stderr
    # The prompt's block says the same to the model.
    assert 'spent="' in str(fake_ollama.bodies("/api/chat")[0]["messages"])
    plain = daemon.tarsctl("chat", "where does Perry love to go?")
    assert "context:" not in plain.stderr


def test_chat_from_stdin_and_json(chat_daemon, fake_ollama):
    fake_ollama.script = [{"text": "Four."}, {"text": "Maths\n- two and two"}]
    daemon = chat_daemon()
    reply = daemon.tarsctl("chat", "--json", input="what is two and two?")
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
    run = daemon.repl(lines)
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


def test_a_conversation_reads_back_in_order_bounded(chat_daemon, fake_ollama):
    long_answer = "Bake " + "then bake again " * 1900  # past the 20,000 characters a message shows
    fake_ollama.script = [
        {"tool_calls": [{"name": "memory_search", "arguments": {"query": "sourdough starter", "limit": 3}}]},
        {"text": "Feed the starter the evening before."},
        {"text": "250 °C, covered."},
        {"text": long_answer},
        *({"text": f"{n} " + "x" * 24_000} for n in range(6)),
    ]
    daemon = chat_daemon(TARS_CHAT_COMPACT_CHARS="1000000")  # no compaction: every message stays
    with daemon.client() as client:
        for n, text in enumerate(["when do I feed the starter? <img src=x onerror=alert(1)>", "how hot is the oven?", "and then?"]):
            assert isinstance(client.call(Chat(id=n, conversation="nvim", message=text)), ChatDone)
        history = client.call(ConversationHistory(id=7, conversation="nvim"))
        assert isinstance(history, ConversationMessages) and history.id == 7 and history.found
        assert [(m.role, m.text[:40]) for m in history.messages] == [
            ("user", "when do I feed the starter? <img src=x o"),
            ("assistant", "Feed the starter the evening before."),
            ("user", "how hot is the oven?"),
            ("assistant", "250 °C, covered."),
            ("user", "and then?"),
            ("assistant", long_answer[:40]),
        ]
        assert history.messages[0].text == "when do I feed the starter? <img src=x onerror=alert(1)>"
        assert history.messages[1].tools == ["memory_search(query: sourdough starter, limit: 3)"]  # the tool result is not shown
        assert [m.tools for m in history.messages[2:]] == [[]] * 4
        assert history.messages[-1].text == long_answer[:20_000] and history.messages[-1].cut == len(long_answer) - 20_000
        assert history.messages[0].at <= history.messages[-1].at and (history.omitted, history.compacted, history.summary) == (0, 0, "")

        last = client.call(ConversationHistory(id=8, conversation="nvim", limit=3))
        assert [m.text[:9] for m in last.messages] == ["250 °C, c", "and then?", "Bake then"] and last.omitted == 3

        # Six exchanges, 12 messages each cut to 20,000 characters: the 200,000 a reply holds take the last 10.
        for n in range(6):
            client.call(Chat(id=20 + n, conversation="long", message=f"{n} " + "y" * 24_000))
        long = client.call(ConversationHistory(id=26, conversation="long"))
        assert [m.text[:2] for m in long.messages] == ["1 ", "1 ", "2 ", "2 ", "3 ", "3 ", "4 ", "4 ", "5 ", "5 "] and long.omitted == 2
        assert {len(m.text) for m in long.messages} == {20_000} and {m.cut for m in long.messages} == {24_002 - 20_000}

        unknown = client.call(ConversationHistory(id=9, conversation="never-used"))
        assert isinstance(unknown, ConversationMessages) and not unknown.found and unknown.messages == [] and unknown.omitted == 0
        with pytest.raises(RemoteError) as refused:
            client.call(ConversationHistory(id=10, conversation="nvim", limit=2000))
        assert refused.value.error.code == "bad_request" and "limit" in refused.value.error.message
    with daemon.client() as client:  # the daemon goes on serving
        assert len(client.call(ConversationHistory(id=11, conversation="nvim", limit=1)).messages) == 1


def test_a_compacted_conversation_reads_back_with_its_summary(chat_daemon, fake_ollama):
    fake_ollama.script = [
        {"text": "A train to Lisbon sounds lovely."},
        {"text": "The Sud Expresso leaves from Hendaye."},
        {"text": "Lisbon train trip\n- Sam plans a train trip to Lisbon in June"},
    ]
    daemon = chat_daemon(TARS_CHAT_COMPACT_CHARS="150", TARS_CHAT_KEEP_RECENT="2")
    with daemon.client() as client:
        client.call(Chat(id=1, conversation="trip", message="I am planning a train trip to Lisbon in June with my sister, slowly."))
        done = client.call(Chat(id=2, conversation="trip", message="Which night train goes into Portugal from the French border?"))
        assert done.session_log.startswith("sessions/")  # compacted
        history = client.call(ConversationHistory(id=3, conversation="trip"))
    assert [(m.role, m.text) for m in history.messages] == [
        ("user", "Which night train goes into Portugal from the French border?"),
        ("assistant", "The Sud Expresso leaves from Hendaye."),
    ]
    assert history.compacted == 2 and history.omitted == 0
    assert history.summary == "Lisbon train trip:\n- Sam plans a train trip to Lisbon in June"
