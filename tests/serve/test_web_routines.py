"""The Routines tab of the web page, in a real headless Chromium against a real tarsd (one of each
for the module; each test opens its own browser context, with its own window size, language and
time zone): routines listed, paused and removed; a reminder set in the page landing in the inbox
with the unread badge; the inbox rendered from its markdown and labelled for people; times in the
routines' time zone, 24-hour unless the browser's language asks otherwise, with the year when it is
not this year's; a routine added and changed in the page with its schedule checked by tarsd as it is
typed; errors under their field and in view on a phone; proposals decided with Approve and Reject
side by side; and a chat message whose answer failed still saying so after a reload. Text from
tarsd (prompts, answers, errors) is shown as text: nothing in it renders or runs.

Screenshots (not committed) go to .artifacts/screenshots/ or $TARS_SCREENSHOTS."""

from __future__ import annotations

import re
import tempfile
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

pytest.importorskip("playwright", reason="the playwright package is missing: bash scripts/test.sh installs the test extras")
from playwright.sync_api import expect, sync_playwright  # noqa: E402

from harness.browser import DESKTOP, PHONE, TIMEOUT_MS, launch, placeholders_cut, shot  # noqa: E402
from harness.daemon import TarsDaemon, wait_for  # noqa: E402
from harness.fake_llm import FakeOllama  # noqa: E402
from harness.paths import MODEL_DIR  # noqa: E402
from harness.tool_servers import stdio_server, toml_config  # noqa: E402
from harness.web import Web  # noqa: E402

HOSTILE = "<img src=x onerror=alert(1)>"
ZONE = "America/New_York"  # the routines' time zone ([routines] timezone)
BROWSER_ZONE = "Asia/Tokyo"  # the browser's: 13 or 14 hours away, so a time said in the wrong zone shows
PROPOSED = {"name": "new-year", "schedule": "0 6 1 1 *", "prompt": f"Wish me a happy new year {HOSTILE}", "quiet": True}
# The messages of tarsd's errors are its own to word (tarsd/routines/schedule.py): the tests look for the
# text the user typed in them, quoted back, not for the wording around it.
RULE = "Use metric units"


def model(body: dict) -> dict:
    """The model: a routine's prompt "Say: X" is answered X; asked to, it proposes a routine or a rule;
    "fail" gets an error from it, as from a model that fell over."""
    messages = body.get("messages", [])
    if messages and messages[-1]["role"] == "tool":
        return {"text": "I proposed it: approve it on the page."}
    users = [m["content"] for m in messages if m["role"] == "user"]
    said = users[-1] if users else ""
    if match := re.search(r"Say: (.+)", said, re.DOTALL):
        return {"text": match.group(1)}
    if match := re.search(r"propose a routine called ([a-z0-9-]+)", said):
        return {"tool_calls": [{"name": "propose_routine", "arguments": {**PROPOSED, "name": match.group(1)}}]}
    if "propose a rule" in said:
        return {"tool_calls": [{"name": "memory_remember", "arguments": {"fact": RULE, "kind": "procedural"}}]}
    if "fail" in said:
        return {"status": 500, "message": "the model fell over"}
    return {"text": "ok"}


@pytest.fixture(scope="module")
def web():
    root = Path(tempfile.mkdtemp(prefix="tars-web-routines-"))
    (root / "vault").mkdir()
    (root / "state").mkdir()
    # Another server's tools, for a routine to be allowed some of them on the page.
    tools = toml_config({"tasks": stdio_server("tasks", root / "journal.jsonl")})
    (root / "state" / "config.toml").write_text(tools + f'\n[routines]\ntimezone = "{ZONE}"\n')
    with FakeOllama() as ollama:
        ollama.script = [model] * 10_000
        env = {
            "TARS_HTTP_ENABLED": "true",
            "TARS_HTTP_PORT": "0",
            "TARS_CHAT_OLLAMA_HOST": ollama.url,
            "TARS_CHAT_OLLAMA_MODEL": "fake-chat",
            "TARS_CHAT_MAX_RETRIES": "0",
        }
        daemon = TarsDaemon(root / "vault", root / "state", MODEL_DIR, "none", env).start()
        try:
            wait_for(lambda: daemon.status().tool_servers[0].state == "ready", "the MCP server to be ready")
            yield Web(daemon)
        finally:
            daemon.stop()
            daemon.cleanup()


@pytest.fixture(scope="module")
def chromium():
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def open_page(web, chromium):
    """A page of the tars web page in a fresh context: ``size`` (DESKTOP or PHONE), the browser's
    ``locale`` (None: Chromium's own, en-US) and time zone. Confirm dialogs are answered by
    ``dialog`` (the message -> accept?), and each dialog's message is kept in ``page.dialogs``."""
    contexts = []

    def factory(size=DESKTOP, locale=None, dialog=lambda message: True):
        context = chromium.new_context(viewport=size, timezone_id=BROWSER_ZONE, **({"locale": locale} if locale else {}))
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        page = context.new_page()
        page.dialogs = []

        def answer(prompt) -> None:
            page.dialogs.append(prompt.message)
            prompt.accept() if dialog(prompt.message) else prompt.dismiss()

        page.on("dialog", answer)
        page.goto(f"{web.url}#token={web.token}")
        expect(page.locator("#state")).to_contain_text(re.compile(r"\d+ notes?"))  # the page is open
        page.click("#tab-routines")
        expect(page.locator("#routines")).to_be_visible()
        return page

    expect.set_options(timeout=TIMEOUT_MS)
    yield factory
    for context in contexts:
        context.close()


def add(web, **routine) -> dict:
    with web.client() as http:
        added = http.post("/routines", json=routine)
    assert added.status_code == 200, added.text
    return added.json()["routine"]


def remind(web, when: str, text: str) -> dict:
    with web.client() as http:
        saved = http.post("/remind", json={"when": when, "text": text})
    assert saved.status_code == 200, saved.text
    return saved.json()["routine"]


def in_view(box: dict | None, size: dict) -> bool:
    """The box is wholly in the window (to a pixel: boxes have fractions)."""
    if box is None:
        return False
    return (
        box["x"] >= -1
        and box["y"] >= -1
        and box["x"] + box["width"] <= size["width"] + 1
        and box["y"] + box["height"] <= size["height"] + 1
    )


def test_routines_reminders_and_the_inbox_on_the_page(web, open_page):
    page = open_page(dialog=lambda message: not (message.startswith("Remove") and page.dialogs.count(message) == 1))
    expect(page.locator("#routines-note")).to_contain_text("No routines or reminders yet")  # the module's first test
    assert page.locator("#unread-badge").is_hidden()  # nothing said yet
    assert page.locator("#chat").is_visible() and page.locator("#search").is_hidden()  # a wide screen: routines beside the chat
    add(web, name="morning-brief", schedule="30 7 * * *", prompt="What is on today?")
    add(web, name="hostile", schedule="every 2h", prompt=HOSTILE)
    page.click("#tab-routines")  # looks again

    brief = page.locator('.routine[data-name="morning-brief"]')
    expect(brief.locator(".routine-schedule")).to_have_text("30 7 * * *")
    expect(brief.locator(".routine-prompt")).to_have_text("What is on today?")
    expect(brief.locator(".routine-state")).to_contain_text("next ")

    # The prompt is text: its tags show, nothing renders or runs.
    hostile = page.locator('.routine[data-name="hostile"]')
    expect(hostile.locator(".routine-prompt")).to_have_text(HOSTILE)
    assert page.locator("#routines img").count() == 0

    brief.get_by_role("button", name="Pause").click()
    expect(brief.locator(".routine-state")).to_have_text("paused")
    expect(brief.get_by_role("button", name="Resume")).to_be_visible()
    with web.client() as http:
        assert http.get("/routines", params={"name": "morning-brief"}).json()["routines"][0]["paused"] is True
    brief.get_by_role("button", name="Resume").click()
    expect(brief.locator(".routine-state")).to_contain_text("next ")

    # A reminder in a second: the page looks again once it is due, and the badge counts it.
    page.fill("#remind-when", "in 1 s")
    page.fill("#remind-text", "Take the bread out")
    page.click("#remind-send")
    # "Set for <time>." or, when the reminder already fired before tarsd answered (an idle machine), "Set."
    expect(page.locator("#remind-note")).to_have_text(re.compile(r"^Set( for .+)?\.$"))
    expect(page.locator("#unread-badge")).to_have_text("1")
    expect(page.locator("#inbox-count")).to_have_text("(1 unread)")
    said = page.locator(".inbox-message").first
    expect(said.locator(".inbox-text")).to_have_text("Take the bread out")
    expect(said.locator(".inbox-source")).to_have_text("Reminder")  # not reminder:remind-1127-1133
    assert "unread" in (said.get_attribute("class") or "")
    assert page.title() == "(1) tars"

    page.click("#mark-all-read")
    expect(page.locator("#unread-badge")).to_be_hidden()
    expect(page.locator(".inbox-message.unread")).to_have_count(0)
    with web.client() as http:
        assert http.get("/inbox").json()["unread"] == 0

    # Remove asks first: dismissed, the routine stays; accepted, it goes.
    doomed = add(web, name="doomed", schedule="every 3h", prompt="Soon gone")["name"]
    page.click("#tab-routines")
    gone = page.locator(f'.routine[data-name="{doomed}"]')
    gone.get_by_role("button", name="Remove").click()
    expect(gone).to_have_count(1)
    gone.get_by_role("button", name="Remove").click()
    expect(gone).to_have_count(0)
    assert page.dialogs == ["Remove the routine “doomed”?"] * 2  # no alert(1) among them
    assert page.locator("#routines img").count() == 0

    # A phone: Routines is a third tab, one view at a time, nothing wider than the screen.
    phone = open_page(PHONE)
    expect(phone.locator('.routine[data-name="hostile"] .routine-prompt')).to_have_text(HOSTILE)
    assert phone.locator("#chat").is_hidden() and phone.locator("#search").is_hidden()
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert phone.locator("#routines img").count() == 0 and phone.dialogs == []


def test_a_routine_the_model_proposed_is_shown_whole_and_approved_on_the_page(web, open_page):
    page = open_page()
    page.fill("#message", "please propose a routine called new-year")
    page.press("#message", "Enter")
    card = page.locator("#pending-rules")
    expect(card).to_be_visible()
    # The Routines tab is shown: the card is in it, where the routine will be.
    assert page.locator("#routines #pending-rules").count() == 1
    waiting = card.locator(".pending-routine")
    expect(waiting.locator(".pending-heading")).to_have_text("Add the routine")
    with web.client() as http:
        [pending] = [rule for rule in http.get("/rules/pending").json()["rules"] if rule["action"] == "routine"]
    # The whole TOML table, as approving writes it: schedule, prompt (its tags as text) and all.
    assert "[routine.new-year]" in pending["rule"]
    expect(waiting.locator("pre.pending-toml")).to_have_text(pending["rule"])
    assert page.locator("#pending-rules img, #routines img").count() == 0
    expect(page.locator('.routine[data-name="new-year"]')).to_have_count(0)  # waiting is not added

    card.locator(".pending-rule", has=page.locator(".pending-routine")).get_by_role("button", name="Approve").click()
    expect(card).to_be_hidden()
    added = page.locator('.routine[data-name="new-year"]')
    expect(added.locator(".routine-prompt")).to_have_text(PROPOSED["prompt"])
    expect(added.locator(".routine-schedule")).to_have_text("0 6 1 1 *")
    expect(added).to_contain_text("speaks only when needed")
    assert page.locator("#routines img").count() == 0 and page.dialogs == []


def test_the_inbox_renders_markdown_and_names_who_spoke_for_people(web, open_page):
    said = f"You have **three** meetings, the first at `09:00`.\n\n- *Dentist* {HOSTILE}\n- [agenda](https://example.org/a)"
    add(web, name="weekly-plan", schedule="0 8 * * *", prompt=f"Say: {said}")
    with web.client() as http:
        ran = http.post("/routines/weekly-plan/run")
    assert ran.status_code == 200 and ran.json()["text"] == said, ran.text
    remind(web, "in 2 s", "Call **Ana** back")

    page = open_page()
    plan = page.locator(".inbox-message", has=page.locator(".inbox-source", has_text="weekly-plan"))
    text = plan.locator(".inbox-text")
    expect(text.locator("strong")).to_have_text("three")
    expect(text.locator("code")).to_have_text("09:00")
    expect(text.locator("em")).to_have_text("Dentist")
    link = text.locator("a")
    expect(link).to_have_text("agenda")
    assert link.get_attribute("href") == "https://example.org/a" and "noreferrer" in link.get_attribute("rel")
    shown = text.inner_text()
    assert "**" not in shown and "`" not in shown and "• Dentist " + HOSTILE in shown  # the tags as text
    assert page.locator("#inbox-list img").count() == 0 and page.dialogs == []
    # Who spoke, for people: the routine's name, "Reminder"; not the inbox's internal labels.
    reminder = page.locator(".inbox-message", has_text="Call Ana back")
    expect(reminder.locator(".inbox-source")).to_have_text("Reminder")
    expect(reminder.locator(".inbox-text strong")).to_have_text("Ana")
    listed = page.locator("#inbox-list").inner_text()
    assert "routine:" not in listed and "reminder:" not in listed and "remind-" not in listed
    assert plan.locator(".inbox-title").count() == 0  # the title only repeated the name


def test_a_date_not_this_years_says_its_year(web, open_page):
    add(web, name="early-walk", schedule="30 6 * * *", prompt="Say: walk")
    far = remind(web, "2028-03-01 09:00", "Renew the passport")
    zone = ZoneInfo(ZONE)
    with web.client() as http:
        [walk] = http.get("/routines", params={"name": "early-walk"}).json()["routines"]
    walk_at = datetime.fromtimestamp(walk["next_run"], zone)
    this_year = datetime.now(zone).year

    page = open_page()
    passport = page.locator(f'.routine[data-name="{far["name"]}"] .routine-state')
    expect(passport).to_contain_text("Mar 1, 2028")
    walk_state = page.locator('.routine[data-name="early-walk"] .routine-state')
    expect(walk_state).to_contain_text("06:30")  # in New York, as the schedule is read; 20:30 or 19:30 in Tokyo
    assert (str(this_year) in walk_state.inner_text()) == (walk_at.year != this_year), walk_state.inner_text()
    expect(page.locator("#routines-zone")).to_have_text(f"Times are in {ZONE}, the routines' time zone.")


def test_times_are_24_hour_unless_the_browsers_language_asks_for_12(web, open_page):
    add(web, name="late-walk", schedule="30 21 * * *", prompt="Say: walk")
    for locale in (None, "en-US", "en-GB", "de-DE"):  # Chromium's own language (en-US), then some that name one
        page = open_page(locale=locale)
        state = page.locator('.routine[data-name="late-walk"] .routine-state')
        expect(state).to_contain_text("21:30")  # not 09:30 PM; and in New York, not Tokyo's 11:30 or 10:30
        assert not re.search(r"AM|PM|am|pm", state.inner_text()), (locale, state.inner_text())
    # A language that asks for 12-hour times itself (a -u-hc-h12 locale) gets them.
    twelve = open_page(locale="en-US-u-hc-h12")
    expect(twelve.locator('.routine[data-name="late-walk"] .routine-state')).to_contain_text("09:30 PM")


def test_no_placeholder_is_cut(web, open_page):
    for size in (DESKTOP, PHONE):
        page = open_page(size)
        assert placeholders_cut(page, "#routines") == [], size  # the Remind me form
        page.click("#routine-new")
        expect(page.locator("#routine-form")).to_be_visible()
        assert placeholders_cut(page, "#routines") == [], size  # and a new routine's


def test_a_routine_is_added_and_changed_on_the_page_its_schedule_checked_as_it_is_typed(web, open_page):
    page = open_page()
    page.click("#routine-new")
    form = page.locator("#routine-form")
    expect(form).to_be_visible()
    page.fill("#routine-name", "evening-review")

    # Typed, the schedule is read by tarsd: the next three runs, in the routines' zone, named.
    page.locator("#routine-schedule").press_sequentially("0 18 * * *")
    runs = page.locator("#routine-preview .preview-runs li")
    expect(runs).to_have_count(3)
    expect(page.locator("#routine-preview .preview-head")).to_have_text(f"Next 3 runs, in {ZONE}:")
    assert all("18:00" in run for run in runs.all_inner_texts()), runs.all_inner_texts()
    assert page.locator("#routine-schedule-error").inner_text() == ""

    # A schedule tarsd cannot read: its message under the field, as text, and no runs.
    page.fill("#routine-schedule", f"every 5 parsecs {HOSTILE}")
    error = page.locator("#routine-schedule-error")
    expect(error).to_contain_text(f"every 5 parsecs {HOSTILE}")  # tarsd's message, as text
    expect(runs).to_have_count(0)
    assert page.locator("#routine-schedule").get_attribute("aria-invalid") == "true"
    field, shown = page.locator("#routine-schedule").bounding_box(), error.bounding_box()
    assert 0 <= shown["y"] - (field["y"] + field["height"]) < 80, (field, shown)  # next to the field, not at the end of the form
    page.fill("#routine-prompt", "What went well today?")
    form.evaluate("node => node.scrollIntoView({block: 'start'})")
    shot(page, "desktop-routine-form-error")
    # Saving with it is refused on the page, the cursor put in the field.
    page.click("#routine-save")
    expect(page.locator("#routine-schedule")).to_be_focused()
    with web.client() as http:
        assert http.get("/routines", params={"name": "evening-review"}).status_code == 404

    page.fill("#routine-schedule", "0 18 * * *")
    expect(runs).to_have_count(3)
    expect(error).to_have_text("")
    page.locator("#routine-deliver label", has_text="inbox").locator("input").check()
    page.locator("#routine-tools label", has_text="tasks_find_tasks").locator("input").check()
    page.check("#routine-quiet")
    form.evaluate("node => node.scrollIntoView({block: 'start'})")
    shot(page, "desktop-routine-form-preview")
    page.click("#routine-save")
    expect(form).to_be_hidden()
    expect(page.locator("#routines-saved")).to_contain_text("Added “evening-review”: next run")
    added = page.locator('.routine[data-name="evening-review"]')
    expect(added.locator(".routine-schedule")).to_have_text("0 18 * * *")
    expect(added.locator(".routine-prompt")).to_have_text("What went well today?")
    expect(added).to_contain_text("speaks only when needed")
    with web.client() as http:
        [saved] = http.get("/routines", params={"name": "evening-review"}).json()["routines"]
    assert (saved["schedule"], saved["prompt"], saved["deliver"], saved["quiet"]) == (
        "0 18 * * *",
        "What went well today?",
        ["inbox"],
        True,
    )
    assert saved["tools"] == ["tasks_find_tasks"]
    expect(added).to_contain_text("may use without asking: tasks_find_tasks")

    # tarsd's own refusal (the name is taken), beside the button that was pressed, as text.
    page.click("#routine-new")
    page.fill("#routine-name", "evening-review")
    page.fill("#routine-schedule", "every 4h")
    page.fill("#routine-prompt", "Again")
    page.click("#routine-save")
    refused = page.locator("#routine-form-error")
    expect(refused).to_contain_text("'evening-review'")  # tarsd's message: the name is taken
    assert in_view(refused.bounding_box(), DESKTOP)
    page.click("#routine-cancel")
    expect(form).to_be_hidden()

    # Changed: the form opens on the routine, filled in; only what changed is sent.
    added.get_by_role("button", name="Edit").click()
    expect(added.locator("#routine-form")).to_be_visible()
    assert page.locator("#routine-name").is_disabled() and page.input_value("#routine-name") == "evening-review"
    assert page.input_value("#routine-prompt") == "What went well today?"
    expect(runs).to_have_count(3)  # its schedule, checked as it opens
    page.fill("#routine-schedule", "every 2h")
    expect(page.locator("#routine-preview .preview-head")).to_have_text(f"Next 3 runs, in {ZONE}:")
    assert len({run[-5:] for run in runs.all_inner_texts()}) == 3, runs.all_inner_texts()  # two hours apart, not 18:00 each
    added.evaluate("node => node.scrollIntoView({block: 'start'})")
    shot(page, "desktop-routine-edit")
    page.uncheck("#routine-quiet")
    page.click("#routine-save")
    expect(form).to_be_hidden()
    expect(added.locator(".routine-schedule")).to_have_text("every 2h")
    expect(added).not_to_contain_text("speaks only when needed")
    with web.client() as http:
        [changed] = http.get("/routines", params={"name": "evening-review"}).json()["routines"]
    assert (changed["schedule"], changed["prompt"], changed["deliver"], changed["quiet"]) == (
        "every 2h",
        "What went well today?",
        ["inbox"],
        False,
    )
    assert changed["tools"] == ["tasks_find_tasks"]  # not sent, so kept
    assert page.locator("#routines img").count() == 0 and page.dialogs == []


def test_on_a_phone_approve_and_reject_sit_side_by_side(web, open_page):
    with web.client() as http:
        for asked in ("please propose a routine called phone-proposal", "please propose a rule"):
            assert http.post("/chat", json={"conversation_id": "setup", "message": asked}).status_code == 200
    phone = open_page(PHONE)
    for tab in ("#tab-chat", "#tab-routines"):  # the card is at the top of both (on a phone, the tab shown)
        phone.click(tab)
        card = phone.locator("#pending-rules")
        expect(card).to_be_visible()
        expect(card.locator(".pending-rule", has_text="phone-proposal")).to_have_count(1)
        expect(card.locator(".pending-rule", has_text=RULE)).to_have_count(1)
        for proposal in card.locator(".pending-rule").all():
            approve = proposal.get_by_role("button", name="Approve").bounding_box()
            reject = proposal.get_by_role("button", name="Reject").bounding_box()
            assert abs(approve["y"] - reject["y"]) < 1 and abs(approve["height"] - reject["height"]) < 1, (tab, approve, reject)
            assert approve["x"] + approve["width"] <= reject["x"] and reject["x"] + reject["width"] <= PHONE["width"], (approve, reject)
            assert proposal.locator(".pending-text").bounding_box()["y"] < approve["y"]  # under what they decide
    assert phone.locator("#routines #pending-rules").count() == 1


def test_on_a_phone_a_bad_time_shows_its_error_under_the_field_in_view(web, open_page):
    for n in range(6):  # enough that the Remind me form is far down the tab
        add(web, name=f"phone-{n}", schedule=f"{n} 9 * * *", prompt=f"Say: number {n}")
    phone = open_page(PHONE)
    expect(phone.locator('.routine[data-name="phone-5"]')).to_have_count(1)
    send = phone.locator("#remind-send")
    send.evaluate("node => node.scrollIntoView({block: 'end'})")  # the button at the bottom of the screen, under the thumb
    phone.fill("#remind-when", "at noon")
    phone.fill("#remind-text", "Lunch")
    send.click()
    error = phone.locator("#remind-form").get_by_text("'at noon'")  # tarsd's message, wherever the page puts it
    expect(error).to_be_attached()
    assert in_view(error.bounding_box(), PHONE), error.bounding_box()
    field = phone.locator("#remind-when").bounding_box()
    assert 0 <= error.bounding_box()["y"] - (field["y"] + field["height"]) < 40  # under its field
    assert phone.locator("#remind-when").get_attribute("aria-invalid") == "true"
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    shot(phone, "phone-remind-error")


def test_on_a_phone_a_routine_is_added_with_its_errors_in_view(web, open_page):
    phone = open_page(PHONE)
    phone.locator("#routine-new").click()
    phone.fill("#routine-name", "phone-review")
    phone.fill("#routine-schedule", "30 25 * * *")
    expect(phone.locator("#routine-schedule-error")).to_contain_text("'30 25 * * *'")
    assert in_view(phone.locator("#routine-schedule-error").bounding_box(), PHONE)
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    phone.locator("#routine-form").evaluate("node => node.scrollIntoView({block: 'start'})")
    shot(phone, "phone-routine-form-error")
    phone.fill("#routine-schedule", "30 21 * * 1-5")
    expect(phone.locator("#routine-preview .preview-runs li")).to_have_count(3)
    phone.fill("#routine-prompt", "Say: what is on tomorrow?")
    shot(phone, "phone-routine-form-preview")
    phone.click("#routine-save")
    expect(phone.locator('.routine[data-name="phone-review"] .routine-schedule')).to_have_text("30 21 * * 1-5")
    phone.locator("#routines").evaluate("node => node.scrollTop = 0")
    shot(phone, "phone-routines")
    assert phone.locator("#routines img").count() == 0 and phone.dialogs == []

    # The same tab on a wide screen: the proposals, the inbox, the routines.
    page = open_page()
    expect(page.locator("#pending-rules")).to_be_visible()
    shot(page, "desktop-routines")


def test_a_message_whose_answer_failed_still_says_so_after_a_reload(web, open_page):
    page = open_page()
    page.fill("#message", "this one will fail")
    page.press("#message", "Enter")
    expect(page.locator(".message-assistant.failed .error")).not_to_be_empty()
    page.fill("#message", "Say: fine now")
    page.press("#message", "Enter")
    expect(page.locator(".message-assistant .body").last).to_have_text("fine now")

    page.reload()
    asked = page.locator(".message-user", has_text="this one will fail")
    expect(asked).to_have_count(1)
    expect(asked).to_have_class(re.compile(r"\bunanswered\b"))
    expect(asked.locator(".message-notes")).to_contain_text("No answer came to this")
    # Shown as it was: no answer after it, the next message the user's; that one answered.
    assert asked.evaluate("node => node.nextElementSibling.querySelector('.body').textContent") == "Say: fine now"
    answered = page.locator(".message-user", has_text="Say: fine now")
    expect(answered).not_to_have_class(re.compile(r"\bunanswered\b"))
    assert answered.evaluate("node => node.nextElementSibling.querySelector('.body').textContent") == "fine now"


def test_the_schedule_preview_says_whether_a_schedule_can_be_used_and_its_next_runs(web):
    """GET /schedule/preview (preview_schedule), which the form asks as the user types: read by the
    routines' own check, nothing saved, never an internal error whatever is typed."""
    created = add(web, name="every-seven", schedule="every 7h", prompt="Say: seven")
    listed = lambda http: [(r["name"], r["schedule"]) for r in http.get("/routines").json()["routines"]]  # noqa: E731
    with web.client() as http:
        before = listed(http)

        def preview(schedule: str, **params) -> dict:
            answer = http.get("/schedule/preview", params={"schedule": schedule, **params})
            assert answer.status_code == 200, answer.text
            assert answer.json()["type"] == "schedule_preview" and answer.json()["timezone"] == ZONE
            return answer.json()

        every = preview("every   2h", runs=5)
        assert (every["valid"], every["kind"], every["schedule"], every["problem"]) == (True, "every", "every 2h", "")
        assert len(every["runs"]) == 5 and all(round(b - a) == 7200 for a, b in pairwise(every["runs"]))
        once = preview("2031-05-04 10:30")
        assert once["kind"] == "once" and once["runs"] == [datetime(2031, 5, 4, 10, 30, tzinfo=ZoneInfo(ZONE)).timestamp()]
        # A routine being changed: its `every` series goes on from its creation, as the clock counts it.
        kept = preview("every 7h", name="every-seven")
        assert kept["runs"][0] == created["next_run"]
        assert all(round(at - kept["runs"][0]) % 25200 == 0 for at in kept["runs"])
        for unusable in ("every 5 parsecs", "2020-01-01 10:00", "61 * * * *", "every 10000000 d", "9999-12-31T23:59-12:00", HOSTILE):
            refused = preview(unusable)
            assert refused["valid"] is False and refused["runs"] == [] and refused["problem"] and refused["hint"], (unusable, refused)
        assert http.get("/schedule/preview", params={"schedule": "every 2h", "runs": 0}).status_code == 400
        assert listed(http) == before  # nothing saved


def test_the_markdown_renderer_builds_elements_and_text_only(web, open_page):
    """markdown.js, which renders the inbox and the chat's answers, on hostile and long input: a
    javascript: link is written out, tags stay text, 100,000 characters of marks are rendered, and a
    line too long to look for marks in is shown as written."""
    page = open_page()
    rendered = page.evaluate(
        """async () => {
            const { markdown } = await import("/markdown.js");
            const box = document.createElement("div");
            const hostile = "[click](javascript:alert(1)) <script>window.__pwned = 1</script> **<img src=x onerror=alert(2)>**\\n"
                + "```\\n<b>code</b> **not bold**\\n```\\n> quoted *and* `code`\\n\\n# Heading\\n---\\n~~gone~~ a\\\\*b\\\\*";
            box.append(markdown(hostile));
            const long = document.createElement("div");
            long.append(markdown("**bold** and *it*\\n".repeat(6000)));  // 108,000 characters
            const line = document.createElement("div");
            line.append(markdown("**a** ".repeat(5000)));  // one line past the 20,000 marked: as written
            return {
                text: box.textContent,
                tags: [...box.querySelectorAll("*")].map((node) => node.tagName.toLowerCase()),
                links: box.querySelectorAll("a").length,
                strong: long.querySelectorAll("strong").length,
                em: long.querySelectorAll("em").length,
                line: [line.querySelectorAll("strong").length, line.textContent.length],
            };
        }"""
    )
    assert rendered["links"] == 0 and "click (javascript:alert(1))" in rendered["text"]
    assert "<script>window.__pwned = 1</script>" in rendered["text"] and "<img src=x onerror=alert(2)>" in rendered["text"]
    assert "<b>code</b> **not bold**" in rendered["text"] and "a*b*" in rendered["text"]
    assert set(rendered["tags"]) <= {"div", "strong", "em", "code", "pre", "blockquote", "hr", "s"}, rendered["tags"]
    assert {"pre", "blockquote", "hr", "s"} <= set(rendered["tags"])
    assert (rendered["strong"], rendered["em"]) == (6000, 6000)
    assert rendered["line"] == [0, len(("**a** " * 5000).rstrip())]
    assert page.evaluate("window.__pwned") is None


def test_a_routine_whose_run_is_the_memory_review_says_what_it_runs_and_changes_without_a_prompt(web, open_page):
    """A routine with review = "memory" has no prompt: the page says what it runs instead, and its
    form has no prompt field to fill (one filled in would make it a routine it cannot be)."""
    done = web.daemon.tarsctl("memory", "schedule", "0 18 * * 0", "--deliver", "inbox")
    assert done.returncode == 0, done.stderr
    page = open_page()
    item = page.locator('.routine[data-name="memory-review"]')
    expect(item.locator(".routine-prompt")).to_have_text(re.compile(r"^Runs the memory review: it proposes changes to Memory\.md"))
    item.get_by_role("button", name="Edit").click()
    expect(item.locator("#routine-form")).to_be_visible()
    expect(page.locator("#routine-prompt")).to_be_hidden()
    expect(page.locator("#routine-built-in")).to_contain_text("Runs the memory review")
    page.fill("#routine-schedule", "0 19 * * 0")
    expect(page.locator("#routine-preview .preview-runs li")).to_have_count(3)
    page.click("#routine-save")
    expect(page.locator("#routine-form")).to_be_hidden()
    expect(item.locator(".routine-schedule")).to_have_text("0 19 * * 0")
    with web.client() as http:
        [saved] = http.get("/routines", params={"name": "memory-review"}).json()["routines"]
        assert (saved["schedule"], saved["review"], saved.get("prompt", "")) == ("0 19 * * 0", "memory", "")
        page.click("#routine-new")  # a routine of the user's own: the prompt field is back
        expect(page.locator("#routine-prompt")).to_be_visible()
        expect(page.locator("#routine-built-in")).to_be_hidden()
        page.click("#routine-cancel")
        assert http.delete("/routines/memory-review").status_code == 200
