"""A vault folder that goes away while tarsd runs (moved, deleted, its drive unmounted) is an
error state: status and every search say so, the index keeps its rows, nothing is written into
the vault path, and the folder is served again once it is back, without a restart."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from harness.daemon import wait_for
from harness.vault_files import tmpfs, write
from tarsctl.client import Client, RemoteError
from tarsctl.protocol import Remember, Search
from tarsd.config.settings import MemoryConfig
from tarsd.memory.files import MemoryFiles
from tarsd.vault.root import VaultMissing, VaultRoot, make_folders


def _search(daemon, query: str):
    with Client(daemon.socket, timeout=30) as client:
        return client.call(Search(id=1, query=query, mode="fts", limit=20))


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_vault_moved_away_is_reported_refuses_writes_and_is_served_again_once_back(start_daemon, vault, tmp_path):
    write(vault, "alpha.md", "the aardvark note")
    write(vault, "Memory.md", "# Core\n- Dog: Perry\n")
    daemon = start_daemon()
    wait_for(lambda: "alpha.md" in daemon.search("aardvark"), "the start-up scan")
    pid = daemon.process.pid

    away = tmp_path / "moved-away"
    os.rename(vault, away)
    before = _tree(away)
    status = wait_for(lambda: (s := daemon.status()).vault_error and s, "status to notice the missing vault")
    # A reply notices at once; the watcher's supervisor, woken by it, stops the watcher.
    wait_for(lambda: not daemon.status().watcher["alive"], "the watcher to stop while the vault is missing")
    assert str(vault) in status.vault_error and "missing" in status.vault_error
    assert any(w.startswith("vault: ") and "nothing is written" in w for w in status.warnings), status.warnings
    assert "MISSING" in daemon.tarsctl("status").stdout

    reply = _search(daemon, "aardvark")
    assert [hit.path for hit in reply.results] == ["alpha.md"]  # the index kept its rows
    said = reply.coverage.incomplete(semantic=False)
    assert any("missing" in note and "index as it was" in note for note in said), said
    shown = daemon.tarsctl("search", "--mode", "fts", "aardvark")
    assert "missing" in shown.stdout + shown.stderr

    refused = daemon.tarsctl("remember", "--force", "My cat is Luna")
    assert refused.returncode != 0 and "missing" in refused.stderr and "nothing was written" in refused.stderr, refused
    with Client(daemon.socket, timeout=30) as client, pytest.raises(RemoteError) as raised:
        client.call(Remember(id=1, fact="My cat is Luna", mode="force"))
    assert raised.value.error.code == "vault_missing" and "move the vault folder back" in raised.value.error.hint
    assert not vault.exists()  # tars never makes the vault folder itself
    forgot = daemon.tarsctl("forget", "Perry")
    assert forgot.returncode != 0 and "missing" in forgot.stderr, forgot
    assert _tree(away) == before

    os.rename(away, vault)
    wait_for(lambda: not daemon.status().vault_error, "status to see the vault again")
    write(vault, "beta.md", "the bison note, written after the move back")
    wait_for(lambda: "beta.md" in daemon.search("bison"), "the new note")
    remembered = daemon.tarsctl("remember", "--force", "My cat is Luna")
    assert remembered.returncode == 0, remembered.stderr
    assert "Luna" in (vault / "Memory.md").read_text()
    assert daemon.process.pid == pid and daemon.process.poll() is None  # the same tarsd, never restarted
    watcher = daemon.status().watcher
    assert watcher["alive"] and "there again" in watcher["last_restart_reason"]


def test_a_vault_deleted_and_recreated_empty_is_served_again(start_daemon, vault):
    write(vault, "alpha.md", "the aardvark note")
    daemon = start_daemon()
    wait_for(lambda: "alpha.md" in daemon.search("aardvark"), "the start-up scan")

    shutil.rmtree(vault)
    wait_for(lambda: daemon.status().vault_error, "status to notice the deleted vault")
    assert daemon.search("aardvark") == ["alpha.md"]  # served from the index, not emptied

    vault.mkdir()
    wait_for(lambda: not daemon.status().vault_error, "status to see the new folder")
    write(vault, "gamma.md", "the gazelle note in the new folder")
    wait_for(lambda: "gamma.md" in daemon.search("gazelle"), "a note saved in the recreated vault")
    wait_for(lambda: daemon.search("aardvark") == [], "the deleted note to leave the index after the rescan")
    write(vault, "delta.md", "the dingo note")
    wait_for(lambda: "delta.md" in daemon.search("dingo"), "the watcher on the new folder")


def test_memory_writes_refuse_a_missing_vault_and_never_create_it(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    root = VaultRoot(vault)
    memory = MemoryFiles(vault, MemoryConfig())
    vault.rmdir()
    assert root.check() == "missing" and "missing" in root.error
    with pytest.raises(VaultMissing, match="nothing was written"):
        memory.remember("My cat is Luna", mode="force")
    with pytest.raises(VaultMissing):
        memory.forget("cat")
    with pytest.raises(VaultMissing):
        memory.record_feedback(True, "question", "answer")
    assert not vault.exists()
    vault.mkdir()
    assert root.check() == "back" and root.error == ""
    make_folders(vault, vault / "sessions" / "2026")
    assert (vault / "sessions" / "2026").is_dir()


def test_a_chat_while_the_vault_is_missing_writes_no_session_log(start_daemon, vault, tmp_path, fake_ollama):
    fake_ollama.script = [{"text": "Perry is your beagle."}, {"text": "Dog question\n- asked about Perry"}]
    daemon = start_daemon(TARS_CHAT_OLLAMA_HOST=fake_ollama.url, TARS_CHAT_OLLAMA_MODEL="fake-chat")
    away = tmp_path / "moved-away"
    os.rename(vault, away)
    before = _tree(away)  # what tarsd wrote at start: its heartbeat in .tars/ (docs/two-machines.md)
    wait_for(lambda: daemon.status().vault_error, "status to notice the missing vault")

    done = daemon.tarsctl("chat", "who is Perry?")
    assert "Perry is your beagle." in done.stdout  # the answer itself is not lost
    assert "missing" in done.stderr and "session log: " not in done.stderr, done.stderr
    assert not vault.exists() and _tree(away) == before and not any(path.startswith("sessions/") for path in before)


def test_an_unmounted_drive_leaves_a_mount_point_that_is_not_taken_for_the_vault(start_daemon, vault):
    with tmpfs(vault):
        write(vault, "alpha.md", "the aardvark note on the drive")
        daemon = start_daemon()
        wait_for(lambda: "alpha.md" in daemon.search("aardvark"), "the start-up scan")
    # The drive is gone; its empty mount point is still a folder at the vault's path.
    assert vault.is_dir() and not os.path.ismount(vault)
    status = wait_for(lambda: (s := daemon.status()).vault_error and s, "status to notice the unmounted drive")
    assert "mounted drive" in status.vault_error
    assert daemon.search("aardvark") == ["alpha.md"]  # the empty mount point did not empty the index
    refused = daemon.tarsctl("remember", "--force", "My cat is Luna")
    assert refused.returncode != 0 and "nothing is mounted there" in refused.stderr, refused
    assert list(vault.iterdir()) == []  # nothing landed on the mount point

    with tmpfs(vault):
        wait_for(lambda: not daemon.status().vault_error, "status to see the drive mounted again")
        write(vault, "beta.md", "the bison note on the drive mounted again")
        wait_for(lambda: "beta.md" in daemon.search("bison"), "the new note")
        daemon.stop()
