"""What every request handler shares, whichever door the request came in by: the ``Peer`` it
answers, ``RequestError`` (a request refused with a typed Error reply), the shape of a handler,
and the two ways a request names a place in the vault (a path, or a note by name).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from tarsctl.authority import Principal
from tarsctl.protocol import Error, Message
from tarsd.serve.parts import DaemonParts
from tarsd.vault.files import OutsideVault, vault_relative


class RequestError(Exception):
    """Answered with its Error: by the dispatcher for a handler's refusal, by the socket server
    (which then closes the connection) for a frame it cannot read."""

    def __init__(self, code: str, message: str, hint: str = ""):
        super().__init__(message)
        self.error = Error(code=code, message=message, hint=hint)


class Peer:
    """What a handler may ask of the client it answers, whichever door it came in by: during a
    chat, the client's next frame, read ahead (a Cancel, or None once the client is gone)."""

    pending: asyncio.Future | None = None
    # Who is asking, from the credential the door was reached with (tarsctl/authority.py); the
    # dispatcher asks the authority table with it before any handler runs.
    principal = Principal.TERMINAL
    door = "socket"  # socket | http | channel: who answered an approval, for the log
    who = ""  # the answerer named in full, when the door knows better (a messenger channel: "you in WhatsApp (#…)")

    def read_ahead(self) -> asyncio.Future:
        raise NotImplementedError


# One handler per request type: an async generator of replies, stream events first, the final reply last.
Handler = Callable[[DaemonParts, Any, Peer], AsyncIterator[Message]]


def in_vault(daemon: DaemonParts, path: str) -> str:
    """``path`` relative to the vault; RequestError if it lies outside."""
    try:
        return vault_relative(daemon.vault, path)
    except OutsideVault as exc:
        raise RequestError("bad_request", str(exc), exc.hint) from None


def find_note(daemon: DaemonParts, name: str) -> str:
    """A note given by path (absolute or in the vault), file name, title or alias; RequestError if none."""
    if not name.strip():
        raise RequestError("bad_request", "no note given", "give a note's path, file name, title or alias")
    candidate = Path(name)
    if candidate.is_absolute() or name.endswith(".md"):
        name = in_vault(daemon, name)
    found = daemon.engine.graph.find_note(name)
    if found is None:
        raise RequestError("not_found", f"no note in the index is called {name!r}", "give a note's path, file name, title or alias")
    return found
