"""The model's tools for speaking first: a reminder the user asked for (set at once: it can only
ever message the user, and the chat shows it with its undo), and a routine it may only propose (it
waits in the proposals like a rule, and runs nothing until the user approves it). The rights come
from the authority table (tarsctl/authority.py): the model has ``remind`` and ``propose``, never
``schedule``."""

from __future__ import annotations

import json
import time
import tomllib
from datetime import datetime

import tomli_w

from tarsctl.authority import Principal, Right, may
from tarsd.memory.pending_rules import ROUTINE, PendingRules
from tarsd.routines.book import CHANNEL_TARGETS, Book, Routine
from tarsd.routines.schedule import parse_when

# Reminders the model set that wait at once: a model told by a note to remind the user of something
# again and again is stopped here (the user's own reminders have no such limit).
MAX_MODEL_REMINDERS = 20
# A reminder's text from the model: a reminder is a line or two, and a longer one (110,000
# characters once arrived as 28 Telegram messages) is refused, the tool error saying the limit.
MAX_REMINDER_TEXT = 1000

SPECS = [
    {
        "name": "remind_user",
        "description": "Set a reminder the user asked for in this conversation ('remind me at 3pm to ...'): tars sends the "
        "text to the user at that time, nothing else happens. Only when the user asks to be reminded.",
        "parameters": {
            "type": "object",
            "properties": {
                "when": {"type": "string", "description": "HH:MM (today, or tomorrow if past), an ISO date-time, or 'in N min|h|d'"},
                "text": {
                    "type": "string",
                    "description": f"what to tell the user then, e.g. 'go to the shop' (at most {MAX_REMINDER_TEXT} characters)",
                },
            },
            "required": ["when", "text"],
        },
    },
    {
        "name": "propose_routine",
        "description": "Propose a routine: a prompt tars runs on a schedule (a morning brief, a weekly review), its answer "
        "sent to the user. It runs nothing until the user approves it.",
        "parameters": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "short, lower case, letters, digits and dashes: morning-brief"},
                "schedule": {"type": "string", "description": "cron '30 7 * * *', 'every 2h', or a date-time '2026-11-27 15:00'"},
                "prompt": {"type": "string", "description": "what tars is asked at each run"},
                "deliver": {"type": "array", "items": {"type": "string"}, "description": "inbox, telegram, whatsapp, note"},
                "tools": {"type": "array", "items": {"type": "string"}, "description": "tools a run may use without asking"},
                "quiet": {"type": "boolean", "description": "speak only when there is something to say"},
            },
            "required": ["name", "schedule", "prompt"],
        },
    },
]
NAMES = frozenset(spec["name"] for spec in SPECS)


class RoutineTools:
    def __init__(self, book: Book, pending: PendingRules, default_targets: list[str], enabled: bool = True):
        self.enabled = enabled  # [routines] enabled: false, this machine runs none, so a reminder set here would never come
        self.book = book
        self.pending = pending
        self.default_targets = default_targets

    def remind(self, args: dict, conversation: str) -> str:
        if not may(Principal.MODEL, Right.REMIND):
            return "error: you may not set reminders"
        if not self.enabled:
            return "error: this tars runs no routines or reminders ([routines] enabled = false); tell the user to set it where routines run"
        waiting = sum(1 for routine in self.book.load() if routine.is_reminder and routine.by == "model")
        if waiting >= MAX_MODEL_REMINDERS:
            return (
                f"error: {waiting} reminders you set wait already, the most there may be; tell the user, who can list them "
                "with `tarsctl routines` and set more with `tarsctl remind`"
            )
        text = str(args.get("text") or "").strip()
        if not text:
            return "error: text is required: what to tell the user"
        if len(text) > MAX_REMINDER_TEXT:
            return (
                f"error: the text is {len(text):,} characters; a reminder's text is at most {MAX_REMINDER_TEXT:,}: "
                "say it in a sentence or two"
            )
        tz = self.book.tz
        when = parse_when(str(args.get("when") or ""), tz, datetime.now(tz))
        # A reminder asked for in a messenger goes back to that messenger; elsewhere to [routines] deliver.
        channel = conversation.split(":", 1)[0]
        targets = (channel,) if channel in CHANNEL_TARGETS else ()
        name = self.book.reminder_name(when)
        self.book.add(
            Routine(name=name, schedule=when.isoformat(timespec="seconds"), created=time.time(), text=text, deliver=targets, by="model")
        )
        return json.dumps(
            {
                "status": "set",
                "name": name,
                "at": when.strftime("%Y-%m-%d %H:%M %Z"),
                "text": text,
                "to": list(targets or self.default_targets),
                "undo": f"tarsctl routines rm {name}",
                "note": "tell the user when you will remind them; they can cancel it with the undo command",
            }
        )

    def propose(self, args: dict, conversation: str) -> str:
        if not may(Principal.MODEL, Right.PROPOSE):
            return "error: you may not propose routines"
        proposal = routine_proposal(args, self.book)
        pending, new = self.pending.propose(proposal, conversation, action=ROUTINE, kind="routine")
        return json.dumps(
            {
                "status": "pending",
                "pending_id": pending.id,
                "routine": str(args.get("name") or ""),
                "note": "not active: the routine waits for the user's approval (tarsctl rules, or the web page); "
                "tell the user you proposed it" + ("" if new else " (the same proposal was waiting already)"),
            }
        )


def routine_proposal(args: dict, book: Book) -> str:
    """The routine as the user will read it before approving: the TOML table it becomes in the
    routines file, whole. Checked now (name, schedule, targets), so what waits can be applied."""
    fields: dict[str, object] = {"schedule": str(args.get("schedule") or "").strip(), "prompt": str(args.get("prompt") or "").strip()}
    for key in ("deliver", "tools"):
        value = args.get(key)
        if isinstance(value, str):
            value = [value]
        if value:
            fields[key] = [str(item) for item in value]
    if args.get("quiet") is not None:
        fields["quiet"] = bool(args.get("quiet"))
    name = str(args.get("name") or "").strip()
    if not fields["prompt"]:
        raise ValueError("prompt is required: what tars is asked at each run")
    book.check(Routine(name=name, created=time.time(), **_typed(fields)))  # the schedule too, as every door checks it
    if book.get(name) is not None:
        raise ValueError(f"a routine called {name!r} exists already: propose another name")
    return tomli_w.dumps({"routine": {name: fields}})


def routine_from_proposal(text: str) -> Routine:
    table = tomllib.loads(text)["routine"]
    (name, fields), *_ = table.items()
    return Routine(name=name, created=time.time(), by="user", **_typed(fields))


def _typed(fields: dict) -> dict:
    typed = dict(fields)
    for key in ("deliver", "tools"):
        if key in typed:
            typed[key] = tuple(typed[key])
    return typed
