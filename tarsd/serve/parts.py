"""What the doors use of the running daemon.

The doors (this package) sit below the daemon's wiring (tarsd/daemon/main.py), which builds
them, so they name the parts they read here instead of importing the daemon: the Daemon there
is the one implementation, and a door that needs something new adds it to this list.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from tarsctl.protocol import ChannelStatus, HttpStatus
from tarsd.chat.assistant import Assistant
from tarsd.config.settings import Config
from tarsd.index.sync_queue import SyncQueue
from tarsd.index.watcher import VaultWatcher
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

    def request_stop(self, why: str) -> None:
        """Begin a clean shutdown (the stop request)."""

    def http_status(self) -> HttpStatus:
        """The HTTP listener's state, for status."""

    def channels_status(self) -> list[ChannelStatus]:
        """The messenger channels' state ([whatsapp]), for status; empty when none is enabled."""
