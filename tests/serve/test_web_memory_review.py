"""The memory review on the web page, in a real headless Chromium against a real tarsd: Review now
lists the proposals by kind, each whole (a line of the file that holds markup shows as text),
nothing changes until Approve; Approve all of a kind applies them as one change, whose Undo puts
Memory.md back byte for byte; Reject takes a proposal off the list for good."""

from __future__ import annotations

import pytest

pytest.importorskip("playwright", reason="the playwright package is missing: bash scripts/test.sh installs the test extras")
from playwright.sync_api import expect  # noqa: E402

from harness.browser import shot
from harness.vault_files import write

HOSTILE = 'Owns a <img src=x onerror="window.__pwned = 1"> lamp'


def test_the_memory_review_is_decided_and_undone_on_the_page(http_daemon, vault, browser):
    write(
        vault,
        "Memory.md",
        f'# Core\n- Name: Sam\n- {HOSTILE}\n- owns a <img src=x onerror="window.__pwned = 1"> lamp.\n'
        "- Keeps bees\n- keeps bees.\n- Flight to Lisbon on 2020-03-14\n"
        + "".join(f"- Likes board game number {n}\n" for n in range(30)),  # 36 lines: a cap of 3
    )
    before = (vault / "Memory.md").read_bytes()
    web = http_daemon()
    page = browser.new_page()
    page.goto(f"{web.url}#token={web.token}")
    card = page.locator("#memory-review")
    expect(card.get_by_role("button", name="Review now")).to_be_visible()

    card.get_by_role("button", name="Review now").click()
    expect(card.locator("#memory-review-note")).to_contain_text("3 new proposals")
    duplicates = card.locator(".memory-kind", has_text="Duplicates (2)")
    expect(duplicates.locator(".memory-proposal")).to_have_count(2)
    expect(duplicates).to_contain_text('owns a <img src=x onerror="window.__pwned = 1"> lamp.')  # as text, whole
    expect(card.locator(".memory-kind", has_text="Lines whose time has passed (1)")).to_contain_text("Flight to Lisbon")
    assert page.evaluate("window.__pwned") is None
    assert (vault / "Memory.md").read_bytes() == before  # proposed, not made
    shot(page, "desktop-memory-review")

    card.locator(".memory-proposal", has_text="Flight to Lisbon").get_by_role("button", name="Reject").click()
    expect(card.locator("#memory-review-note")).to_contain_text("never proposed again")
    expect(card.locator(".memory-proposal", has_text="Flight to Lisbon")).to_have_count(0)
    assert (vault / "Memory.md").read_bytes() == before

    duplicates.get_by_role("button", name="Approve all 2").click()
    expect(card.locator("#memory-review-note")).to_contain_text("recorded in Memory history/")
    text = (vault / "Memory.md").read_text(encoding="utf-8")
    assert "keeps bees." not in text and "lamp." not in text and "Keeps bees" in text and HOSTILE in text
    expect(card.locator(".memory-proposal")).to_have_count(0)

    card.get_by_role("button", name="Undo").click()
    expect(card.locator("#memory-review-note")).to_contain_text("is back byte for byte as it was")
    assert (vault / "Memory.md").read_bytes() == before
