"""A user's environment for tarsctl subprocesses, kept away from the real user's files."""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens: the port was free a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def isolated_env(tmp_path: Path, base: dict[str, str] | None = None, **settings: str) -> dict[str, str]:
    """The user's own config, cache, keys and service files stay out of it."""
    dropped = ("ANTHROPIC_API_KEY", "HF_ENDPOINT", "HF_HUB_OFFLINE", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS")
    env = {k: v for k, v in (base or os.environ).items() if k not in dropped}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    config = tmp_path / "config.toml"
    config.touch()
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
    )
    env.setdefault("TARS_CONFIG", str(config))
    # Never the user's own daemon: a short socket path (addresses are limited to ~104 bytes) nobody listens on.
    env.setdefault("TARS_SOCKET", f"/tmp/tars-test-{uuid.uuid4().hex[:12]}/tarsd.sock")
    env.update(settings)
    return env
