"""Two machines, one vault, with a plain newest-wins copy for a sync tool (tests/harness/copy_sync.py):
it makes no conflict copies, it keeps whichever version of a file is newer, so the older side's
changes are dropped whole. tars loses no fact anyway: a line dropped within seconds of its write is
put back by the write guard (a stale save, to it), and one dropped later (a machine that was offline
a while) by the machine that never had it, from tars's journal in .tars/journal/ (docs/two-machines.md)."""

from __future__ import annotations

import time

import pytest

from harness.copy_sync import NewestWinsCopy
from harness.daemon import TarsDaemon, wait_for
from harness.two_machines import facts_in, machine, remember, remember_at_once
from tarsd.memory.guard import WINDOW_SECONDS


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    root = tmp_path_factory.mktemp("copy")
    mac, pi = machine(root, "mac", root / "mac-vault"), machine(root, "pi", root / "pi-vault")
    with NewestWinsCopy(mac.vault, pi.vault) as copy:
        try:
            mac.start()
            pi.start()
            yield copy, mac, pi
        finally:
            for daemon in (mac, pi):
                daemon.stop()
                daemon.cleanup()


def _all_there(copy: NewestWinsCopy, daemons: tuple[TarsDaemon, ...], facts: list[str]) -> bool:
    return copy.quiet_rounds >= 2 and copy.equal() and all(sorted(facts_in(d.vault)) == sorted(facts) for d in daemons)


def test_200_remembers_through_a_newest_wins_copy_and_an_offline_spell_lose_nothing(rig):
    copy, mac, pi = rig
    facts: list[str] = []
    for i in range(90):
        daemon = mac if i % 2 == 0 else pi
        facts.append(f"Copied fact {i:03d} on the {'mac' if daemon is mac else 'pi'}")
        remember(daemon, facts[-1], f"Topic {i % 5}")
    burst = [(mac if i % 2 == 0 else pi, f"Copied burst fact {i:02d}", f"Topic {i % 5}") for i in range(20)]
    remember_at_once(burst)
    facts += [fact for _, fact, _ in burst]
    for i in range(90, 180):
        daemon = mac if i % 2 == 0 else pi
        facts.append(f"Copied fact {i:03d} on the {'mac' if daemon is mac else 'pi'}")
        remember(daemon, facts[-1], f"Topic {i % 5}")
    wait_for(lambda: _all_there(copy, (mac, pi), facts), "both Memory.md to hold all 200 facts, once", 180)
    # Offline: the copy stops; the mac remembers, then the pi, more than the guard's window later. When
    # the copy runs again the pi's newer Memory.md replaces the mac's whole (the mac's guard takes that
    # for the user's deletion: too late for a race), and the pi, which never had the mac's lines, puts
    # them back from the journal.
    copy.pause()
    offline = [f"Offline fact {i} on the {name}" for name in ("mac", "pi") for i in range(3)]
    for fact in offline[:3]:
        remember(mac, fact, "Offline")
    time.sleep(WINDOW_SECONDS + 1)
    for fact in offline[3:]:
        remember(pi, fact, "Offline")
    copy.resume()
    facts += offline
    wait_for(lambda: _all_there(copy, (mac, pi), facts), "the facts the copy dropped to be put back", 180)
    put_back = mac.status().sync.put_back + pi.status().sync.put_back
    assert put_back >= 3, "the copy dropped the older side's offline facts and tars put them back"
    for daemon in (mac, pi):
        found = facts_in(daemon.vault)
        assert len(found) == len(set(found)) == 206
