"""`tarsctl ... | head`: when the reader goes away, the command stops quietly (as other tools
do), and only the command does so: main() called in-process leaves the caller's SIGPIPE alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tarsctl.cli import main


def test_a_reader_that_went_away_stops_tarsctl_quietly():
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before tarsctl writes a byte: every write fails
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tarsctl.cli", "completion", "bash"],
            stdout=write_end,
            capture_output=False,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert done.returncode == -signal.SIGPIPE, done.stderr
    assert done.stderr == b""  # no BrokenPipeError traceback


def test_main_in_process_leaves_the_callers_sigpipe_handler(capsys):
    before = signal.getsignal(signal.SIGPIPE)
    assert main(["completion", "bash"]) == 0
    assert "tarsctl" in capsys.readouterr().out
    assert signal.getsignal(signal.SIGPIPE) == before
