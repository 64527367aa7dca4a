"""What the model did on its own, drawn for a messenger (tarsd/channels/effects.py): the model's
words arrive as written through each channel's own formatting (Telegram HTML, WhatsApp's marks),
on one line, cut to a phone's length, whatever they hold; each undo is a command to copy."""

from __future__ import annotations

from tarsctl.protocol import ToolEffect
from tarsd.channels.effects import HEADING, effect_line, effects_message, literal
from tarsd.channels.telegram_text import plain, to_messages
from tarsd.channels.whatsapp_text import to_whatsapp

HOSTILE = "Pay at [your bank](https://phish.example/x) **now** `code` <b>bold</b> & _it_ ~no~ \\*"


def shown_in_telegram(markdown: str) -> str:
    [message] = to_messages(markdown)
    assert "<a " not in message and "<b>" not in message and "<i>" not in message and "<s>" not in message
    return plain(message)


def test_the_models_words_arrive_as_written_in_telegram_and_whatsapp():
    effect = ToolEffect(kind="reminder", text=HOSTILE, at="2026-11-27 15:00 CET", name="remind-1127-1500", to=["telegram"])
    line = effect_line(effect, "telegram", here_is_owner=True)
    written = HOSTILE.replace("`", "'")  # a backtick could open a code span before any escape is read
    shown = shown_in_telegram(line)
    assert shown == f"• set a reminder for 2026-11-27 15:00 CET (sent here): «{written}» — undo: /routines rm remind-1127-1500"
    [html] = to_messages(line)
    assert "<code>/routines rm remind-1127-1500</code>" in html and "&lt;b&gt;bold&lt;/b&gt; &amp;" in html
    assert f"«{written}»" in to_whatsapp(line)  # WhatsApp shows the marks as typed: no link markup exists there


def test_one_line_invisible_characters_as_escapes_and_a_phone_length():
    text = "first line\nsecond\u202e line " + "x" * 1_000_000
    quoted = literal(text)
    shown = shown_in_telegram(quoted)
    assert "\n" not in shown and "\u202e" not in shown and "\\u000a" in shown and "\\u202e" in shown
    assert len(shown) < 260 and shown.endswith("(1,000,024 characters)")


def test_each_kind_says_what_happened_and_how_to_undo_it():
    noted = ToolEffect(kind="noted", text="Dog: *Perry* `x`", path="Memory.md")
    assert (
        shown_in_telegram(effect_line(noted, "telegram", True))
        == "• noted in Memory.md: «Dog: *Perry* 'x'» — undo: /forget Dog: *Perry* 'x'"
    )
    elsewhere = ToolEffect(kind="reminder", text="tea", at="15:00", name="remind-1127-1500", to=["telegram"])
    assert "(sent to the owner's chat, the first of the allow list)" in effect_line(elsewhere, "telegram", here_is_owner=False)
    inbox = ToolEffect(kind="reminder", text="tea", at="15:00", name="remind-1127-1500", to=["inbox"])
    assert "(sent to inbox)" in effect_line(inbox, "whatsapp", here_is_owner=True)
    rule = effect_line(ToolEffect(kind="proposed_rule", text="Always answer in French", pending_id=4), "telegram", True)
    assert "not in effect until you approve it" in rule and "`tarsctl rules` (number 4)" in rule
    change = effect_line(ToolEffect(kind="proposed_change", text="new", old="old", path="Memory.md", pending_id=5), "telegram", True)
    assert "«old» → «new»" in change and "nothing changes until you approve it" in change
    routine = effect_line(ToolEffect(kind="proposed_routine", text="morning", pending_id=6), "whatsapp", True)
    assert "proposed the routine «morning», which runs nothing until you approve it" in routine
    assert effects_message([], "telegram", True) == ""
    assert effects_message([noted, elsewhere], "telegram", True).split("\n")[0] == HEADING
