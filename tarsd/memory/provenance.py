"""Provenance of the lines tars writes into memory files.

Every line tars adds to Memory.md or Procedural.md ends with a stamp saying when it was
added, and from which conversation when the model stored it during a chat:

    - Dog: Perry (beagle) <!-- tars:2026-11-22 chat:nvim -->
    - Has a beagle called Perry <!-- tars:2026-11-22 chat:cli by:model -->

``by:model`` marks a line the model stored with its memory_remember tool during a chat: it
is shown to the model as noted during a conversation, never as the user's own words
(docs/memory.md). A stamp without it is a line the user had tars write (tarsctl remember,
the HTTP API, MCP, an approved rule). An HTML comment: Obsidian hides it in reading view, and a hand edit of the text before it
keeps it. Only this exact shape is recognised (a broad ``<!--.*?-->`` would eat the user's
own comments), and only at the end of a line. Lines without a stamp are the user's; tars
never rewrites them on its own.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

# `<!-- tars:YYYY-MM-DD -->`, `<!-- tars:YYYY-MM-DD chat:ID -->` or either with ` by:model`
# before the end, at the end of a line.
STAMP = re.compile(r"[ \t]*<!-- tars:(\d{4}-\d{2}-\d{2})(?: chat:([A-Za-z0-9_.@:+-]{1,64}))?(?: by:(model))? -->[ \t]*$")
MODEL = "model"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.@:+-]+")


@dataclass(frozen=True, slots=True)
class Stamp:
    date: str  # YYYY-MM-DD
    conversation: str = ""  # the chat it came from, if any
    by: str = ""  # MODEL: the model stored it; "": the user had tars write it

    @property
    def by_model(self) -> bool:
        return self.by == MODEL

    def render(self) -> str:
        chat = f" chat:{self.conversation}" if self.conversation else ""
        return f"<!-- tars:{self.date}{chat}" + (f" by:{self.by}" if self.by else "") + " -->"

    def describe(self) -> str:
        where = f" in chat {self.conversation}" if self.conversation else ""
        return f"noted by the model {self.date}{where}" if self.by_model else f"added {self.date}{where}"


def new_stamp(conversation: str = "", now: float | None = None, by_model: bool = False) -> Stamp:
    """A stamp for a line written now. The conversation id is client-chosen text: it is
    reduced to characters that cannot end the comment (``--``) or the line."""
    safe = _UNSAFE.sub("-", conversation.strip())
    while "--" in safe:
        safe = safe.replace("--", "-")
    safe = safe.strip("-")[:64]
    return Stamp(time.strftime("%Y-%m-%d", time.localtime(now)), safe, MODEL if by_model else "")


def split(line: str) -> tuple[str, Stamp | None]:
    """(the line without its stamp, the stamp) — (line, None) for a line tars did not write."""
    match = STAMP.search(line)
    if match is None:
        return line, None
    return line[: match.start()], Stamp(match.group(1), match.group(2) or "", match.group(3) or "")


def strip(line: str) -> str:
    return split(line)[0]


def stamped(text: str, stamp: Stamp) -> str:
    return f"{strip(text).rstrip()} {stamp.render()}"
