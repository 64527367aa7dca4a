"""One machine polls Telegram: which one, decided from the machines' heartbeats (tarsd/vault/heartbeat.py).

Telegram lets one client long-poll a bot's updates at a time: a second ``getUpdates`` ends the first
with 409 Conflict, so two machines polling one bot take turns failing, and both may answer a
message. Every tarsd with Telegram enabled (polling mode) therefore says in its heartbeat whether it
polls or stands by, and decides at each look, the same way on every machine:

- a live machine polls this bot already: this one stands by (it is sticky: a machine that polls
  keeps polling while it lives, so a restart of the other never takes Telegram from it);
- two poll at once (each started before it saw the other's heartbeat): the one polling longer
  keeps it, the other stops (its machine id breaks a tie);
- none polls: the live machine first in line (the lowest machine id among those that want to poll)
  takes it; the others wait.

A machine that stops cleanly says so in its last heartbeat, and the next in line polls at its next
look (BEAT_SECONDS, plus the sync tool's delay); one killed is taken for stopped once its heartbeat
is STALE_SECONDS old. Machines whose tokens name different bots do not wait for each other.
Pure: the coordinator (tarsd/sync/coordinator.py) starts and stops the poller as told.
"""

from __future__ import annotations

from dataclasses import dataclass

from tarsd.vault.heartbeat import TELEGRAM_POLLING, TELEGRAM_STANDBY, Beat


@dataclass(frozen=True, slots=True)
class Decision:
    poll: bool
    why: str  # for status and the log


def who_polls(me: Beat, peers: list[tuple[Beat, bool]]) -> Decision:
    """Whether this machine (``me``, as its heartbeat says now) should poll, given the other
    machines' heartbeats and whether each is live."""
    rivals = [beat for beat, live in peers if live and beat.machine != me.machine and _same_bot(me, beat)]
    polling = [beat for beat in rivals if beat.telegram == TELEGRAM_POLLING]
    if polling:
        if me.telegram == TELEGRAM_POLLING:
            first = min([me, *polling], key=lambda beat: (beat.telegram_since, beat.machine))
            if first.machine == me.machine:
                return Decision(True, f"this machine polls Telegram; {_names(polling)} polled too and stands down (this one began first)")
            return Decision(False, f"{first.label} polls Telegram for this bot (it began first); this machine stands by")
        return Decision(False, f"{_names(polling)} polls Telegram for this bot; this machine stands by and takes over if it stops")
    waiting = [beat for beat in rivals if beat.telegram == TELEGRAM_STANDBY]
    if me.telegram == TELEGRAM_POLLING:
        return Decision(True, "this machine polls Telegram" + (f"; {_names(waiting)} stands by" if waiting else ""))
    first = min([me, *waiting], key=lambda beat: beat.machine)
    if first.machine == me.machine:
        return Decision(True, "this machine polls Telegram" + (f"; {_names(waiting)} stands by" if waiting else ""))
    return Decision(False, f"{first.label} is first in line to poll Telegram; this machine stands by")


def _same_bot(me: Beat, other: Beat) -> bool:
    return not me.bot or not other.bot or me.bot == other.bot


def _names(beats: list[Beat]) -> str:
    return ", ".join(beat.label for beat in beats)
