"""What tarsctl prints, read as a user reads it: counts of one are singular."""

from __future__ import annotations

from pathlib import Path

from harness.vault_files import write


def test_index_of_one_note_says_one_file_and_one_chunk(start_daemon, vault: Path):
    write(vault, "Only.md", "# Only\n\nOne short note.\n")
    daemon = start_daemon()
    done = daemon.tarsctl("index", "--full")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("1 file scanned: 1 indexed"), lines
    assert lines[1].startswith("1 chunk written;"), lines
