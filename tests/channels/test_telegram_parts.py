"""The Telegram channel's parts that need no daemon: what its config check says, and the log
filter that keeps the bot token out of tarsd's log."""

from __future__ import annotations

import logging

from tarsd.channels.telegram import Telegram, _HideToken
from tarsd.config.settings import TelegramConfig

TOKEN = "7700112233:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"


def test_a_username_in_allowed_users_is_named_and_never_allowed():
    problems = Telegram._check(TelegramConfig(allowed_users=[123456789, "@me", "someone"]))
    [problem] = problems
    assert "2 entries that are not numeric user ids ('@me', 'someone')" in problem and "usernames are not accepted" in problem
    assert Telegram._check(TelegramConfig(allowed_users=[123456789, " 987654321 "])) == []
    assert "allowed_users is empty: nobody can talk to tars" in Telegram._check(TelegramConfig())[0]


def test_addresses_are_checked():
    problems = Telegram._check(TelegramConfig(allowed_users=[1], api_url="api.telegram.org", webhook_url="http://pi.example/hook"))
    assert len(problems) == 2
    assert "api_url 'api.telegram.org' is not an http(s) address" in problems[0]
    assert "is not an https address ending in /channels/telegram" in problems[1]
    assert Telegram._check(TelegramConfig(allowed_users=[1], webhook_url="https://pi.example/channels/telegram")) == []


def test_the_token_never_reaches_the_log_and_each_poll_line_is_dropped():
    hide = _HideToken()

    def record(message: str, *args: object) -> logging.LogRecord:
        return logging.LogRecord("httpx", logging.INFO, __file__, 1, message, args, None)

    sent = record('HTTP Request: %s %s "%s"', "POST", f"https://api.telegram.org/bot{TOKEN}/sendMessage", "HTTP/1.1 200 OK")
    assert hide.filter(sent)
    assert sent.getMessage() == 'HTTP Request: POST https://api.telegram.org/bot<token>/sendMessage "HTTP/1.1 200 OK"'
    polled = record('HTTP Request: %s %s "%s"', "POST", f"https://api.telegram.org/bot{TOKEN}/getUpdates", "HTTP/1.1 200 OK")
    assert not hide.filter(polled)
    failed = logging.LogRecord("httpx", logging.WARNING, __file__, 1, "failed: %s", (f"/bot{TOKEN}/getUpdates",), None)
    assert hide.filter(failed) and TOKEN not in failed.getMessage()  # a warning about a poll is kept, without the token
    other = record("nothing of the bot here: %d", 5)
    assert hide.filter(other) and other.getMessage() == "nothing of the bot here: 5"
