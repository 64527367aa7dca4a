"""The relay's commands, as in the REPL: /new, /remember, /forget, /search (/sgrep, /svec), /remind
and /routines, each through the doors' dispatcher as the phone, answered in the sender's chat. A
part of ``Relay`` (its base class): they use its sending, its questions with buttons and its
dispatcher, and the relay's ``_message`` sends each command here.

Replies say what to type, in the phone's words, never the names of request types: a phone may not
remove a routine, so ``/routines rm`` of one is answered with the command for the terminal.
"""

from __future__ import annotations

import asyncio

from tarsctl.authority import Principal, refusal
from tarsctl.protocol import (
    ConversationEnded,
    DecideMemoryProposals,
    EndConversation,
    Error,
    Forget,
    Forgotten,
    MemoryProposal,
    MemoryProposalsDecided,
    MemoryReview,
    MemoryReviewReply,
    MemoryUndo,
    MemoryUndone,
    Message,
    Remember,
    Remembered,
    Remind,
    RoutineAction,
    RoutineRan,
    Routines,
    RoutineSaved,
    RoutinesReply,
    Search,
    SearchResults,
)
from tarsctl.routine_times import WHEN_FORMS, day_and_time, soon, split_when
from tarsctl.shown import shown_text
from tarsd.channels.channel import Button
from tarsd.channels.effects import literal

QUESTION_SECONDS = 3600.0  # a question that is not a tool approval (remember: replace?) is kept this long
SEARCH_RESULTS = 5
LINE_SHOWN_CHARS = 10_000  # a memory line asked about is shown whole up to this (a Forget names at most this much)
HELP = """Commands:
/search QUERY: search your notes (/sgrep: keywords only, /svec: by meaning)
/remember FACT: save a fact to Memory.md
/forget TEXT: remove the line of Memory.md that TEXT names (you are asked first)
/remind WHEN TEXT: a reminder here, in the owner's chat (WHEN: 15:00, 2026-11-27 15:00, in 20 min)
/routines: your routines and reminders; /routines pause|resume|run NAME; /routines rm REMINDER
/review memory: review Memory.md; approve or reject each proposal; /review undo [N]: undo a change
/new: log this conversation and start a new one
/whoami: the ids this message came from, for {allow_list}
/help: this list
Anything else is a message to tars."""
FORGET_CHOICES = 5  # lines listed when /forget's words name more than one


class Commands:
    """The commands of ``Relay``, which it inherits: methods on the relay's own state (its channel,
    ids, questions and dispatcher)."""

    async def _new(self, sender: str) -> None:
        final = await self._final(EndConversation(id=next(self._ids), conversation=self.conversation(sender)), sender)
        if not isinstance(final, ConversationEnded):
            return await self._say(sender, failure("The conversation goes on", final))
        lines = ["New conversation."]
        if final.session_log:
            lines.append(f"The last one is logged in {final.session_log}.")
        lines += [f"({warning})" for warning in final.warnings]
        await self._say(sender, " ".join(lines))

    async def _remember(self, sender: str, fact: str, mode: str = "", replace_line: str = "") -> None:
        if not fact:
            return await self._say(sender, "Usage: /remember FACT")
        request = Remember(
            id=next(self._ids), fact=fact, kind="semantic", mode=mode, replace_line=replace_line, conversation=self.conversation(sender)
        )
        reply = await self._final(request, sender)
        if not isinstance(reply, Remembered):
            return await self._say(sender, failure("Not remembered", reply))
        where = f" under {reply.section}" if reply.section else ""
        if reply.status == "possible_update":
            nonce = self._question(
                sender,
                {
                    "replace": lambda: self._remember(sender, fact, "replace", reply.similar),
                    "keep": lambda: self._remember(sender, fact, "force"),
                    "cancel": lambda: self._say(sender, "Cancelled: nothing changed."),
                },
                QUESTION_SECONDS,
            )
            text = f"{reply.path} has a similar line{where}:\n{reply.similar}" + (f"\n(differs: {reply.reason})" if reply.reason else "")
            buttons = [Button(f"{nonce}:replace", "Replace it"), Button(f"{nonce}:keep", "Keep both"), Button(f"{nonce}:cancel", "Cancel")]
            if not self.channel.fits_question(text):
                await self._say(sender, text)
                text = "Replace that line, keep both, or cancel?"
            await self._ask(sender, text, buttons)
            return
        if reply.status == "replaced":
            return await self._say(sender, f"Replaced in {reply.path}{where}:\n- {reply.replaced}\n+ {reply.line}")
        if reply.status == "duplicate":
            return await self._say(sender, f"Already remembered in {reply.path}: {reply.similar or reply.duplicate_of}")
        await self._say(sender, f"Remembered in {reply.path}{where}.")

    async def _forget(self, sender: str, text: str) -> None:
        """/forget TEXT: the Memory.md line TEXT names, removed once the sender taps "Remove it" (as
        `tarsctl forget` asks first); several lines that match are listed, to be named whole."""
        if not text:
            return await self._say(sender, "Usage: /forget TEXT, TEXT being the words of the Memory.md line to remove")
        found = await self._final(Forget(id=next(self._ids), text=text, limit=FORGET_CHOICES), sender)
        if not isinstance(found, Forgotten):
            return await self._say(sender, failure("Nothing forgotten", found))
        if not found.candidates:
            return await self._say(sender, f"No line of {found.path} matches «{literal(text)}»: nothing forgotten.")
        exact = [candidate for candidate in found.candidates if candidate.line.strip() == text.strip()]
        chosen = exact[0] if exact else found.candidates[0] if len(found.candidates) == 1 else None
        if chosen is None:
            lines = "\n".join(f"{n}. «{literal(c.line)}»" for n, c in enumerate(found.candidates, 1))
            return await self._say(sender, f"Lines of {found.path} that match:\n{lines}\nSend /forget with the whole line you mean.")
        line = chosen.line
        nonce = self._question(
            sender,
            {"forget": lambda: self._forget_line(sender, text, line), "keep": lambda: self._say(sender, "Kept: nothing changed.")},
            QUESTION_SECONDS,
        )
        # The line whole: a tap removes what the question shows.
        question = f"Remove this line from {found.path}?\n«{literal(line, LINE_SHOWN_CHARS)}»"
        if not self.channel.fits_question(question):
            await self._say(sender, f"This line of {found.path}:\n«{literal(line, LINE_SHOWN_CHARS)}»")
            question = "Remove the line above?"
        await self._ask(sender, question, [Button(f"{nonce}:forget", "Remove it"), Button(f"{nonce}:keep", "Keep it")])

    async def _forget_line(self, sender: str, text: str, line: str) -> None:
        done = await self._final(Forget(id=next(self._ids), text=text, confirm_line=line), sender)
        if not isinstance(done, Forgotten) or not done.removed:
            return await self._say(sender, failure("Nothing forgotten", done if not isinstance(done, Forgotten) else None))
        await self._say(sender, f"Removed from {done.path}: «{literal(done.removed)}»")

    async def _search(self, sender: str, query: str, mode: str) -> None:
        if not query:
            return await self._say(sender, "Usage: /search QUERY")
        reply = await self._final(Search(id=next(self._ids), query=query, mode=mode, limit=SEARCH_RESULTS), sender)
        if not isinstance(reply, SearchResults):
            return await self._say(sender, failure("The search failed", reply))
        if not reply.results:
            return await self._say(sender, "No results.")
        hits = []
        for hit in reply.results:
            where = " › ".join(part for part in (hit.title, hit.heading) if part)
            hits.append(f"**{where or hit.path}** ({hit.band} {hit.score:.2f})\n{hit.path}:{hit.start_line}\n{hit.snippet}")
        await self._say(sender, "\n\n".join(hits))

    # ---- routines and reminders ----

    async def _remind(self, sender: str, rest: str) -> None:
        """/remind WHEN TEXT: a reminder sent here (to this channel) at WHEN."""
        when, words = split_when(rest.split())
        text = " ".join(words).strip()
        if not when or not text:
            return await self._say(sender, f"Usage: /remind WHEN TEXT, WHEN being {WHEN_FORMS}.")
        if not self.is_owner(sender):
            # What tars starts goes to the owner only: set here, the reminder would arrive in their chat, not this one.
            return await self._say(
                sender,
                f"No reminder set: reminders in {self.title} go to the owner only (the first id of {self.allow_list}), "
                "so /remind works in the owner's chat. Set yours at the terminal (`tarsctl remind`) or on the web page.",
            )
        reply = await self._final(Remind(id=next(self._ids), when=when, text=text, to=[self.channel.name]), sender)
        if not isinstance(reply, RoutineSaved):
            return await self._say(sender, failure("No reminder set", reply))
        reminder = reply.routine
        timezone = await self._routines_timezone(sender, reminder.name)
        at = day_and_time(reminder.next_run, timezone) if reminder.next_run else "now"
        # Names and commands as code: a name's "_" is not read as emphasis.
        await self._say(sender, f"Reminder set for {at}: {reminder.text}\n(undo: `/routines rm {reminder.name}`)")

    async def _routines_timezone(self, sender: str, name: str) -> str:
        """The routines' time zone, to say a time in the zone the reminder's name was made in."""
        reply = await self._final(Routines(id=next(self._ids), name=name), sender)
        return reply.timezone if isinstance(reply, RoutinesReply) else ""

    async def _routines(self, sender: str, rest: str) -> None:
        """/routines: the list; /routines pause|resume|run|rm NAME: that action (a phone's rights
        cover all but removing a routine: the dispatcher refuses that, with a hint, said here)."""
        words = rest.split()
        if not words:
            reply = await self._final(Routines(id=next(self._ids)), sender)
            if not isinstance(reply, RoutinesReply):
                return await self._say(sender, failure("No list", reply))
            return await self._say(sender, routines_list(reply))
        action = {"pause": "pause", "resume": "resume", "run": "run", "rm": "remove", "remove": "remove"}.get(words[0].lower())
        if action is None or len(words) != 2:
            return await self._say(sender, "Usage: /routines, or /routines pause|resume|run|rm NAME")
        name = words[1]
        removing = RoutineAction(id=next(self._ids), name=name, action=action)
        if action == "remove" and refusal(Principal.PHONE, removing) is not None:
            # Said here in the phone's words: the dispatcher's refusal names its request types.
            return await self._say(
                sender,
                f"`{name}` is unchanged: a routine is removed at the terminal (`tarsctl routines rm {name}`) or on the web page; "
                f"from here `/routines pause {name}` stops it, and `/routines rm` removes reminders.",
            )
        if action == "run":
            typing = asyncio.ensure_future(self._keep_typing(sender))
            try:
                reply = await self._final(RoutineAction(id=next(self._ids), name=name, action="run"), sender)
            finally:
                typing.cancel()
            if not isinstance(reply, RoutineRan):
                return await self._say(sender, failure(f"{name} did not run", reply))
            said = reply.text.strip() or "(nothing to say)"
            outcome = reply.run.outcome + (f": {reply.run.detail}" if reply.run.detail else "")
            return await self._say(sender, f"{said}\n\n(`{name}`: {outcome})")
        reply = await self._final(removing, sender)
        if not isinstance(reply, RoutineSaved):
            return await self._say(sender, failure(f"{name} is unchanged", reply))
        await self._say(sender, f"`{reply.routine.name or name}`: {reply.status}.")

    # ---- the memory review: /review memory, its proposals with buttons, /review undo ----

    async def _review_command(self, sender: str, rest: str) -> None:
        words = rest.lower().split()
        if words == ["memory"]:
            return await self._review_memory(sender)
        if words[:1] == ["undo"] and len(words) <= 2 and all(w.isdigit() for w in words[1:]):
            return await self._undo_memory(sender, int(words[1]) if len(words) == 2 else 0)
        await self._say(sender, "Usage: /review memory, or /review undo [N] to undo a change it applied (the last by default)")

    async def _review_memory(self, sender: str) -> None:
        """Review Memory.md now, then ask about every proposal waiting: all of a kind at once (the
        list shown whole first) or one by one, each with its whole text; nothing changes until a tap."""
        typing = asyncio.ensure_future(self._keep_typing(sender))
        try:
            reply = await self._final(MemoryReview(id=next(self._ids)), sender)
        finally:
            typing.cancel()
        if not isinstance(reply, MemoryReviewReply):
            return await self._say(sender, failure("No review", reply))
        said = f"Reviewed {reply.path} ({reply.lines} lines): " + (
            f"{len(reply.new)} new proposals" if reply.new else "nothing new to propose"
        )
        said += f"; {len(reply.waiting)} wait for you." if reply.waiting else "."
        said += "".join(f"\n({line})" for line in [*reply.left, *reply.notes])
        await self._say(sender, said)
        for kind in MEMORY_KINDS:
            group = [p for p in reply.waiting if p.kind == kind]
            if len(group) > 1:
                await self._ask_memory_group(sender, kind, group)
            elif group:
                await self._ask_memory_one(sender, group[0])

    async def _ask_memory_group(self, sender: str, kind: str, group: list[MemoryProposal]) -> None:
        listing = "\n".join(f"#{p.id} {_whole(p.text)}" for p in group)
        await self._say(sender, f"{MEMORY_KINDS[kind]} ({len(group)}):\n```\n{listing}\n```")
        ids, seen = [p.id for p in group], [p.text for p in group]
        nonce = self._question(
            sender,
            {
                "yes": lambda: self._decide_memory(sender, ids, True, seen),
                "no": lambda: self._decide_memory(sender, ids, False, seen),
                "each": lambda: self._ask_memory_each(sender, group),
            },
            QUESTION_SECONDS,
        )
        buttons = [
            Button(f"{nonce}:yes", f"Approve all {len(group)}"),
            Button(f"{nonce}:no", "Reject all"),
            Button(f"{nonce}:each", "One by one"),
        ]
        await self._ask(sender, f"The {len(group)} above: approve all, reject all, or one by one?", buttons)

    async def _ask_memory_each(self, sender: str, group: list[MemoryProposal]) -> None:
        for proposal in group:
            await self._ask_memory_one(sender, proposal)

    async def _ask_memory_one(self, sender: str, proposal: MemoryProposal) -> None:
        text = f"#{proposal.id}:\n```\n{_whole(proposal.text)}\n```\nsource: `{_whole(proposal.source)}`"
        if proposal.quote:
            text += f"\nthe log's line:\n```\n{_whole(proposal.quote)}\n```"
        if not self.channel.fits_question(text):
            await self._say(sender, text)
            text = f"Approve #{proposal.id}, shown above?"
        nonce = self._question(
            sender,
            {
                "yes": lambda: self._decide_memory(sender, [proposal.id], True, [proposal.text]),
                "no": lambda: self._decide_memory(sender, [proposal.id], False, [proposal.text]),
            },
            QUESTION_SECONDS,
        )
        await self._ask(sender, text, [Button(f"{nonce}:yes", "Approve"), Button(f"{nonce}:no", "Reject")])

    async def _decide_memory(self, sender: str, ids: list[int], approve: bool, seen: list[str]) -> None:
        reply = await self._final(DecideMemoryProposals(id=next(self._ids), ids=ids, approve=approve, seen=seen), sender)
        if not isinstance(reply, MemoryProposalsDecided):
            return await self._say(sender, failure("Nothing was decided", reply))
        numbers = ", ".join(f"#{n}" for n in reply.decided)
        gone = f"\nNot done: {', '.join(f'#{n}' for n in reply.gone)} (its lines changed since)." if reply.gone else ""
        if not approve:
            return await self._say(sender, f"Rejected {numbers}: never proposed again.{gone}")
        if not reply.change_id:
            return await self._say(sender, f"Nothing was applied.{gone}")
        changed = "\n".join([*(f"- {_whole(line)}" for line in reply.removed), *(f"+ {_whole(line)}" for line in reply.added)])
        done = f"Approved {numbers}: change {reply.change_id} in {reply.path}:\n```\n{changed}\n```\nRecorded in {reply.history}.{gone}"
        done += f"\nUndo: /review undo {reply.change_id} (or `{reply.undo}`)"
        await self._say(sender, done)
        nonce = self._question(sender, {"undo": lambda: self._undo_memory(sender, reply.change_id)}, QUESTION_SECONDS)
        await self._ask(sender, f"Undo change {reply.change_id}?", [Button(f"{nonce}:undo", "Undo")])

    async def _undo_memory(self, sender: str, change_id: int) -> None:
        reply = await self._final(MemoryUndo(id=next(self._ids), change_id=change_id), sender)
        if not isinstance(reply, MemoryUndone):
            return await self._say(sender, failure("Nothing was undone", reply))
        how = "byte for byte as it was" if reply.exact else "line by line (it changed since: your edits stay)"
        await self._say(sender, f"Undid change {reply.change_id}: {reply.path} is back {how}.")


def routines_list(reply: RoutinesReply) -> str:
    """One short line per routine and reminder, for a phone's screen."""
    if not reply.routines:
        return "No routines or reminders. /remind WHEN TEXT sets a reminder."
    lines = []
    for routine in reply.routines:
        if routine.paused:
            next_run = "paused"
        elif routine.next_run:
            next_run = f"next {soon(routine.next_run, reply.timezone)}"
        else:
            next_run = "no next run"
        last = f"; last {routine.last_run.outcome}" if routine.last_run is not None and routine.last_run.outcome else ""
        what = routine.text if routine.kind == "reminder" else routine.schedule
        lines.append(f"`{routine.name}` ({what}): {next_run}{last}")
    if reply.problem:
        lines.append(f"Problem: {reply.problem}")
    return "\n".join(lines)


MEMORY_KINDS = {
    "duplicate": "Duplicates",
    "supersede": "Lines another updates (they go to the history)",
    "expired": "Lines whose time has passed",
    "budget": "Sections to move out of a file past its budget",
    "missing": "Facts the session logs stated (found by the model: check each)",
}


def _whole(text: str) -> str:
    """Text from the user's file or a model, shown whole in a code block: cleaned, and unable to close it."""
    return shown_text(text).replace("```", "ʼʼʼ")


def failure(what: str, reply: Message | None) -> str:
    if isinstance(reply, Error) and reply.code == "forbidden":
        # The authority table's own words name request types (RoutineAction): the phone is told what to do instead.
        return f"{what}: that is not done from a messenger" + (f"; {reply.hint}" if reply.hint else "") + "."
    if isinstance(reply, Error):
        return f"{what}: {reply.message}" + (f" ({reply.hint})" if reply.hint else "")
    return f"{what}: tarsd gave no answer (see its log)."
