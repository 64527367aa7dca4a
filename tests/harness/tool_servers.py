"""Configuring tarsd with the test MCP servers (tests/harness/tool_server.py), starting the HTTP
one, and reading the journal in which every server writes each call it receives."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from harness.daemon import wait_for
from harness.paths import REPO

TESTS = REPO / "tests"


def stdio_server(name: str, journal: Path, **settings: object) -> dict:
    """A [mcp.servers.NAME] table for the test server on stdio."""
    env = {"TOOL_SERVER_JOURNAL": str(journal), **settings.pop("env", {})}  # type: ignore[arg-type]
    return {"command": [sys.executable, "-m", "harness.tool_server", name], "cwd": str(TESTS), "env": env, **settings}


def toml_config(servers: dict[str, dict], **mcp: object) -> str:
    """config.toml text with an [mcp] section (values written as TOML through JSON, which TOML reads alike)."""
    lines = ["[mcp]", *(f"{key} = {json.dumps(value)}" for key, value in mcp.items())]
    for name, table in servers.items():
        lines.append(f"\n[mcp.servers.{json.dumps(name)}]")
        for key, value in table.items():
            if isinstance(value, dict):
                value_text = "{" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items()) + "}"
            else:
                value_text = json.dumps(value)
            lines.append(f"{key} = {value_text}")
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def http_tool_server(name: str, journal: Path, workdir: Path) -> Iterator[str]:
    """The test server over streamable HTTP on a free port; yields its URL."""
    port_file = workdir / f"{name}.port"
    env = {**os.environ, "TOOL_SERVER_JOURNAL": str(journal), "PYTHONPATH": str(TESTS)}
    process = subprocess.Popen(
        [sys.executable, "-m", "harness.tool_server", name, "--http", str(port_file)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(workdir / f"{name}.log", "ab"),
    )
    try:
        port = wait_for(lambda: port_file.exists() and port_file.read_text().strip(), f"the HTTP MCP server {name} to listen")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


class Journal:
    """What the test servers wrote: starts ({"event": "started", "server", "pid"}) and calls
    ({"server", "tool", "arguments", "pid", "at"})."""

    def __init__(self, path: Path):
        self.path = path
        path.touch()

    def entries(self) -> list[dict]:
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def calls(self, since: float = 0.0, tool: str | None = None, server: str | None = None) -> list[dict]:
        return [
            e
            for e in self.entries()
            if "tool" in e and e["at"] >= since and (tool is None or e["tool"] == tool) and (server is None or e["server"] == server)
        ]

    def pid(self, server: str) -> int:
        """The pid of the server's latest start."""
        return [e["pid"] for e in self.entries() if e.get("event") == "started" and e["server"] == server][-1]

    def children(self, server: str) -> list[int]:
        """The pids of the children the server started to hold its stdout (fork_child, crash_with_child)."""
        return [e["pid"] for e in self.entries() if e.get("event") == "child" and e["server"] == server]

    @staticmethod
    def mark() -> float:
        return time.time()
