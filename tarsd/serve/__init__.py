"""The doors: the Unix socket server (socket_server: listener, connections, framing), the request
handlers every door shares (handlers: one per request type, in a table, and the dispatcher), the
optional HTTP listener (http: the listener and its lifecycle; http_app: the API, the web page and
the mounting point; http_json: bodies in, JSON and SSE out; http_middleware: the guard in front,
with its rules in http_guard and the token in http_token), MCP over HTTP (mcp_http), the web
page's files (web/), and what the daemon reports about itself (status).

Every door renders the same replies from the same handlers. The doors know the daemon only
as the parts they use (parts.DaemonParts), never its wiring. May import every tarsd package
but daemon, and the wire types and MCP tool table from tarsctl.
"""
