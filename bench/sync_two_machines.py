"""Two machines, one vault: the heavy trials the suite runs once (tests/sync/test_rig_syncthing.py),
on the same rig: two real tarsd, each with its own copy of a vault, kept in step by a real Syncthing
pair on 127.0.0.1 (tests/harness/syncthing.py), both with Telegram enabled against the fake Bot API.

    python bench/sync_two_machines.py kill [--trials 20]   # kill -9 during a sync: facts lost, lines doubled
    python bench/sync_two_machines.py telegram [--watch 60] # one polls, 409s over the watch, takeover time
    python bench/sync_two_machines.py remember              # 200 remembers on both, 20 at once: time to settle
    python bench/sync_two_machines.py all

kill: both machines remember without pause; once 20 remembers were answered, one machine's tarsd is
killed with SIGKILL (in every other pair of trials its Syncthing too: the machine dying), the mac
and the pi in turn; it is started again and the pair left to settle. Every answered fact must be in both Memory.md,
once. telegram: watches getUpdates for --watch seconds (no 409 may come), then stops the machine that
polls (SIGTERM) and times until the other polls, and again with SIGKILL (the heartbeat goes stale).
Needs Syncthing (apt-get install syncthing).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from common import log, print_table  # noqa: E402

from harness.daemon import wait_for  # noqa: E402
from harness.fake_telegram import FakeTelegram  # noqa: E402
from harness.syncthing import SyncthingPair, syncthing_binary  # noqa: E402
from harness.two_machines import (  # noqa: E402
    ME,
    TOKEN,
    Rig,
    copies_in,
    facts_in,
    kill_trial,
    machine,
    remember,
    remember_at_once,
    telegram_config,
    trial_facts,
)
from tarsd.sync.coordinator import TICK_SECONDS  # noqa: E402
from tarsd.vault.heartbeat import STALE_SECONDS  # noqa: E402


def _rig(root: Path, telegram: FakeTelegram, pair: SyncthingPair) -> Rig:
    config = telegram_config(telegram.url) + "\n[routines]\nenabled = false\n"
    mac = machine(root, "mac", root / "mac-vault", config)
    pi = machine(root, "pi", root / "pi-vault", config)
    mac.start()
    pi.start()
    return Rig(pair, mac, pi, telegram)


def _stop(rig: Rig) -> None:
    for daemon in rig.machines:
        daemon.stop()
        daemon.cleanup()


def kill(rig: Rig, trials: int) -> list[list[object]]:
    told: list[str] = []
    lost_total = doubled_total = 0
    started = time.monotonic()
    for trial in range(trials):
        victim = rig.pi if trial % 2 == 0 else rig.mac
        peer = rig.pair.peers[0 if victim is rig.mac else 1] if trial % 4 >= 2 else None
        told += kill_trial(rig, trial, victim, peer)
        found = [trial_facts(d.vault) for d in rig.machines]
        lost = len(set(told) - set(found[0])) + len(set(told) - set(found[1]))
        doubled = sum(len(f) - len(set(f)) for f in found)
        lost_total, doubled_total = lost_total + lost, doubled_total + doubled
        log(
            f"trial {trial + 1}: killed the {'mac' if victim is rig.mac else 'pi'}{' and its Syncthing' if peer else ''}; "
            f"{len(told)} facts answered so far, lost {lost}, doubled {doubled}"
        )
    seconds = time.monotonic() - started
    return [
        [
            f"kill -9 during a sync, {trials} trials ({len(told)} facts answered)",
            f"lost {lost_total}, doubled {doubled_total}",
            "0, 0",
            "yes" if lost_total == doubled_total == 0 else "no",
        ],
        ["... their time, with the settling", f"{seconds:.0f} s", "", ""],
    ]


def _roles(rig: Rig):
    said = {d: d.status().sync.telegram for d in rig.machines}
    polling = [d for d, why in said.items() if why.startswith("this machine polls")]
    return (polling[0], next(d for d in rig.machines if d is not polling[0])) if len(polling) == 1 else None


def telegram(rig: Rig, watch: float) -> list[list[object]]:
    poller, standby = wait_for(lambda: _roles(rig), "one machine to poll", 120)
    watched_from = time.time()
    time.sleep(watch)
    polls = rig.telegram.called("getUpdates", watched_from)
    conflicts = [c for c in polls if c.status == 409]
    rows = [
        [
            f"Telegram on both, watched {watch:.0f} s: getUpdates answered / 409",
            f"{len(polls)} / {len(conflicts)}",
            "409: 0",
            "yes" if polls and not conflicts else "no",
        ]
    ]
    for how in ("SIGTERM", "SIGKILL"):
        poller, standby = wait_for(lambda: _roles(rig), "one machine to poll", 120)
        stopped = time.time()
        if how == "SIGTERM":
            poller.stop()
        else:
            poller.process.kill()
            poller.process.wait()
        wait_for(lambda s=standby: s.status().sync.telegram.startswith("this machine polls"), "the other to take over", 180)
        took = time.time() - stopped
        asked = time.time()
        rig.telegram.text(ME, "/help")
        answered = rig.telegram.wait_texts(ME, 1, asked)
        target = 60 if how == "SIGTERM" else STALE_SECONDS + 2 * TICK_SECONDS  # killed: its heartbeat goes stale first
        rows.append(
            [
                f"... the poller stopped by {how}: the other polls after",
                f"{took:.1f} s",
                f"< {target:.0f} s",
                ("yes" if took < target else "no") + f"; /help answered: {bool(answered)}",
            ]
        )
        poller.start()
    return rows


def remember_200(rig: Rig) -> list[list[object]]:
    facts = []
    started = time.monotonic()
    for i in range(180):
        daemon = rig.mac if i % 2 == 0 else rig.pi
        facts.append(f"Bench fact {i:03d}")
        remember(daemon, facts[-1], f"Topic {i % 5}")
        if i == 90:
            burst = [(rig.mac if j % 2 == 0 else rig.pi, f"Bench burst {j:02d}", f"Topic {j % 5}") for j in range(20)]
            remember_at_once(burst)
            facts += [fact for _, fact, _ in burst]
    wrote = time.monotonic() - started
    rig.wait_settled()
    settled = time.monotonic() - started - wrote
    ok = all(
        sorted(f for f in facts_in(d.vault) if f.startswith("Bench")) == sorted(facts) and not copies_in(d.vault) for d in rig.machines
    )
    merged = sum(d.status().sync.merged for d in rig.machines)
    return [
        ["200 remembers, 20 at once: written in / settled after", f"{wrote:.1f} s / {settled:.1f} s", "", ""],
        [
            f"... both Memory.md equal, every fact once, no copy left ({merged} conflict copies merged)",
            str(ok),
            "True",
            "yes" if ok else "no",
        ],
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("kill", "telegram", "remember", "all"))
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--watch", type=float, default=60.0)
    args = parser.parse_args()
    if syncthing_binary() is None:
        sys.exit("Syncthing is not installed: apt-get install syncthing")
    root = Path(tempfile.mkdtemp(prefix="tars-two-machines-"))
    rows: list[list[object]] = []
    with FakeTelegram(TOKEN) as fake, SyncthingPair(root / "mac-vault", root / "pi-vault", root / "st") as pair:
        rig = _rig(root, fake, pair)
        try:
            if args.what in ("remember", "all"):
                rows += remember_200(rig)
            if args.what in ("kill", "all"):
                rows += kill(rig, args.trials)
            if args.what in ("telegram", "all"):
                rows += telegram(rig, args.watch)
        finally:
            _stop(rig)
    print_table(["two machines, one vault (real Syncthing)", "figure", "target", "met"], rows)


if __name__ == "__main__":
    main()
