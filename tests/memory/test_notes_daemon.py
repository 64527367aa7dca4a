"""The read_note and sessions requests through a real tarsd: line numbers that agree with
search hits, headings, bounds, the vault's symlink rules, and session logs by date."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest

from harness.daemon import wait_for
from harness.vault_files import write
from tarsctl.client import RemoteError
from tarsctl.protocol import ReadNote, Search, Sessions

NOTE = """\
---
title: Garden plan
tags: [garden]
---
# Garden

Intro line.

## Beds

- tomatoes by the wall

### Soil

compost in March

## Tools

```
# not a heading inside a code block
```
- a spade
"""


def read(daemon, **fields):
    with daemon.client() as client:
        return client.call(ReadNote(id=1, **fields))


def refused(daemon, **fields) -> str:
    with daemon.client() as client, pytest.raises(RemoteError) as caught:
        client.call(ReadNote(id=1, **fields))
    return f"{caught.value.error.code}: {caught.value}"


def test_whole_range_and_heading_sections(start_daemon, vault):
    write(vault, "garden.md", NOTE)
    daemon = start_daemon()
    whole = read(daemon, path="garden.md")
    assert (whole.title, whole.start_line, whole.end_line, whole.total_lines) == ("Garden plan", 1, 22, 22)
    assert whole.lines == NOTE.splitlines() and not whole.truncated and whole.memory_type == "note"

    part = read(daemon, path=str(vault / "garden.md"), start_line=9, end_line=11)  # an absolute path inside the vault
    assert (part.path, part.lines) == ("garden.md", ["## Beds", "", "- tomatoes by the wall"])
    assert read(daemon, path="garden.md", start_line=21, end_line=500).lines == ["```", "- a spade"]  # clamped to the end

    beds = read(daemon, path="garden.md", heading="beds")  # its own name, any case: deeper headings are inside it
    assert (beds.heading, beds.start_line, beds.end_line) == ("Garden > Beds", 9, 15)
    soil = read(daemon, path="garden.md", heading="Garden > Beds > Soil")
    assert (soil.start_line, soil.lines) == (13, ["### Soil", "", "compost in March"])
    tools = read(daemon, path="garden.md", heading="Tools")  # the code block's "#" line is not a heading
    assert (tools.start_line, tools.end_line) == (17, 22)

    assert "no heading 'Weeds'" in refused(daemon, path="garden.md", heading="Weeds")
    assert "Garden > Beds > Soil" in refused(daemon, path="garden.md", heading="Weeds")  # the hint lists the headings
    assert "not both" in refused(daemon, path="garden.md", heading="Beds", start_line=2)
    assert "past the end" in refused(daemon, path="garden.md", start_line=23)
    assert "before start_line" in refused(daemon, path="garden.md", start_line=5, end_line=4)


def test_line_numbers_agree_with_search_hits(start_daemon, vault):
    # A BOM, CRLF line ends and a line separator inside a line: the chunker's numbering is the one used.
    (vault / "odd.md").write_bytes("\ufeff# Odd\r\n\r\nfirst\u2028half\r\n\r\nzebrafinch here\r\n".encode())
    daemon = start_daemon()
    with daemon.client() as client:
        [hit] = client.call(Search(id=1, query="zebrafinch", mode="fts", all_chunks=True)).results
    note = read(daemon, path="odd.md", start_line=hit.start_line, end_line=hit.end_line)
    assert "zebrafinch here" in note.lines[-1] and note.lines[0] == "# Odd"


def test_bounded_replies_say_where_to_read_on(start_daemon, vault):
    write(vault, "long.md", "".join(f"line {n:05d} " + "x" * 90 + "\n" for n in range(1, 3001)))
    write(vault, "one-line.md", "y" * 50_000)
    daemon = start_daemon()
    first = read(daemon, path="long.md", max_chars=10_000)
    assert first.truncated and first.start_line == 1 and sum(len(line) + 1 for line in first.lines) <= 10_000 + 1
    rest = read(daemon, path="long.md", start_line=first.end_line + 1, max_chars=10_000)
    assert rest.lines[0].startswith(f"line {first.end_line + 1:05d} ")
    cut = read(daemon, path="one-line.md", max_chars=1000)
    assert cut.truncated and cut.lines == ["y" * 1000]
    with daemon.client() as client, pytest.raises(RemoteError, match="max_chars"):
        client.call(ReadNote(id=1, path="long.md", max_chars=2_000_000))


def test_only_real_notes_inside_the_vault_are_read(start_daemon, vault, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("the secret\n")
    os.symlink(outside / "secret.md", vault / "link-out.md")
    os.symlink(outside, vault / "folder-out")
    write(vault, "real.md", "real text\n")
    os.symlink(vault / "real.md", vault / "link-in.md")
    write(vault, ".obsidian/workspace.md", "config\n")
    write(vault, "picture.png", "not a note\n")
    os.mkfifo(vault / "pipe.md")
    daemon = start_daemon()

    assert refused(daemon, path="../outside/secret.md").startswith("bad_request: ../outside/secret.md is not inside the vault")
    assert "is not inside the vault" in refused(daemon, path=str(outside / "secret.md"))
    assert "outside the vault: never read" in refused(daemon, path="link-out.md")
    assert "symlinked folder" in refused(daemon, path="folder-out/secret.md")
    assert "real.md: indexed there" in refused(daemon, path="link-in.md")  # read the note itself instead
    assert "not a note" in refused(daemon, path=".obsidian/workspace.md")
    assert "not a note" in refused(daemon, path="picture.png")
    assert "FIFO" in refused(daemon, path="pipe.md")  # refused at once, never opened (a FIFO would block)
    assert refused(daemon, path="missing.md").startswith("not_found: there is no note at missing.md")
    assert "invalid request" in refused(daemon, path="a\x00b.md")  # the protocol bounds refuse a NUL byte
    assert read(daemon, path="real.md").lines == ["real text"]


def test_a_hard_link_is_read_like_any_file(start_daemon, vault, tmp_path):
    # The README's decision: a hard link is the file itself, put in the vault as a copy would
    # be (it cannot be re-pointed later, as a symlink can); files with several links are kept,
    # as backup and de-duplication tools make them.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "linked.md").write_text("# Linked\n\nquokka census\n")
    os.link(outside / "linked.md", vault / "linked.md")
    daemon = start_daemon()
    assert daemon.search("quokka") == ["linked.md"]  # indexed in the start-up scan
    assert read(daemon, path="linked.md").lines == ["# Linked", "", "quokka census"]
    assert (vault / "linked.md").stat().st_nlink == 2


def test_memory_files_by_kind(start_daemon, vault):
    daemon = start_daemon(TARS_MEMORY_SEMANTIC_FILE="About me.md")
    empty = read(daemon, memory="semantic")  # nothing remembered yet: an empty file, not an error
    assert (empty.path, empty.lines, empty.total_lines) == ("About me.md", [], 0)
    write(vault, "About me.md", "# Core\n- Name: Sam\n")
    write(vault, "Procedural.md", "# Rules\n- Be brief\n")
    assert read(daemon, memory="semantic").lines == ["# Core", "- Name: Sam"]
    rules = read(daemon, memory="procedural")
    assert (rules.path, rules.memory_type, rules.lines) == ("Procedural.md", "procedural", ["# Rules", "- Be brief"])
    assert "memory must be semantic or procedural" in refused(daemon, memory="episodic")
    assert "memory must be semantic or procedural" in refused(daemon, memory="semantic", path="x.md")


def session_log(vault, name: str, title: str, text: str, started: str | None = None) -> None:
    front = f"---\ntype: session-log\nstarted: {started}\n---\n" if started else ""
    write(vault, f"sessions/{name}", f"{front}# {title}\n\n{text}\n")


def test_sessions_newest_first_and_searched(start_daemon, vault):
    session_log(vault, "2026-03-01-0900-taxes.md", "Taxes", "- Filed the tax return with the accountant.")
    session_log(vault, "2026-05-10-2015-bike.md", "Bike repair", "- Replaced the chain on the gravel bike.")
    session_log(vault, "2026-04-02-1200-garden.md", "Garden", "- Planned the tomato beds.")
    session_log(vault, "trip notes.md", "Lisbon trip", "- Booked the train to Lisbon.", started="2026-06-01T08:30:00+00:00")
    write(vault, "not-a-session.md", "# Bike shop\n\nthe chain was cheap\n")
    daemon = start_daemon()
    with daemon.client() as client:
        listed = client.call(Sessions(id=1, limit=3))
        assert listed.total == 4 and listed.coverage is None
        assert [s.path for s in listed.sessions] == [
            "sessions/trip notes.md",
            "sessions/2026-05-10-2015-bike.md",
            "sessions/2026-04-02-1200-garden.md",
        ]
        trip = listed.sessions[0]
        assert trip.title == "Lisbon trip" and trip.summary == "- Booked the train to Lisbon."
        assert trip.started_at == datetime(2026, 6, 1, 8, 30, tzinfo=UTC).timestamp()
        assert listed.sessions[1].started.startswith("2026-05-10T20:15")  # the file name's local time

        found = client.call(Sessions(id=2, query="chain", mode="fts"))
        found_paths = [s.path for s in found.sessions]
        assert found_paths == ["sessions/2026-05-10-2015-bike.md"]  # only session logs, never other notes
        assert found.sessions[0].band and "**chain**" in found.sessions[0].snippet and found.coverage.reconciled

        # A log written a moment ago is listed at once (the listing reads the disk, not the index).
        session_log(vault, "2026-07-01-0700-new.md", "Fresh", "- Just now.")
        assert client.call(Sessions(id=3, limit=1)).sessions[0].title == "Fresh"
        with pytest.raises(RemoteError, match="unknown mode"):
            client.call(Sessions(id=4, query="x", mode="grep"))
    wait_for(lambda: daemon.search("Fresh", types=["episodic"]) == ["sessions/2026-07-01-0700-new.md"], "the new log indexed")
