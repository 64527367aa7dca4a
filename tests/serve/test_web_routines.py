"""The routines card and the inbox on the web page, in a real headless Chromium against a real
tarsd: a routine added over HTTP is listed, Pause pauses it, a reminder set in the page's form
lands in the inbox with the unread badge, Mark all read clears it, Remove asks first, and a
routine's prompt is shown as text (never run as HTML)."""

from __future__ import annotations

import pytest

pytest.importorskip("playwright", reason="the playwright package is missing: bash scripts/test.sh installs the test extras")
from playwright.sync_api import expect  # noqa: E402

from harness.browser import PHONE, shot  # noqa: E402

HOSTILE_PROMPT = "<img src=x onerror=alert(1)>"


def test_routines_reminders_and_the_inbox_on_the_page(http_daemon, browser):
    web = http_daemon()
    with web.client() as http:
        for routine in (
            {"name": "morning-brief", "schedule": "30 7 * * *", "prompt": "What is on today?"},
            {"name": "hostile", "schedule": "every 2h", "prompt": HOSTILE_PROMPT},
        ):
            added = http.post("/routines", json=routine)
            assert added.status_code == 200, added.text
    page = browser.new_page()
    dialogs: list[str] = []

    def answer_dialog(dialog) -> None:
        dialogs.append(dialog.message)
        if dialog.message.startswith("Remove") and len([d for d in dialogs if d.startswith("Remove")]) == 1:
            dialog.dismiss()  # the first Remove is thought better of
        else:
            dialog.accept()

    page.on("dialog", answer_dialog)
    page.goto(f"{web.url}#token={web.token}")
    expect(page.locator("#state")).to_contain_text("notes")
    assert page.locator("#unread-badge").is_hidden()  # nothing said yet
    page.click("#tab-routines")
    expect(page.locator("#routines")).to_be_visible()
    assert page.locator("#chat").is_visible() and page.locator("#search").is_hidden()  # a wide screen: routines beside the chat

    brief = page.locator('.routine[data-name="morning-brief"]')
    expect(brief.locator(".routine-schedule")).to_have_text("30 7 * * *")
    expect(brief.locator(".routine-prompt")).to_have_text("What is on today?")
    expect(brief.locator(".routine-state")).to_contain_text("next ")

    # The prompt is text: its tags show, nothing renders or runs.
    hostile = page.locator('.routine[data-name="hostile"]')
    expect(hostile.locator(".routine-prompt")).to_have_text(HOSTILE_PROMPT)
    assert page.locator("#routines img").count() == 0

    brief.get_by_role("button", name="Pause").click()
    expect(brief.locator(".routine-state")).to_have_text("paused")
    expect(brief.get_by_role("button", name="Resume")).to_be_visible()
    with web.client() as http:
        assert http.get("/routines", params={"name": "morning-brief"}).json()["routines"][0]["paused"] is True

    # A reminder in a second: the page looks again once it is due, and the badge counts it.
    page.fill("#remind-when", "in 1 s")
    page.fill("#remind-text", "Take the bread out")
    page.click("#remind-send")
    expect(page.locator("#remind-note")).to_contain_text("Set")
    expect(page.locator("#unread-badge")).to_have_text("1")
    expect(page.locator("#inbox-count")).to_have_text("(1 unread)")
    said = page.locator(".inbox-message").first
    expect(said.locator(".inbox-text")).to_have_text("Take the bread out")
    expect(said.locator(".inbox-source")).to_contain_text("reminder:remind-")
    assert "unread" in (said.get_attribute("class") or "")
    assert page.title() == "(1) tars"
    shot(page, "desktop-routines")

    page.click("#mark-all-read")
    expect(page.locator("#unread-badge")).to_be_hidden()
    expect(page.locator(".inbox-message.unread")).to_have_count(0)
    with web.client() as http:
        assert http.get("/inbox").json()["unread"] == 0

    # Remove asks first: dismissed, the routine stays; accepted, it goes.
    brief.get_by_role("button", name="Remove").click()
    expect(brief).to_have_count(1)
    brief.get_by_role("button", name="Remove").click()
    expect(brief).to_have_count(0)
    assert dialogs == ["Remove the routine “morning-brief”?"] * 2  # no alert(1) among them
    assert page.locator("#routines img").count() == 0

    # A phone: Routines is a third tab, one view at a time, nothing wider than the screen.
    phone = browser.new_page()
    phone.set_viewport_size(PHONE)
    phone.on("dialog", answer_dialog)
    phone.goto(web.url)
    expect(phone.locator("#state")).to_contain_text("notes")
    phone.click("#tab-routines")
    expect(phone.locator('.routine[data-name="hostile"] .routine-prompt')).to_have_text(HOSTILE_PROMPT)
    assert phone.locator("#chat").is_hidden() and phone.locator("#search").is_hidden()
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    shot(phone, "phone-routines")
    assert phone.locator("#routines img").count() == 0 and len(dialogs) == 2


def test_a_routine_the_model_proposed_is_shown_whole_and_approved_on_the_page(http_daemon, fake_ollama, browser):
    proposal = {"name": "new-year", "schedule": "0 6 1 1 *", "prompt": f"Wish me a happy new year {HOSTILE_PROMPT}", "quiet": True}
    fake_ollama.script = [{"tool_calls": [{"name": "propose_routine", "arguments": proposal}]}, {"text": "I proposed a routine."}]
    web = http_daemon()
    page = browser.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(f"{web.url}#token={web.token}")
    expect(page.locator("#state")).to_contain_text("notes")
    page.click("#tab-routines")
    expect(page.locator("#routines-note")).to_contain_text("No routines or reminders yet")

    page.fill("#message", "wish me a happy new year every year")
    page.press("#message", "Enter")
    card = page.locator("#pending-rules")
    expect(card).to_be_visible()
    waiting = card.locator(".pending-routine")
    expect(waiting.locator(".pending-heading")).to_have_text("Add the routine")
    with web.client() as http:
        [pending] = http.get("/rules/pending").json()["rules"]
    # The whole TOML table, as approving writes it: schedule, prompt (its tags as text) and all.
    assert pending["action"] == "routine" and "[routine.new-year]" in pending["rule"]
    expect(waiting.locator("pre.pending-toml")).to_have_text(pending["rule"])
    assert page.locator("#pending-rules img, #routines img").count() == 0
    expect(page.locator(".routine")).to_have_count(0)  # waiting is not added
    shot(page, "desktop-routine-proposal")

    card.locator(".pending-rule", has=page.locator(".pending-routine")).get_by_role("button", name="Approve").click()
    expect(card).to_be_hidden()
    added = page.locator('.routine[data-name="new-year"]')
    expect(added.locator(".routine-prompt")).to_have_text(proposal["prompt"])
    expect(added.locator(".routine-schedule")).to_have_text("0 6 1 1 *")
    expect(added).to_contain_text("speaks only when needed")
    assert page.locator("#routines img").count() == 0 and dialogs == []
