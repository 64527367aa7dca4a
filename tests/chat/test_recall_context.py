"""Recall as the model receives it (issue 44): the chat's opening context and memory_search, one
recall, through the real Assistant against the fake Ollama server. The lines that answer, not one
passage per note: two passages of one note, a turn of a long session by its own words, the newer
of two values first, each note dated, and what the recall spent said."""

from __future__ import annotations

import re

import pytest

from harness.vault_files import write
from tarsd.chat.assistant import Assistant

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def make_assistant(make_engine, fake_ollama):
    def factory(kind: str = "none") -> Assistant:
        engine = make_engine(kind=kind, chat_ollama_host=fake_ollama.url, chat_ollama_model="fake-chat", chat_max_retries=0)
        engine.indexer.sync()
        return Assistant(engine.config, engine, reindex=lambda rel: engine.indexer.sync(paths=[rel]))

    return factory


def system_prompt(fake_ollama) -> str:
    body = fake_ollama.bodies("/api/chat")[-1]
    return next(m["content"] for m in body["messages"] if m["role"] == "system")


def tool_result(fake_ollama) -> str:
    body = fake_ollama.bodies("/api/chat")[-1]
    return next(m["content"] for m in body["messages"] if m["role"] == "tool")


def note_blocks(text: str) -> list[dict]:
    """Each <note ...>text</note> block: its attributes and text, in order."""
    blocks = []
    for match in re.finditer(r"<note ([^>]*)>\n(.*?)\n</note>", text, re.DOTALL):
        attributes = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
        blocks.append({**attributes, "text": match.group(2)})
    return blocks


def said_line(who: str, text: str) -> str:
    return f"- {who}: {text}"


def session(vault, when: str, turns: list[tuple[str, str]], title: str = "Conversation") -> str:
    """A session log as tars writes one from a transcript (assistant.session_log_text); returns its path."""
    from datetime import datetime, timedelta

    started = datetime.fromisoformat(when)
    ended = started + timedelta(minutes=10)
    front = f"---\ntype: session-log\nconversation: cli\nstarted: {started.isoformat()}\nended: {ended.isoformat()}\n"
    front += f"messages: {len(turns)}\n---\n"
    head = f"# {title}\n\n_{started:%Y-%m-%d %H:%M} – {ended:%H:%M}_\n\n"
    rel = f"sessions/{started:%Y-%m-%d-%H%M}-{title.lower().replace(' ', '-')}.md"
    write(vault, rel, front + head + "".join(said_line(who, text) + "\n" for who, text in turns))
    return rel


KETTLE = (
    "# House\n\n## Kitchen\n\n- The kettle needs descaling every month with citric acid.\n\n"
    + "".join(f"## Room {n}\n\n- Paint colour {n}: soft grey, bought at the market in spring.\n\n" for n in range(40))
    + "## Utility\n\n- Descaling the kettle: one spoon of citric acid, boil twice, rinse.\n"
)


def test_memory_search_returns_two_passages_of_one_note(make_assistant, vault, fake_ollama):
    write(vault, "House.md", KETTLE)
    write(vault, "Other.md", "# Other\n\nNothing about kitchens here.\n")
    fake_ollama.script = [
        {"tool_calls": [{"name": "memory_search", "arguments": {"query": "kettle descaling citric acid"}}]},
        {"text": "ok"},
    ]
    make_assistant().chat("cli", "hello there")
    found = tool_result(fake_ollama)
    [house] = [b for b in note_blocks(found) if b["path"] == "House.md"]
    assert "every month with citric acid" in house["text"] and "boil twice, rinse" in house["text"], found
    assert len(house["lines"].split(",")) == 2  # two ranges, far apart: the passages in between are not sent
    assert "Room 20" not in house["text"]
    assert re.search(r'spent="[\d,]+ of 4,400 characters, about [\d,]+ tokens: \d+ lines from \d+ notes?"', found), found


CHATTER = [
    "How was the weekend? We spent most of Saturday painting the garden fence a dark green, two coats in the end.",
    "Busy here too: the football was on, then dinner at my sister's, she made a huge lasagne and we ate far too much.",
    "Did it rain where you are? The forecast said storms all afternoon but we only had a few drops around six.",
    "Only on Sunday morning, so the run was muddy; I did the long loop by the river anyway and felt great after.",
]
DECOYS = {
    "Keys.md": "# Keys\n\nThe car keys hang on the hook by the front door.\n",
    "Shed.md": "# Shed\n\nThe garden shed needs a new padlock before the winter.\n",
    "Flowerpots.md": "# Flowerpots\n\nBuy two blue flowerpots for the balcony in spring.\n",
    "Locks.md": "# Locks\n\nThe locksmith on Mill Road cuts spare keys while you wait.\n",
    "Garden.md": "# Garden\n\nMove the potted plants by the shed into the sun.\n",
    "Door.md": "# Door\n\nThe back door sticks in damp weather; plane the bottom edge.\n",
}


def test_a_turn_is_found_by_its_own_words_in_a_60_turn_session(make_assistant, vault, fake_ollama):
    turns = [("you" if n % 2 == 0 else "tars", f"{CHATTER[n % 4]} ({n})") for n in range(60)]
    turns[41] = ("you", "The spare key is under the blue flowerpot by the shed.")
    rel = session(vault, "2026-03-14 10:00", turns, "Weekend chat")
    for name, text in DECOYS.items():
        write(vault, name, text)
    line = (vault / rel).read_text().split("\n").index(said_line(*turns[41])) + 1
    # Its own words, by meaning alone: the turn's own vector, where the passage's is mostly weekend chatter.
    query = turns[41][1]
    fake_ollama.script = [
        {"tool_calls": [{"name": "memory_search", "arguments": {"query": query, "mode": "vec", "limit": 5}}]},
        {"text": "ok"},
    ]
    make_assistant(kind="local").chat("cli", "hello")
    found = tool_result(fake_ollama)
    blocks = note_blocks(found)
    assert any(b["path"] == rel for b in blocks), found
    [block] = [b for b in blocks if b["path"] == rel]
    ranges = [tuple(map(int, (r.split("-") * 2)[:2])) for r in block["lines"].split(",")]
    assert any(first <= line <= last for first, last in ranges), block
    assert said_line(*turns[41]) in block["text"] and block["date"] == "2026-03-14 10:00", block


def test_a_newer_fact_comes_ahead_of_a_stale_one_with_both_dates(make_assistant, vault, fake_ollama):
    stale = session(vault, "2026-01-10 09:00", [("you", "My locker code is 4471."), ("tars", "Noted.")], "Locker")
    newer = session(
        vault, "2026-03-02 18:30", [("you", "They reset the lockers at work, the new combination is 0932."), ("tars", "Got it.")], "Work"
    )
    write(vault, "Notes.md", "# Notes\n\nThe locker room is on the second floor.\n")
    fake_ollama.script = [{"text": "ok"}]
    make_assistant().chat("cli", "what is my locker code?")
    blocks = note_blocks(system_prompt(fake_ollama))
    paths = [b["path"] for b in blocks]
    assert paths.index(newer) < paths.index(stale), blocks
    dates = {b["path"]: b.get("date") for b in blocks}
    assert dates[newer] == "2026-03-02 18:30" and dates[stale] == "2026-01-10 09:00"
    assert "modified" in next(b for b in blocks if b["path"] == "Notes.md")  # a note that says no date: when it last changed
