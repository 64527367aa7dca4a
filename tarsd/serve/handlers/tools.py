"""The handler that shows the MCP servers tars uses: each server's state and tools with their
policy, the newest calls and how many wait for the user (`tarsctl tools`, and in brief in status)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from tarsctl.protocol import ListTools, Message, ToolsReply
from tarsd.serve.handlers.common import Peer
from tarsd.serve.parts import DaemonParts
from tarsd.serve.status import recent_calls, server_info

RECENT_IN_REPLY = 20


async def list_tools(daemon: DaemonParts, request: ListTools, _peer: Peer) -> AsyncIterator[Message]:
    servers = daemon.tool_servers
    rules = servers.rules
    yield ToolsReply(
        id=request.id,
        servers=[server_info(view, with_tools=True) for view in servers.describe()],
        calls=recent_calls(servers, RECENT_IN_REPLY),
        waiting=len(daemon.assistant.approvals.waiting()),
        rules_file=str(rules.path) if rules is not None else "",
        rules_problem=rules.problem if rules is not None else "",
    )
