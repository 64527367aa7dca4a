"""Issue 36, observation 12: a decision on a proposal either happened or did not. An approve and a
reject sent at once both succeeded (1 trial in 5), and tarsd killed during an approval left the
rule both in Procedural.md and pending (rejecting it then said "rejected" and left it active).

Real parts: the assistant on a real index database and vault, many threads at once; and a real
tarsd killed with SIGKILL while approvals run, then started again."""

from __future__ import annotations

import contextlib
import random
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.vault_files import write
from tarsctl.client import Client, RemoteError
from tarsctl.protocol import DecideRule, Error, PendingRules, Remember
from tarsd.chat.assistant import Assistant
from tarsd.memory.pending_rules import AlreadyDecided

TRIALS = 20


@pytest.fixture
def assistant(make_engine):
    engine = make_engine(kind="none")
    engine.indexer.sync()
    made = Assistant(engine.config, engine, reindex=lambda rel: None)
    yield made
    made.close()


def test_an_approve_and_a_reject_at_once_one_wins_the_other_is_told(assistant, vault):
    for trial in range(TRIALS):
        rule = f"Rule number {trial} of the race"
        result = assistant.memory.remember(rule, "procedural", by_model=True)
        outcomes: dict[bool, str] = {}
        start = threading.Barrier(2)

        def decide(approve: bool, pending_id: int = result.pending_id, start=start, outcomes=outcomes) -> None:
            start.wait()
            try:
                assistant.decide_rule(pending_id, approve)
                outcomes[approve] = "decided"
            except AlreadyDecided:
                outcomes[approve] = "already decided"

        threads = [threading.Thread(target=decide, args=(approve,)) for approve in (True, False)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes.values()) == ["already decided", "decided"], (trial, outcomes)
        active = rule in (vault / "Procedural.md").read_text(encoding="utf-8") if (vault / "Procedural.md").exists() else False
        assert active == (outcomes[True] == "decided"), (trial, outcomes)
        assert all(p.rule != rule for p in assistant.pending_rules())


def test_a_proposal_whose_line_is_gone_waits_again_when_approved(assistant, vault):
    write(vault, "Memory.md", "# Core\n- My locker number is 12\n")
    proposed = assistant.memory.remember("My locker number is 14", mode="replace", replace_line="My locker number is 12", by_model=True)
    assert proposed.status == "pending" and (vault / "Memory.md").read_text() == "# Core\n- My locker number is 12\n"
    write(vault, "Memory.md", "# Core\n- Name: Sam\n")  # the user edited the line away meanwhile
    with pytest.raises(ValueError, match="is no longer in Memory.md"):
        assistant.decide_rule(proposed.pending_id, approve=True)
    assert [p.id for p in assistant.pending_rules()] == [proposed.pending_id]  # still the user's to reject
    assistant.decide_rule(proposed.pending_id, approve=False)
    assert assistant.pending_rules() == [] and (vault / "Memory.md").read_text() == "# Core\n- Name: Sam\n"


def test_a_replace_whose_line_is_gone_is_not_reported_done_because_its_new_text_is_elsewhere(assistant, vault):
    """The line a replace named was edited away; its new text happened to be another line of the
    file. Approving said "replaced" and dropped the proposal, though nothing was replaced."""
    write(vault, "Memory.md", "# Core\n- Name: Sam\n- Lives in Paris\n")
    proposed = assistant.memory.remember("Lives in Paris", mode="replace", replace_line="Name: Sam", by_model=True)
    assert proposed.status == "pending"
    write(vault, "Memory.md", "# Core\n- Name: Samuel\n- Lives in Paris\n")  # the user's hand edit
    with pytest.raises(ValueError, match="is no longer in Memory.md"):
        assistant.decide_rule(proposed.pending_id, approve=True)
    assert [p.id for p in assistant.pending_rules()] == [proposed.pending_id]
    assert (vault / "Memory.md").read_text() == "# Core\n- Name: Samuel\n- Lives in Paris\n"


@pytest.mark.parametrize("action", ["remove", "replace"])
def test_an_approval_finished_at_start_never_changes_a_second_copy_of_the_line(assistant, vault, action):
    """tarsd killed after an approved remove or replace was written, before its row went: the next
    start applied it again, and a second line reading the same (the user's, under another heading)
    was removed or replaced too."""
    write(vault, "Memory.md", "# Core\n- Likes tea\n\n# Work\n- Likes tea\n")
    if action == "remove":
        pending_id = assistant.memory.forget("", confirm_line="Likes tea", by_model=True).pending_id
        after = "# Core\n\n# Work\n- Likes tea\n"
    else:
        pending_id = assistant.memory.remember("Likes coffee", mode="replace", replace_line="Likes tea", by_model=True).pending_id
        after = "# Core\n- Likes coffee <!-- tars:DATE -->\n\n# Work\n- Likes tea\n"
    # What an approval does (tarsd/chat/assistant.py decide_rule): claim it, write the change...
    proposal = assistant.memory.pending.claim(pending_id, approve=True)
    assistant.memory.apply_proposal(proposal)
    # ...and tarsd is killed before the row goes: the next start finishes what it finds.
    assistant.finish_decisions()
    shown = re.sub(r"<!-- tars:[^>]* -->", "<!-- tars:DATE -->", (vault / "Memory.md").read_text())
    assert shown == after
    assert assistant.pending_rules() == [] and assistant.memory.pending.unfinished() == []


def test_a_flood_of_proposals_stops_at_a_hundred_waiting_and_says_so(assistant, vault):
    """A model or an AI tool could propose without end (a rule each, a change to every line): the
    user, who decides each one by one, would find their own proposals buried under thousands."""
    write(vault, "Memory.md", "# Core\n- Name: Sam\n")
    waiting = [assistant.memory.remember(f"Rule {n} of the flood", "procedural", by_model=True) for n in range(100)]
    assert {r.status for r in waiting} == {"pending"} and len({r.pending_id for r in waiting}) == 100
    for refused in (
        lambda: assistant.memory.remember("One rule too many", "procedural", by_model=True),
        lambda: assistant.memory.remember("Name: Bob", mode="replace", replace_line="Name: Sam", by_model=True),
        lambda: assistant.memory.forget("", confirm_line="Name: Sam", by_model=True),
    ):
        with pytest.raises(ValueError, match="100 proposals wait for the user"):
            refused()
    # The same proposal again is the one waiting, not a new one; a decision makes room.
    assert assistant.memory.remember("Rule 7 of the flood", "procedural", by_model=True).pending_id == waiting[7].pending_id
    assistant.decide_rule(waiting[0].pending_id, approve=False)
    assert assistant.memory.remember("One rule too many", "procedural", by_model=True).status == "pending"
    assert len(assistant.pending_rules()) == 100 and (vault / "Memory.md").read_text() == "# Core\n- Name: Sam\n"


@contextlib.contextmanager
def full_disk(folder: Path) -> Iterator[None]:
    """``folder`` on a small tmpfs of its own, filled up while the body runs (it needs root)."""
    folder.mkdir(exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> Path:
    filler = folder / "filler"
    with contextlib.suppress(OSError), open(filler, "wb") as out:
        while True:
            out.write(b"x" * 65536)
            out.flush()
    return filler


def test_a_full_disk_under_the_index_is_said_so_and_the_proposal_waits(start_daemon, vault, tmp_path):
    """The index database's disk full: proposing and deciding answered "internal: FullError: database
    or disk is full", see the log (a traceback there), instead of what is wrong and what to do."""
    write(vault, "Memory.md", "# Core\n- Name: Sam\n")
    state = tmp_path / "state"
    with full_disk(state):
        daemon = start_daemon()
        with Client(daemon.socket, timeout=30) as client:
            proposed = client.call(Remember(id=client.next_id(), fact="Answer in French", kind="procedural", by_model=True))
        filler = fill(state)
        with Client(daemon.socket, timeout=30) as client:
            for request in (
                Remember(id=client.next_id(), fact="Use metric units", kind="procedural", by_model=True),
                DecideRule(id=client.next_id(), rule_id=proposed.pending_id, approve=True),
                DecideRule(id=client.next_id(), rule_id=proposed.pending_id, approve=False),
            ):
                with pytest.raises(RemoteError) as refused:
                    client.call(request)
                assert refused.value.error.code == "io_error", refused.value.error
                assert "is full" in refused.value.error.message and "free some space" in refused.value.error.message
        assert not (vault / "Procedural.md").exists()
        filler.unlink()
        with Client(daemon.socket, timeout=30) as client:
            assert [p.id for p in client.call(PendingRules(id=client.next_id())).rules] == [proposed.pending_id]
        daemon.stop()
        assert "Traceback" not in daemon.log.read_text(encoding="utf-8", errors="replace")


def test_kill_9_during_approvals_never_leaves_a_rule_both_active_and_pending(start_daemon, vault):
    daemon = start_daemon()
    rng = random.Random(36)
    for trial in range(TRIALS):
        rule = f"Rule {trial}: answer in {rng.choice(['French', 'Irish', 'Dutch'])} on day {trial}"
        with Client(daemon.socket, timeout=30) as client:
            proposed = client.call(Remember(id=client.next_id(), fact=rule, kind="procedural", by_model=True))
            approve = rng.random() < 0.75
            client.send(DecideRule(id=client.next_id(), rule_id=proposed.pending_id, approve=approve, rule=rule))
            time.sleep(rng.uniform(0.0, 0.03))  # somewhere in the decision: before it, in the write, after it
            daemon.kill()
        daemon.start(scanned=False)
        procedural = vault / "Procedural.md"
        active = procedural.exists() and rule in procedural.read_text(encoding="utf-8")
        with Client(daemon.socket, timeout=30) as client:
            waiting = client.call(PendingRules(id=client.next_id()))
        pending = any(p.rule == rule for p in waiting.rules)
        # Either the decision happened (approved: active; rejected: gone) or it did not (pending), never both.
        assert not (active and pending), f"trial {trial}: active and pending"
        assert active or pending if approve else not active, f"trial {trial} ({approve=}): active={active}, pending={pending}"
        if pending:  # a reject now really rejects it; an approve now really approves it
            with Client(daemon.socket, timeout=30) as client:
                decided = client.call(DecideRule(id=client.next_id(), rule_id=proposed.pending_id, approve=False, rule=rule))
            assert not isinstance(decided, Error) and not (procedural.exists() and rule in procedural.read_text(encoding="utf-8"))


def test_a_commit_by_another_connection_between_a_proposals_read_and_write_never_fails_it(assistant):
    """CI saw a proposal right after a start fail at once with "the index is locked": its transaction
    read first, the start-up scan committed, and SQLite refused the write (SQLITE_BUSY_SNAPSHOT)
    without waiting. Here another connection commits exactly there, every time: the proposal and
    the decision take the write lock first, so they cannot be refused so."""
    import apsw

    pending = assistant.memory.pending
    other = assistant.engine.store.writer_connection()
    other.set_busy_timeout(50)
    commits = []

    def commit_elsewhere(_cursor, sql: str, _bindings) -> bool:
        if sql.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
            try:  # what the indexer does at any moment: a write of its own, committed
                other.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('race', ?)", (str(len(commits)),))
                commits.append("committed")
            except apsw.BusyError:
                commits.append("waited")  # our transaction holds the write lock: the other writer waits its turn
        return True

    pending.conn.exec_trace = commit_elsewhere
    try:
        proposed, _ = pending.propose("Answer in Irish")
        pending.claim(proposed.id, approve=False)
    finally:
        pending.conn.exec_trace = None
    assert commits and set(commits) == {"waited"}, commits
    assert pending.list() == []
