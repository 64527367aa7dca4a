"""What the model did on its own during a messenger chat, drawn by tars after the model's answer:
one line per side effect (a reminder set, a line noted in Memory.md, a rule, change or routine
proposed) with how to undo it from the phone, as the terminal shows it (tarsctl/chat.py).

A note the model read may have told it what to do: a reminder set from a prompt-injected note is
a message tars will send later, seemingly from tars. Shown here in tars's own words, the user sees
it when it is made, and can remove it with one command. The model's words in a line are data: one
line, invisible and control characters as escapes (tarsctl.shown), markdown marks escaped so that
the channel's formatting shows them as written (no link can hide its address), and cut to a
length a phone shows whole.
"""

from __future__ import annotations

import re

from tarsctl.protocol import ToolEffect
from tarsctl.shown import shown_text

MAX_QUOTED_CHARS = 200  # of the model's words in a line; the whole is in the routines or memory file
MAX_UNDO_CHARS = 300  # of a line given to /forget: enough to find it among the closest
# What the channels' markdown reads as marks: escaped, each channel's formatting shows the character
# itself. A backtick becomes a quote instead: a code span is found before any escape is read.
_MARKS = re.compile(r"([\\*_~\[\]()])")
HEADING = "tars did this on its own while answering:"


def literal(text: str, limit: int = MAX_QUOTED_CHARS) -> str:
    """The model's ``text`` as markdown the channels show as written, on one line, cut at ``limit``."""
    line = shown_text(text).replace("`", "'")
    if len(line) > limit:
        line = line[:limit].rstrip() + f"… ({len(text):,} characters)"
    return _MARKS.sub(r"\\\1", line)


def _code(text: str, limit: int) -> str:
    """``text`` as a code span to copy (Telegram copies one with a tap): no backtick can close it early."""
    return "`" + shown_text(text)[:limit].replace("`", "'").strip() + "`"


def effect_line(effect: ToolEffect, channel: str, here_is_owner: bool) -> str:
    """One side effect as a markdown line, with its undo as the phone types it."""
    quoted = f"«{literal(effect.text)}»"
    if effect.kind == "reminder":
        to = [target for target in effect.to if target]
        if channel in to:
            where = " (sent here)" if here_is_owner else " (sent to the owner's chat, the first of the allow list)"
        else:
            where = f" (sent to {literal(', '.join(to))})" if to else ""
        undo = _code(f"/routines rm {effect.name}", MAX_UNDO_CHARS)
        return f"• set a reminder for {literal(effect.at)}{where}: {quoted} — undo: {undo}"
    if effect.kind == "noted":
        return f"• noted in {literal(effect.path)}: {quoted} — undo: {_code('/forget ' + effect.text, MAX_UNDO_CHARS)}"
    if effect.kind == "replaced":
        undo = _code("/forget " + effect.text, MAX_UNDO_CHARS)
        return f"• replaced a line it had noted in {literal(effect.path)}: «{literal(effect.old)}» → {quoted} — undo: {undo}"
    decide = f"approve or reject it with `tarsctl rules` (number {effect.pending_id}) or on the web page"
    if effect.kind == "proposed_rule":
        return f"• proposed a rule, not in effect until you approve it: {quoted} — {decide}"
    if effect.kind == "proposed_change":
        return (
            f"• proposed to replace your line in {literal(effect.path)}: «{literal(effect.old)}» → {quoted}; "
            f"nothing changes until you approve it — {decide}"
        )
    if effect.kind == "proposed_routine":
        return f"• proposed the routine {quoted}, which runs nothing until you approve it — see it whole and {decide}"
    return f"• {literal(effect.kind)}: {quoted}"


def effects_message(effects: list[ToolEffect], channel: str, here_is_owner: bool) -> str:
    """The message after the answer ("" when the model did nothing on its own)."""
    if not effects:
        return ""
    return "\n".join([HEADING, *(effect_line(effect, channel, here_is_owner) for effect in effects)])
