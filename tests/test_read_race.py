"""Reads that a race on the vault cannot redirect (tarsd/safe_open.py): a vault folder swapped
for a symlink out of the vault, over and over, while read_note and the indexer read the note
inside it. Not one byte of the outside file may come back, or reach the index."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from conftest import write
from daemon_harness import wait_for
from tarsctl.client import RemoteError
from tarsctl.protocol import ReadNote

# Long enough to catch the unprotected reads every time (about 40 outside reads in 10 s on
# two busy cores), short for the suite. A 30 s run by hand: see race_reads.
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
    print(counts)
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
