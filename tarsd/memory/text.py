"""The one check on text that goes into a memory file: a fact, a rule or a section name.

Every write path (the socket's remember, the HTTP door and MCP, which reach it through the
socket's handlers, the chat tool memory_remember, /review's approved rules and approved
pending rules) ends in MemoryFiles.remember, which calls ``fact_text`` and ``section_text``
before it touches a file. What they refuse leaves the file as it was, byte for byte.

A memory line is one line of printable text. Refused:

- line breaks of any kind (``\\n``, ``\\r``, U+0085, U+2028, U+2029, vertical tab, form
  feed): a second line could be a heading, a rule of its own, or a line with no stamp,
  which counts as the user's;
- other control characters (a NUL makes the file binary; escapes garble an editor);
- bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069): they make a line
  read differently on screen from what the model gets. The single marks U+200E/U+200F
  (LRM/RLM) and U+061C stay: right-to-left text needs them and they reorder nothing;
- invisible characters: format characters (zero-width space U+200B, word joiner U+2060, BOM
  U+FEFF, the deprecated U+206A-U+206F, interlinear annotation U+FFF9-U+FFFB, soft hyphen,
  Unicode tag characters U+E0000-U+E007F, ...), variation selectors (U+FE00-U+FE0F,
  U+E0100-U+E01EF) and the invisible fillers: invisible on screen, yet a model reads them as
  text, so they could carry words the user never sees ("Prefer metric units" plus 36
  variation selectors encoding another sentence). Kept, because real languages need them:
  a ZWJ (U+200D) or ZWNJ (U+200C) alone between two characters of a script that uses them
  (emoji sequences, Persian, Indic: neither may follow or precede Latin letters, digits,
  spaces or another invisible character, so they cannot hide bits in Latin text); one
  emoji variation selector (U+FE0E/U+FE0F) right after a symbol or digit (``❤️``, ``1️⃣``),
  or one ideographic one (U+E0100-U+E01EF) right after a CJK ideograph;
- ``<!--`` and ``-->``: only tars writes provenance stamps, so a line cannot claim a date,
  a conversation or an author of its own;
- for a section: a name starting with ``#`` (a heading mark) or a list marker.

Spaces and tabs around it are trimmed and runs of them become one space; nothing else is
changed silently (a line break even at the very end is refused, not dropped).
"""

from __future__ import annotations

import re
import unicodedata

_BIDI = {
    "\u202a": "LEFT-TO-RIGHT EMBEDDING",
    "\u202b": "RIGHT-TO-LEFT EMBEDDING",
    "\u202c": "POP DIRECTIONAL FORMATTING",
    "\u202d": "LEFT-TO-RIGHT OVERRIDE",
    "\u202e": "RIGHT-TO-LEFT OVERRIDE",
    "\u2066": "LEFT-TO-RIGHT ISOLATE",
    "\u2067": "RIGHT-TO-LEFT ISOLATE",
    "\u2068": "FIRST STRONG ISOLATE",
    "\u2069": "POP DIRECTIONAL ISOLATE",
}
_JOINERS = frozenset("\u200c\u200d")  # ZWNJ, ZWJ
_FILLERS = frozenset("\u115f\u1160\u3164\uffa0\u034f\u17b4\u17b5")  # Hangul fillers, CGJ, Khmer inherent vowels
_LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
_LIST_ITEM = re.compile(r"^(?:[-*+]|\d+[.)])(?:\s|$)")
_SPACES = re.compile(r"[ \t]+")


class UnsafeMemoryText(ValueError):
    """Text refused for a memory file; the message says what is wrong, the hint what to do."""

    def __init__(self, message: str, hint: str):
        super().__init__(message)
        self.hint = hint


def _name(char: str) -> str:
    return f"U+{ord(char):04X}" + (f" {unicodedata.name(char, '')}".rstrip() if unicodedata.name(char, "") else "")


def _variation_selector(char: str) -> bool:
    return "\ufe00" <= char <= "\ufe0f" or "\U000e0100" <= char <= "\U000e01ef"


def _hidden(char: str) -> bool:
    """Invisible on screen: a format character, a variation selector, a filler."""
    return unicodedata.category(char) == "Cf" or _variation_selector(char) or char in _FILLERS


def _joinable(char: str) -> bool:
    """A character a ZWJ/ZWNJ may stand next to: one of a script or symbol set that uses joiners
    (not ASCII or Latin, not a space, not itself invisible)."""
    return ord(char) >= 0x370 and not char.isspace() and not _hidden(char)


def _needed(text: str, i: int) -> bool:
    """Whether the invisible character at ``text[i]`` is one a real language needs there."""
    char, before = text[i], text[i - 1] if i else ""
    after = text[i + 1] if i + 1 < len(text) else ""
    if char in "\u200e\u200f\u061c":  # LRM, RLM, ALM: right-to-left text needs them, they reorder nothing
        return True
    if char in _JOINERS:
        # an emoji's variation selector may stand before a ZWJ (🏳️‍🌈)
        return bool(after) and _joinable(after) and bool(before) and (_joinable(before) or before in "\ufe0e\ufe0f")
    if char in "\ufe0e\ufe0f":
        return bool(before) and not _hidden(before) and unicodedata.category(before) in ("So", "Sm", "Sk", "Nd", "Po", "No")
    if "\U000e0100" <= char <= "\U000e01ef":
        return bool(before) and unicodedata.name(before, "").startswith("CJK")
    return False


def one_line(text: str, what: str) -> str:
    """``text`` trimmed, spaces collapsed; UnsafeMemoryText if it is not one line of printable text."""
    hint = f"send the {what} as one line of plain text"
    for char in text:  # before any trimming: a line break at the end is refused too, never dropped silently
        if char in _LINE_BREAKS:
            raise UnsafeMemoryText(
                f"the {what} holds a line break ({_name(char)}): a memory line is one line",
                f"{hint}; for more than one line, remember each line on its own",
            )
        if char in _BIDI:
            raise UnsafeMemoryText(
                f"the {what} holds a bidi control character ({_BIDI[char]}, U+{ord(char):04X}) that makes it read differently on screen",
                f"{hint}, without that character",
            )
        if "\U000e0000" <= char <= "\U000e007f":
            raise UnsafeMemoryText(
                f"the {what} holds an invisible Unicode tag character (U+{ord(char):04X}): it would say more to the model "
                "than shows on screen",
                f"{hint}, without invisible tag characters",
            )
        if unicodedata.category(char) == "Cc" and char != "\t":
            raise UnsafeMemoryText(f"the {what} holds a control character ({_name(char)})", f"{hint}, without control characters")
    for i, char in enumerate(text):
        if _hidden(char) and not _needed(text, i):
            raise UnsafeMemoryText(
                f"the {what} holds an invisible character ({_name(char)}) at position {i + 1}: it would say more to the model "
                "than shows on screen",
                f"{hint}, without invisible characters (retype it rather than paste it: pasted text can carry them; an emoji "
                "sequence, Persian or Indic joiners and one emoji variation selector are kept)",
            )
    if "<!--" in text or "-->" in text:
        raise UnsafeMemoryText(
            f"the {what} holds an HTML comment mark ('<!--' or '-->'); only tars writes the provenance comment of a memory line",
            f"{hint}, without '<!--' and '-->'",
        )
    return _SPACES.sub(" ", text).strip()


def fact_text(fact: str, kind: str = "semantic") -> str:
    """A fact (or a rule, for kind procedural) checked and tidied for a memory line."""
    return one_line(fact, "rule" if kind == "procedural" else "fact")


def section_text(section: str) -> str:
    """A section name checked and tidied; "" lets tars choose. It becomes a heading of its own,
    so it cannot carry heading marks or be a list item."""
    section = one_line(section, "section")
    if section.startswith("#"):
        raise UnsafeMemoryText(
            f"the section {section!r} starts with '#': tars writes the heading marks itself",
            f"give the heading's name alone, e.g. {section.lstrip('#').strip() or 'Notes'!r}",
        )
    if _LIST_ITEM.match(section):
        raise UnsafeMemoryText(
            f"the section {section!r} is a list item, not a heading's name", "give the heading's name alone, e.g. 'Pets'"
        )
    return section
