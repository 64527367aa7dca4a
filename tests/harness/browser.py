"""A real headless Chromium (Debian's chromium package, driven by Playwright; no browser download
at run time): where it is and how it is started for the page tests (the ``browser`` fixture is in
tests/serve/conftest.py), and where its screenshots go."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from harness.paths import REPO

CHROMIUM = Path(os.environ.get("TARS_CHROMIUM", shutil.which("chromium") or "/usr/bin/chromium"))
# Headless, offline and quiet: no sandbox (CI runs as root), no GPU, no QUIC, no background
# downloads, updates or sync.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}
TIMEOUT_MS = 20_000

# Screenshots of the page, looked at by people, never committed.
SCREENSHOTS = Path(os.environ.get("TARS_SCREENSHOTS", REPO / ".artifacts" / "screenshots"))


def shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=False)
