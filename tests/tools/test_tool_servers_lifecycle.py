"""MCP servers that never delay tarsd, servers configured wrong, names the providers refuse, and
a kill -9 while a call waits for the user: each with a real tarsd of its own."""

from __future__ import annotations

import os
import re
import signal
import time

from harness.daemon import wait_for
from harness.tool_servers import Journal, stdio_server, toml_config
from harness.vault_files import write
from tarsctl.protocol import Chat, ChatDone, Search, ToolApproval
from tarsd.chat.conversations import UNANSWERED

ANTHROPIC = {"ANTHROPIC_API_KEY": "sk-test", "TARS_CHAT_PROVIDER": "anthropic", "TARS_CHAT_MAX_RETRIES": "0"}


def configure(start_daemon, tmp_path, servers: dict, fake, **mcp) -> object:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    (state / "config.toml").write_text(toml_config(servers, **mcp))
    return start_daemon(TARS_CHAT_ANTHROPIC_BASE_URL=fake.url, **ANTHROPIC)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not open(f"/proc/{pid}/stat").read().split(")")[1].split()[0] == "Z"


def test_search_and_chat_answer_while_a_server_is_still_starting(start_daemon, tmp_path, vault, fake_anthropic):
    """A server that never answers its handshake is still starting (its start timeout is a minute)
    when a search and a chat have been answered: neither waits for the servers, on any machine."""
    write(vault, "Garden.md", "# Garden\n\nTomatoes need sun.\n")
    fake_anthropic.script = [{"text": "Hello."}]
    daemon = configure(start_daemon, tmp_path, {"mute": {"command": ["sleep", "1000"]}}, fake_anthropic, start_timeout_seconds=60.0)
    with daemon.client() as client:
        assert [h.path for h in client.call(Search(id=1, query="tomatoes", mode="fts")).results] == ["Garden.md"]
        assert client.call(Chat(id=2, conversation="early", message="hi")).text == "Hello."
    [mute] = daemon.status().tool_servers
    assert mute.state == "starting" and not mute.error, "the chat above waited for the servers"


def test_servers_never_delay_start_up_search_or_chat_and_wrong_ones_say_why(start_daemon, tmp_path, vault, fake_anthropic):
    write(vault, "Garden.md", "# Garden\n\nTomatoes need sun.\n")
    journal = Journal(tmp_path / "journal.jsonl")
    leaky = tmp_path / "leaky.env"
    leaky.write_text("TOKEN=x\n")
    leaky.chmod(0o644)
    servers = {
        "mute": {"command": ["sleep", "1000"]},  # never answers the handshake
        "missing": {"command": ["no-such-program-for-tars-tests"]},
        "both": {"command": ["true"], "url": "http://127.0.0.1:9/mcp"},
        "bad name!": {"command": ["true"]},
        "leaky": stdio_server("leaky", journal.path, env_file=str(leaky)),
        "odd": stdio_server("odd", journal.path, env={"TOOL_SERVER_ODD_NAMES": "1"}),
        # 3,000 lines of its own log on stdout before the protocol starts (the SDK's Python servers guard
        # their stdout; a server in another language may not).
        "noisy": {
            **stdio_server("noisy", journal.path),
            "command": [
                "sh",
                "-c",
                'i=0; while [ $i -lt 3000 ]; do echo "debug: starting $i"; i=$((i+1)); done; exec "$@"',
                "sh",
                *stdio_server("noisy", journal.path)["command"],
            ],
        },
    }
    fake_anthropic.script = [{"text": "Hello."}]
    began = time.monotonic()
    # 10 s: the mute server's failure is seen soon, and the real servers (Python processes) start within it
    # even on a machine busy with other work (3 s was passed there, again and again).
    daemon = configure(start_daemon, tmp_path, servers, fake_anthropic, start_timeout_seconds=10.0, restart_seconds=0.5)
    # Answering beside servers that never answer: that the answers do not wait for them is shown by the
    # test above (still "starting" after both); here, with a start timeout short enough to see the
    # failures below, how long they took depends only on how busy the machine is.
    with daemon.client() as client:
        assert [h.path for h in client.call(Search(id=1, query="tomatoes", mode="fts")).results] == ["Garden.md"]
        assert client.call(Chat(id=2, conversation="early", message="hi")).text == "Hello."

    views = wait_for(
        lambda: (
            (found := {s.name: s for s in daemon.status().tool_servers})["mute"].state == "failed"
            and found["odd"].state == found["noisy"].state == "ready"
            and found
        ),
        "the servers to settle",
        deadline=120,
    )
    assert views["mute"].error == "did not start and list its tools within 10 s"
    assert views["missing"].state == "failed" and "cannot start 'no-such-program-for-tars-tests': no such program" in views["missing"].error
    assert views["both"].state == "misconfigured" and "needs exactly one of command" in views["both"].error
    assert views["bad name!"].state == "misconfigured" and "must be 1-32 letters, digits" in views["bad name!"].error
    assert views["leaky"].state == "failed" and "can be read by others (mode 644): run `chmod 600" in views["leaky"].error
    assert not [e for e in journal.entries() if e.get("server") == "leaky"], "a server with a readable secret file never starts"
    status = daemon.tarsctl("status").stdout
    assert "tools: the MCP server leaky is failed" in status and "tools: the MCP server both is misconfigured" in status
    assert daemon.ping()
    # The noisy server's junk lines were skipped, and logged once a minute, not 3,000 times (on a busy
    # machine its start can pass the start timeout a few times, each start printing its 3,000 lines again).
    minutes = int((time.monotonic() - began) // 60) + 1
    assert views["noisy"].tool_count > 10 and 1 <= daemon.log.read_text().count("Failed to parse JSONRPC message") <= minutes

    # Names the providers refuse become names they take, unique, each reaching its own tool.
    fake_anthropic.script = [
        {"tool_calls": [{"name": "odd_odd_name_with_dots", "arguments": {}}, {"name": "odd_a_b", "arguments": {}}]},
        lambda body: {"tool_calls": [{"name": next(n for n in offered(body) if n.startswith("odd_a_b_")), "arguments": {}}]},
        {"text": "Called them."},
    ]
    with daemon.client() as client:
        done = client.call(Chat(id=3, conversation="odd", message="call the odd ones"))
    assert isinstance(done, ChatDone) and done.text == "Called them."  # the fake refuses what the real API refuses
    names = offered(fake_anthropic.bodies("/v1/messages")[-1])
    odd = [n for n in names if n.startswith("odd_")]
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", n) for n in names) and len(set(names)) == len(names)
    assert {"odd_odd_name_with_dots", "odd_a_b"} <= set(odd) and len([n for n in odd if n.startswith("odd_nnnn")][0]) == 64
    assert [c["tool"] for c in journal.calls(server="odd")] == ["odd name!/with.dots", "a.b", "a_b"]

    # A server that keeps failing is tried again after a back-off that doubles (0.5 s, 1 s, 2 s, ...).
    def doubling() -> bool:
        missing = next(s for s in daemon.status().tool_servers if s.name == "missing")
        return missing.restarts >= 2 and abs(missing.next_start_at - missing.error_at - 0.5 * 2**missing.restarts) < 0.25

    wait_for(doubling, "the missing server's back-off to double")

    # doctor starts each server on its own: a broken one is a warning that says why, never a problem.
    doctor = daemon.tarsctl("doctor")
    assert "warn     tools     MCP server missing (stdio: no-such-program-for-tars-tests): failed: cannot start" in doctor.stdout
    assert "warn     tools     MCP server leaky" in doctor.stdout and "chmod 600" in doctor.stdout
    assert "ok       tools     MCP server noisy (stdio: sh -c" in doctor.stdout and "problem  tools" not in doctor.stdout
    assert daemon.stop() == 0  # not the fixture's kill -9: the mute server ignores its closed stdin


def offered(body: dict) -> list[str]:
    return [tool["name"] for tool in body.get("tools") or []]


def test_a_kill_9_with_a_call_waiting_for_approval_runs_nothing_and_the_conversation_goes_on(start_daemon, tmp_path, fake_anthropic):
    journal = Journal(tmp_path / "journal.jsonl")
    fake_anthropic.script = [{"tool_calls": [{"name": "tasks_add_tasks", "arguments": {"tasks_to_add": ["sell the car"]}}]}]
    daemon = configure(start_daemon, tmp_path, {"tasks": stdio_server("tasks", journal.path)}, fake_anthropic)
    wait_for(lambda: daemon.status().tool_servers[0].state == "ready", "the server")
    server_pid = journal.pid("tasks")
    with daemon.client() as client:
        client.send(Chat(id=1, conversation="car", message="sell my car", approvals=True))
        while not isinstance(client.receive(), ToolApproval):
            pass
        daemon.kill()  # SIGKILL, with the approval waiting
    wait_for(lambda: not alive(server_pid), "the server of the killed tarsd to exit (its stdin closed)")
    daemon.start()
    wait_for(lambda: daemon.status().tool_servers[0].state == "ready", "the server again")
    fake_anthropic.script = [{"text": "I did not sell it."}]
    with daemon.client() as client:
        done = client.call(Chat(id=2, conversation="car", message="did you sell it?", approvals=True))
    assert done.text == "I did not sell it."  # the fake refuses a tool_use with no tool_result, as the real API does
    history = fake_anthropic.bodies("/v1/messages")[-1]["messages"]
    result = next(b for m in history if isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_result")
    assert result["content"] == UNANSWERED
    assert not journal.calls(tool="add_tasks")
    assert "Traceback" not in daemon.log.read_text()


def test_a_server_that_never_answers_is_never_left_running(start_daemon, tmp_path, fake_anthropic):
    """Each start that runs out of time, and tarsd's stop while a start is still waiting, end the
    server's process (the SDK closes its stdin, then kills its process group): none is left
    behind, not even one that ignores its stdin."""
    from harness.daemon import child_pids

    servers = {"mute": {"command": ["sleep", "1000"]}}
    daemon = configure(start_daemon, tmp_path, servers, fake_anthropic, start_timeout_seconds=1.0, restart_seconds=0.2)
    wait_for(lambda: daemon.status().tool_servers[0].restarts >= 2, "two starts of the mute server to run out of time")
    assert len(child_pids(daemon.process.pid, "sleep 1000")) <= 1  # the one being started now, if any
    assert daemon.stop() == 0
    # Stopped while the start still has 30 s to run: the stop does not wait for it, and ends it.
    (tmp_path / "state" / "config.toml").write_text(toml_config(servers))
    daemon.start()
    pids = wait_for(lambda: child_pids(daemon.process.pid, "sleep 1000"), "the server's process")
    began = time.monotonic()
    assert daemon.stop() == 0 and time.monotonic() - began < 5
    assert not [pid for pid in pids if alive(pid)]


def test_a_crash_is_seen_by_the_process_exit_while_a_child_still_holds_its_stdout(start_daemon, tmp_path, fake_anthropic):
    """The server forks a child that shares its stdout, then dies: no end of file comes, and only
    the process's exit tells. Killed while idle, it is restarted at once; crashing mid-call, the
    call fails at once instead of waiting out its 30 s; the children it left are ended."""
    journal = Journal(tmp_path / "journal.jsonl")
    servers = {"forky": stdio_server("forky", journal.path, timeout_seconds=30)}
    fake_anthropic.script = [{"tool_calls": [{"name": "forky_fork_child", "arguments": {}}]}, {"text": "Forked."}]
    daemon = configure(start_daemon, tmp_path, servers, fake_anthropic, restart_seconds=0.2)
    wait_for(lambda: daemon.status().tool_servers[0].state == "ready", "the server")
    with daemon.client() as client:
        assert client.call(Chat(id=1, conversation="fork", message="fork")).text == "Forked."
    [child] = journal.children("forky")
    first = journal.pid("forky")
    os.kill(first, signal.SIGKILL)  # while idle, the child holding its stdout
    server = wait_for(
        lambda: (s := daemon.status().tool_servers[0]).restarts == 1 and s.state == "ready" and s,
        "the killed server to be noticed and started again",
        deadline=10,
    )
    assert journal.pid("forky") != first and server.error == "the connection ended (the server exited or closed it)"
    wait_for(lambda: not alive(child), "the child the dead server left to be ended", deadline=10)

    fake_anthropic.script = [{"tool_calls": [{"name": "forky_crash_with_child", "arguments": {}}]}, {"text": "It crashed."}]
    began = time.monotonic()
    with daemon.client() as client:
        done = client.call(Chat(id=2, conversation="crash", message="crash"))
    assert done.text == "It crashed." and time.monotonic() - began < 10  # not the call's 30 s
    told = [b for m in fake_anthropic.bodies("/v1/messages")[-1]["messages"] if isinstance(m["content"], list) for b in m["content"]]
    assert any(b.get("content") == "error: the server stopped during the call; it is started again" for b in told), told
    wait_for(lambda: daemon.status().tool_servers[0].restarts == 2, "the crashed server to be started again", deadline=10)
    wait_for(lambda: not any(alive(pid) for pid in journal.children("forky")), "its children to be ended", deadline=10)
