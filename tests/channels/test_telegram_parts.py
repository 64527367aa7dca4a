"""The Telegram channel's parts that need no daemon: what its config check says, and the one
redaction that keeps the bot token and the webhook secret out of status, the log, doctor and
messages, with the log filters that apply it to every line."""

from __future__ import annotations

import logging

from tarsd.channels.telegram import _QuietPolls, _Redacting
from tarsd.config.settings import TelegramConfig
from tarsd.setup.telegram import allowed_users, config_problems, redact

TOKEN = "7700112233:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"


def test_a_username_in_allowed_users_is_named_and_never_allowed():
    settings = TelegramConfig(allowed_users=[123456789, "@me", "someone", " 987654321 ", 123456789])
    [problem] = config_problems(settings)
    assert "2 entries that are not numeric user ids ('@me', 'someone')" in problem and "usernames are not accepted" in problem
    assert allowed_users(settings) == ["123456789", "987654321"]  # in the order written: the first is the owner
    assert config_problems(TelegramConfig(allowed_users=[123456789, " 987654321 "])) == []
    assert "allowed_users is empty: nobody can talk to tars" in config_problems(TelegramConfig())[0]


def test_addresses_are_checked():
    problems = config_problems(TelegramConfig(allowed_users=[1], api_url="api.telegram.org", webhook_url="http://pi.example/hook"))
    assert len(problems) == 2
    assert "api_url 'api.telegram.org' is not an http(s) address" in problems[0]
    assert "is not an https address ending in /channels/telegram" in problems[1]
    assert config_problems(TelegramConfig(allowed_users=[1], webhook_url="https://pi.example/channels/telegram")) == []


def test_redact_hides_the_token_however_it_is_written_and_the_webhook_secret():
    """Issue 43, observation 5: Telegram's error texts (and the library's, and httpx's) may hold the token."""
    secret_part = TOKEN.partition(":")[2]
    said = (
        f"Unauthorized: token {TOKEN} at https://api.telegram.org/bot{TOKEN}/getMe (bot7700112233%3A{secret_part}), "
        f"secret part {secret_part}, webhook secret s3cret-w0rd, an old token 123456789:{'A' * 35}"
    )
    hidden = redact(said, [TOKEN, "s3cret-w0rd"])
    assert TOKEN not in hidden and secret_part not in hidden and "s3cret-w0rd" not in hidden and "A" * 35 not in hidden
    assert "https://api.telegram.org/bot<token>/getMe" in hidden and hidden.startswith("Unauthorized: token <token> at ")
    # A secret too short to look for is not looked for: it would blank ordinary words.
    assert redact("a cat sat", ["at"]) == "a cat sat"
    assert redact("nothing of the bot here: 5") == "nothing of the bot here: 5"


def test_no_log_line_holds_the_token_and_each_poll_line_is_dropped():
    quiet, redacting = _QuietPolls(), _Redacting()

    class Channel:  # what the filter asks of a channel: its secrets
        def secrets(self) -> list[str]:
            return [TOKEN, "s3cret-w0rd"]

    channel = Channel()
    redacting.channels.add(channel)

    def record(message: str, *args: object, level: int = logging.INFO, name: str = "httpx") -> logging.LogRecord:
        return logging.LogRecord(name, level, __file__, 1, message, args, None)

    sent = record('HTTP Request: %s %s "%s"', "POST", f"https://api.telegram.org/bot{TOKEN}/sendMessage", "HTTP/1.1 200 OK")
    assert quiet.filter(sent) and redacting.filter(sent)
    assert sent.getMessage() == 'HTTP Request: POST https://api.telegram.org/bot<token>/sendMessage "HTTP/1.1 200 OK"'
    polled = record('HTTP Request: %s %s "%s"', "POST", f"https://api.telegram.org/bot{TOKEN}/getUpdates", "HTTP/1.1 200 OK")
    assert not quiet.filter(polled)
    failed = record("failed: %s", f"/bot{TOKEN}/getUpdates", level=logging.WARNING)
    assert quiet.filter(failed) and redacting.filter(failed) and TOKEN not in failed.getMessage()  # a poll's warning is kept
    # The library's own loggers (telegram.Bot logs the API's address at debug), and a traceback's text.
    try:
        raise ValueError(f"refused: the secret s3cret-w0rd and {TOKEN}")
    except ValueError as exc:
        traced = logging.LogRecord("telegram.Bot", logging.ERROR, __file__, 1, "Set Bot API URL: %s", (f"https://x/bot{TOKEN}",), None)
        traced.exc_info = (type(exc), exc, exc.__traceback__)
    assert redacting.filter(traced)
    shown = logging.Formatter().format(traced)
    assert TOKEN not in shown and "s3cret-w0rd" not in shown and "ValueError: refused: the secret <token> and <token>" in shown
    other = record("nothing of the bot here: %d", 5)
    assert redacting.filter(other) and other.getMessage() == "nothing of the bot here: 5"
