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

import difflib
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase

from tarsd.config.settings import McpServerConfig

ALLOW, ASK, DENY = "allow", "ask", "deny"
CLOSEST = 3  # tool names suggested for a pattern that names none


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
        return Policy(ALLOW, "your 'always' answer in the rules file")
    if pattern := _named(tool, settings.ask):
        return Policy(ASK, f"ask {pattern!r} in the config")
    if read_only:
        return Policy(ALLOW, "the server's read-only mark")
    return Policy(ASK, "not marked read-only by the server")


def unmatched_patterns(settings: McpServerConfig, tools: list[str]) -> list[str]:
    """A warning for each pattern in the server's allow, ask and deny lists that matches none of
    ``tools`` (the names the server lists now): such a pattern does nothing, and a ``deny`` that
    does nothing fails open, so the user must hear of it. Each names the closest tool names."""
    found = []
    for kind, patterns in ((DENY, settings.deny), (ASK, settings.ask), (ALLOW, settings.allow)):
        for pattern in patterns:
            if any(fnmatchcase(tool, pattern) for tool in tools):
                continue
            closest = closest_names(pattern, tools)
            hint = f"; the closest: {', '.join(repr(name) for name in closest)}" if closest else ""
            effect = "the tools it was meant to deny are not denied" if kind == DENY else "it does nothing"
            found.append(f"{kind} {pattern!r} matches none of its {len(tools)} tools, so {effect}{hint}")
    return found


def _plain(name: str) -> str:
    """Letters and digits only, lower case: longRunningOperation and long-running-operation alike."""
    return re.sub(r"[^0-9a-z]", "", name.lower())


def closest_names(pattern: str, tools: list[str]) -> list[str]:
    """Up to CLOSEST tool names that look like what ``pattern`` meant: those that hold it (its
    case, separators and wildcards aside) first, then the most similar."""
    wanted = _plain(pattern)
    if not wanted:
        return []
    holding = sorted((tool for tool in tools if wanted in _plain(tool)), key=len)
    scored = sorted(
        ((difflib.SequenceMatcher(None, wanted, _plain(tool)).ratio(), tool) for tool in tools if tool not in holding),
        key=lambda pair: -pair[0],
    )
    similar = [tool for score, tool in scored if score >= 0.6]
    return (holding + similar)[:CLOSEST]
