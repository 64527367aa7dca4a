"""A routine's run and a reminder's message, when the clock says one is due.

A reminder is posted as it is: no model, no tools. A routine's prompt runs as a conversation of its
own (``routine:NAME``, logged to sessions/ when the run ends, like any conversation) through the
doors' dispatcher as the ``routine`` principal: the tools it lists run without asking; any other
tool that asks is asked of the user on the routine's first channel that can ask now (Telegram, or
WhatsApp within its window), and where nobody can be asked it is not run and the message says so.
A routine told to speak only when needed may answer ``NOTHING_TO_SAY``: nothing is sent, and the run
is recorded as quiet. Runs per day and model tokens per run are limited per routine.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from tarsctl.authority import Principal
from tarsctl.protocol import Chat, ChatDone, Error, Message, ToolActivity
from tarsd.config.settings import RoutinesConfig
from tarsd.routines.book import CHANNEL_TARGETS, Book, Routine
from tarsd.routines.ledger import Ledger, Run
from tarsd.routines.schedule import ScheduleError, parse_schedule
from tarsd.serve.handlers.common import Peer
from tarsd.speaking.deliveries import Deliveries
from tarsd.speaking.memory_review import run_review

if TYPE_CHECKING:  # the channels are loaded only when one is enabled
    from tarsd.channels.relay import Relay

log = logging.getLogger(__name__)

Dispatch = Callable[[Message, Peer], AsyncIterator[Message]]

QUIET_MARK = "NOTHING_TO_SAY"
# Outcomes of a call the user was not there to allow (tarsd/chat/external.py), reported with the run's message.
NOT_RUN = {"not_asked": "nobody could be asked", "denied": "you said no", "timed_out": "no answer came in time"}


class RoutinePeer(Peer):
    """The client a routine's run comes from: tarsd itself, for a routine the user wrote. No door
    carries this principal; the run ends (cancelled) when tarsd stops."""

    door = "routine"
    principal = Principal.ROUTINE

    def __init__(self, name: str, stopping: asyncio.Future):
        self.who = f"the routine {name}"
        self.stopping = stopping

    def read_ahead(self) -> asyncio.Future:
        return self.stopping


class RoutineRunner:
    def __init__(
        self,
        config: RoutinesConfig,
        book: Book,
        ledger: Ledger,
        dispatch: Dispatch,
        deliveries: Deliveries,
        relays: Callable[[], Mapping[str, Relay]],
        tz: ZoneInfo,
    ):
        self.config = config
        self.book = book
        self.ledger = ledger
        self.dispatch = dispatch
        self.deliveries = deliveries
        self.relays = relays
        self.tz = tz
        self._ids = itertools.count(1)
        self._stopping: asyncio.Future | None = None

    def start(self) -> None:
        self._stopping = asyncio.get_running_loop().create_future()

    def stop(self) -> None:
        if self._stopping is not None and not self._stopping.done():
            self._stopping.set_result(None)

    def targets(self, routine: Routine) -> list[str]:
        return list(routine.targets(self.config.deliver))

    # ---- the clock's callback ----

    async def fire(self, routine: Routine, scheduled: datetime, late: bool) -> None:
        """The clock's callback: run one occurrence it claimed in the ledger."""
        run = await asyncio.to_thread(self.ledger.run_for, routine.name, scheduled.timestamp())
        if run is None:  # the clock claims before it fires: a run missing here is a bug, said in the log
            log.error("routine %s: no claimed run for %s; not run", routine.name, scheduled.isoformat())
            return
        await self._fire(routine, scheduled, late, run)

    async def _fire(self, routine: Routine, scheduled: datetime, late: bool, run: Run) -> Run:
        """Run one occurrence claimed as ``run``; the finished run. A failed one leaves a notice where
        the user looks (Deliveries.notice: the inbox and the routine's messenger, at most one an hour)."""
        try:
            if routine.is_reminder:
                finished = await self._remind(routine, scheduled, late, run)
            elif routine.review:  # a built-in run, no prompt: the memory review (tarsd/speaking/memory_review.py)
                finished = await run_review(self, routine, RoutinePeer(routine.name, self._stopping), run)
            else:
                finished = await self._run(routine, scheduled, late, run)
        except asyncio.CancelledError:
            await asyncio.to_thread(self.ledger.finish, run.id, "interrupted", "tarsd stopped during the run")
            raise
        except Exception as exc:
            log.exception("routine %s failed", routine.name)
            finished = await asyncio.to_thread(self.ledger.finish, run.id, "failed", f"{type(exc).__name__}: {exc}")
        if finished.outcome == "failed":
            try:
                await self.deliveries.notice(routine.name, f"did not run: {finished.detail}", self.targets(routine))
            except Exception:  # the notice is a help: the run's failure is recorded whatever becomes of it
                log.exception("routine %s: the notice of its failure could not be posted", routine.name)
        return finished

    async def _remind(self, routine: Routine, scheduled: datetime, late: bool, run: Run) -> Run:
        one_shot = self._one_shot(routine)
        if not one_shot:  # a repeating reminder is limited per day like a routine (a runaway "every 1 min" stops there)
            limit = routine.runs_per_day if routine.runs_per_day is not None else self.config.reminder_runs_per_day
            limited = await self._over_limit(routine, run, limit, "reminder_runs_per_day")
            if limited is not None:
                return limited
        text = routine.text
        if late:
            text = f"{self._late_mark(scheduled)}\n{text}"
        item = await self.deliveries.post(
            f"reminder:{routine.name}", "Reminder", text, self.targets(routine), run.id, routine.note, routine.heading
        )
        finished = await asyncio.to_thread(self.ledger.finish, run.id, "reminded", "", "", item.id)
        if not one_shot:
            return finished  # a reminder on a repeating schedule stays
        # A one-shot reminder is said once: it leaves the routines file (its message stays in the inbox).
        try:
            await asyncio.to_thread(self.book.remove, routine.name)
        except (ValueError, OSError) as exc:  # gone already (removed by hand), or the file cannot be written now
            log.info("reminder %s sent; not removed from %s: %s", routine.name, self.book.path, exc)
        return finished

    def _one_shot(self, routine: Routine) -> bool:
        try:  # read as when it was written: a one-shot whose time has come is refused as past today
            created = datetime.fromtimestamp(routine.created, self.tz) - timedelta(days=1)
            return parse_schedule(routine.schedule, self.tz, created).kind == "once"
        except ScheduleError:
            return True  # a one-shot older than its own creation: nothing to keep it for

    async def _over_limit(self, routine: Routine, run: Run, limit: int, default_key: str) -> Run | None:
        """The run finished as limited when ``routine`` ran ``limit`` times today already; else None."""
        day_start = datetime.now(self.tz).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
        ran_today = await asyncio.to_thread(self.ledger.runs_since, routine.name, day_start)
        if ran_today <= limit:  # this run is counted already
            return None
        key = "runs_per_day" if routine.runs_per_day is not None else f"[routines] {default_key}"
        if routine.is_reminder:
            detail = f"not sent: {limit} messages a day is this reminder's limit ({key})"
        else:
            detail = f"not run: {limit} runs a day is this routine's limit ({key})"
        log.warning("routine %s: %s", routine.name, detail)
        return await asyncio.to_thread(self.ledger.finish, run.id, "limited", detail)

    def _late_mark(self, scheduled: datetime) -> str:
        """(late: this was due at 14:00), with the date when it was not today."""
        local = scheduled.astimezone(self.tz)
        when = f"{local:%H:%M}" if local.date() == datetime.now(self.tz).date() else f"{local:%Y-%m-%d %H:%M}"
        return f"(late: this was due at {when})"

    async def _run(self, routine: Routine, scheduled: datetime, late: bool, run: Run) -> Run:
        limit = routine.runs_per_day if routine.runs_per_day is not None else self.config.runs_per_day
        limited = await self._over_limit(routine, run, limit, "runs_per_day")
        if limited is not None:
            return limited
        targets = self.targets(routine)
        asking = self._asking_relay(targets)
        budget = routine.tokens_per_run if routine.tokens_per_run is not None else self.config.tokens_per_run
        conversation = f"routine:{routine.name}"
        request = Chat(
            id=next(self._ids),
            conversation=conversation,
            message=self._message(routine, scheduled, late),
            end=True,  # each run is logged to sessions/ and the next starts afresh
            approvals=asking is not None,
            allow_tools=list(routine.tools),
            token_budget=budget,
        )
        assert self._stopping is not None, "the runner is not started"
        peer = RoutinePeer(routine.name, self._stopping)
        not_run: list[str] = []
        final: Message | None
        if asking is not None:
            final = await asking.run_chat(request, peer)
        else:
            final = None
            async for reply in self.dispatch(request, peer):
                if isinstance(reply, ToolActivity) and reply.outcome in NOT_RUN:
                    not_run.append(f"{reply.name} ({NOT_RUN[reply.outcome]})")
                final = reply
        if isinstance(final, Error) or not isinstance(final, ChatDone):
            why = f"{final.message} ({final.hint})" if isinstance(final, Error) and final.hint else getattr(final, "message", "no answer")
            log.warning("routine %s failed: %s", routine.name, why)
            return await asyncio.to_thread(self.ledger.finish, run.id, "failed", why, conversation)
        text = final.text.strip()
        if final.cancelled:
            return await asyncio.to_thread(self.ledger.finish, run.id, "interrupted", "the run was stopped", conversation)
        detail = "; ".join(final.warnings)
        if not_run:
            detail = "; ".join(filter(None, [detail, "not run: " + ", ".join(not_run)]))
        if routine.quiet and _nothing_to_say(text) and not not_run:
            return await asyncio.to_thread(self.ledger.finish, run.id, "quiet", detail, conversation)
        text = text.replace(QUIET_MARK, "").strip() or "(the routine had nothing to say)"
        if not_run:
            text += (
                "\n\n(not run: "
                + ", ".join(not_run)
                + ". Tools a routine may use go in its tools list: `tarsctl routines edit "
                + routine.name
                + " --tools ...`)"
            )
        if late:
            text = f"{self._late_mark(scheduled)}\n{text}"
        item = await self.deliveries.post(f"routine:{routine.name}", routine.name, text, targets, run.id, routine.note, routine.heading)
        return await asyncio.to_thread(self.ledger.finish, run.id, "spoke", detail, conversation, item.id)

    def _asking_relay(self, targets: list[str]) -> Relay | None:
        relays = self.relays()
        for target in targets:
            relay = relays.get(target) if target in CHANNEL_TARGETS else None
            if relay is not None and relay.can_ask():
                return relay
        return None

    def _message(self, routine: Routine, scheduled: datetime, late: bool) -> str:
        """The run's message: the user's prompt, and what tars says about the run around it."""
        local = scheduled.astimezone(self.tz)
        now = datetime.now(self.tz)
        when = f"due {local.strftime('%A %Y-%m-%d %H:%M %Z')}"
        if late:
            when += f", run late at {now.strftime('%H:%M')} (tarsd was not running, or the machine slept)"
        lines = [
            f"[tars: the routine {routine.name!r}, {when}. The user wrote its prompt, below; they read the answer later, "
            "so do not ask them questions: say what you found.]"
        ]
        if routine.quiet:
            lines.append(f"[If nothing in it needs the user's attention now, answer exactly {QUIET_MARK} and nothing else.]")
        lines.append(routine.prompt)
        return "\n".join(lines)

    async def run_now(self, routine: Routine) -> tuple[Run, str]:
        """``tarsctl routines run NAME``: one run now, outside its schedule (still counted, limited and recorded)."""
        now = datetime.now(self.tz)
        run = await asyncio.to_thread(self.ledger.claim, routine.name, now.timestamp(), False)
        if run is None:  # an occurrence is its time to the microsecond: taken already only by a run started with it
            raise ValueError(f"{routine.name} was started at this very moment already")
        finished = await self._fire(routine, now, False, run)
        text = ""
        if finished.message_id is not None:
            item = await asyncio.to_thread(self.ledger.message, finished.message_id)
            text = item.text if item is not None else ""
        return finished, text


def _nothing_to_say(text: str) -> bool:
    return not text or text.strip(" .`*\"'\n") == QUIET_MARK
