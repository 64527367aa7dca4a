"""The doors: the Unix socket server and its request handlers (socket_server), the optional
HTTP listener with its guard and token (http, http_guard, http_token), MCP over HTTP
(mcp_http), the web page (web/), and what the daemon reports about itself (status).

Every door renders the same replies from the same handlers. The doors know the daemon only
as the parts they use (parts.DaemonParts), never its wiring. May import every tarsd package
but daemon, and the wire types and MCP tool table from tarsctl.
"""
