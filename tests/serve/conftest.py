"""Fixtures of the doors' tests: a real headless Chromium with a fresh profile for each test."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.browser import CHROMIUM, DESKTOP, FLAGS, TIMEOUT_MS


@pytest.fixture
def browser(tmp_path: Path):
    if not CHROMIUM.is_file():
        pytest.skip(f"no Chromium at {CHROMIUM}: install Debian's chromium package (.ci/run does: apt-get install chromium)")
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),  # a fresh profile every run
            executable_path=str(CHROMIUM),
            headless=True,
            args=FLAGS,
            viewport=DESKTOP,
        )
        context.set_default_timeout(TIMEOUT_MS)
        expect.set_options(timeout=TIMEOUT_MS)
        try:
            yield context
        finally:
            context.close()
