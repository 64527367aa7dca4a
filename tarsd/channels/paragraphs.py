"""A reply's pieces (paragraphs, or parts of one cut to fit) packed into as few messages as fit a
messenger's length limit, a blank line between two pieces in one message: what WhatsApp's and
Telegram's formatting share once each has rendered and cut the pieces its own way."""

from __future__ import annotations

from collections.abc import Iterable


def pack(pieces: Iterable[str], limit: int, between: str = "\n\n") -> list[str]:
    """``pieces`` (each at most ``limit`` characters) joined by ``between`` (a blank line: paragraphs;
    a line break: the lines of one paragraph) into messages of at most ``limit``."""
    messages: list[str] = []
    current = ""
    for piece in pieces:
        if current and len(current) + len(between) + len(piece) <= limit:
            current = f"{current}{between}{piece}"
        else:
            if current:
                messages.append(current)
            current = piece
    if current:
        messages.append(current)
    return messages
