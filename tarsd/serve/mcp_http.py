"""MCP over streamable HTTP at ``/mcp`` on tarsd's HTTP listener: the tools and resources of
``tarsctl mcp`` (the tarsctl.mcp package), with each call run through the daemon's own dispatcher in
process instead of over the Unix socket.

Loaded only when the listener is on and ``[http] mcp`` is true. The listener's guard (Host and
Origin checks against DNS rebinding, the bearer token, the failed-auth limiter) stands in front
of it, so the SDK's own rebinding check is left off rather than configured twice. MCP clients are
given their own token (``tarsctl mcp token``); the HTTP token is accepted here too, with the same
MCP client's rights.
"""

from __future__ import annotations

import functools

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from tarsctl.authority import Principal
from tarsctl.mcp.server import build_server
from tarsd.serve.http_app import Dispatch, Mount, final_reply

MCP_PATH = "/mcp"
# An MCP client that goes away without ending its session frees it after this long.
SESSION_IDLE_SECONDS = 30 * 60.0
MAX_SESSIONS = 64


def mcp_mount(dispatch: Dispatch) -> Mount:
    # Whichever token it came with, a caller of /mcp is an MCP client: it has an MCP client's rights
    # (tarsctl/authority.py), never the user's. (The SDK runs each session in a task of its own, so
    # the guard's per-request caller would not reach the calls anyway.)
    as_mcp_client = functools.partial(dispatch, principal=Principal.MCP_CLIENT)
    manager = StreamableHTTPSessionManager(
        app=build_server(functools.partial(final_reply, as_mcp_client)),  # progress events are not forwarded
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        session_idle_timeout=SESSION_IDLE_SECONDS,
        max_sessions=MAX_SESSIONS,
    )
    return Mount(MCP_PATH, manager.handle_request, lifespan=manager.run)
