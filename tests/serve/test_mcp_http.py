"""MCP over streamable HTTP at /mcp on a real tarsd's HTTP listener, driven by the official SDK's
streamable-HTTP client: the same tools and results as `tarsctl mcp` on stdio, behind the same token."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx
import httpx2
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

from harness.mcp_client import CLIENT, TOOLS, VAULT, run, tarsctl_json, text
from harness.vault_files import write


@contextlib.asynccontextmanager
async def session(web, token: str | None = None) -> AsyncIterator[ClientSession]:
    """An MCP session over HTTP, as Claude Code's `--transport http` or a remote client opens one."""
    token = web.token if token is None else token
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        async with streamable_http_client(web.url + "mcp", http_client=http) as (read, write_stream, *_):
            async with ClientSession(read, write_stream, client_info=CLIENT) as mcp:
                await mcp.initialize()
                yield mcp


def test_the_tools_over_http_answer_as_over_stdio(http_daemon, vault):
    for rel, body in VAULT.items():
        write(vault, rel, body)
    web = http_daemon()

    async def scenario():
        async with session(web) as mcp:
            assert mcp.initialize_result.server_info.name == "tars"
            assert {tool.name for tool in (await mcp.list_tools()).tools} == TOOLS
            found = await mcp.call_tool("search", {"query": "sourdough starter", "mode": "fts", "limit": 3})
            assert not found.is_error, text(found)
            hits, _ = tarsctl_json(web.daemon, "--mode", "fts", "--limit", "3", "sourdough", "starter")
            assert found.structured_content["results"] == hits and hits
            kept = await mcp.call_tool("remember", {"fact": "My bike is a green Brompton"})
            assert not kept.is_error, text(kept)
            memory = await mcp.read_resource("tars://memory")
            [content] = memory.contents
            assert isinstance(content, types.TextResourceContents) and "green Brompton" in content.text
            assert "chat:mcp:" in content.text and "by:model -->" in content.text  # stamped with where it came from, as a model
            outside = await mcp.call_tool("get_note", {"path": "../../etc/passwd"})
            assert outside.is_error, text(outside)

    run(scenario)


def test_mcp_over_http_needs_the_token_and_a_local_host(http_daemon):
    web = http_daemon()
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "curl", "version": "1"}},
    }
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    port = web.url.rsplit(":", 1)[1].strip("/")
    with httpx.Client(base_url=web.url, timeout=30) as anonymous:
        assert anonymous.post("/mcp", json=initialize, headers=headers).status_code == 401
    with web.client() as client:
        rebound = client.post("/mcp", json=initialize, headers={**headers, "Host": f"evil.example:{port}"})
        assert rebound.status_code == 403
        foreign = client.post("/mcp", json=initialize, headers={**headers, "Origin": "http://evil.example"})
        assert foreign.status_code == 403
        answered = client.post("/mcp", json=initialize, headers=headers)
        assert answered.status_code == 200, answered.text
        assert answered.headers.get("mcp-session-id")


def test_mcp_over_http_can_be_turned_off(http_daemon):
    web = http_daemon(TARS_HTTP_MCP="false")
    with web.client() as client:
        assert client.post("/mcp", json={}).status_code == 404
        assert client.get("/status").status_code == 200
    assert "Traceback" not in web.daemon.log.read_text()


def test_tarsd_stops_cleanly_after_an_mcp_session(http_daemon):
    """The SDK's streams (sse_starlette's tasks among them) end with the listener: no "Task was
    destroyed but it is pending" when tarsd stops after serving MCP over HTTP."""
    web = http_daemon()

    async def scenario():
        async with session(web) as mcp:
            assert not (await mcp.call_tool("status", {})).is_error

    run(scenario)
    with web.client() as client:  # a session left open, as a client that goes away without ending it leaves it
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "curl", "version": "1"}},
        }
        answered = client.post("/mcp", json=initialize, headers={"Accept": "application/json, text/event-stream"})
        assert answered.status_code == 200, answered.text
    assert web.daemon.stop() == 0
    log = web.daemon.log.read_text()
    assert "Task was destroyed" not in log and "Traceback" not in log, log[-3000:]
