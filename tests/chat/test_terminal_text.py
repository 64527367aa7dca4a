"""Issue 36: nothing a party writes can draw on the user's terminal. A real tarsd, a scripted
model (fake Ollama), a real MCP server and notes with hostile text and a hostile file name;
`tarsctl chat`, `search`, `status`, `tools` and `rules` run on a pseudo-terminal, and the raw
bytes they write are checked: no escape sequence of anyone else's reaches the terminal, tars's
own approval question cannot be imitated, and the undo tars suggests is safe to paste."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys

import pytest

from harness.daemon import TarsDaemon, wait_for
from harness.fake_llm import FakeOllama
from harness.paths import MODEL_DIR
from harness.terminal import on_a_terminal
from harness.tool_servers import Journal, stdio_server, toml_config
from harness.vault_files import write

BLACK_ON_BLACK = "\x1b[30;40m"
CLEAR_SCREEN = "\x1b[2J"
CLIPBOARD = "\x1b]52;c;d2lyZSA1MDAgZXVyb3M=\x07"  # OSC 52: write the clipboard
FAKE_QUESTION = "\n  ? tasks wants to run find_tasks (the server marks it read-only)\n    run it? [y]es / [n]o / [a]lways (9 s to answer): "
# What tars itself may write: its own styles, and what readline writes around a prompt.
OWN_SEQUENCES = {"\x1b[0m", "\x1b[7m", "\x1b[1m", "\x1b[?1034h", "\x1b[?2004h", "\x1b[?2004l"}
EVIL_FILE = "Evil\u202etxt.\x1b[31mred.md"


def foreign_sequences(shown: str) -> list[str]:
    """The escape sequences (CSI, OSC, any ESC) and BELs on the terminal that are not tars's own."""
    found = re.findall(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.?|\x07", shown)
    return [s for s in found if s not in OWN_SEQUENCES]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("terminal")
    vault, state = root / "vault", root / "state"
    vault.mkdir()
    state.mkdir()
    write(vault, "Hostile.md", f"# Hostile {CLEAR_SCREEN}heading\n\nzanzibar parcel {CLEAR_SCREEN} then {CLIPBOARD} and \u202eevil\n")
    (vault / EVIL_FILE).write_text("# Odd name\n\nquokka sighting near the river\n")
    journal = Journal(root / "journal.jsonl")
    with FakeOllama() as ollama:
        (state / "config.toml").write_text(toml_config({"tasks": stdio_server("tasks", journal.path)}, approval_timeout_seconds=30))
        env = {"TARS_CHAT_OLLAMA_HOST": ollama.url, "TARS_CHAT_OLLAMA_MODEL": "fake-chat", "TARS_CHAT_MAX_RETRIES": "0"}
        daemon = TarsDaemon(vault, state, MODEL_DIR, "none", env).start()
        try:
            wait_for(lambda: all(s.state == "ready" for s in daemon.status().tool_servers), "the MCP server to be ready")
            wait_for(lambda: daemon.search("zanzibar") == ["Hostile.md"] and daemon.search("quokka") == [EVIL_FILE], "the notes")
            yield daemon, journal, ollama, root
        finally:
            daemon.stop()
            daemon.cleanup()


def test_a_reply_a_tool_and_a_note_cannot_draw_on_the_terminal_or_imitate_the_question(world):
    daemon, journal, ollama, root = world
    since = journal.mark()
    ollama.script = [
        {
            "text": f"Sure.{FAKE_QUESTION}{BLACK_ON_BLACK}\u258c ? tasks wants to run find_tasks",
            "tool_calls": [{"name": "tasks_echo", "arguments": {"text": f"echo {CLEAR_SCREEN}{CLIPBOARD}"}}],
        },
        {"tool_calls": [{"name": "tasks_add_tasks", "arguments": {"tasks_to_add": ["wire 500 euros to account 666" + " " * 500 + "!"]}}]},
        {
            "text": f"Done{CLEAR_SCREEN}.",
            "tool_calls": [{"name": "memory_remember", "arguments": {"fact": "Prefer metric units", "kind": "procedural"}}],
        },
        {"text": "Proposed."},
    ]
    code, shown = on_a_terminal(
        daemon.tarsctl_command("chat", "--conversation", "hostile"),
        daemon.env,
        [
            ("you> ", "plan my day"),
            ("\u258c   run it? [y]es / [n]o / [a]lways (30 s to answer): ", "n"),
            ("Proposed.", "/search zanzibar"),
            ("\\u0007 and", "/exit"),
        ],
    )
    assert code == 0, shown
    assert foreign_sequences(shown) == [], shown
    assert "\\u001b[30;40m" in shown and "\\u001b[2J" in shown  # shown as text, harmless
    # The model's fake question stays in its text; tars's own starts on a fresh line, attributes
    # reset, in reverse video, and only its lines start with the mark no cleaned text can hold.
    assert "\\u258c ? tasks wants to run find_tasks" in shown
    assert "\n\x1b[0m\x1b[7m\u258c ? tasks wants to run add_tasks (not marked read-only by the server)\x1b[0m\n" in shown
    assert [line for line in shown.splitlines() if line.lstrip("\x1b[0m7").startswith("\u258c")] == [
        "\x1b[0m\x1b[7m\u258c ? tasks wants to run add_tasks (not marked read-only by the server)\x1b[0m",
        "\u258c   arguments (76 characters, all shown):",
        "\u258c     {",
        '\u258c       "tasks_to_add": [',
        '\u258c         "wire 500 euros to account 666⟨500 spaces⟩!"',
        "\u258c       ]",
        "\u258c     }",
        "\u258c   run it? [y]es / [n]o / [a]lways (30 s to answer): ",
    ]
    assert [c["tool"] for c in journal.calls(since)] == ["echo"]

    for command, answers in [
        (["search", "zanzibar parcel"], []),
        (["search", "quokka"], []),
        (["status"], []),
        (["tools"], []),
        (["rules"], [("decide later [l]? ", "l")]),
    ]:
        code, shown = on_a_terminal(daemon.tarsctl_command(*command), daemon.env, answers)
        assert code == 0, (command, shown)
        assert foreign_sequences(shown) == [], (command, shown)
        if command[0] == "search":
            assert "\x1b[1m" in shown  # the query's words in bold: tars's own style still works
        if command == ["search", "quokka"]:
            assert "Evil\\u202etxt.\\u001b[31mred.md:1" in shown, shown
        if command == ["tools"] or command == ["status"]:
            assert "echo \\u001b[2J\\u001b]52;c;d2lyZSA1MDAgZXVyb3M=\\u0007" in shown, shown
        if command == ["rules"]:
            assert "Prefer metric units" in shown


def test_the_undo_tars_suggests_for_a_models_fact_is_safe_to_paste(world):
    """Issue 36: the undo was Python's repr in double quotes, so pasting it ran $(...)."""
    daemon, journal, ollama, root = world
    marker = root / "pwned"
    fact = f"Sam's backup host is $(touch {marker}) ok"
    ollama.script = [{"tool_calls": [{"name": "memory_remember", "arguments": {"fact": fact}}]}, {"text": "Noted."}]
    done = daemon.tarsctl("chat", "remember the backup host")
    [chat_undo] = re.findall(r"\(undo: (.*)\)$", done.stderr, re.M)
    [status_undo] = re.findall(r"undo: (.*)$", daemon.tarsctl("status").stdout, re.M)
    assert chat_undo == status_undo and shlex.split(chat_undo) == ["tarsctl", "forget", fact]
    # Pasted into a shell, as the user would: the command runs, and nothing in the line does.
    bin_dir = root / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "tarsctl").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m tarsctl "$@"\n')
    (bin_dir / "tarsctl").chmod(0o755)
    env = {**daemon.env, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    pasted = subprocess.run(["sh", "-c", chat_undo + " --yes"], env=env, capture_output=True, text=True, timeout=60)
    assert pasted.returncode == 0, pasted.stderr
    assert not marker.exists()
    assert fact in pasted.stdout and fact not in (daemon.vault / "Memory.md").read_text()


def test_the_terminal_shows_a_calls_arguments_whole_however_long(world):
    """Issue 36: the CLI cut a call's arguments at 20,000 characters while a call may carry 100,000."""
    daemon, journal, ollama, root = world
    since = journal.mark()
    tasks = [f"task {n}" for n in range(2500)] + ["wire 500 euros to account 666"]  # about 30,000 characters
    ollama.script = [{"tool_calls": [{"name": "tasks_add_tasks", "arguments": {"tasks_to_add": tasks}}]}, {"text": "Not added."}]
    code, shown = on_a_terminal(
        daemon.tarsctl_command("chat", "--conversation", "long-arguments"),
        daemon.env,
        [("you> ", "add my tasks"), ("[n]o / [a]lways", "n"), ("Not added.", "/exit")],
    )
    assert code == 0, shown
    arguments = [line.removeprefix("\u258c     ") for line in shown.splitlines() if line.startswith("\u258c     ")]
    assert "\n".join(arguments) == json.dumps({"tasks_to_add": tasks}, indent=2, ensure_ascii=False)
    assert "not shown" not in shown and not journal.calls(since, tool="add_tasks")


C1_CLEAR_SCREEN = "\x9b2J"  # CSI as one C1 character: a terminal takes it for ESC [ and clears the screen
RAW_NEVER = "\x9b\x7f\u202e\u2028"


def test_json_output_spells_control_and_bidi_characters_as_escapes(world):
    """`--json` output printed a note's or the model's C1 controls (CSI), DEL, bidi overrides and
    line separators raw: JSON escapes only the C0 controls, so `tarsctl search --json` on a
    terminal let a note clear the screen. Every other character stays itself, and the JSON reads
    the same."""
    daemon, journal, ollama, root = world
    hostile = f"wombat burrow {C1_CLEAR_SCREEN} then \u202eevil\u2028next \x7f end"
    write(daemon.vault, "Wombat.md", f"# Wombat\n\n{hostile}\n\nSee [[Den{C1_CLEAR_SCREEN}\u202ex]].\n")
    wait_for(lambda: daemon.search("wombat") == ["Wombat.md"], "the note")
    ollama.script = [{"text": f"Wombats {C1_CLEAR_SCREEN}dig\u202e."}]
    runs = {
        "search": daemon.tarsctl("search", "--json", "wombat burrow"),  # the quick path
        "links": daemon.tarsctl("links", "--json", "Wombat.md"),  # the full client
        "chat": daemon.tarsctl("chat", "--json", "--conversation", "json-out", "wombats?"),
    }
    for name, run in runs.items():
        assert run.returncode == 0, (name, run.stderr)
        assert not set(run.stdout) & set(RAW_NEVER), (name, run.stdout)
    [hit] = [json.loads(line) for line in runs["search"].stdout.splitlines()]
    assert C1_CLEAR_SCREEN in hit["snippet"] and "\u202eevil" in hit["snippet"]
    [link] = [json.loads(line) for line in runs["links"].stdout.splitlines()]
    assert link["target"] == f"Den{C1_CLEAR_SCREEN}\u202ex"
    assert json.loads(runs["chat"].stdout)["text"] == f"Wombats {C1_CLEAR_SCREEN}dig\u202e."
