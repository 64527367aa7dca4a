"""Text from elsewhere made safe to print on a terminal: the one cleaner for every piece of note,
model, tool, file-name or remote text tarsctl prints.

What it does, so that such text cannot move the cursor, recolour, clear or retitle the screen,
write the clipboard (OSC 52), hide what follows it, or pose as tarsctl's own question:

- control characters (C0 and C1, so ESC and every escape sequence it would start) and line or
  paragraph separators are shown as ``\\uXXXX`` escapes; newline only where the caller keeps
  lines (``keep_newlines``), tab always kept (it moves the cursor right, nothing more);
- format characters (bidi embeddings, overrides and isolates, zero-width spaces, word joiners,
  BOMs, tag characters, interlinear annotation marks, ...), variation selectors and the
  invisible fillers are shown as escapes, except what real text needs, once, right after a
  visible character: a ZWJ (emoji sequences, Indic conjuncts), a ZWNJ (Persian, Indic), an
  LRM/RLM/ALM mark, one variation selector (``❤️``), or a variation selector then a ZWJ
  (``🏳️‍🌈``). A run of anything else invisible is all escaped;
- a run of spaces and tabs longer than a few (longer than an indentation at a line's start) is
  shown as a marker with its count, so padding cannot push the rest of a line out of sight;
- ``QUESTION_MARK``, the mark tarsctl starts each line of its own questions with, is escaped, so
  no cleaned text can start a line that looks like one of them.

Standard library only: the quick search path (quick.py) imports it.
"""

from __future__ import annotations

import json
import shlex
import unicodedata

QUESTION_MARK = "▌"  # U+258C: every line of tarsctl's own approval question starts with it
BLANK_RUN = 8  # spaces/tabs in a row shown as they are; a longer run becomes a marker
INDENT_RUN = 32  # the same at a line's start (indentation of code a model writes)
_KEPT_ALONE = frozenset("\u200c\u200d\u200e\u200f\u061c")  # ZWNJ, ZWJ, LRM, RLM, ALM
_INVISIBLE_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u034f\u17b4\u17b5\u180e")  # fillers, CGJ, Khmer inherent vowels
_ALWAYS_ESCAPED = frozenset(("Cc", "Cf", "Zl", "Zp", "Cs"))
_LONG_BLANKS = " " * (BLANK_RUN + 1)  # the shortest run of spaces shown as a marker


def _variation_selector(char: str) -> bool:
    return "\ufe00" <= char <= "\ufe0f" or "\U000e0100" <= char <= "\U000e01ef"


def _invisible(char: str) -> bool:
    return unicodedata.category(char) in _ALWAYS_ESCAPED or _variation_selector(char) or char in _INVISIBLE_LETTERS


def _escape(char: str) -> str:
    return f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}"


def _kept(run: str, before: str) -> bool:
    """A run of invisible characters real text needs, after the visible character ``before``."""
    if not before or before in " \t\n" or _invisible(before):
        return False
    if len(run) == 1:
        return run in _KEPT_ALONE or _variation_selector(run)
    return len(run) == 2 and _variation_selector(run[0]) and run[1] == "\u200d"


def _blanks(run: str) -> str:
    what = "spaces" if set(run) == {" "} else "tabs" if set(run) == {"\t"} else "spaces and tabs"
    return f"⟨{len(run):,} {what}⟩"


def _shown(text: str, keep_newlines: bool, before: str) -> str:
    """``text`` cleaned; ``before`` is the character printed just before it ("" at the start)."""
    out: list[str] = []
    i, end = 0, len(text)
    line_start = before in ("", "\n")
    while i < end:
        char = text[i]
        if char == "\n" and keep_newlines:
            out.append(char)
            before, line_start, i = char, True, i + 1
            continue
        j = i + 1
        if char in " \t":
            while j < end and text[j] in " \t":
                j += 1
            run = text[i:j]
            out.append(run if len(run) <= (INDENT_RUN if line_start else BLANK_RUN) else _blanks(run))
        elif _invisible(char):
            while j < end and _invisible(text[j]) and not (keep_newlines and text[j] == "\n"):
                j += 1
            run = text[i:j]
            out.append(run if _kept(run, before) else "".join(map(_escape, run)))
        elif char == QUESTION_MARK:
            out.append(_escape(char))
        else:
            out.append(char)
        before, line_start, i = text[j - 1], False, j
    return "".join(out)


def shown_text(text: str, keep_newlines: bool = False) -> str:
    """``text`` safe to print on a terminal (see the module's doc); one line unless ``keep_newlines``."""
    text = str(text)
    if text.isascii() and text.isprintable() and _LONG_BLANKS not in text:
        return text  # nothing in it to clean (no control, nothing invisible, no long run of spaces): most names and times
    return _shown(text, keep_newlines, "")


def shown_json(value: object) -> str:
    """Indented JSON (line breaks inside strings stay escaped as \\n), safe to print."""
    return shown_text(json.dumps(value, indent=2, ensure_ascii=False, default=str), keep_newlines=True)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # beyond the BMP, a JSON escape is a surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def shown_json_line(encoded: str) -> str:
    """JSON text (``--json`` output) safe to print: JSON escapes only the C0 controls, so a C1
    control (U+009B is CSI to a terminal), DEL, a bidi override or a line separator in a note or
    a reply would reach the terminal raw. Each character shown_text would escape is written as a
    JSON escape instead; any character may be spelled so inside a JSON string (and they occur
    nowhere else), so the JSON reads back the same."""
    if encoded.isascii():
        return encoded.replace("\x7f", "\\u007f")
    return "".join(_json_escape(char) if _invisible(char) else char for char in encoded)


def forget_command(line: str) -> str:
    """The `tarsctl forget` command that removes ``line``, safe to paste into a shell: the line is
    one shell word in single quotes (shlex.quote), so ``$(...)``, backticks or quotes in it stay
    text; ``--`` keeps a line starting with "-" from being read as an option."""
    return "tarsctl forget -- " + shlex.quote(line) if line.startswith("-") else "tarsctl forget " + shlex.quote(line)


class ShownStream:
    """shown_text for text that arrives in pieces (a model's streamed reply): a run of blanks or
    invisible characters is held back until it ends, so a piece boundary never splits one and
    the result is what shown_text gives for the whole text."""

    def __init__(self) -> None:
        self._held = ""
        self._before = ""  # the last character let through, for the context of the next piece
        self.line_open = False  # what was let through does not end with a newline

    def feed(self, piece: str) -> str:
        text = self._held + piece
        cut = len(text)
        while cut and (text[cut - 1] in " \t" or (_invisible(text[cut - 1]) and text[cut - 1] != "\n")):
            cut -= 1
        self._held = text[cut:]
        return self._let_through(text[:cut])

    def end(self) -> str:
        """What is still held back, cleaned: the text is complete."""
        text, self._held = self._held, ""
        return self._let_through(text)

    def _let_through(self, text: str) -> str:
        if not text:
            return ""
        shown = _shown(text, True, self._before)
        self._before = text[-1]
        self.line_open = not shown.endswith("\n")
        return shown
