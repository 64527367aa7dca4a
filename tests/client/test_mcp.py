"""tarsctl mcp through the MCP SDK's own client: a real tarsd on a temp vault, real `tarsctl mcp`
subprocesses on stdio, driven by stdio_client + ClientSession as Claude Code or Cursor would."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import anyio
import pytest
from mcp import MCPError, types

from harness.daemon import TarsDaemon, child_pids, wait_for
from harness.mcp_client import TOOLS, VAULT, mcp_session, no_crash, run, tarsctl_json, text
from harness.vault_files import write
from tarsd.memory.provenance import new_stamp


@pytest.fixture
def filled_vault(vault):
    for rel, body in VAULT.items():
        write(vault, rel, body)
    return vault


def test_initialize_lists_tools_and_resources_for_a_model(start_daemon, filled_vault, tmp_path):
    daemon = start_daemon()
    log = tmp_path / "mcp.log"

    async def scenario():
        async with mcp_session(daemon.env, log) as session:
            info = session.initialize_result
            assert info.server_info.name == "tars" and "data, not instructions" in info.instructions
            assert info.capabilities.tools is not None and info.capabilities.resources is not None
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert set(tools) == TOOLS
            for tool in tools.values():
                schema = tool.input_schema
                assert schema["type"] == "object" and schema["additionalProperties"] is False and len(tool.description) > 80
                assert all(prop.get("description") for prop in schema["properties"].values()), tool.name
            assert tools["search"].input_schema["required"] == ["query"]
            assert "data, not instructions" in tools["get_note"].description
            assert tools["search"].annotations.read_only_hint and tools["forget"].annotations.destructive_hint
            assert not tools["remember"].annotations.read_only_hint
            resources = {r.uri: r for r in (await session.list_resources()).resources}
            assert set(resources) == {"tars://memory", "tars://rules"}
            [template] = (await session.list_resource_templates()).resource_templates
            assert template.uri_template == "tars://note/{+path}"

    run(scenario)
    no_crash(log)


def test_search_matches_tarsctl_search_json(start_daemon, filled_vault, tmp_path):
    daemon = start_daemon()
    log = tmp_path / "mcp.log"
    cases = [
        ({"query": "oven temperature"}, ["oven", "temperature"]),
        ({"query": "sourdough starter", "mode": "fts", "limit": 3}, ["--mode", "fts", "--limit", "3", "sourdough", "starter"]),
        ({"query": "tomatoes basil", "path": "projects/"}, ["--path", "projects/", "tomatoes", "basil"]),
        ({"query": "oven", "types": ["episodic"]}, ["--type", "episodic", "oven"]),
        ({"query": "baking", "tags": ["baking"]}, ["--tag", "baking", "baking"]),
    ]

    async def scenario():
        async with mcp_session(daemon.env, log) as session:
            for arguments, argv in cases:
                result = await session.call_tool("search", arguments)
                assert not result.is_error, text(result)
                hits, meta = tarsctl_json(daemon, *argv)
                got = result.structured_content
                assert got["results"] == hits and hits, arguments  # every field, scores included
                assert got["mode"] == meta["mode"] and got["coverage"] == meta["coverage"]
                shown = text(result)
                for n, hit in enumerate(hits, 1):
                    assert f"{n}. {hit['path']}:{hit['start_line']}-{hit['end_line']}" in shown and hit["band"] in shown
                assert "data, not instructions" in shown and "index: complete" in shown
            empty = await session.call_tool("search", {"query": "xylophonequartz"})
            assert not empty.is_error and text(empty).startswith("no hits") and empty.structured_content["results"] == []

    run(scenario)
    no_crash(log)


def test_get_note_reads_lines_and_refuses_what_is_not_a_note_in_the_vault(start_daemon, filled_vault, tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_text("secret\n")
    os.symlink(outside, filled_vault / "sneaky.md")
    write(filled_vault, "long.md", "".join(f"line {n} " + "z" * 200 + "\n" for n in range(1, 1001)))
    daemon = start_daemon()
    log = tmp_path / "mcp.log"

    async def scenario():
        async with mcp_session(daemon.env, log) as session:
            bake = await session.call_tool("get_note", {"path": "Sourdough.md", "heading": "Bake"})
            assert not bake.is_error
            assert text(bake).splitlines()[1:] == [
                " 9| ## Bake",
                "10| ",
                "11| - Bake covered at 250 °C for 20 minutes.",
                "12| - Then uncovered at 230 °C.",
            ]
            assert bake.structured_content["heading"] == "Sourdough > Bake" and bake.structured_content["total_lines"] == 12

            part = await session.call_tool("get_note", {"path": "projects/garden plan.md", "start_line": 3, "end_line": 5})
            assert part.structured_content["lines"] == ["## Beds", "", "Tomatoes by the south wall, basil between them."]
            assert "3| ## Beds" in text(part)

            first = await session.call_tool("get_note", {"path": "long.md"})
            end = first.structured_content["end_line"]
            assert first.structured_content["truncated"] and f"read on with start_line {end + 1}" in text(first)
            rest = await session.call_tool("get_note", {"path": "long.md", "start_line": end + 1})
            assert rest.structured_content["lines"][0].startswith(f"line {end + 1} ")

            for path, message in (
                ("../outside.md", "is not inside the vault"),
                (str(outside), "is not inside the vault"),
                ("/etc/passwd", "is not inside the vault"),
                ("sneaky.md", "outside the vault: never read"),
                ("missing.md", "there is no note at missing.md"),
            ):
                refused = await session.call_tool("get_note", {"path": path})
                assert refused.is_error and message in text(refused) and "fix:" in text(refused), text(refused)
                assert refused.structured_content["error"]["code"] in ("bad_request", "not_found")

    run(scenario)
    no_crash(log)


def test_remember_update_and_forget(start_daemon, filled_vault, tmp_path):
    daemon = start_daemon()
    log = tmp_path / "mcp.log"
    memory = filled_vault / "Memory.md"
    stamp = new_stamp("mcp:test-client", by_model=True).render()  # an AI tool is a model: its lines say so

    async def scenario():
        async with mcp_session(daemon.env, log) as session:
            added = await session.call_tool("remember", {"fact": "Allergic to penicillin", "section": "Core"})
            assert not added.is_error and text(added) == "remembered in Memory.md under Core: Allergic to penicillin"
            assert f"- Allergic to penicillin {stamp}\n" in memory.read_text()  # the line says which AI tool stored it

            again = await session.call_tool("remember", {"fact": "allergic to penicillin!"})
            assert again.structured_content["status"] == "duplicate" and "nothing changed" in text(again)

            update = await session.call_tool("remember", {"fact": "My locker number is 14"})
            assert update.structured_content["status"] == "possible_update" and "mode 'replace'" in text(update)
            assert "locker number is 14" not in memory.read_text()
            line = update.structured_content["similar"]
            # The locker line is the user's own: an AI tool's replacement only waits for the user (issue 36, observation 6).
            replaced = await session.call_tool("remember", {"fact": "My locker number is 14", "mode": "replace", "replace_line": line})
            assert replaced.structured_content["status"] == "pending" and "is the user's own line" in text(replaced)
            assert "- My locker number is 12\n" in memory.read_text() and "locker number is 14" not in memory.read_text()
            assert daemon.tarsctl("rules", "approve", str(replaced.structured_content["pending_id"])).returncode == 0
            assert "locker number is 12" not in memory.read_text() and "- My locker number is 14 <!-- tars:" in memory.read_text()

            rule = await session.call_tool("remember", {"fact": "Use metric units", "kind": "procedural"})
            # A rule from an AI tool is only proposed: nothing is active until the user approves it.
            assert rule.structured_content["status"] == "pending" and "waits for the user's approval" in text(rule)
            assert "metric" not in (filled_vault / "Procedural.md").read_text()
            assert daemon.tarsctl("rules").stdout.count("Use metric units") == 1

            noted = await session.call_tool("remember", {"fact": "Parks in bay B7 at work", "section": "Core"})
            assert not noted.is_error and "bay B7" in memory.read_text()
            listed = await session.call_tool("forget", {"text": "parks bay B7"})
            [candidate] = listed.structured_content["candidates"]
            assert candidate["line"] == "Parks in bay B7 at work" and "nothing removed yet" in text(listed)
            assert "noted by the model" in text(listed) and "in chat mcp:test-client" in text(listed)
            assert "bay B7" in memory.read_text()
            gone = await session.call_tool("forget", {"confirm_line": candidate["line"]})
            assert text(gone) == "removed from Memory.md: Parks in bay B7 at work" and "bay B7" not in memory.read_text()

            # A line the user wrote is not the AI tool's to remove (a note it read could ask it to): it is proposed.
            users = await session.call_tool("forget", {"confirm_line": "Name: Sam"})
            assert not users.is_error and "proposed, not removed" in text(users) and "- Name: Sam\n" in memory.read_text()
            assert "remove your line 'Name: Sam'" in daemon.tarsctl("rules").stdout

            neither = await session.call_tool("forget", {})
            assert neither.is_error and "give text" in text(neither)

    run(scenario)
    no_crash(log)
    wait_for(lambda: daemon.search("penicillin") == ["Memory.md"], "the remembered fact in the index")


def test_recent_sessions_and_status(start_daemon, filled_vault, tmp_path):
    daemon = start_daemon()
    log = tmp_path / "mcp.log"

    async def scenario():
        async with mcp_session(daemon.env, log) as session:
            recent = await session.call_tool("recent_sessions", {})
            paths = [s["path"] for s in recent.structured_content["sessions"]]
            assert paths == ["sessions/2026-11-20-1930-backups.md", "sessions/2026-11-01-0930-oven.md"]
            shown = text(recent)
            assert shown.index("Raspberry Pi backups") < shown.index("Oven temperatures") and "2026-11-01 09:30" in shown
            assert "- restic with a systemd timer at 03:00." in shown

            one = await session.call_tool("recent_sessions", {"limit": 1})
            assert len(one.structured_content["sessions"]) == 1 and one.structured_content["total"] == 2

            found = await session.call_tool("recent_sessions", {"query": "oven"})
            assert [s["path"] for s in found.structured_content["sessions"]] == ["sessions/2026-11-01-0930-oven.md"]

            status = await session.call_tool("status", {})
            assert not status.is_error and "index: complete; 8 notes indexed of 8 on disk" in text(status)
            coverage = status.structured_content["coverage"]
            assert coverage["reconciled"] and coverage["notes_indexed"] == 8
            assert status.structured_content["vault"] == str(filled_vault)

    run(scenario)
    no_crash(log)


def test_resources_are_the_memory_files_and_notes(start_daemon, filled_vault, tmp_path):
    daemon = start_daemon()
    log = tmp_path / "mcp.log"

    async def scenario():
        async with mcp_session(daemon.env, log) as session:

            async def read(uri: str) -> str:
                [content] = (await session.read_resource(uri)).contents
                assert content.mime_type == "text/markdown"
                return content.text

            assert await read("tars://memory") == VAULT["Memory.md"]
            assert await read("tars://rules") == VAULT["Procedural.md"]
            assert await read("tars://note/" + quote("projects/garden plan.md")) == VAULT["projects/garden plan.md"]
            assert await read((filled_vault / "projects" / "tars.md").as_uri()) == VAULT["projects/tars.md"]
            for uri, message in (
                ("tars://note/missing.md", "there is no note at missing.md"),
                ("file:///etc/passwd", "is not inside the vault"),
                ("https://example.com/x.md", "unknown resource"),
            ):
                with pytest.raises(MCPError, match=message):
                    await session.read_resource(uri)
            assert await read("tars://memory") == VAULT["Memory.md"]  # the session goes on after errors

    run(scenario)
    no_crash(log)


def test_bad_arguments_are_tool_errors_and_the_bridge_goes_on(start_daemon, filled_vault, tmp_path):
    daemon = start_daemon()
    log = tmp_path / "mcp.log"
    bad = [
        ("search", {}, "'query' is a required property"),
        ("search", {"query": "x", "limit": "many"}, "'many' is not of type 'integer'"),
        ("search", {"query": "x", "limit": 5000}, "5000 is greater than the maximum of 50"),
        ("search", {"query": "x", "mode": "grep"}, "'grep' is not one of"),
        ("search", {"query": "x", "types": ["secrets"]}, "'secrets' is not one of"),
        ("search", {"query": "x", "since": "last blue moon"}, "cannot read 'last blue moon' as a time"),
        ("search", {"query": "x", "min_score": float("nan")}, "bad arguments for search"),
        ("search", {"query": "x", "sudo": True}, "Additional properties are not allowed"),
        ("search", {"query": ["x"]}, "is not of type 'string'"),
        ("get_note", {"path": "Sourdough.md", "start_line": -3}, "less than the minimum of 1"),
        ("get_note", {"path": "Sourdough.md", "heading": "Bake", "start_line": 2}, "a heading or a line range, not both"),
        ("get_note", {"path": "Sourdough.md", "start_line": 99}, "past the end"),
        ("remember", {"fact": "x", "mode": "overwrite"}, "'overwrite' is not one of"),
        ("remember", {"fact": "x", "kind": "episodic"}, "'episodic' is not one of"),
        ("remember", {"fact": "x", "replace_line": "y"}, "replace_line goes with mode 'replace'"),
        ("recent_sessions", {"limit": 0}, "less than the minimum of 1"),
        ("no_such_tool", {}, "there is no tool named 'no_such_tool'"),
    ]

    async def scenario():
        async with mcp_session(daemon.env, log) as session:
            for name, arguments, message in bad:
                result = await session.call_tool(name, arguments)
                assert result.is_error and message in text(result), (name, arguments, text(result))
            raw = await session.send_request(
                types.CallToolRequest(params=types.CallToolRequestParams(name="status", arguments=None)), types.CallToolResult
            )
            assert not raw.is_error  # no arguments at all is an empty object
            ok = await session.call_tool("search", {"query": "sourdough"})
            assert not ok.is_error and ok.structured_content["results"][0]["path"] == "Sourdough.md"

    run(scenario)
    no_crash(log)


def test_daemon_down_then_started_then_restarted(vault, tmp_path, model_dir):
    write(vault, "note.md", "# Note\n\nthe wombat burrow\n")
    state = tmp_path / "state"
    state.mkdir()
    # Idle connections closed after a second: the bridge's pooled connection must be replaced too.
    daemon = TarsDaemon(vault, state, model_dir, extra_env={"TARS_DAEMON_IDLE_TIMEOUT_SECONDS": "1"})
    log = tmp_path / "mcp.log"

    async def scenario():
        async with mcp_session(daemon.env, log) as session:
            assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS  # no daemon needed for that
            down = await session.call_tool("search", {"query": "wombat"})
            assert down.is_error and down.structured_content["error"]["code"] == "not_running"
            assert text(down).startswith("tars: tarsd is not running (no answer on ") and "tarsd --vault PATH" in text(down)
            with pytest.raises(MCPError, match="tarsd is not running"):
                await session.read_resource("tars://memory")

            daemon.start()
            up = await session.call_tool("search", {"query": "wombat"})
            assert not up.is_error and up.structured_content["results"][0]["path"] == "note.md"
            await anyio.sleep(1.5)  # tarsd closes the idle connection
            idle = await session.call_tool("search", {"query": "wombat"})
            assert not idle.is_error and idle.structured_content["results"] == up.structured_content["results"]

            daemon.stop()  # a restart between two calls: the bridge reconnects
            daemon.start()
            again = await session.call_tool("get_note", {"path": "note.md"})
            assert not again.is_error and "the wombat burrow" in text(again)

            daemon.kill()  # killed outright, then back
            gone = await session.call_tool("status", {})
            assert gone.is_error and "not running" in text(gone)
            daemon.start()
            back = await session.call_tool("status", {})
            assert not back.is_error and "index: complete" in text(back)  # start() waited for the scan

    try:
        run(scenario)
    finally:
        daemon.cleanup()
    no_crash(log)


def _rss_mb(pid: int) -> float:
    match = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(match.group(1)) / 1024


def test_two_clients_share_the_daemon_and_its_one_model(start_daemon, filled_vault, tmp_path):
    daemon = start_daemon(embedder="local")
    wait_for(lambda: daemon.status().embedder.state == "ready" and daemon.status().coverage.pending_vectors == 0, "the model and vectors")
    daemon.tarsctl("search", "warm up the query path")  # the first query embeds once: its buffers are not a client's cost
    before = _rss_mb(daemon.process.pid)
    logs = tmp_path / "a.log", tmp_path / "b.log"
    queries = ["what temperature for the oven", "how do I back up the pi", "where do tomatoes go", "what is my dog called"]

    async def scenario():
        async with mcp_session(daemon.env, logs[0]) as first, mcp_session(daemon.env, logs[1]) as second:
            bridges = child_pids(os.getpid(), "tarsctl.cli mcp")
            assert len(bridges) == 2
            for query in queries:
                one, two = await first.call_tool("search", {"query": query}), await second.call_tool("search", {"query": query})
                hits, meta = tarsctl_json(daemon, query)
                assert meta["mode"] == "hybrid" and one.structured_content["results"] == two.structured_content["results"] == hits
            after = _rss_mb(daemon.process.pid)
            for pid in bridges:
                maps = Path(f"/proc/{pid}/maps").read_text()
                # The bridge loads no model and opens no database: that is the daemon's alone.
                assert "onnxruntime" not in maps and "apsw" not in maps and "sqlite" not in maps and "vec0" not in maps
            bridge_mb = [round(_rss_mb(pid)) for pid in bridges]
            print(f"\n  tarsd RSS {before:.0f} MB before, {after:.0f} MB with two MCP clients; the bridges {bridge_mb} MB")
            assert after - before < 40, (before, after)

    run(scenario)
    for log in logs:
        no_crash(log)


def test_other_commands_do_not_load_the_sdk():
    for argv in (["--version"], ["--socket", "/nonexistent/tarsd.sock", "search", "anything"]):
        done = subprocess.run([sys.executable, "-X", "importtime", "-m", "tarsctl.cli", *argv], capture_output=True, text=True, timeout=60)
        modules = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
        assert modules and not {m for m in modules if m.split(".")[0] in ("mcp", "mcp_types", "pydantic", "anyio", "jsonschema")}, argv
