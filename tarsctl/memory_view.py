"""`tarsctl memory`: the memory review at the terminal (docs/memory.md#the-memory-review).

    tarsctl memory review [--no-sessions]     review Memory.md now; on a terminal, decide each proposal
    tarsctl memory proposals                  the proposals waiting
    tarsctl memory approve N... | --kind K    apply them (one change, undoable)
    tarsctl memory reject N... | --kind K     reject them (never proposed again)
    tarsctl memory undo [N]                   undo change N (default: the last)
    tarsctl memory schedule CRON [--deliver T]  run the review on a schedule (the routine memory-review)

Every text a proposal holds (lines of Memory.md, a session log's line, a fact the model found) is
the user's file's or a model's: printed through tarsctl/shown.py, whole (what is approved is seen).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import msgspec

from tarsctl.client import Client
from tarsctl.protocol import (
    DecideMemoryProposals,
    MemoryProposal,
    MemoryProposals,
    MemoryProposalsDecided,
    MemoryReview,
    MemoryReviewReply,
    MemoryUndo,
    MemoryUndone,
    every_field,
)
from tarsctl.shown import shown_json_line, shown_text

EXIT_OK, EXIT_REMOTE, EXIT_USAGE = 0, 1, 2
ACTIONS = ("review", "proposals", "approve", "reject", "undo", "schedule")
KINDS = ("duplicate", "supersede", "expired", "budget", "missing")
TITLES = {
    "duplicate": "duplicates",
    "supersede": "lines another updates (they go to the history)",
    "expired": "lines whose time has passed",
    "budget": "sections to move out of a file past its budget",
    "missing": "facts the session logs stated (the model found them: check each)",
}

Ask = Callable[[str], str]


def memory_command(client: Client, args, ask: Ask | None = None, out=sys.stdout, err=sys.stderr) -> int:
    action = args.memory_action
    numbers = []
    for word in args.rest if action in ("approve", "reject", "undo") else ():
        if not word.isdigit() or int(word) < 1:
            print(f"tarsctl: {shown_text(word)!s} is not a number (#N as `tarsctl memory proposals` shows it)", file=err)
            return EXIT_USAGE
        numbers.append(int(word))
    if action in ("review", "proposals") and args.rest:
        print(f"tarsctl: memory {action} takes no numbers: `tarsctl memory approve N...` decides", file=err)
        return EXIT_USAGE
    if action == "review":
        reply = client.call(MemoryReview(id=client.next_id(), sessions=not args.no_sessions, provider=args.provider, model=args.model))
        if args.json:
            print(shown_json_line(msgspec.json.encode(every_field(reply)).decode()), file=out)
            return EXIT_OK
        print_review(reply, out, listed=ask is None)
        if ask is not None and reply.waiting:
            decide_each(client, reply.waiting, ask, out)
        elif reply.waiting:
            print("decide with `tarsctl memory approve N...` or `tarsctl memory reject N...` (or --kind KIND for all of a kind)", file=out)
        return EXIT_OK
    if action == "proposals":
        waiting = client.call(MemoryProposals(id=client.next_id()))
        if args.json:
            print(shown_json_line(msgspec.json.encode(every_field(waiting)).decode()), file=out)
            return EXIT_OK
        if not waiting.proposals:
            print("no memory proposal waits for you (`tarsctl memory review` looks for some)", file=out)
            return EXIT_OK
        if ask is None:
            print_proposals(waiting.proposals, out)
        else:
            decide_each(client, waiting.proposals, ask, out)
        return EXIT_OK
    if action in ("approve", "reject"):
        if not numbers and not args.kind:
            print(f"tarsctl: say which proposals to {action}: their numbers, or --kind KIND for all of one kind", file=err)
            return EXIT_USAGE
        done = client.call(DecideMemoryProposals(id=client.next_id(), ids=numbers, kind=args.kind, approve=action == "approve"))
        print_decided(done, out)
        return EXIT_OK
    if action == "undo":
        if len(numbers) > 1:
            print("tarsctl: undo one change at a time: `tarsctl memory undo N`", file=err)
            return EXIT_USAGE
        undone = client.call(MemoryUndo(id=client.next_id(), change_id=numbers[0] if numbers else 0))
        print_undone(undone, out)
        return EXIT_OK
    if action == "schedule":
        if len(args.rest) != 1 or not args.rest[0].strip():
            print('tarsctl: give the schedule in quotes: tarsctl memory schedule "0 18 * * 0" (cron, every 7d, or a date)', file=err)
            return EXIT_USAGE
        reply = client.call(MemoryReview(id=client.next_id(), schedule=args.rest[0], deliver=list(args.deliver)))
        print(
            f"the memory review runs as the routine {reply.routine} ({shown_text(args.rest[0])}): `tarsctl routines show {reply.routine}`",
            file=out,
        )
        return EXIT_OK
    print(f"tarsctl: memory {shown_text(action)}: say one of {', '.join(ACTIONS)}", file=err)
    return EXIT_USAGE


def print_review(reply: MemoryReviewReply, out, listed: bool = True) -> None:
    """What the review found; ``listed``: and every proposal waiting (not when each is asked about next)."""
    new = {p.id for p in reply.new}
    said = f"reviewed {shown_text(reply.path)} ({reply.lines} lines)"
    said += f": {len(reply.new)} new proposal{'s' if len(reply.new) != 1 else ''}" if reply.new else ": nothing new to propose"
    if reply.known:
        said += f" ({reply.known} found again but proposed before: never twice)"
    print(said, file=out)
    for line in [*reply.left, *reply.notes]:
        print(f"  ({shown_text(line)})", file=out)
    if reply.waiting:
        older = [p for p in reply.waiting if p.id not in new]
        if older:
            print(f"{len(older)} from earlier reviews wait too", file=out)
        if listed:
            print_proposals(reply.waiting, out)


def print_proposals(proposals: list[MemoryProposal], out) -> None:
    """Grouped by kind, each whole: what approving it changes, why, and where it came from."""
    for kind in KINDS:
        group = [p for p in proposals if p.kind == kind]
        if not group:
            continue
        print(f"{TITLES[kind]}:", file=out)
        for proposal in group:
            print(f"  #{proposal.id}  {shown_text(proposal.text)}", file=out)
            if proposal.quote:
                print(f"       the log's line: {shown_text(proposal.quote)}", file=out)
            print(f"       source: {shown_text(proposal.source)}", file=out)


def decide_each(client: Client, proposals: list[MemoryProposal], ask: Ask, out) -> None:
    """One question per proposal, in groups by kind: approve, reject, later, or all the rest of the kind."""
    for kind in KINDS:
        group = [p for p in proposals if p.kind == kind]
        if group:
            print(f"{TITLES[kind]}:", file=out)
        for position, proposal in enumerate(group):
            print(f"  #{proposal.id}  {shown_text(proposal.text)}", file=out)
            if proposal.quote:
                print(f"       the log's line: {shown_text(proposal.quote)}", file=out)
            print(f"       source: {shown_text(proposal.source)}", file=out)
            answer = _reply(ask, "       approve [a], reject [r], later [l], approve all left of this kind [A], reject all [R]? ").strip()
            rest = group[position:]
            if answer in ("A", "R"):
                ids = [p.id for p in rest]
                seen = [p.text for p in rest]
                print_decided(client.call(DecideMemoryProposals(id=client.next_id(), ids=ids, approve=answer == "A", seen=seen)), out)
                break
            if answer.lower().startswith(("a", "r")):
                decision = DecideMemoryProposals(
                    id=client.next_id(), ids=[proposal.id], approve=answer.lower().startswith("a"), seen=[proposal.text]
                )
                print_decided(client.call(decision), out)


def _reply(ask: Ask, prompt: str) -> str:
    try:
        return ask(prompt)
    except EOFError:
        return ""


def print_decided(done: MemoryProposalsDecided, out) -> None:
    numbers = ", ".join(f"#{n}" for n in done.decided)
    if done.gone:
        print(f"not done: {', '.join(f'#{n}' for n in done.gone)}: its lines changed since it was proposed", file=out)
    if not done.approve:
        print(f"rejected {numbers}: never proposed again", file=out)
        return
    if not done.change_id:
        return
    print(f"approved {numbers}: change {done.change_id} in {shown_text(done.path)}", file=out)
    for line in done.removed:
        print(f"  - {shown_text(_bare(line))}", file=out)
    for line in done.added:
        print(f"  + {shown_text(_bare(line))}", file=out)
    if done.history:
        print(f"  recorded in {shown_text(done.history)}", file=out)
    print(f"  undo: {done.undo}", file=out)


def print_undone(done: MemoryUndone, out) -> None:
    how = "byte for byte as it was" if done.exact else "line by line (the file changed since: your edits stay)"
    print(f"undid change {done.change_id}: {shown_text(done.path)} is back {how}", file=out)
    for line in done.restored:
        print(f"  + {shown_text(_bare(line))}", file=out)
    for line in done.removed:
        print(f"  - {shown_text(_bare(line))}", file=out)


def _bare(line: str) -> str:
    """A line of the file without its list marker (its stamp stays: who wrote it)."""
    return line[2:] if line.startswith(("- ", "* ", "+ ")) else line
