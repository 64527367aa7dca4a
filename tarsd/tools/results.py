"""A tool's result as text for the model: its text content in order, other content named by
kind and size (an image or audio is not passed on), the structured content as JSON when there is
no text, bounded to ``max_chars`` with a note saying how much was left out. The chat wraps this
text as data (tarsd/chat/prompts.py); nothing here decides what the model may believe.

A long string is already cut while its message streams in (tarsd/tools/cut_stream.py): it keeps
its first ``max_chars`` characters and ends with a cut mark, which holds how many characters were
left out and the connection's own random nonce, so a server cannot forge one. The mark is taken
out here and its count goes into the note.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from mcp import types


@dataclass(frozen=True, slots=True)
class ResultText:
    text: str  # for the model, bounded
    chars: int  # of the whole result before the cut
    is_error: bool  # the tool says the call failed (its own error, not a server failure)


def cut_mark(nonce: str, left_out: int) -> str:
    """What ends a string cut while streaming: ``left_out`` characters of it were not kept."""
    return f"\x00tarsd-cut:{nonce}:{left_out}\x00"


def unmarked(text: str, nonce: str) -> tuple[str, int]:
    """``text`` without its cut marks, and the characters they say were left out."""
    if not nonce or "tarsd-cut:" not in text:
        return text, 0
    left_out = 0

    def take(match: re.Match) -> str:
        nonlocal left_out
        left_out += int(match.group(1))
        return ""

    # The mark as received, or as json.dumps writes it (structured content shown as JSON).
    nul = r"(?:\x00|\\u0000)"
    return re.sub(f"{nul}tarsd-cut:{re.escape(nonce)}:([0-9]+){nul}", take, text), left_out


def result_text(result: types.CallToolResult, max_chars: int, nonce: str = "") -> ResultText:
    """``nonce``: the connection's, in the cut marks of strings cut while streaming."""
    parts: list[str] = []
    left_out = 0

    def whole(text: str) -> str:  # the text as received, its cut counted
        nonlocal left_out
        kept, cut = unmarked(text, nonce)
        left_out += cut
        return kept

    def size(data: str) -> int:  # base64: the bytes it holds, before any cut
        kept, cut = unmarked(data, nonce)
        return (len(kept) + cut) * 3 // 4

    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(whole(block.text))
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, types.TextResourceContents):
                parts.append(f"[resource {resource.uri}]\n{whole(resource.text)}")
            else:
                parts.append(
                    f"[resource {resource.uri}: {size(resource.blob):,} bytes of {resource.mime_type or 'binary data'}, not shown]"
                )
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[link to resource {block.uri}" + (f": {block.name}" if block.name else "") + "]")
        elif isinstance(block, (types.ImageContent, types.AudioContent)):
            parts.append(f"[{block.type}: {size(block.data):,} bytes of {block.mime_type}, not shown]")
    if not any(part.strip() for part in parts) and result.structured_content is not None:
        left_out = 0
        parts = [whole(json.dumps(result.structured_content, ensure_ascii=False))]
    text = "\n".join(parts) if parts else "(the tool returned nothing)"
    chars = len(text) + left_out
    return ResultText(bounded(text, max_chars, chars), chars, bool(result.is_error))


def bounded(text: str, max_chars: int, chars: int | None = None) -> str:
    """``text`` cut to ``max_chars``; ``chars``: the length of the whole of which ``text`` is the
    start (when part of it was already cut while streaming)."""
    total = len(text) if chars is None else chars
    if total <= max_chars:
        return text
    return text[:max_chars] + f"\n[cut: {total - max_chars:,} more characters of this result are left out]"
