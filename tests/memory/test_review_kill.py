"""Issue 45: tarsd killed with SIGKILL during an approval of memory-review proposals leaves Memory.md
and the proposals consistent, in 20 trials: after the next start (which finishes or rolls back what
the kill interrupted) each proposal is either applied (its lines out of the file, the change undoable
back to the file as it was, byte for byte) or still waiting (the file as it was), never both or
neither. A real tarsd, killed somewhere in the decision: before it, in the journal, in the write,
after it."""

from __future__ import annotations

import os
import random
import time

from harness.daemon import TarsDaemon
from tarsctl.client import Client
from tarsctl.protocol import DecideMemoryProposals, MemoryProposals, MemoryReview, MemoryUndo
from tarsd.memory.guard import WINDOW_SECONDS

TRIALS = 20


def save(daemon: TarsDaemon, text: str) -> bytes:
    """The user's own save (dated past the write guard's window: not taken for a stale copy)."""
    path = daemon.vault / "Memory.md"
    temp = path.with_name(".Memory.md.editor")
    temp.write_text(text, encoding="utf-8")
    later = time.time() + WINDOW_SECONDS + 5
    os.utime(temp, (later, later))
    os.replace(temp, path)
    return path.read_bytes()


def test_kill_9_during_an_approval_leaves_the_file_and_the_proposals_consistent(start_daemon, vault):
    daemon = start_daemon()
    rng = random.Random(45)
    outcomes = {"applied": 0, "waiting": 0}
    for trial in range(TRIALS):
        pet, town = rng.choice(["Perry", "Luna", "Rex", "Mango"]), rng.choice(["Cork", "Sligo", "Derry"])
        before = save(
            daemon,
            f"# Core\n- Name: Sam {trial}\n- Has a dog called {pet}{trial}\n- has a dog called {pet}{trial}.\n"
            f"- Sister Ann{trial} lives in {town}\n- Ann{trial} (sister) is based in {town}\n- Keeps bees\n"
            + "".join(f"- Plays board game number {n} on Fridays\n" for n in range(14)),  # 20 lines: two removals fit the cap
        )
        with Client(daemon.socket, timeout=60) as client:
            proposals = client.call(MemoryReview(id=client.next_id(), sessions=False)).new
            assert len(proposals) == 2, (trial, [p.text for p in proposals])
            ids = [p.id for p in proposals]
            client.send(DecideMemoryProposals(id=client.next_id(), ids=ids, approve=True, seen=[p.text for p in proposals]))
            time.sleep(rng.uniform(0.0, 0.04))  # somewhere in the decision
            daemon.kill()
        daemon.start(scanned=False)
        now = (vault / "Memory.md").read_bytes()
        with Client(daemon.socket, timeout=60) as client:
            waiting = {p.id for p in client.call(MemoryProposals(id=client.next_id())).proposals}
            if now == before:
                # Not applied: both wait, as they were.
                assert waiting >= set(ids), f"trial {trial}: the file as it was, yet {set(ids) - waiting} not waiting"
                outcomes["waiting"] += 1
                client.call(DecideMemoryProposals(id=client.next_id(), ids=ids, approve=False))
                continue
            # Applied: both lines out, neither proposal waiting, and the undo puts the file back as it was.
            assert not waiting & set(ids), f"trial {trial}: applied, yet {waiting & set(ids)} still waiting"
            text = now.decode()
            assert f"has a dog called {pet}{trial}." not in text and f"is based in {town}" not in text, (trial, text)
            assert f"Has a dog called {pet}{trial}" in text and f"Sister Ann{trial} lives in {town}" in text, (trial, text)
            undone = client.call(MemoryUndo(id=client.next_id()))
            assert undone.exact and (vault / "Memory.md").read_bytes() == before, f"trial {trial}: the undo did not put it back"
            outcomes["applied"] += 1
    assert sum(outcomes.values()) == TRIALS
    print(f"kill -9 during approvals: {outcomes}")
