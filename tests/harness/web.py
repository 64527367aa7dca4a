"""A real tarsd with its HTTP listener on, and a real HTTP client (httpx over TCP) to talk to it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx

from harness.daemon import TarsDaemon, wait_for


class Web:
    """The HTTP side of a running tarsd: its address (port 0 in tests: read from status) and token."""

    def __init__(self, daemon: TarsDaemon):
        self.daemon = daemon
        self.refresh()

    def refresh(self) -> Web:
        """After a (re)start: the listener's address, from tarsd's status, and the token from its file."""
        http = wait_for(lambda: self.daemon.status().http, "tarsd's status")
        assert http.url, f"the HTTP listener is not listening: {http.error}\n{self.daemon.log.read_text()}"
        self.url = http.url
        self.token = self.token_file.read_text().strip()
        return self

    @property
    def token_file(self) -> Path:
        return Path(self.daemon.env["TARS_CONFIG"]).parent / "http_token"

    @property
    def host(self) -> str:
        return self.url.split("//")[1].rstrip("/")

    def client(self, token: str | None = None, timeout: float = 60) -> httpx.Client:
        token = self.token if token is None else token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout)


def sse(response: httpx.Response) -> Iterator[tuple[str, dict]]:
    """(event name, data) for each server-sent event of a streamed response; comments skipped."""
    name, data = "message", ""
    for line in response.iter_lines():
        if not line:
            if data:
                yield name, json.loads(data)
            name, data = "message", ""
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data += line[5:].strip()
