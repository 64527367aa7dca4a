"""Tools from other MCP servers: tarsd as an MCP client (the official ``mcp`` SDK's client).

The servers declared under ``[mcp.servers.NAME]`` run in the background on a loop of their own
(``servers``: started after tarsd is READY, restarted with back-off, a circuit per server), each
one connection (``connection``) whose tool list is cached and refreshed on ``list_changed``.
What the model may do with each tool is the user's policy (``policy``: deny, allow, ask, with the
user's "always" answers kept in ``rules``); calls that ask wait for an answer in ``approvals``.
Tool names become ``server_tool`` within the providers' rules (``names``); results become text
for the model, bounded (``results``); secrets come from files only their owner can read
(``tarsd.setup.private_files``, which ``tarsctl doctor`` reads too).

May import: config and setup (and the mcp SDK, loaded only when a server is configured). Chat uses it;
nothing here knows about conversations, prompts or doors.
"""
