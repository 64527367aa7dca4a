"""What ``[telegram]`` says, read (docs/telegram.md): who may write to tars and who the owner is,
where the bot token and the webhook's secret are, what in the settings stops the channel, and the
one function that keeps the token and the secret out of every text tars shows (``redact``). The
channel and ``tarsctl doctor`` both read it here.

A Telegram user is named by their numeric user id (usernames can be changed and then taken by
someone else, so they are refused); the same number is their private chat with the bot. The
**owner** is the first id of ``allowed_users``: what tars starts (a routine's answer, a reminder, a
routine's question about a tool call) goes to them only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote, urlsplit

from tarsd.config.settings import TelegramConfig

TOKEN_FILE = "telegram_token"
WEBHOOK_SECRET_FILE = "telegram_webhook_secret"
WEBHOOK_PATH = "/channels/telegram"
HIDDEN = "<token>"
# A Bot API token is the bot's numeric id, a colon (or %3A in an address) and a secret of letters,
# digits, _ and - (35 of them today): wherever one stands in a text, it is hidden, whichever bot's.
_BOT_TOKEN = re.compile(r"\d{3,}(?::|%3[Aa])[A-Za-z0-9_-]{20,}")
_BOT_ADDRESS = re.compile(r"/bot\d+(?::|%3[Aa])[^/\s'\"]*")  # the Bot API's addresses hold the token: /bot<token>/method
MIN_HIDDEN_CHARS = 6  # a shorter webhook secret is not searched for: it would blank ordinary words


def secret_paths(settings: TelegramConfig, config_file: Path) -> dict[str, tuple[Path, str, str]]:
    """setting -> (its file, what it is for the user, the hint when it is missing): the token, and
    in webhook mode the webhook's secret."""
    folder = Path(config_file).expanduser().parent
    token = Path(settings.token_file).expanduser() if settings.token_file else folder / TOKEN_FILE
    found = {
        "token_file": (
            token,
            "[telegram] token_file",
            f"write the token @BotFather gave your bot on its first line, then `chmod 600 {token}` (docs/telegram.md)",
        )
    }
    if settings.webhook_url:
        secret = Path(settings.webhook_secret_file).expanduser() if settings.webhook_secret_file else folder / WEBHOOK_SECRET_FILE
        found["webhook_secret_file"] = (
            secret,
            "[telegram] webhook_secret_file",
            f"write a random word of letters, digits, _ and - on its first line, then `chmod 600 {secret}` (docs/telegram.md)",
        )
    return found


def allowed_users(settings: TelegramConfig) -> list[str]:
    """The numeric user ids of ``allowed_users``, in the order written (the first is the owner)."""
    return list(dict.fromkeys(str(user).strip() for user in settings.allowed_users if str(user).strip().isdigit()))


def config_problems(settings: TelegramConfig) -> list[str]:
    """What in the settings stops the channel, or part of it, each with what to do."""
    problems = []
    if not settings.allowed_users:
        problems.append("[telegram] allowed_users is empty: nobody can talk to tars; put your own user id there (docs/telegram.md)")
    odd = [str(user) for user in settings.allowed_users if not str(user).strip().isdigit()]
    if odd:
        problems.append(
            f"[telegram] allowed_users has {len(odd)} entr{'y' if len(odd) == 1 else 'ies'} that are not numeric user ids "
            f"({', '.join(repr(user[:40]) for user in odd[:3])}): usernames are not accepted, as they can be changed and "
            "taken by someone else; put the numeric id there (docs/telegram.md: Find your user id)"
        )
    url = urlsplit(settings.api_url)
    if url.scheme not in ("http", "https") or not url.netloc:
        problems.append(f"[telegram] api_url {settings.api_url!r} is not an http(s) address")
    hook = urlsplit(settings.webhook_url)
    if settings.webhook_url and (hook.scheme != "https" or not hook.netloc or not hook.path.endswith(WEBHOOK_PATH)):
        problems.append(
            f"[telegram] webhook_url {settings.webhook_url!r} is not an https address ending in {WEBHOOK_PATH}: "
            "Telegram posts only to HTTPS, and tarsd serves the webhook at that path"
        )
    return problems


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with the bot token and the webhook secret hidden: Telegram's error texts, the
    library's and httpx's can hold them (an address is ``/bot<token>/method``). Every text about the
    channel passes here before it reaches status, the log, doctor or a message: the ``secrets``
    given (the token in the file now, the webhook secret, also URL-encoded), any address of the Bot
    API, and anything shaped like a bot token (an old one, another bot's)."""
    for secret in secrets:
        if len(secret) >= MIN_HIDDEN_CHARS:
            for form in dict.fromkeys((secret, quote(secret, safe=""), secret.partition(":")[2])):
                if len(form) >= MIN_HIDDEN_CHARS:
                    text = text.replace(form, HIDDEN)
    text = _BOT_ADDRESS.sub("/bot" + HIDDEN, text)
    return _BOT_TOKEN.sub(HIDDEN, text)
