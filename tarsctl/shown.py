"""Text from elsewhere (another server's tool names, a model's arguments) made safe to print on a
terminal: control and format characters (escape sequences, bidi overrides) are shown as
``\\uXXXX`` escapes, never passed to the terminal, so a name or an argument cannot move the
cursor, rewrite a line above it, or pose as tarsctl's own question."""

from __future__ import annotations

import json
import unicodedata


def shown_text(text: str, keep_newlines: bool = False) -> str:
    out = []
    for char in text:
        if keep_newlines and char == "\n":
            out.append(char)
        elif unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp"):
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return "".join(out)


def shown_json(value: object) -> str:
    """Indented JSON (line breaks inside strings stay escaped as \\n), safe to print."""
    return shown_text(json.dumps(value, indent=2, ensure_ascii=False, default=str), keep_newlines=True)
