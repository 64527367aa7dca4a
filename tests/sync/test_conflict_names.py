"""Conflict copies by each sync tool's naming, the sync tools by their markers (tarsd/vault/conflicts.py),
heartbeats and who polls Telegram (tarsd/vault/heartbeat.py, tarsd/sync/lease.py): on real temp folders."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.vault_files import write
from tarsd.sync.lease import who_polls
from tarsd.vault.conflicts import DROPBOX, ICLOUD, OBSIDIAN_SYNC, SYNCTHING, conflict_copy, find_conflict_copies, sync_tools
from tarsd.vault.heartbeat import TELEGRAM_POLLING, TELEGRAM_STANDBY, Beat, Liveness, read_beats, write_beat


@pytest.mark.parametrize(
    ("name", "original", "tool", "device"),
    [
        ("Memory.sync-conflict-20261127-101500-ABCDEFG.md", "Memory.md", SYNCTHING, "ABCDEFG"),
        ("Daily/2026-11-27.sync-conflict-20261127-101500-Q2W3E4R.md", "Daily/2026-11-27.md", SYNCTHING, "Q2W3E4R"),
        ("Memory.sync-conflict-20261127-101500.md", "Memory.md", SYNCTHING, ""),  # before device ids
        ("Memory (conflicted copy).md", "Memory.md", DROPBOX, ""),
        ("Memory (Sam's conflicted copy 2026-11-27).md", "Memory.md", DROPBOX, "Sam"),
        ("Memory (Case Conflict).md", "Memory.md", DROPBOX, ""),
        ("notes/Plan (Case Conflict 1).md", "notes/Plan.md", DROPBOX, ""),
        ("Memory (Conflicted copy MacBook 202611271015).md", "Memory.md", OBSIDIAN_SYNC, "MacBook"),
    ],
)
def test_each_tools_naming_leads_back_to_its_file(name, original, tool, device):
    found = conflict_copy(name)
    assert found is not None and (found.original, found.tool, found.device) == (original, tool, device)


def test_ordinary_names_are_not_conflict_copies():
    for name in ("Memory.md", "Chapter 2.md", "conflicted copy.md", "Memory (draft).md", "sync-conflict notes.md"):
        assert conflict_copy(name) is None, name


def test_icloud_copies_count_only_beside_their_file_in_an_icloud_vault(tmp_path: Path):
    vault = tmp_path / "Library" / "Mobile Documents" / "iCloud~md~obsidian" / "Documents" / "Notes"
    write(vault, "Memory.md", "- a\n")
    write(vault, "Memory 2.md", "- b\n")
    write(vault, "Chapter 2.md", "text\n")  # no "Chapter.md": a note
    tools = sync_tools(vault, home=tmp_path)
    assert [tool.name for tool in tools] == [ICLOUD]
    found = find_conflict_copies(vault, icloud=True)
    assert [(c.path, c.original, c.tool) for c in found] == [("Memory 2.md", "Memory.md", ICLOUD)]
    assert find_conflict_copies(vault, icloud=False) == []


def test_sync_tools_by_their_markers(tmp_path: Path):
    home = tmp_path / "home"
    root = home / "Sync"
    vault = root / "Notes"
    vault.mkdir(parents=True)
    assert sync_tools(vault, home) == []
    (root / ".stfolder").mkdir()  # Syncthing's folder holds the vault
    (vault / ".obsidian").mkdir()
    (vault / ".obsidian" / "core-plugins.json").write_text(json.dumps({"sync": True, "graph": True}))
    (root / ".dropbox").write_text("")
    write(vault, "sub/.Plan.md.icloud", "")
    names = [tool.name for tool in sync_tools(vault, home)]
    assert names == [SYNCTHING, OBSIDIAN_SYNC, ICLOUD, DROPBOX]
    (vault / ".obsidian" / "core-plugins.json").write_text(json.dumps({"sync": False}))
    assert OBSIDIAN_SYNC not in [tool.name for tool in sync_tools(vault, home)]


def test_finding_copies_never_enters_symlinks_or_tars_folders(tmp_path: Path):
    vault, outside = tmp_path / "vault", tmp_path / "outside"
    write(outside, "Memory (conflicted copy).md", "x\n")
    write(vault, "Memory.md", "x\n")
    write(vault, ".tars/merged/ab12cd34ef56/20261127-Memory (conflicted copy).md", "x\n")
    os.symlink(outside, vault / "linked")
    write(vault, "deep/Note.sync-conflict-20261127-101500-ABCDEFG.md", "x\n")
    assert [c.path for c in find_conflict_copies(vault)] == ["deep/Note.sync-conflict-20261127-101500-ABCDEFG.md"]


def test_heartbeats_are_read_back_and_bad_ones_named(tmp_path: Path):
    vault = tmp_path / "vault"
    vault.mkdir()
    write_beat(vault, Beat("aaaa1111", "mac", routines=["brief"], telegram=TELEGRAM_POLLING, beat=3, beat_at=1.0))
    write(vault, ".tars/machines/bbbb2222.json", json.dumps({"machine": "cccc3333"}))  # names another machine
    write(vault, ".tars/machines/dddd4444.json", "{not json")
    beats, problems = read_beats(vault)
    assert [(b.machine, b.name, b.routines, b.telegram) for b in beats] == [("aaaa1111", "mac", ["brief"], TELEGRAM_POLLING)]
    assert len(problems) == 2 and all(".tars/machines/" in p for p in problems)


def test_a_peer_is_live_while_its_beat_moves_by_this_machines_clock():
    liveness = Liveness(stale_seconds=60)
    beat = Beat("aaaa1111", beat=1, beat_at=1_000_000.0)  # its own clock is far behind ours
    assert not liveness.live(beat, now=2_000_000.0)  # first sight, says it beat long ago
    beat.beat = 2
    assert liveness.live(beat, now=2_000_010.0)  # a new beat: live, whatever its clock says
    assert liveness.live(beat, now=2_000_069.0)
    assert not liveness.live(beat, now=2_000_071.0)  # no new beat for a minute
    beat.beat, beat.stopped = 3, True
    assert not liveness.live(beat, now=2_000_072.0)  # said it stopped


def test_one_machine_polls_and_the_other_takes_over_when_it_stops():
    mac = Beat("aaaa1111", "mac", telegram=TELEGRAM_STANDBY, bot="b1")
    pi = Beat("bbbb2222", "pi", telegram=TELEGRAM_STANDBY, bot="b1")
    assert who_polls(mac, [(pi, True)]).poll and not who_polls(pi, [(mac, True)]).poll  # first in line: the lower id
    mac.telegram, mac.telegram_since = TELEGRAM_POLLING, 10.0
    assert not who_polls(pi, [(mac, True)]).poll  # the mac polls: the pi stands by
    assert who_polls(pi, [(mac, False)]).poll  # the mac stopped (or went silent): the pi takes over
    pi.telegram, pi.telegram_since = TELEGRAM_POLLING, 20.0
    mac.telegram, mac.telegram_since = TELEGRAM_STANDBY, 0.0  # the mac started again
    assert not who_polls(mac, [(pi, True)]).poll  # the pi polls now and keeps it, though the mac is first in line
    assert who_polls(pi, [(mac, True)]).poll
    both = Beat("aaaa1111", "mac", telegram=TELEGRAM_POLLING, telegram_since=30.0, bot="b1")
    assert not who_polls(both, [(pi, True)]).poll and who_polls(pi, [(both, True)]).poll  # both poll: the one polling longer keeps it
    other_bot = Beat("cccc3333", "nas", telegram=TELEGRAM_POLLING, bot="b2")
    assert who_polls(Beat("dddd4444", telegram=TELEGRAM_STANDBY, bot="b1"), [(other_bot, True)]).poll  # another bot: no waiting
