"""MCP over streamable HTTP at ``/mcp`` on tarsd's HTTP listener: the tools and resources of
``tarsctl mcp`` (tarsctl/mcp.py), with each call run through the daemon's own dispatcher in
process instead of over the Unix socket.

Loaded only when the listener is on and ``[http] mcp`` is true. The listener's guard (Host and
Origin checks against DNS rebinding, the bearer token, the failed-auth limiter) stands in front
of it, so the SDK's own rebinding check is left off rather than configured twice.
"""

from __future__ import annotations

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from tarsctl.mcp import build_server
from tarsctl.protocol import Error, Message
from tarsd.serve.http_app import Dispatch, Mount

MCP_PATH = "/mcp"
# An MCP client that goes away without ending its session frees it after this long.
SESSION_IDLE_SECONDS = 30 * 60.0
MAX_SESSIONS = 64


def mcp_mount(dispatch: Dispatch) -> Mount:
    async def send(request: Message) -> Message:
        """The request's final reply (progress events are not forwarded); an Error, never an exception."""
        final: Message | None = None
        async for reply in dispatch(request):  # the dispatcher turns every failure into an Error reply
            final = reply
        if final is None:
            return Error(id=request.id, code="internal", message="tarsd gave no reply", hint="see tarsd's log")
        return final

    manager = StreamableHTTPSessionManager(
        app=build_server(send),
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        session_idle_timeout=SESSION_IDLE_SECONDS,
        max_sessions=MAX_SESSIONS,
    )
    return Mount(MCP_PATH, manager.handle_request, lifespan=manager.run)
