"""`tarsctl tools`, the tools lines of `tarsctl status` and `tarsctl doctor`'s check of them: the
MCP servers tars uses, their state and tools with each one's policy, and the newest calls. Names
and errors come from the servers: they are printed through tarsctl/shown.py."""

from __future__ import annotations

import sys
import time

from tarsctl.protocol import ToolCallRecord, ToolServerInfo, ToolsReply
from tarsctl.shown import shown_text

POLICY_WORD = {"allow": "runs", "ask": "asks", "deny": "denied"}
DESCRIPTION_CHARS = 70
POLICY_FIX = "name the tool as `tarsctl tools` lists it (patterns are shell-style: *long-running*), in the config (docs/tools.md)"


def _when(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at)) if at else ""


def server_line(server: ToolServerInfo) -> str:
    state = server.state
    if server.state == "restarting" and server.next_start_at:
        state += f" (next try at {_when(server.next_start_at)})"
    if server.circuit == "open":
        state += f", circuit open until {_when(server.circuit_retry_at)} after {server.circuit_failures} failed calls"
    counts = f"{server.tool_count} tools" if server.tool_count or server.state == "ready" else ""
    restarts = f"{server.restarts} restarts" if server.restarts else ""
    extra = ", ".join(filter(None, [counts, restarts, shown_text(server.server_info)]))
    return f"{shown_text(server.name)} ({server.transport}: {shown_text(server.target)}): {state}" + (f"; {extra}" if extra else "")


def call_line(call: ToolCallRecord) -> str:
    took = f" {call.duration_ms / 1000:.1f} s" if call.duration_ms else ""
    by = f", approved by {shown_text(call.approved_by)}" if call.approved_by else ""
    return f"{_when(call.at)} {shown_text(call.server)} {shown_text(call.tool)} {shown_text(call.arguments)}: {call.outcome}{took}{by}"


def print_tools(reply: ToolsReply, out=sys.stdout) -> None:
    if not reply.servers:
        print("no MCP servers configured: add [mcp.servers.NAME] to the config (docs/tools.md)", file=out)
    for server in reply.servers:
        print(server_line(server), file=out)
        if server.error:
            print(f"  last error ({_when(server.error_at)}): {shown_text(server.error)}", file=out)
        for said in server.pattern_warnings:
            print(f"  warning: [mcp.servers.{shown_text(server.name)}] {shown_text(said)}", file=out)
        for line in server.stderr if server.state != "ready" else []:
            print(f"  stderr: {shown_text(line)}", file=out)
        width = max((len(shown_text(t.name or t.tool)) for t in server.tools), default=0)
        for tool in server.tools:
            shown_name = shown_text(tool.name) if tool.name else f"({shown_text(tool.tool)})"
            description = shown_text(tool.description)
            if len(description) > DESCRIPTION_CHARS:
                description = description[: DESCRIPTION_CHARS - 1] + "…"
            policy = POLICY_WORD.get(tool.policy, tool.policy)
            note = f" [{shown_text(tool.problem)}]" if tool.problem else ""
            print(f"  {shown_name:<{width}}  {policy:<6} {shown_text(tool.why)}{note}", file=out)
            if description:
                print(f"  {'':<{width}}         {description}", file=out)
    if reply.rules_file:
        rules_problem = f" ({reply.rules_problem})" if reply.rules_problem else ""
        print(shown_text(f'"always" answers are kept in {reply.rules_file}{rules_problem}'), file=out)
    if reply.waiting:
        print(f"{reply.waiting} call(s) wait for your approval now", file=out)
    if reply.calls:
        print("recent calls (newest first):", file=out)
        for call in reply.calls:
            print(f"  {call_line(call)}", file=out)


def status_lines(servers: list[ToolServerInfo], calls: list[ToolCallRecord]) -> list[str]:
    lines = []
    for server in servers:
        lines.append(f"tools      {server_line(server)}" + (f"; last error: {shown_text(server.error)}" if server.error else ""))
    for call in calls[:5]:
        lines.append(f"           {call_line(call)}")
    return lines


def probe_servers(settings) -> list[tuple[str, str, str]]:
    """`tarsctl doctor`'s check of [mcp.servers] (a tarsd.config.settings.McpConfig): each server
    started here, on its own (the running tarsd's connections are not touched), and its tools
    listed; (ok | warn, what was found, the fix) per server."""
    import logging

    from tarsd.tools.servers import ToolServers

    for name in ("tarsd.tools", "mcp"):  # what they log is in the checks below; not on doctor's screen too
        logging.getLogger(name).addHandler(logging.NullHandler())
    servers = ToolServers(settings)
    servers.start()
    try:
        servers.wait_ready(settings.start_timeout_seconds + 2)
        views = servers.describe()
    finally:
        servers.stop()
    found = []
    for view in views:
        where = f"MCP server {view.name} ({view.transport}: {view.target})"
        if not view.enabled:
            found.append(("ok", f"{where}: disabled (enabled = false)", ""))
        elif view.state == "ready":
            count = {action: sum(t.policy.action == action for t in view.tools) for action in ("allow", "ask", "deny")}
            found.append(
                (
                    "ok",
                    f"{where}: started and listed {len(view.tools)} tool{'' if len(view.tools) == 1 else 's'} "
                    f"({count['allow']} run without asking, {count['ask']} ask first, {count['deny']} denied)",
                    "",
                )
            )
            found += [("warn", f"{where}: {said}", POLICY_FIX) for said in view.pattern_warnings]
        else:
            said = f" (stderr: {view.stderr[-1]})" if view.stderr and view.stderr[-1] not in view.error else ""
            found.append(
                (
                    "warn",
                    f"{where}: {view.state}: {view.error or 'no answer'}{said} (chat tools only: the rest works without it)",
                    f"fix [mcp.servers.{view.name}] in the config (docs/tools.md), or run its command by hand to see why",
                )
            )
    return found
