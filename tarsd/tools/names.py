"""The names the model sees for other servers' tools: ``server_tool``, within every provider's
rules (Anthropic: ``^[a-zA-Z0-9_-]{1,64}$``; Ollama and OpenAI-style APIs take the same), unique
across servers and never one of tars's own tools.

A name is a pure function of (server, tool) and of the names already taken, so the same server
and tool get the same name after a restart and a conversation's history keeps meaning the same.
"""

from __future__ import annotations

import hashlib
import re

NAME_RULE = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # use with fullmatch: "$" would let a final newline through
MAX_NAME = 64
_NOT_ALLOWED = re.compile(r"[^a-zA-Z0-9_-]+")
_HASH_CHARS = 8


def exposed_name(server: str, tool: str, taken: set[str]) -> str:
    """``server_tool`` with every character outside the rule made ``_``; when that is too long or
    taken already (two tools that differ only in characters the rule refuses, or a name of tars's
    own), cut and ended with a short hash of the real pair, which keeps it unique and stable."""
    plain = _NOT_ALLOWED.sub("_", f"{server}_{tool}").strip("_") or "tool"
    if len(plain) <= MAX_NAME and plain not in taken:
        return plain
    digest = hashlib.sha1(f"{server}\0{tool}".encode()).hexdigest()
    for extra in range(0, len(digest) - _HASH_CHARS + 1):
        suffix = digest[extra : extra + _HASH_CHARS]
        name = f"{plain[: MAX_NAME - _HASH_CHARS - 1]}_{suffix}"
        if name not in taken:
            return name
    raise ValueError(f"no free name for the tool {tool!r} of the server {server!r}")  # 33 hash windows all taken: never in practice


SERVER_NAME_RULE = re.compile(r"[a-zA-Z0-9_-]{1,32}")


def server_name_problem(name: str) -> str:
    """Why ``name`` cannot name a server ("" when it can): it starts every tool name the model sees."""
    if SERVER_NAME_RULE.fullmatch(name):
        return ""
    return f"the server name {name!r} must be 1-32 letters, digits, '-' or '_' (it starts the tool names the model sees)"
