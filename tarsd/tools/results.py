"""A tool's result as text for the model: its text content in order, other content named by
kind and size (an image or audio is not passed on), the structured content as JSON when there is
no text, bounded to ``max_chars`` with a note saying how much was left out. The chat wraps this
text as data (tarsd/chat/prompts.py); nothing here decides what the model may believe.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from mcp import types


@dataclass(frozen=True, slots=True)
class ResultText:
    text: str  # for the model, bounded
    chars: int  # of the whole result before the cut
    is_error: bool  # the tool says the call failed (its own error, not a server failure)


def result_text(result: types.CallToolResult, max_chars: int) -> ResultText:
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, types.TextResourceContents):
                parts.append(f"[resource {resource.uri}]\n{resource.text}")
            else:
                parts.append(
                    f"[resource {resource.uri}: {len(resource.blob) * 3 // 4:,} bytes of {resource.mime_type or 'binary data'}, not shown]"
                )
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[link to resource {block.uri}" + (f": {block.name}" if block.name else "") + "]")
        elif isinstance(block, (types.ImageContent, types.AudioContent)):
            parts.append(f"[{block.type}: {len(block.data) * 3 // 4:,} bytes of {block.mime_type}, not shown]")
    if not any(part.strip() for part in parts) and result.structured_content is not None:
        parts = [json.dumps(result.structured_content, ensure_ascii=False)]
    whole = "\n".join(parts) if parts else "(the tool returned nothing)"
    return ResultText(bounded(whole, max_chars), len(whole), bool(result.is_error))


def bounded(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + f"\n[cut: {len(text) - max_chars:,} more characters of this result are left out]"
