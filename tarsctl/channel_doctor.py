"""`tarsctl doctor`'s checks of the messenger channels: for each channel whose config section is
enabled, its setup (the settings, its secret files and their modes) and whether the messenger's
API accepts it, each finding with what to fix.

A channel's check is one function in CHANNEL_CHECKS, under its config section's name: it gets the
whole config, its own section, the config file (its secret files live beside it by default) and
doctor's HTTP GET, and returns (status, summary, fix) lines, status being ok, warn or problem as
in doctor. A messenger added to tars adds its function here and nothing else in doctor.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

# doctor's _http_get: (url, headers) -> (HTTP status, body, "") or (None, b"", why it could not be reached)
HttpGet = Callable[[str, dict[str, str] | None], tuple[int | None, bytes, str]]
Finding = tuple[str, str, str]  # status, summary, fix


def check_channels(config: Any, config_file: Path, http_get: HttpGet) -> list[tuple[str, str, str, str]]:
    """(channel, status, summary, fix) for every enabled channel, in CHANNEL_CHECKS' order."""
    found = []
    for section, check in CHANNEL_CHECKS.items():
        settings = getattr(config, section, None)
        if settings is None or not getattr(settings, "enabled", False):
            continue
        found += [(section, *finding) for finding in check(config, settings, config_file, http_get)]
    return found


def whatsapp(config: Any, settings: Any, config_file: Path, http_get: HttpGet) -> list[Finding]:
    """[whatsapp]: the HTTP listener it is served on, the settings, the three secret files, and a
    GET of ``{graph_url}/{phone_number_id}`` with the access token: Meta answers it with the
    business number when the id is right and the token may see it."""
    from tarsd.setup.private_files import SecretFile, SecretFileError
    from tarsd.setup.whatsapp import allowed_senders, config_problems, secret_paths

    found: list[Finding] = []
    if not config.http.enabled:
        found.append(("problem", "enabled, but its webhook is served on the HTTP listener, which is off", "set [http] enabled = true"))
    for problem in config_problems(settings):
        what, _, fix = problem.partition(": ")  # the messages end with what to do, after the first ": "
        found.append(("problem", what, fix))
    secrets = {key: SecretFile(*paths) for key, paths in secret_paths(settings, config_file).items()}
    unusable = [problem for problem in (secret.problem() for secret in secrets.values()) if problem]
    found += [("problem", problem, "") for problem in unusable]

    phone_number_id = settings.phone_number_id.strip()
    token_file = secrets["access_token_file"]
    try:
        token = token_file.get()
    except SecretFileError:
        return found  # said above; without a token there is nothing to ask Meta
    if not phone_number_id.isdigit() or not settings.graph_url.startswith(("http://", "https://")):
        return found  # said above
    url = f"{settings.graph_url.rstrip('/')}/{phone_number_id}"
    status, body, error = http_get(url, {"Authorization": f"Bearer {token}"})
    if status is None:
        found.append(("problem", f"the Graph API cannot be reached at {url} ({error})", "check the network, or [whatsapp] graph_url"))
        return found
    code, message = _graph_error(body)
    if status == 200 and code is None:
        number = _field(body, "display_phone_number")
        name = _field(body, "verified_name")
        senders = len(allowed_senders(settings.allowed_senders)[0])
        summary = f"the Graph API knows phone number id {phone_number_id}" + (f": {number}" if number else "")
        summary += (f" ({name})" if name else "") + f"; {senders} allowed sender{'s' * (senders != 1)}"
        if not found:
            summary += "; the three secret files are private"
        found.append(("ok", summary, ""))
    elif status == 401 or code in (0, 190):
        why = message or f"HTTP {status}"
        found.append(
            (
                "problem",
                f"the Graph API refused the access token in {token_file.path} ({why})",
                "put a valid permanent token on its first line (a system user's: docs/whatsapp.md, step 1), mode 600",
            )
        )
    elif code == 100 or status == 404:
        why = message or f"HTTP {status}"
        found.append(
            (
                "problem",
                f"the Graph API does not know phone number id {phone_number_id}, or the token may not see it ({why})",
                "copy the Phone number ID from WhatsApp › API Setup into [whatsapp] phone_number_id, and assign the WhatsApp "
                "account to the token's system user",
            )
        )
    else:
        found.append(
            (
                "problem",
                f"the Graph API answered HTTP {status} for phone number id {phone_number_id}: {message or 'no error text'}",
                "try again later; Meta's status page: https://metastatus.com",
            )
        )
    return found


def telegram(config: Any, settings: Any, config_file: Path, http_get: HttpGet) -> list[Finding]:
    """[telegram]: the settings (numeric user ids, addresses), the token file (and the webhook's
    secret file in webhook mode), and ``getMe`` with the token: the Bot API answers it with the bot
    when the token is right. Never the token in what is shown: doctor's output is pasted into bug
    reports, and the Bot API's error texts may quote the address the token is part of."""
    from tarsd.setup.private_files import SecretFile, SecretFileError
    from tarsd.setup.telegram import allowed_users, config_problems, redact, secret_paths

    found: list[Finding] = [("problem", problem, "") for problem in config_problems(settings)]
    if settings.webhook_url and not config.http.enabled:
        found.append(
            (
                "problem",
                "webhook_url is set, but the webhook is served on the HTTP listener, which is off",
                "set [http] enabled = true, or empty webhook_url to poll",
            )
        )
    files = {key: SecretFile(*paths) for key, paths in secret_paths(settings, config_file).items()}
    found += [("problem", problem, "") for problem in (file.problem() for file in files.values()) if problem]
    token_file = files["token_file"]
    try:
        token = token_file.get()
    except SecretFileError:
        return found  # said above
    api = settings.api_url.rstrip("/")
    status, body, error = http_get(f"{api}/bot{token}/getMe", None)
    where = f"{api}/bot<token>/getMe"
    if status is None:
        found.append(
            ("problem", f"the Bot API cannot be reached at {where} ({redact(error, [token])})", "check the network, or [telegram] api_url")
        )
        return found
    answer = _json(body)
    said = redact(str(answer.get("description", ""))[:200], [token])
    bot = answer.get("result") if isinstance(answer.get("result"), dict) else {}
    if status == 200 and answer.get("ok") is True:
        name = bot.get("username", "")
        summary = f"the Bot API knows the token: the bot @{name}" if name else "the Bot API knows the token"
        users = allowed_users(settings)
        found.append(
            (
                "ok",
                summary
                + f"; {len(users)} allowed user{'s' * (len(users) != 1)}; "
                + ("webhook mode" if settings.webhook_url else "long polling"),
                "",
            )
        )
    elif status in (401, 404):
        found.append(
            (
                "problem",
                f"the Bot API refused the token in {token_file.path} (HTTP {status}: {said})",
                "ask @BotFather for the bot's token (/token), write it on the file's first line, mode 600",
            )
        )
    else:
        found.append(("problem", f"the Bot API answered HTTP {status} to getMe: {said}", "try again later"))
    return found


def _json(body: bytes) -> dict:
    try:
        found = json.loads(body)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _field(body: bytes, name: str) -> str:
    value = _json(body).get(name)
    return value if isinstance(value, str) else ""


def _graph_error(body: bytes) -> tuple[int | None, str]:
    """Meta's ``{"error": {"code", "message"}}``: (code, message), or (None, "") when there is none."""
    error = _json(body).get("error")
    if not isinstance(error, dict):
        return None, ""
    code = error.get("code")
    return (code if isinstance(code, int) else -1), str(error.get("message", ""))[:300]


# Config section -> its check. A messenger channel added to tars adds its line here.
CHANNEL_CHECKS: dict[str, Callable[[Any, Any, Path, HttpGet], list[Finding]]] = {
    "whatsapp": whatsapp,
    "telegram": telegram,
}
