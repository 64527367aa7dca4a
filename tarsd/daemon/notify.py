"""systemd's notify protocol in a few lines (no libsystemd): READY, STATUS, WATCHDOG, STOPPING."""

from __future__ import annotations

import os
import socket


class SystemdNotifier:
    def __init__(self) -> None:
        address = os.environ.get("NOTIFY_SOCKET", "")
        # An address starting with "@" is in the abstract namespace.
        self.address = "\0" + address[1:] if address.startswith("@") else address

    @property
    def enabled(self) -> bool:
        return bool(self.address)

    def send(self, *lines: str) -> None:
        if not self.address:
            return
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.sendto("\n".join(lines).encode(), self.address)
        except OSError:
            pass  # the supervisor went away: nothing useful to do

    @staticmethod
    def watchdog_interval() -> float | None:
        """Seconds between WATCHDOG=1 pings (half of WatchdogSec), or None when not asked for."""
        usec = os.environ.get("WATCHDOG_USEC")
        pid = os.environ.get("WATCHDOG_PID")
        if not usec or (pid and pid != str(os.getpid())):
            return None
        try:
            return int(usec) / 2_000_000
        except ValueError:
            return None
