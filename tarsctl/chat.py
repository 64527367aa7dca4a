"""`tarsctl chat`: one-shot messages and the REPL, with streaming, slash commands,
Ctrl-C to cancel an answer, and the /review approval loop."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from tarsctl.client import Client, RemoteError
from tarsctl.protocol import (
    ApplyReview,
    Cancel,
    Chat,
    ChatDelta,
    ChatDone,
    DecideRule,
    EndConversation,
    Error,
    Feedback,
    Forget,
    Forgotten,
    MemoryCandidate,
    PendingRules,
    PendingRulesReply,
    Remember,
    Remembered,
    Review,
    ReviewApplied,
    ReviewProposals,
    RuleDecided,
    Search,
    SearchResults,
    ToolActivity,
    ToolApproval,
)
from tarsctl.shown import QUESTION_MARK, ShownStream, shown_json, shown_text

HELP = """\
  /search QUERY     search memory (hybrid)      /sgrep QUERY   keywords only     /svec QUERY   by meaning
  /remember FACT    save a fact to Memory.md    /forget TEXT   remove a line from Memory.md
  /w [NOTE]         last answer was wrong       /r [NOTE]      last answer was good
  /review           turn feedback into rules    /rules         approve or reject rules the model proposed
  /review memory    review Memory.md: duplicates, updates, expired lines, facts from session logs; you decide each
  /routines         routines and reminders      /remind WHEN TEXT  a reminder (WHEN: 15:00, 2026-11-27 15:00, in 20 min)
  /new              log this conversation and start a new one
  /help             this help                   /exit          log the conversation and quit (Ctrl-D too)
  Ctrl-C while tars answers stops the answer; the conversation goes on."""


class ChatSession:
    def __init__(
        self,
        client: Client,
        conversation: str,
        provider: str,
        model: str,
        out=sys.stdout,
        err=sys.stderr,
        ask: Callable[[str], str] | None = None,
        allow_tools: list[str] | None = None,
        explain: bool = False,
    ):
        """``ask`` reads a person's answer (input on a terminal); without it, tools that ask first
        are not run (tarsd tells the model why). ``allow_tools``: tools allowed without asking."""
        self.client = client
        self.conversation = conversation
        self.provider = provider
        self.model = model
        self.out = out
        self.err = err
        self.ask = ask
        self.allow_tools = allow_tools or []
        self.explain = explain  # say what the opening context spent
        self._stream = ShownStream()  # the model's text of the answer under way, cleaned as it arrives

    def say(self, message: str, end: bool = False) -> ChatDone | Error:
        """Send a message and stream the answer. Ctrl-C sends a cancel and waits for the end."""
        request_id = self.client.next_id()
        self.client.send(
            Chat(
                id=request_id,
                conversation=self.conversation,
                message=message,
                provider=self.provider,
                model=self.model,
                end=end,
                approvals=self.ask is not None,
                allow_tools=self.allow_tools,
            )
        )
        cancelled = False
        self._stream = ShownStream()  # the model's text, cleaned as it arrives
        while True:
            try:
                reply = self.client.receive()
            except KeyboardInterrupt:
                if not cancelled:
                    cancelled = True
                    self.client.send(Cancel(id=request_id))
                    print("\n[cancelling]", file=self.err, flush=True)
                continue
            if isinstance(reply, ChatDelta):
                self.out.write(self._stream.feed(reply.text))
                self.out.flush()
            elif isinstance(reply, ToolApproval):
                if not self.approve(reply, request_id) and not cancelled:
                    cancelled = True  # Ctrl-C at the question: no, and the answer stops
                    self.client.send(Cancel(id=request_id))
            elif isinstance(reply, ToolActivity):
                if reply.phase == "call":
                    arguments = shown_text(", ".join(f"{k}={v!r}" for k, v in reply.arguments.items()))
                    print(f"\n  · {shown_text(reply.name)}({arguments})", file=self.err, flush=True)
                elif reply.server:
                    print(f"  · {activity_line(reply)}", file=self.err, flush=True)
                elif reply.summary:
                    print(f"  · memory: {shown_text(reply.summary)}", file=self.err, flush=True)
            elif isinstance(reply, (ChatDone, Error)):
                self.out.write(self._stream.end())
                if isinstance(reply, ChatDone):
                    if self._stream.line_open:
                        self.out.write("\n")
                    if reply.cancelled:
                        print("[answer cancelled]", file=self.err)
                    for warning in reply.warnings:
                        print(f"warning: {shown_text(warning)}", file=self.err)
                    if self.explain and reply.context:
                        print(f"context: {shown_text(reply.context)}", file=self.err)
                    if reply.session_log:
                        print(f"session log: {shown_text(reply.session_log)}", file=self.err)
                else:
                    print_error(reply, self.err)
                self.out.flush()
                return reply

    def approve(self, event: ToolApproval, request_id: int) -> bool:
        """Show a call waiting for approval and send the person's answer; False after a Ctrl-C.

        The question is tars's own, in a form no text from elsewhere can take: it starts on a
        fresh line, after the model's text so far, with the terminal's attributes reset (nothing
        the model wrote can make it black on black: its ESC never reaches the terminal anyway);
        on a terminal its first line is in reverse video, which cleaned text cannot produce; and
        every line of it starts with QUESTION_MARK, which shown_text escapes in any other text,
        so a copy in a reply, a note or an argument cannot start a line the same way. The
        arguments are shown whole, blank runs as a counted marker."""
        from tarsctl.protocol import DecideToolCall

        server, tool = shown_text(event.server), shown_text(event.tool)
        arguments = shown_json(event.arguments)
        self.out.write(self._stream.end())
        tty = _isatty(self.out)
        fresh = "\n" if self._stream.line_open else ""
        heading = f"{QUESTION_MARK} ? {server} wants to run {tool} ({shown_text(event.why)})"
        print(fresh + ("\033[0m\033[7m" + heading + "\033[0m" if tty else heading), file=self.out)
        print(f"{QUESTION_MARK}   arguments ({len(arguments):,} characters, all shown):", file=self.out)
        for line in arguments.splitlines():
            print(f"{QUESTION_MARK}     {line}", file=self.out)
        self.out.flush()
        self._stream = ShownStream()  # the reply goes on after the question, from a fresh line
        approve = always = False
        interrupted = False
        try:
            assert self.ask is not None
            answer = (
                self.ask(f"{QUESTION_MARK}   run it? [y]es / [n]o / [a]lways ({event.timeout_seconds:.0f} s to answer): ").strip().lower()
            )
            if answer.startswith("a"):
                rules_file = shown_text(event.rules_file)
                sure = self.ask(
                    f"{QUESTION_MARK}   always run {server} {tool} without asking? This adds an allow rule to {rules_file} [y/N]: "
                )
                always = sure.strip().lower().startswith("y")
                approve = True
                if not always:
                    print("    approved this once; no rule written", file=self.out)
            else:
                approve = answer.startswith("y")
        except (EOFError, KeyboardInterrupt) as exc:
            interrupted = isinstance(exc, KeyboardInterrupt)
        self.client.send(DecideToolCall(id=request_id, approval=event.approval, approve=approve, always=always))
        return not interrupted

    def end(self) -> None:
        try:
            reply = self.client.call(
                EndConversation(id=self.client.next_id(), conversation=self.conversation, provider=self.provider, model=self.model)
            )
        except RemoteError as exc:
            print_error(exc.error, self.err)
            return
        for warning in reply.warnings:
            print(f"warning: {shown_text(warning)}", file=self.err)
        if reply.session_log:
            print(f"session log: {shown_text(reply.session_log)}", file=self.err)

    def search(self, query: str, mode: str) -> None:
        if not query:
            print("usage: /search QUERY", file=self.err)
            return
        reply = self.client.call(Search(id=self.client.next_id(), query=query, mode=mode, limit=5))
        assert isinstance(reply, SearchResults)
        for warning in reply.warnings:
            print(f"warning: {shown_text(warning)}", file=self.err)
        if not reply.results:
            print("no results", file=self.out)
        for hit in reply.results:
            where = " › ".join(shown_text(part) for part in (hit.title, hit.heading) if part)
            print(
                f"{shown_text(hit.path)}:{hit.start_line}  {where}  [{hit.band} {hit.score:.2f}]\n    {shown_text(hit.snippet)}",
                file=self.out,
            )

    def feedback(self, good: bool, note: str) -> None:
        reply = self.client.call(Feedback(id=self.client.next_id(), conversation=self.conversation, good=good, note=note))
        print(f"noted in {shown_text(reply.path)}", file=self.out)

    def review(self, ask: Callable[[str], str]) -> None:
        proposals = self.client.call(Review(id=self.client.next_id(), provider=self.provider, model=self.model))
        assert isinstance(proposals, ReviewProposals)
        if proposals.nothing_to_review:
            print("nothing to review: no corrections or rewards yet (/w and /r add them)", file=self.out)
            return
        if not proposals.rules:
            print("the model proposed no rules", file=self.out)
        approved = []
        for number, rule in enumerate(proposals.rules, 1):
            print(f"  {number}. {shown_text(rule)}", file=self.out)
            answer = ask("     keep it? [y]es / [n]o / [e]dit: ").strip().lower()
            if answer.startswith("e"):
                edited = ask("     rule: ").strip()
                if edited:
                    approved.append(edited)
            elif answer.startswith("y"):
                approved.append(rule)
        done = self.client.call(ApplyReview(id=self.client.next_id(), rules=approved))
        assert isinstance(done, ReviewApplied)
        print(
            f"{done.added} rule(s) added to the procedural rules; archived: {shown_text(', '.join(done.archived)) or 'nothing'}",
            file=self.out,
        )


def activity_line(activity: ToolActivity) -> str:
    """What came of a call of another server's tool, in one line for people."""
    said = {
        "ok": "done",
        "error": "the tool reported an error",
        "failed": "failed",
        "unavailable": "not run: the server is unavailable",
        "denied": "not run: you said no",
        "timed_out": "not run: no answer in time",
        "not_asked": "not run: it needs your approval (tarsctl chat on a terminal, or --allow-tools " + shown_text(activity.name) + ")",
        "cancelled": "not run: stopped",
        "refused": "not run",
    }.get(activity.outcome, activity.outcome)
    details = [
        f"{activity.duration_ms / 1000:.1f} s" if activity.duration_ms else "",
        f"{activity.chars:,} characters" if activity.chars else "",
    ]
    if activity.approved_by:
        details.append(f"approved by {shown_text(activity.approved_by)}")
    extra = ", ".join(filter(None, details))
    return f"{shown_text(activity.server)} {shown_text(activity.tool)}: {said}" + (f" ({extra})" if extra else "")


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def print_error(error: Error, stream=sys.stderr) -> None:
    print(f"tarsctl: {shown_text(error.message)}" + (f"\n  hint: {shown_text(error.hint)}" if error.hint else ""), file=stream)


def _history_file() -> Path:
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return state / "tars" / "tarsctl_history"


def repl(session: ChatSession) -> int:
    """Read-eval-print loop. Line editing and history come from readline where available."""
    try:
        import readline

        history = _history_file()
        history.parent.mkdir(parents=True, exist_ok=True)
        if history.exists():
            readline.read_history_file(history)
    except (ImportError, OSError):
        readline = None
    print(f"tars chat (conversation {session.conversation}): /help for commands, Ctrl-D to quit", file=session.err)
    try:
        while True:
            try:
                line = input("you> ").strip()
            except EOFError:
                print(file=session.err)
                session.end()
                return 0
            except KeyboardInterrupt:
                print(file=session.err)
                continue
            if not line:
                continue
            try:
                if not _command(session, line):
                    return 0
            except RemoteError as exc:
                print_error(exc.error, session.err)
    finally:
        if readline is not None:
            try:
                readline.write_history_file(_history_file())
            except OSError:
                pass


def _command(session: ChatSession, line: str) -> bool:
    """Handle one line; False means quit."""
    if not line.startswith("/"):
        session.say(line)
        return True
    name, _, rest = line.partition(" ")
    rest = rest.strip()
    if name == "/exit" or name == "/quit":
        session.end()
        return False
    if name == "/new":
        session.end()
        print("new conversation", file=session.err)
    elif name in ("/search", "/sgrep", "/svec"):
        session.search(rest, {"/search": "hybrid", "/sgrep": "fts", "/svec": "vec"}[name])
    elif name == "/remember":
        if not rest:
            print("usage: /remember FACT", file=session.err)
        else:
            remember(session.client, rest, "semantic", "", session.out, session.err, ask=input, conversation=session.conversation)
    elif name == "/forget":
        if not rest:
            print("usage: /forget WORDS OF THE LINE", file=session.err)
        else:
            forget(session.client, rest, "semantic", session.out, session.err, ask=input)
    elif name in ("/w", "/r"):
        session.feedback(name == "/r", rest)
    elif name == "/review" and rest.lower() == "memory":
        from tarsctl.memory_view import decide_each, print_review
        from tarsctl.protocol import MemoryReview

        reply = session.client.call(MemoryReview(id=session.client.next_id(), provider=session.provider, model=session.model))
        print_review(reply, session.out, listed=False)
        if reply.waiting:
            decide_each(session.client, reply.waiting, input, session.out)
    elif name == "/review":
        session.review(input)
    elif name == "/rules":
        rules(session.client, out=session.out, err=session.err, ask=input)
    elif name == "/routines":
        from tarsctl.protocol import Routines
        from tarsctl.routines_view import print_routines

        print_routines(session.client.call(Routines(id=session.client.next_id())), session.out)
    elif name == "/remind":
        from tarsctl.routines_view import remind as set_reminder

        set_reminder(session.client, rest.split(), session.out, session.err)
    elif name == "/help":
        print(HELP, file=session.out)
    else:
        print(f"unknown command {name}: /help lists them", file=session.err)
    return True


EXIT_OK, EXIT_REMOTE, EXIT_USAGE = 0, 1, 2
# forget --yes removes the closest line only when it is clearly the one meant.
FORGET_SURE = 0.75
FORGET_MARGIN = 0.15

Ask = Callable[[str], str]


def _reply(ask: Ask, prompt: str) -> str:
    """The answer to a question; end of input (Ctrl-D) answers nothing, which cancels."""
    try:
        return ask(prompt)
    except EOFError:
        return ""


def remember(
    client: Client,
    fact: str,
    kind: str,
    section: str,
    out=sys.stdout,
    err=sys.stderr,
    mode: str = "",
    ask: Ask | None = None,
    conversation: str = "",
) -> int:
    """Remember a fact; a possible update is settled by ``ask`` (replace / keep both / cancel),
    or, with no one to ask, by ``mode`` ("replace" or "force"). Returns the exit code."""

    def send(mode: str, replace_line: str = "") -> Remembered:
        request = Remember(
            id=client.next_id(), fact=fact, kind=kind, section=section, mode=mode, replace_line=replace_line, conversation=conversation
        )
        return client.call(request)

    reply = send(mode)
    status = reply.status or ("added" if reply.added else "duplicate")  # an older tarsd says only added or not
    if status == "possible_update":
        where = f" under {reply.section}" if reply.section else ""
        print(f"{shown_text(reply.path)} has a similar line{shown_text(where)}:\n  {shown_text(reply.similar)}", file=out)
        if reply.reason:
            print(f"  differs: {shown_text(reply.reason)}", file=out)
        if ask is None:
            print("tarsctl: not asking (not a terminal): add --replace to replace that line, or --force to keep both", file=err)
            return EXIT_USAGE
        answer = _reply(ask, "replace it [r], keep both [k], or cancel [c]? ").strip().lower()
        if answer.startswith("r"):
            reply = send("replace", reply.similar)
        elif answer.startswith("k"):
            reply = send("force")
        else:
            print("cancelled: nothing changed", file=out)
            return EXIT_OK
        status = reply.status or ("added" if reply.added else "duplicate")
    if status == "replaced":
        where = f" under {reply.section}" if reply.section else ""
        print(
            shown_text(f"replaced in {reply.path}{where}:") + f"\n  - {shown_text(reply.replaced)}\n  + {shown_text(reply.line)}", file=out
        )
    elif status == "added":
        print(shown_text(f"remembered in {reply.path}" + (f" under {reply.section}" if reply.section else "")), file=out)
    else:
        print(shown_text(f"already remembered in {reply.path}: {reply.similar or reply.duplicate_of}"), file=out)
    return EXIT_OK


def rules(client: Client, action: str = "", rule_id: int = 0, out=sys.stdout, err=sys.stderr, ask: Ask | None = None) -> int:
    """What the model proposed in chats (rules, changes to your memory lines): listed; approved or
    rejected by number (action "approve" / "reject"), or one by one when ``ask`` can ask. Returns
    the exit code."""
    if action:
        done = client.call(DecideRule(id=client.next_id(), rule_id=rule_id, approve=action == "approve"))
        assert isinstance(done, RuleDecided)
        _decided(done, out)
        return EXIT_OK
    waiting = client.call(PendingRules(id=client.next_id()))
    assert isinstance(waiting, PendingRulesReply)
    if not waiting.rules:
        print("nothing the model proposed waits for your approval", file=out)
        return EXIT_OK
    print(f"what the model proposed, none of it in effect until you approve it (rules go into {shown_text(waiting.path)}):", file=out)
    for pending in waiting.rules:
        where = f" (proposed in chat {pending.conversation})" if pending.conversation else ""
        if pending.action == "routine":
            _draw_routine(pending, where, out)
        else:
            print(f"  #{pending.id}  {shown_text(_proposal(pending) + where)}", file=out)
        if ask is None:
            if pending.action == "routine":
                print(f"       approve: tarsctl rules approve {pending.id}", file=out)
            continue
        answer = _reply(ask, "       approve [a], reject [r], or decide later [l]? ").strip().lower()
        if answer.startswith(("a", "r")):
            # Bound to the text shown: if #N said anything else by now, tarsd refuses the decision.
            decision = DecideRule(id=client.next_id(), rule_id=pending.id, approve=answer.startswith("a"), rule=pending.rule)
            _decided(client.call(decision), out)
    if ask is None:
        print("approve one with `tarsctl rules approve N`, reject it with `tarsctl rules reject N`", file=out)
    return EXIT_OK


def _proposal(pending) -> str:
    """A proposal in words: what approving it would change, and where."""
    if pending.action == "replace":
        return f"in {pending.path}, replace your line {pending.target!r} with {pending.rule!r}"
    if pending.action == "remove":
        return f"remove your line {pending.rule!r} from {pending.path}"
    return pending.rule


def _draw_routine(pending, where: str, out) -> None:
    """A routine the model proposed, drawn whole by tarsctl: approving it makes the model's prompt
    run on its schedule with the tools it lists, so every line of the TOML table is shown, each
    after QUESTION_MARK. shown_text escapes that mark in any other text, so no line of the table
    (nor of a note, nor of a reply) can start the way these do, nor fake the end of the table."""
    print(f"  #{pending.id}  a routine for {shown_text(pending.path)}{shown_text(where)}, whole:", file=out)
    for line in shown_text(pending.rule, keep_newlines=True).splitlines() or [""]:
        print(f"       {QUESTION_MARK} {line}", file=out)


def _decided(done: RuleDecided, out) -> None:
    rule, path = shown_text(done.rule), shown_text(done.path)
    if not done.approved:
        print(f"rejected #{done.rule_id}: {rule}", file=out)
    elif done.status == "duplicate":
        print(f"#{done.rule_id} is in {path} already: {rule}", file=out)
    elif done.action == "replace":
        print(f"approved #{done.rule_id}: replaced in {path}: {rule}", file=out)
    elif done.action == "remove":
        print(f"approved #{done.rule_id}: removed from {path}: {rule}", file=out)
    elif done.action == "routine":
        print(f"approved #{done.rule_id}: the routine is in {path} (tarsctl routines shows it)", file=out)
    else:
        print(f"approved #{done.rule_id}: added to {path} as your rule: {rule}", file=out)


def _show(candidates: list[MemoryCandidate], out) -> None:
    for number, candidate in enumerate(candidates, 1):
        where = ", ".join(filter(None, [candidate.section, f"line {candidate.line_number}", candidate.provenance]))
        print(f"  {number}. {shown_text(candidate.line)}   ({shown_text(where)})", file=out)


def clear_choice(candidates: list[MemoryCandidate]) -> MemoryCandidate | None:
    """The line meant, when one matches well and clearly better than the next."""
    if not candidates or candidates[0].score < FORGET_SURE:
        return None
    if len(candidates) > 1 and candidates[1].score > candidates[0].score - FORGET_MARGIN:
        return None
    return candidates[0]


def forget(
    client: Client, text: str, kind: str, out=sys.stdout, err=sys.stderr, ask: Ask | None = None, yes: bool = False, limit: int = 5
) -> int:
    """Show the lines closest to ``text`` and remove the one chosen, after a confirmation
    (``ask``); ``yes`` removes the closest line without asking when it is clearly the one."""
    found = client.call(Forget(id=client.next_id(), text=text, kind=kind, limit=limit))
    assert isinstance(found, Forgotten)
    if not found.candidates:
        print(f"tarsctl: no line of {shown_text(found.path)} matches {shown_text(repr(text))}: nothing forgotten", file=err)
        return EXIT_REMOTE
    chosen: MemoryCandidate | None
    if yes:
        chosen = clear_choice(found.candidates)
        if chosen is None:
            print(f"lines of {shown_text(found.path)} that match:", file=out)
            _show(found.candidates, out)
            print("tarsctl: no single line matches clearly: give more of the line's words, or run without --yes to choose", file=err)
            return EXIT_USAGE
    else:
        print(f"lines of {shown_text(found.path)} that match:", file=out)
        _show(found.candidates, out)
        if ask is None:
            print("tarsctl: not asking (not a terminal): add --yes to forget the closest line when it clearly matches", file=err)
            return EXIT_USAGE
        if len(found.candidates) == 1:
            chosen = found.candidates[0]
        else:
            answer = _reply(ask, f"forget which? [1-{len(found.candidates)}, Enter: none] ").strip()
            if not answer.isdigit() or not 1 <= int(answer) <= len(found.candidates):
                print("nothing forgotten", file=out)
                return EXIT_OK
            chosen = found.candidates[int(answer) - 1]
        if not _reply(ask, f"forget {shown_text(repr(chosen.line))}? [y/N] ").strip().lower().startswith("y"):
            print("nothing forgotten", file=out)
            return EXIT_OK
    done = client.call(Forget(id=client.next_id(), text=text, kind=kind, confirm_line=chosen.line))
    print(f"forgot from {shown_text(done.path)}: {shown_text(done.removed)}", file=out)
    if done.stale_copy_seconds > 0:
        # Said here because tarsd undoes such a save quietly: a line typed back at once looks like a stale copy.
        window = f"{done.stale_copy_seconds:g} s"
        print(
            f"  an editor's copy saved within {window} that still holds this line is taken for a stale copy, and the line removed again;\n"
            f"  to keep it after all, `tarsctl remember` it (or type it back after those {window})",
            file=out,
        )
    return EXIT_OK
