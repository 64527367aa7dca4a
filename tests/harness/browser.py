"""A real headless Chromium (Debian's chromium package, driven by Playwright; no browser download
at run time): where it is and how it is started for the page tests (the ``browser`` fixture is in
tests/serve/conftest.py; ``launch`` starts one a test module shares), and where its screenshots go."""

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


def launch(playwright):
    """One headless Chromium for a test module: each test opens contexts of its own in it (a fresh
    profile each, with its window size, language and time zone), cheaper than a browser each."""
    import pytest

    if not CHROMIUM.is_file():
        pytest.skip(f"no Chromium at {CHROMIUM}: install Debian's chromium package (.ci/run does: apt-get install chromium)")
    return playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)


def placeholders_cut(page, within: str) -> list[str]:
    """The visible fields under ``within`` whose placeholder is wider than the field shows: each as
    "id: placeholder (needs N px, has M px)". The placeholder's width is measured in the field's own font."""
    return page.evaluate(
        """(within) => {
            const canvas = document.createElement("canvas").getContext("2d");
            const cut = [];
            for (const field of document.querySelectorAll(within + " input[placeholder], " + within + " textarea[placeholder]")) {
                if (!field.offsetParent) continue;  // not shown
                const style = getComputedStyle(field);
                canvas.font = style.font;
                const needs = canvas.measureText(field.placeholder).width;
                const has = field.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
                if (field.tagName === "INPUT" ? needs > has : needs > has * field.rows) {
                    cut.push(`${field.id}: ${field.placeholder} (needs ${Math.ceil(needs)} px, has ${Math.floor(has)} px)`);
                }
            }
            return cut;
        }""",
        within,
    )
