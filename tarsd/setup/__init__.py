"""What tarsd and ``tarsctl`` both read of the user's setup beyond the config's own values: the
private files beside the config (the secrets of MCP servers and messenger channels, the HTTP and
MCP bearer tokens: made, rotated, read, their modes checked) and each messenger's settings read
and checked (who may write, who the owner is, where its secrets are, what stops it).

It sits right above ``tarsd.config`` so that the command line (``tarsctl doctor``, ``tarsctl http``)
reads these here and never imports the daemon's doors, channels or tools: the client stays a client.
Standard library and ``tarsd.config`` only.
"""
