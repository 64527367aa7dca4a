"""What a messenger channel is to the relay: the messages it takes in (``Inbound`` and its kinds),
and what the relay asks of it (``Channel``): send text, ask a question with buttons, show that tars
is typing, and say who a sender is without naming them in the log."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Inbound:
    """A message a person sent, as the messenger delivered it."""

    # The messenger's id of the person, the one replies go to and their conversation is named by:
    # in WhatsApp their phone number, or their BSUID when the message carries no number; in Telegram
    # their numeric user id.
    sender: str
    message_id: str  # the messenger's id of the message: the same on every delivery of it (Telegram: the update's id)
    at: float  # when the person sent it (unix time), by the messenger's clock
    # Other ids the same message names the person by (WhatsApp: the BSUID beside the number): the
    # message is the user's when the sender or any of these is on the allow list.
    also: tuple[str, ...] = field(default=(), kw_only=True)

    @property
    def ids(self) -> tuple[str, ...]:
        return (self.sender, *self.also)


@dataclass(frozen=True, slots=True)
class TextIn(Inbound):
    text: str


@dataclass(frozen=True, slots=True)
class ChoiceIn(Inbound):
    """A button tapped: ``choice`` is the id the button was sent with."""

    choice: str


@dataclass(frozen=True, slots=True)
class OtherIn(Inbound):
    """Anything tars does not read (an image, a voice note, a location): answered politely, or
    not at all when ``quiet`` (a reaction is not a message to answer)."""

    kind: str
    quiet: bool = False


@dataclass(frozen=True, slots=True)
class IdChanged(Inbound):
    """The messenger says a person's id changed (WhatsApp: a new BSUID, with or without a new
    number): ``sender`` and ``also`` are the old ids, ``new_ids`` the new ones, and
    ``new_address`` the one of them a message to the person goes to. The new ids are never
    allowed by this: the owner adds them to the allow list, or nobody does."""

    new_ids: tuple[str, ...]
    new_address: str


@dataclass(frozen=True, slots=True)
class Button:
    id: str  # sent back in ChoiceIn.choice when tapped
    title: str


@dataclass(slots=True)
class Counters:
    """What a channel has done since start, for status: each field is the ChannelStatus field of its name."""

    received: int = 0
    answered: int = 0
    duplicates: int = 0
    unknown_senders: int = 0
    bad_signatures: int = 0
    sent: int = 0
    retries: int = 0
    send_failures: int = 0
    window_closed: int = 0
    window_closed_at: float = 0.0
    id_changes: int = 0
    last_error: str = ""
    last_error_at: float = 0.0

    def failed(self, why: str, at: float) -> None:
        self.last_error, self.last_error_at = why, at


class SendFailed(Exception):
    """A message could not be sent (after the retries the error allowed); the message says why,
    with the messenger's own error text."""


class WindowClosed(SendFailed):
    """A message refused because the person's reply window had closed (WhatsApp: a day since
    their last message): a message tars starts can still go out through ``send_outside_window``."""


class Channel(Protocol):
    name: str  # "whatsapp", "telegram": conversations are "<name>:<sender>"
    counters: Counters
    # How long after a person's last message the messenger lets tars send them free text and
    # buttons (WhatsApp: 24 hours); None when it always does (Telegram).
    reply_window: float | None

    def format(self, markdown: str) -> list[str]:
        """The model's markdown as this messenger's messages: its own formatting, cut to its length limit."""
        ...

    def fits_question(self, text: str) -> bool:
        """Whether ``text`` fits in one message with buttons."""
        ...

    async def send_text(self, to: str, text: str) -> None:
        """Send one message (already formatted, within the limit); SendFailed when it could not be."""
        ...

    async def ask(self, to: str, text: str, buttons: list[Button]) -> None:
        """Send a question with buttons; SendFailed when it could not be."""
        ...

    async def send_outside_window(self, to: str, markdown: str) -> None:
        """Send ``markdown``, a message tars starts, to someone whose reply window has closed, as
        the messenger allows it then (WhatsApp: one approved template message); SendFailed when it
        cannot be. A channel without a window sends it as any other message.

        A method of its own rather than a check inside ``send_text``: only the relay knows when a
        person last wrote, and only a message tars starts may take the template's form (a reply
        is never outside the window)."""
        ...

    async def typing(self, to: str, message_id: str) -> None:
        """Show that tars is working on ``message_id`` (read mark, typing indicator); never raises."""
        ...

    def who(self, sender: str) -> str:
        """The sender as the log names them: not their number, nor any other id of theirs."""
        ...
