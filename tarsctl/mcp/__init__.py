"""tarsctl mcp: tars as memory for AI tools (Claude Code, Claude Desktop, Cursor, Zed, ...) over
the Model Context Protocol, built with the official ``mcp`` SDK (its low-level server).

The bridge holds no model, no database and no logic of its own: every tool call and every
resource read is exactly one tarsd request (tarsctl/protocol.py), and the reply is only
rendered. Many MCP clients therefore share the one resident daemon, its model and its index,
which the watcher keeps fresh.

The package owns the MCP side of tars, in three modules, top to bottom:
- tools: the tool table. For each tool its name, description and JSON schema (written for a
  model), ``build`` (arguments -> one protocol request) and ``render`` (the final reply ->
  readable text plus structured content); ``call_tool`` runs one. The arguments are checked
  against the schema, then by the protocol's own msgspec bounds; a failure is a tool error,
  never a crash.
- resources: tars://memory, tars://rules and notes by URI, each read as one ReadNote request.
- server: ``build_server(send)``, the SDK server (tools, resources, instructions) around them,
  and the stdio transport (``SocketSender``, ``main``) that talks to tarsd over its Unix socket.

The other transport, MCP's streamable HTTP inside tarsd (tarsd/serve/mcp_http.py), shares all of it
through one seam:

    Send = Callable[[Message], Awaitable[Message]]
    # a protocol request in, its final reply out (an Error reply for any failure; never raises)

Nothing but SocketSender knows about sockets: inside tarsd, ``send`` runs the request through
the daemon's own dispatcher, so both transports have the same tools, descriptions, renderings
and errors.

The modules import the SDK at the top; this file imports nothing, and tarsctl's cli imports
the package only inside the ``mcp`` command, so other commands start as fast as before.
"""
