"""What the doors use of the running daemon.

The doors (this package) sit below the daemon's wiring (tarsd/daemon/main.py), which builds
them, so they name the parts they read here instead of importing the daemon: the Daemon there
is the one implementation, and a door that needs something new adds it to this list.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol
from zoneinfo import ZoneInfo

from tarsctl.protocol import ChannelStatus, HttpStatus, SyncStatus
from tarsd.chat.assistant import Assistant
from tarsd.config.settings import Config
from tarsd.index.sync_queue import SyncQueue
from tarsd.index.watcher import VaultWatcher
from tarsd.routines.book import Book, Routine
from tarsd.routines.clock import RoutineClock
from tarsd.routines.ledger import Ledger, Run
from tarsd.search.engine import Engine
from tarsd.tools.servers import ToolServers


class DaemonParts(Protocol):
    config: Config
    vault: Path
    started_at: float  # time.time() at start, for the uptime status reports
    engine: Engine
    queue: SyncQueue
    watcher: VaultWatcher
    assistant: Assistant
    tool_servers: ToolServers  # other MCP servers whose tools the chat may call
    routine_book: Book  # the routines file (the user's)
    ledger: Ledger  # runs and the inbox
    clock: RoutineClock | None  # None when [routines] enabled = false: this machine runs none
    routine_tz: ZoneInfo  # the user's time zone ([routines] timezone)
    routines_skipped: list[str]  # runs missed past their grace at start, for people

    async def run_routine(self, routine: Routine) -> tuple[Run, str]:
        """Run ``routine`` now (tarsctl routines run): the finished run and what it said."""

    def request_stop(self, why: str) -> None:
        """Begin a clean shutdown (the stop request)."""

    def http_status(self) -> HttpStatus:
        """The HTTP listener's state, for status."""

    def channels_status(self) -> list[ChannelStatus]:
        """The messenger channels' state ([whatsapp]), for status; empty when none is enabled."""

    def sync_status(self) -> SyncStatus:
        """Other machines on this vault, conflict copies and merges (tarsd/sync), for status."""
