"""Two machines, one vault, with a real sync tool: two real tarsd (a "mac" and a "pi"), each with its own
config, index, socket and copy of the vault, kept in step by a real Syncthing pair on 127.0.0.1
(tests/harness/syncthing.py), both with Telegram enabled against the fake Bot API, the pi running
routines and the mac not ([routines] enabled = false).

The tests share the rig and run in order (the last stops a tarsd). How a test waits for a sync to
settle: ``Rig.settled`` (tests/harness/two_machines.py): Syncthing rescans both folders and says both are idle and complete (twice
in a row, nothing moving), no conflict copy is left in either folder, and the memory files are equal
on both, all at one look. The heavy trials (20 kill -9 trials, Telegram watched for 60 s) are in
bench/sync_two_machines.py; the suite runs one trial of each kind here.
"""

from __future__ import annotations

import time

import pytest

from harness.daemon import TarsDaemon, wait_for
from harness.fake_llm import FakeOllama
from harness.fake_telegram import FakeTelegram
from harness.syncthing import SyncthingPair, addresses_in_json, addresses_in_xml, host_of, syncthing_binary
from harness.two_machines import (
    ME,
    TOKEN,
    Rig,
    copies_in,
    facts_in,
    kill_trial,
    log_lines,
    machine,
    remember,
    remember_at_once,
    telegram_config,
    trial_facts,
)
from tarsctl.client import RemoteError
from tarsctl.protocol import (
    DecideRule,
    Forget,
    Forgotten,
    Inbox,
    InboxReply,
    PendingRules,
    PendingRulesReply,
    Remember,
    Remembered,
    Routines,
    RoutinesReply,
    RuleDecided,
)

pytestmark = pytest.mark.skipif(
    syncthing_binary() is None,
    reason="Syncthing is not installed (Debian: apt-get install syncthing; .ci/run installs it): the two-machine rig needs it",
)


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    root = tmp_path_factory.mktemp("rig")
    with FakeOllama() as ollama, FakeTelegram(TOKEN) as telegram, SyncthingPair(root / "mac-vault", root / "pi-vault", root / "st") as pair:
        ollama.script = [{"text": "brief: all well"}] * 10_000
        env = {"TARS_CHAT_OLLAMA_HOST": ollama.url, "TARS_CHAT_OLLAMA_MODEL": "fake-chat", "TARS_CHAT_MAX_RETRIES": "0"}
        routines = '\n[routines]\ntimezone = "UTC"\nnote = "Daily/{date}.md"\nmin_interval_seconds = 1\n'
        mac = machine(root, "mac", root / "mac-vault", telegram_config(telegram.url) + routines + "enabled = false\n", env)
        pi = machine(root, "pi", root / "pi-vault", telegram_config(telegram.url) + routines, env)
        try:
            mac.start()
            pi.start()
            yield Rig(pair, mac, pi, telegram)
        finally:
            for daemon in (mac, pi):
                daemon.stop()
                daemon.cleanup()


def test_the_rig_talks_to_127_0_0_1_and_nothing_else(rig: Rig):
    """Both Syncthing configs (the files, and what each runs with): every address on 127.0.0.1;
    discovery, relays, NAT traversal, usage and crash reporting off."""
    for peer in rig.pair.peers:
        text = peer.config_file.read_text(encoding="utf-8")
        found = addresses_in_xml(text) + addresses_in_json(peer.get("/rest/config"))
        assert found and {host_of(address) for address in found} == {"127.0.0.1"}, found
        options = peer.get("/rest/config")["options"]
        assert not options["globalAnnounceEnabled"] and not options["localAnnounceEnabled"]
        assert not options["relaysEnabled"] and not options["natEnabled"] and not options["crashReportingEnabled"]
        assert options["urAccepted"] == -1
        for device in peer.get("/rest/config")["devices"]:
            assert [host_of(address) for address in device["addresses"]] == ["127.0.0.1"]


def test_200_remembers_on_both_machines_end_in_both_files_once(rig: Rig):
    """200 remember calls alternating between the machines, 20 of them at once (10 on each) while the
    sync runs: once settled, both Memory.md are equal and hold every fact once, no conflict copy is
    left, and the merges are reported (status, inbox, log)."""
    facts: list[str] = []
    for i in range(90):
        daemon = rig.mac if i % 2 == 0 else rig.pi
        fact = f"Fact {i:03d} from the {'mac' if daemon is rig.mac else 'pi'}: item {i:03d}"
        remember(daemon, fact, f"Topic {i % 5}")
        facts.append(fact)
    burst = [(rig.mac if i % 2 == 0 else rig.pi, f"Burst fact {i:02d} said at once", f"Topic {i % 5}") for i in range(20)]
    remember_at_once(burst)
    facts += [fact for _, fact, _ in burst]
    for i in range(90, 180):
        daemon = rig.mac if i % 2 == 0 else rig.pi
        fact = f"Fact {i:03d} from the {'mac' if daemon is rig.mac else 'pi'}: item {i:03d}"
        remember(daemon, fact, f"Topic {i % 5}")
        facts.append(fact)
    assert len(facts) == 200
    rig.wait_settled()
    ids = {daemon.status().sync.machine for daemon in rig.machines}
    for daemon in rig.machines:
        found = facts_in(daemon.vault)
        assert sorted(found) == sorted(facts), sorted(set(found) ^ set(facts))
        assert not copies_in(daemon.vault)
        # Syncthing carried each machine's .tars/ files to the other (heartbeat and journal), and tars indexed none.
        assert {p.stem for p in (daemon.vault / ".tars/machines").glob("*.json")} == ids
        assert {p.stem for p in (daemon.vault / ".tars/journal").glob("*.jsonl")} == ids
        assert daemon.search("machine", mode="fts") == []
    merged = [daemon for daemon in rig.machines if daemon.status().sync.merged]
    assert merged, "no conflict copy was made: the burst did not race"
    merger = merged[0]
    report = merger.status().sync.merges[0]
    assert report.file == "Memory.md" and report.kept_at.startswith(".tars/merged/")
    assert (merger.vault / report.kept_at).exists()  # the copy's content, recoverable
    with merger.client() as client:
        inbox = client.call(Inbox(id=1, limit=100))
    assert isinstance(inbox, InboxReply) and any(m.source == "sync:merge" and "Memory.md" in m.text for m in inbox.messages)
    assert log_lines(merger, r"merged Syncthing's conflict copy Memory\.sync-conflict-.* into Memory\.md")
    shown = merger.tarsctl("status")
    assert "conflict cop" in shown.stdout and "merged since start" in shown.stdout


def _pause_and(rig: Rig, on_mac, on_pi) -> None:
    """Make a change on each machine while they cannot exchange, then let them meet."""
    rig.pair.pause()
    try:
        on_mac()
        on_pi()
    finally:
        rig.pair.resume()


@pytest.mark.parametrize("later", ["forget", "edit"])
def test_forget_racing_an_edit_of_the_same_line(rig: Rig, later: str):
    """tars forgets a line on the mac while the user edits the same line by hand on the pi: the later
    of the two wins (docs/two-machines.md). Forget later: the line is gone on both. Edit later: the
    edited line stays on both, listed in the merge report."""
    line = f"Locker code {later}: 4412"
    remember(rig.mac, line, "Gym")
    rig.wait_settled()
    memory_pi = rig.pi.vault / "Memory.md"

    def forget() -> None:
        result = rig.mac.tarsctl("forget", line, "--yes")
        assert result.returncode == 0, result.stderr

    def edit() -> None:
        text = memory_pi.read_text(encoding="utf-8")
        old = next(raw for raw in text.splitlines() if line in raw)
        memory_pi.write_text(text.replace(old, f"- {line} (top row)"), encoding="utf-8")  # the user's edit drops the stamp

    first, second = (edit, forget) if later == "forget" else (forget, edit)

    def in_order() -> None:
        first()
        time.sleep(1.1)  # the second change is later by the clocks (the versions' mtimes, the journal)
        second()

    _pause_and(rig, lambda: None, in_order)
    rig.wait_settled()
    for daemon in rig.machines:
        found = [fact for fact in facts_in(daemon.vault) if line in fact]
        assert found == ([] if later == "forget" else [f"{line} (top row)"]), found
    if later == "edit":
        reports = [m for daemon in rig.machines for m in daemon.status().sync.merges if any(line in kept for kept in m.kept)]
        assert reports and "edited after tars removed it" in " ".join(reports[0].kept)


def test_a_users_note_in_conflict_is_listed_with_both_paths_never_merged(rig: Rig):
    note = "Trip.md"
    (rig.mac.vault / note).write_text("# Trip\nFly on Monday.\n", encoding="utf-8")
    rig.wait_settled(note)
    _pause_and(
        rig,
        lambda: (rig.mac.vault / note).write_text("# Trip\nFly on Tuesday.\n", encoding="utf-8"),
        lambda: (rig.pi.vault / note).write_text("# Trip\nFly on Wednesday.\n", encoding="utf-8"),
    )
    rig.pair.wait_settled()

    def listed(daemon: TarsDaemon):
        conflicts = [c for c in daemon.status().sync.conflicts if c.original == note]
        return conflicts if conflicts and all(c.state == "yours" for c in conflicts) else None

    for daemon in rig.machines:
        [conflict] = wait_for(lambda d=daemon: listed(d), "the note's conflict copy listed in status")
        assert (daemon.vault / conflict.path).exists() and conflict.tool == "Syncthing"
        assert any(note in w and conflict.path in w for w in daemon.status().warnings)
        doctor = daemon.tarsctl("doctor")
        assert conflict.path in doctor.stdout and note in doctor.stdout
    texts = {(daemon.vault / note).read_text(encoding="utf-8") for daemon in rig.machines}
    assert len(texts) == 1 and texts.pop().count("Fly on") == 1  # tars wrote nothing into it
    for daemon in rig.machines:  # the user resolves it: the copy goes
        for copy in copies_in(daemon.vault):
            (daemon.vault / copy).unlink(missing_ok=True)
    rig.wait_settled(note)


def _call(daemon: TarsDaemon, request, expected: type):
    with daemon.client() as client:
        reply = client.call(request)
    assert isinstance(reply, expected), reply
    return reply


def _pending(daemon: TarsDaemon) -> list:
    return _call(daemon, PendingRules(id=1), PendingRulesReply).rules


def test_a_proposal_approved_on_one_machine_is_applied_once_and_closed_on_the_other(rig: Rig):
    """An AI tool asked both machines' tars to change a line of the user's (a proposal each). The user
    approves on the mac; the pi sees the line changed in its copy of the vault and closes its own
    proposal, never applying it again. The same for a removal approved on the pi."""
    memory_mac = rig.mac.vault / "Memory.md"
    before = memory_mac.read_text(encoding="utf-8") if memory_mac.exists() else ""
    memory_mac.write_text(before + "\n# Me\n- Name: Sam\n- Works at the bakery\n", encoding="utf-8")  # the user's own lines
    rig.wait_settled()
    for daemon in rig.machines:
        asked = Remember(id=1, fact="Name: Samuel", mode="replace", replace_line="Name: Sam", by_model=True)
        assert _call(daemon, asked, Remembered).status == "pending"
        assert _call(daemon, Forget(id=1, confirm_line="Works at the bakery", by_model=True), Forgotten).pending_id
    [on_mac] = [p for p in _pending(rig.mac) if p.action == "replace"]
    assert _call(rig.mac, DecideRule(id=1, rule_id=on_mac.id, approve=True), RuleDecided).status == "replaced"
    wait_for(lambda: not [p for p in _pending(rig.pi) if p.action == "replace"], "the pi to close its copy of the proposal", 120)
    [on_pi] = [p for p in _pending(rig.pi) if p.action == "remove"]
    assert _call(rig.pi, DecideRule(id=1, rule_id=on_pi.id, approve=True), RuleDecided).status == "removed"
    wait_for(lambda: not [p for p in _pending(rig.mac) if p.action == "remove"], "the mac to close its copy of the removal", 120)
    rig.wait_settled()
    for daemon in rig.machines:
        found = facts_in(daemon.vault)
        assert found.count("Name: Samuel") == 1 and "Name: Sam" not in found and "Works at the bakery" not in found
        assert not _pending(daemon)
    assert any("Name: Samuel" in closed for closed in rig.pi.status().sync.closed_proposals)
    assert any("Works at the bakery" in closed for closed in rig.mac.status().sync.closed_proposals)
    with pytest.raises(RemoteError, match="no proposal"):  # the closed copy cannot be approved a second time
        _call(rig.mac, DecideRule(id=1, rule_id=on_mac.id + 1, approve=True), RuleDecided)


def test_kill_9_of_a_machine_during_a_sync_loses_no_fact_and_doubles_none(rig: Rig):
    """One trial each way here (tarsd alone on the pi; tarsd and its Syncthing on the mac: the machine
    dying); the 20 trials are bench/sync_two_machines.py's."""
    told = kill_trial(rig, 0, rig.pi)
    told += kill_trial(rig, 1, rig.mac, rig.pair.peers[0])
    for daemon in rig.machines:
        found = trial_facts(daemon.vault)
        assert set(told) <= set(found), set(told) - set(found)
        assert len(found) == len(set(found)), "a line is doubled"


def _runs(daemon: TarsDaemon, name: str) -> list:
    reply = _call(daemon, Routines(id=1, name=name, runs=50), RoutinesReply)
    return [run for routine in reply.routines for run in routine.runs if run.outcome == "spoke"]


def test_a_routine_on_both_machines_fires_once_per_occurrence_and_a_reminder_once(rig: Rig):
    """The same routine in both machines' routines files; the mac runs none ([routines] enabled =
    false): each occurrence runs once, on the pi, and its note in the synced vault has one entry per
    run. A reminder set on the pi is sent once, by the pi: the mac never had it."""
    for daemon in rig.machines:
        added = daemon.tarsctl("routines", "add", "brief", "--schedule", "every 3s", "--prompt", "Say: brief", "--deliver", "note")
        assert added.returncode == 0, added.stderr
    wait_for(lambda: len(_runs(rig.pi, "brief")) >= 2, "the pi to run the routine twice", 60)
    assert rig.pi.tarsctl("routines", "pause", "brief").returncode == 0
    ran = _runs(rig.pi, "brief")
    assert _runs(rig.mac, "brief") == []
    note = f"Daily/{time.strftime('%Y-%m-%d', time.gmtime(ran[0].scheduled_at))}.md"
    rig.wait_settled(note)
    for daemon in rig.machines:
        assert (daemon.vault / note).read_text(encoding="utf-8").count("brief: all well") == len(ran)
        assert not any("fires twice" in w for w in daemon.status().warnings)  # the mac runs no routines: nothing to warn of
    rig.telegram.text(ME, "/start")  # Telegram lets a bot write only to a user who wrote first
    rig.telegram.wait_texts(ME, 1)
    sent_from = time.time()
    reminded = rig.pi.tarsctl("remind", "in", "2", "s", "Tea from the pi", "--to", "telegram")
    assert reminded.returncode == 0, reminded.stderr
    rig.telegram.wait_texts(ME, 1, sent_from)
    time.sleep(3)  # long enough for a second sending to show
    assert len([text for text in rig.telegram.texts(ME, sent_from) if "Tea from the pi" in text]) == 1
    assert not any("Tea from the pi" in m.text for m in _call(rig.mac, Inbox(id=1, limit=100), InboxReply).messages)


def _telegram_roles(rig: Rig) -> tuple[TarsDaemon, TarsDaemon] | None:
    said = {daemon: daemon.status().sync.telegram for daemon in rig.machines}
    polling = [daemon for daemon, why in said.items() if why.startswith("this machine polls")]
    waiting = [daemon for daemon, why in said.items() if "stands by" in why and not why.startswith("this machine polls")]
    return (polling[0], waiting[0]) if len(polling) == 1 and len(waiting) == 1 else None


WATCH_SECONDS = 10  # bench/sync_two_machines.py watches 60 s


def test_telegram_on_both_one_polls_without_409_and_the_other_takes_over(rig: Rig):
    poller, standby = wait_for(lambda: _telegram_roles(rig), "one machine to poll Telegram and the other to stand by", 120)
    watched_from = time.time()
    time.sleep(WATCH_SECONDS)
    conflicts = [c for c in rig.telegram.called("getUpdates", watched_from) if c.status == 409]
    assert conflicts == [] and rig.telegram.called("getUpdates", watched_from)  # polled, and never refused
    assert _telegram_roles(rig) == (poller, standby)
    stopped_at = time.time()
    poller.stop()
    wait_for(lambda: standby.status().sync.telegram.startswith("this machine polls"), "the other machine to take over", 60)
    took = time.time() - stopped_at
    asked = time.time()
    rig.telegram.text(ME, "/help")
    [answer] = rig.telegram.wait_texts(ME, 1, asked)
    assert answer.startswith("Commands:")
    poller.start()  # back: the one polling now keeps it
    wait_for(lambda: _telegram_roles(rig) == (standby, poller), "the restarted machine to stand by", 60)
    assert took < 60
