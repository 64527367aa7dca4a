"""Reads that a race on the vault cannot redirect (tarsd/vault/safe_open.py): a vault folder swapped
for a symlink out of the vault, over and over, while read_note, the indexer and the memory
files' reads read the note inside it. Not one byte of the outside file may come back, or
reach the index."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from harness.daemon import wait_for
from harness.vault_files import write
from tarsctl.client import RemoteError
from tarsctl.protocol import ReadNote, Status
from tarsd.config.settings import MemoryConfig, VaultConfig
from tarsd.memory import sessions
from tarsd.memory.files import MemoryFiles
from tarsd.vault import safe_open
from tarsd.vault.files import REDIRECTED, OutsideVault, read_note, stat_note, walk

# Long enough to catch the unprotected reads every time (before the fix: 22, 33 and 27 outside
# replies of 500-830 reads in three 10 s runs on two busy cores, and the outside text found by
# search), short for the suite.
RACE_SECONDS = 10.0
INSIDE = "inside-text-4ab1"
OUTSIDE = "outsidemarker7c2e"  # one word, so a keyword search finds it

# The swapper runs in a process of its own: in a thread it would share the test's GIL with the
# reader and slow both. It swaps an even number of times, so the real folder ends in place.
SWAPPER = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
folder, link, end = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2]), time.monotonic() + float(sys.argv[3])
count = 0
while time.monotonic() < end:
    for _ in range(2):
        if libc.renameat2(-100, folder, -100, link, 2) != 0:  # AT_FDCWD, RENAME_EXCHANGE
            sys.exit(os.strerror(ctypes.get_errno()))
    count += 2
print(count)
"""


def race_reads(daemon, vault, tmp_path, seconds: float) -> dict[str, int]:
    """Swap vault/folder with a symlink to an outside folder holding a note of the same name
    for ``seconds`` while reading vault/folder/note.md through the daemon as fast as it answers
    and searching for the outside note's marker. Returns the counts seen."""
    outside = tmp_path / "outside"
    outside.mkdir()
    # The same size, so neither the reply's length nor the index's stat tells them apart.
    (outside / "note.md").write_text(f"# Note\n\n{OUTSIDE}\n")
    write(vault, "folder/note.md", f"# Note\n\n{INSIDE}-\n")
    assert (outside / "note.md").stat().st_size == (vault / "folder" / "note.md").stat().st_size
    # Entries only the outside folder has: a listing through the swapped folder must not
    # record them either (a FIFO and a symlink would be recorded as skipped, with their names).
    (outside / f"{OUTSIDE}-note.md").write_text(f"{OUTSIDE}\n")
    os.mkfifo(outside / f"{OUTSIDE}-pipe.md")
    os.symlink("note.md", outside / f"{OUTSIDE}-link.md")
    os.symlink(outside, vault / "swap")
    wait_for(lambda: daemon.search(INSIDE) == ["folder/note.md"], "the inside note to be indexed")

    counts = {"reads": 0, "inside": 0, "outside": 0, "refused": 0, "searches": 0, "outside_in_index": 0}
    errors: dict[str, int] = {}
    stop = threading.Event()

    def search_loop() -> None:
        while not stop.is_set():
            counts["searches"] += 1
            if daemon.search(OUTSIDE):
                counts["outside_in_index"] += 1

    searcher = threading.Thread(target=search_loop)
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(vault / "folder"), str(vault / "swap"), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    searcher.start()
    try:
        with daemon.client() as client:
            while swapper.poll() is None:
                counts["reads"] += 1
                try:
                    text = "\n".join(client.call(ReadNote(id=1, path="folder/note.md")).lines)
                except RemoteError as exc:
                    counts["refused"] += 1
                    errors[exc.error.message] = errors.get(exc.error.message, 0) + 1
                    continue
                counts["outside" if OUTSIDE in text else "inside"] += 1
    finally:
        stop.set()
        searcher.join()
        out, _ = swapper.communicate(timeout=60)
    assert swapper.returncode == 0, f"the swapper failed: {out}"
    counts["swaps"] = int(out)
    counts["errors"] = errors  # type: ignore[assignment]
    return counts


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 (Linux) swaps the folders in one step")
def test_a_folder_swapped_for_a_symlink_never_redirects_a_read(start_daemon, vault, tmp_path):
    daemon = start_daemon()
    counts = race_reads(daemon, vault, tmp_path, RACE_SECONDS)
    print(f"\n  race: {counts['swaps']:,} folder swaps, {counts['reads']:,} read_note calls: {counts['outside']} outside, {counts}")
    assert counts["outside"] == 0, counts
    assert counts["inside"] > 0 and counts["swaps"] > 1000, counts  # the race ran, and reads got through
    assert counts["outside_in_index"] == 0, counts
    # A read that meets the swap is refused with a reason the user can act on, never a bare
    # "Invalid argument" from the check tripping over the swap (realpath's readlink).
    clear = ("inside a symlinked folder", "a symlink took the place", "changed while it was checked", "there is no note")
    assert all(any(reason in message for reason in clear) for message in counts["errors"]), counts["errors"]
    # With the real folder back in place the index settles on the inside note, and the outside
    # note's text never reached it.
    wait_for(lambda: daemon.search(INSIDE) == ["folder/note.md"], "the index to settle on the inside note")
    assert daemon.search(OUTSIDE) == []
    with daemon.client() as client:
        listed = client.call(Status(id=1, files=True))
    assert not [entry for entry in [*listed.problems, *listed.files] if OUTSIDE in str(entry)], listed


# ---- the opener itself, both ways: openat2 and the step-by-step walk ----


@pytest.fixture(params=["openat2", "stepwise"])
def opener(request, monkeypatch) -> str:
    """Runs a test with openat2 (where the kernel has it) and with the walk macOS and older
    kernels use."""
    if request.param == "openat2" and safe_open._openat2 is None:
        pytest.skip("this kernel has no openat2 (Linux 5.6 and later): the stepwise walk is what runs here")
    if request.param == "stepwise":
        monkeypatch.setattr(safe_open, "_openat2", None)
    return request.param


def test_only_a_regular_file_reached_without_a_symlink_is_read(opener, tmp_path):
    real = tmp_path / "real-vault"
    write(real, "folder/note.md", "inside\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "note.md").write_text("outside\n")
    os.symlink(tmp_path / "outside", real / "out")
    os.symlink("folder", real / "in")  # a symlinked folder, even one staying inside
    os.symlink("folder/note.md", real / "link.md")
    os.mkfifo(real / "pipe.md")
    vault = tmp_path / "Notes"
    os.symlink(real, vault)  # the root the user configured may itself be a symlink

    data, info = safe_open.read_beneath(vault, "folder/note.md")
    assert data == b"inside\n" and info.st_ino == (real / "folder" / "note.md").stat().st_ino
    for rel in ("out/note.md", "in/note.md", "link.md"):
        with pytest.raises(safe_open.SymlinkInPath):
            safe_open.read_beneath(vault, rel)
    with pytest.raises(safe_open.NotRegularFile):
        safe_open.read_beneath(vault, "pipe.md")  # at once: a FIFO never blocks the reader
    with pytest.raises(safe_open.NotRegularFile):
        safe_open.read_beneath(vault, "folder")
    with pytest.raises(FileNotFoundError):
        safe_open.read_beneath(vault, "folder/missing.md")
    with pytest.raises(NotADirectoryError):
        safe_open.read_beneath(vault, "folder/note.md/more.md")
    for rel in ("../outside/note.md", str(tmp_path / "outside" / "note.md"), "folder/./note.md", "folder//note.md", ""):
        with pytest.raises(ValueError):
            safe_open.read_beneath(vault, rel)
    with pytest.raises(safe_open.TooLarge):
        safe_open.read_beneath(vault, "folder/note.md", max_bytes=6)  # counted on the file read
    assert safe_open.read_beneath(vault, "folder/note.md", max_bytes=7)[0] == b"inside\n"


def test_the_vaults_reads_refuse_a_symlink_and_say_why(opener, tmp_path, vault):
    write(vault, "folder/note.md", "inside\n")
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", vault / "out")
    (tmp_path / "outside" / "Memory.md").write_text("- outside\n")
    os.mkfifo(vault / "Memory.md")
    assert read_note(vault, "out/Memory.md", 1000).problem == REDIRECTED
    assert read_note(vault, "Memory.md", 1000).problem == "not a regular file: never read"
    assert read_note(vault, "folder/note.md", 1000).text == "inside\n"
    memory = MemoryFiles(vault, MemoryConfig())
    with pytest.raises(OutsideVault, match="Memory.md is not a regular file"):  # a FIFO: refused, where a read blocked forever
        memory.lines()
    assert memory.read_semantic() == ""  # left out of the prompt
    memory.guard.stop()


def test_a_fifo_in_place_of_memory_md_is_refused_not_waited_on(start_daemon, vault):
    # Memory.md was read with a plain open: a FIFO there held remember, forget and every
    # chat's prompt until a writer came.
    os.mkfifo(vault / "Memory.md")
    daemon = start_daemon()
    for command in (("remember", "--force", "My cat is Luna"), ("forget", "Luna")):
        refused = daemon.tarsctl(*command, timeout=30)
        assert refused.returncode == 1 and "Memory.md is not a regular file" in refused.stderr, refused.stderr
        assert "put a text file at" in refused.stderr
    assert "a FIFO (named pipe), not a regular file" in daemon.tarsctl("status", timeout=30).stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 (Linux) swaps the folders in one step")
def test_a_folder_swap_never_redirects_the_opener_or_a_memory_read(opener, tmp_path, vault):
    """The race above, in process: the opener and the memory files' reads as fast as they go."""
    outside = tmp_path / "outside"
    write(outside, "Memory.md", f"- {OUTSIDE}\n")
    write(vault, "folder/Memory.md", f"- {INSIDE}\n")
    os.symlink(outside, vault / "swap")
    memory = MemoryFiles(vault, MemoryConfig(semantic_file="folder/Memory.md"))
    seen = {"inside": 0, "outside": 0, "refused": 0}
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(vault / "folder"), str(vault / "swap"), "3"], stdout=subprocess.PIPE, text=True
    )
    try:
        while swapper.poll() is None:
            for read in (
                lambda: safe_open.read_beneath(vault, "folder/Memory.md")[0].decode(),
                lambda: "\n".join(line.text for line in memory.lines()),
            ):
                try:
                    text = read()
                except (safe_open.SymlinkInPath, OutsideVault):
                    seen["refused"] += 1
                    continue
                seen["outside" if OUTSIDE in text else "inside"] += 1
    finally:
        out, _ = swapper.communicate(timeout=60)
        memory.guard.stop()
    assert swapper.returncode == 0, out
    print(f"\n  race ({opener}): {seen}")
    assert seen["outside"] == 0, seen
    assert seen["inside"] > 100 and seen["refused"] > 100, seen  # the race ran, and reads got through


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 (Linux) swaps the folders in one step")
def test_a_folder_swap_never_lists_the_outside_folder(tmp_path, vault):
    """The vault's listing (every scan of the indexer and status) and the stat of a path a
    watcher event names, under the same race: a folder swapped for a symlink between being
    listed and being entered is not entered. Entering it would list the outside tree (a symlink
    to / swapped in: the whole disk) and record its FIFOs and symlinks by name."""
    outside = tmp_path / "outside"
    write(outside, f"{OUTSIDE}/deeper.md", "x\n")
    os.mkfifo(outside / f"{OUTSIDE}-pipe.md")
    write(vault, "folder/sub/note.md", f"{INSIDE}\n")
    os.symlink(outside, vault / "swap")
    seen = {"with_note": 0, "without": 0, "outside": 0}
    logs = VaultConfig(episodic=["folder/"])
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(vault / "folder"), str(vault / "swap"), "3"], stdout=subprocess.PIPE, text=True
    )
    try:
        while swapper.poll() is None:
            listed = walk(vault)
            seen["outside"] += any(OUTSIDE in path for path in listed)
            # A path named by a watcher event: only the outside folder has it.
            seen["outside"] += stat_note(vault, f"folder/{OUTSIDE}-pipe.md") is not None
            # The session logs' listing, with the swapped folder as their folder.
            seen["outside"] += any(OUTSIDE in path for path in sessions.episodic_paths(vault, logs, 1000))
            seen["with_note" if "folder/sub/note.md" in listed else "without"] += 1
    finally:
        out, _ = swapper.communicate(timeout=60)
    assert swapper.returncode == 0, out
    print(f"\n  race (listing): {seen}")
    assert seen["outside"] == 0, seen
    assert seen["with_note"] > 100 and seen["without"] > 100, seen  # the race ran, and listings got through
