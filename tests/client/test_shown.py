"""tarsctl/shown.py, the one cleaner of text from elsewhere before it reaches a terminal (issue 36)."""

from __future__ import annotations

import json
import unicodedata

import pytest

from tarsctl.shown import QUESTION_MARK, ShownStream, forget_command, shown_json_line, shown_text

HOSTILE = (
    "Sure.\n  ? tasks wants to run find_tasks\x1b[30;40m\u258c run it?\x9b2J \x1b]52;c;eA==\x07 \u202eevil\u202c"
    "Prefer metric units\ufe00\ufe01\ufe02 zero\u200bwidth\u2060\ufeff\u206a\ufff9x\ufffb\U000e0041 \ud800"
    + " " * 40
    + "payload\n        indented code\r\n"
)


def test_no_control_format_or_question_mark_character_gets_through():
    shown = shown_text(HOSTILE, keep_newlines=True)
    assert not [c for c in shown if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0]
    for char in "\u202e\u202c\ufe00\u200b\u2060\ufeff\u206a\ufff9\ufffb\U000e0041\ud800" + QUESTION_MARK:
        assert char not in shown
    assert "\\u001b[30;40m\\u258c run it?\\u009b2J \\u001b]52;c;eA==\\u0007 \\u202eevil\\u202c" in shown
    assert "\\U000e0041" in shown and "\\ud800" in shown
    assert "⟨40 spaces⟩payload\n        indented code\\u000d\n" in shown  # indentation stays, padding does not
    assert "\n" not in shown_text(HOSTILE)


@pytest.mark.parametrize("text", ["❤\ufe0f and 1\ufe0f\u20e3", "🏳\ufe0f\u200d🌈 👨\u200d👩\u200d👧", "می\u200cخواهم", "मरीज़\u200d"])
def test_what_real_text_needs_is_shown_as_it_is(text):
    assert shown_text(text) == text


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64])
def test_a_stream_cut_anywhere_shows_what_the_whole_text_shows(size):
    stream = ShownStream()
    pieces = [stream.feed(HOSTILE[i : i + size]) for i in range(0, len(HOSTILE), size)]
    assert "".join(pieces) + stream.end() == shown_text(HOSTILE, keep_newlines=True)
    assert stream.line_open is False


def test_the_undo_is_one_shell_word_whatever_the_line_holds():
    assert forget_command("Sam's host is $(touch /tmp/x) `id` ok") == "tarsctl forget 'Sam'\"'\"'s host is $(touch /tmp/x) `id` ok'"
    assert forget_command("-rf everything") == "tarsctl forget -- '-rf everything'"


@pytest.mark.parametrize("text", [HOSTILE.replace("\ud800", ""), "del\x7f only", "❤️ 🏳️‍🌈 کتاب‌ها ok"])
def test_json_output_reads_the_same_with_nothing_invisible_left_raw(text):
    for encoded in (json.dumps({"text": text}, ensure_ascii=False), json.dumps([text], ensure_ascii=False, separators=(",", ":"))):
        shown = shown_json_line(encoded)
        assert json.loads(shown) == json.loads(encoded)
        raw = [c for c in shown if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs") or "\ufe00" <= c <= "\ufe0f"]
        assert raw == [], raw
