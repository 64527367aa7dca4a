"""What ``[whatsapp]`` says, read (docs/whatsapp.md): who may write to tars and who the owner is,
where its three secrets are, and what in it stops the channel. The channel and ``tarsctl doctor``
both read it here.

A WhatsApp user is named two ways (Meta's business-scoped user ids, docs/whatsapp.md):
- a **phone number**, digits with country code ("353871234567"; "+", spaces, dashes and
  parentheses are ignored): a message's ``from``;
- a **BSUID**, a business-scoped user id: two capital letters (the user's country), a period, and
  up to 128 letters and digits ("US.13491208655302741918"): a message's ``from_user_id``. Since
  April 2026 every message carries one; a user who adopted a WhatsApp username may come with it
  alone, without a number. A parent BSUID ("US.ENT.…", shared by linked business portfolios) is
  not what a message's ``from_user_id`` holds, so it is refused here with the fix.

A message is the user's when either of the ids it carries is on the list. The **owner** is the
list's first id: what tars starts (a routine's answer, a reminder, a routine's question about a
tool call) goes to them only. The entries' values never reach the log: a problem names an entry by
its place in the list.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from tarsd.config.settings import WhatsAppConfig

BSUID = re.compile(r"[A-Z]{2}\.[A-Za-z0-9]{1,128}")
PARENT_BSUID = re.compile(r"[A-Z]{2}\.ENT\.[A-Za-z0-9]{1,128}")
PHONE_DIGITS = (6, 15)  # E.164 numbers have at most 15 digits; the shortest in use have about 7
SECRET_FILES = {  # setting -> (file name beside the config file, what it is)
    "verify_token_file": ("whatsapp_verify_token", "the verify token you type into Meta's webhook setup"),
    "app_secret_file": ("whatsapp_app_secret", "the app secret (Meta's dashboard: App settings › Basic)"),
    "access_token_file": ("whatsapp_access_token", "a permanent access token (a system user's, in Meta Business settings)"),
}


def number(text: str) -> str:
    """A phone number as WhatsApp writes a sender: digits only ("+353 87-123 4567" -> "353871234567")."""
    return re.sub(r"[\s+\-().]", "", text)


def is_bsuid(text: str) -> bool:
    return BSUID.fullmatch(text) is not None


def is_phone(text: str) -> bool:
    return text.isascii() and text.isdigit() and PHONE_DIGITS[0] <= len(text) <= PHONE_DIGITS[1]


def sender_id(entry: str) -> str | None:
    """An ``allowed_senders`` entry as messages carry it (a phone number's digits, or the BSUID as
    written: it is case-sensitive); None when it is neither."""
    entry = entry.strip()
    if is_bsuid(entry):
        return entry
    digits = number(entry)
    return digits if is_phone(digits) else None


def allowed_senders(entries: list[str]) -> tuple[set[str], list[str]]:
    """The ids on the list, and one line for each entry that is not an id (by its place, never its value)."""
    allowed: set[str] = set()
    problems = []
    for place, entry in enumerate(entries, 1):
        found = sender_id(entry)
        if found is not None:
            allowed.add(found)
        elif PARENT_BSUID.fullmatch(entry.strip()):
            problems.append(
                f"[whatsapp] allowed_senders entry {place} is a parent BSUID (with .ENT.): put the user's own BSUID there "
                "(a message's from_user_id, docs/whatsapp.md)"
            )
        else:
            problems.append(
                f"[whatsapp] allowed_senders entry {place} is neither a phone number with country code (6 to 15 digits, "
                'e.g. "+353871234567") nor a BSUID (e.g. "US.13491208655302741918"): it is ignored; fix or remove it'
            )
    return allowed, problems


def addresses(entries: list[str]) -> list[str]:
    """The list's ids in the order written, each one a message can be sent to (a number or a BSUID):
    the first is the owner."""
    return list(dict.fromkeys(found for entry in entries if (found := sender_id(entry)) is not None))


def config_problems(settings: WhatsAppConfig) -> list[str]:
    """What in the settings stops the channel, or part of it, each with what to do."""
    problems = []
    if not settings.phone_number_id.strip().isdigit():
        problems.append("[whatsapp] phone_number_id is not set (or not a number): Meta's app dashboard shows it under WhatsApp › API Setup")
    if not settings.allowed_senders:
        problems.append("[whatsapp] allowed_senders is empty: nobody can talk to tars; put your own number (or your BSUID) there")
    problems += allowed_senders(settings.allowed_senders)[1]
    url = urlsplit(settings.graph_url)
    if url.scheme not in ("http", "https") or not url.netloc:
        problems.append(f"[whatsapp] graph_url {settings.graph_url!r} is not an http(s) address")
    return problems


def secret_paths(settings: WhatsAppConfig, config_file: Path) -> dict[str, tuple[Path, str, str]]:
    """setting -> (its file, what it is for the user, the hint when it is missing)."""
    folder = Path(config_file).expanduser().parent
    found = {}
    for key, (default, what) in SECRET_FILES.items():
        configured = getattr(settings, key)
        path = Path(configured).expanduser() if configured else folder / default
        found[key] = (path, f"[whatsapp] {key}", f"write {what} on its first line, then `chmod 600 {path}` (docs/whatsapp.md)")
    return found
