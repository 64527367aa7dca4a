"""Running a command on a pseudo-terminal, as a user at a shell does, typing each answer once its
prompt shows (tarsctl asks before it changes memory only when a person is there to answer)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time


def on_a_terminal(command: list[str], env: dict, answers: list[tuple[str, str]], timeout: float = 60) -> tuple[int, str]:
    """Run a command on a pseudo-terminal, typing each answer once its prompt shows."""
    master, slave = pty.openpty()
    process = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    output, pending = b"", list(answers)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                output += chunk
            if pending and pending[0][0].encode() in output:
                os.write(master, (pending.pop(0)[1] + "\n").encode())
                output += b"\n"
            if process.poll() is not None and not ready:
                break
        return process.wait(timeout=10), output.decode(errors="replace").replace("\r\n", "\n")
    finally:
        os.close(master)
        if process.poll() is None:
            process.kill()
