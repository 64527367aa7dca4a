"""What the model may do with a tool: ``deny`` (never offered), ``allow`` (runs without asking)
or ``ask`` (the user confirms each call). The user's word, in this order:

1. ``deny`` in the server's config wins over everything;
2. ``allow`` in the config, or an "always" answer the user gave (kept in the rules file);
3. ``ask`` in the config;
4. nothing said: allowed when the server marks the tool read-only (``readOnlyHint``), else asked.

The read-only mark is the server's claim, not the user's: a tool that lies about it is only as
harmless as the server; name it under ``ask`` or ``deny`` to overrule it. Patterns are
shell-style (``delete-*``), matched against the tool's name as the server lists it.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from tarsd.config.settings import McpServerConfig

ALLOW, ASK, DENY = "allow", "ask", "deny"


@dataclass(frozen=True, slots=True)
class Policy:
    action: str  # allow | ask | deny
    why: str  # for people: where the decision comes from


def _named(tool: str, patterns: list[str]) -> str | None:
    return next((pattern for pattern in patterns if fnmatchcase(tool, pattern)), None)


def decide(tool: str, read_only: bool, settings: McpServerConfig, always: set[str]) -> Policy:
    """The policy for ``tool`` of a server configured by ``settings``; ``always`` holds the tools
    the user answered "always" for."""
    if pattern := _named(tool, settings.deny):
        return Policy(DENY, f"deny {pattern!r} in the config")
    if pattern := _named(tool, settings.allow):
        return Policy(ALLOW, f"allow {pattern!r} in the config")
    if tool in always:
        return Policy(ALLOW, "you answered always (rules file)")
    if pattern := _named(tool, settings.ask):
        return Policy(ASK, f"ask {pattern!r} in the config")
    if read_only:
        return Policy(ALLOW, "the server marks it read-only")
    return Policy(ASK, "not marked read-only by the server")
