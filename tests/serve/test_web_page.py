"""The web page in a real headless Chromium (Debian's chromium package, driven by Playwright; no
browser is downloaded), against a real tarsd and the fake Ollama server: the token from the
address's fragment, live search with Obsidian links, a streamed chat with tool activity, hostile
note text shown as text. Screenshots of both views at phone and desktop widths go to
.artifacts/screenshots/ (or $TARS_SCREENSHOTS): looked at by people, never committed.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from urllib.parse import quote

import pytest

pytest.importorskip("playwright", reason="the playwright package is missing: bash scripts/test.sh installs the test extras")
from playwright.sync_api import expect  # noqa: E402

from harness.browser import DESKTOP, PHONE, shot
from harness.vault_files import write

HOSTILE_TITLE = 'Hostile <img src=x onerror="window.__pwned = 1"> notes'
HOSTILE_BODY = 'A clever <script>window.__pwned = 2</script> trick and <img src=x onerror="window.__pwned = 3"> too.'


def test_search_and_chat_in_a_real_browser(http_daemon, vault, fake_ollama, browser):
    write(
        vault, "Sourdough.md", "# Sourdough\n\nFeed the starter the evening before.\n\n## Bake\n\nBake covered at 250 °C for 20 minutes.\n"
    )
    write(vault, "Bread ideas.md", "# Bread ideas\n\nA rye sourdough with caraway, and a spelt loaf.\n")
    write(vault, "Garden.md", "# Garden\n\nTomatoes need sun and daily water in July.\n")
    write(vault, "Hostile.md", f"# {HOSTILE_TITLE}\n\n{HOSTILE_BODY}\n")
    answer = 'You feed the starter the evening before, then bake at 250 °C. <img src=x onerror="window.__pwned = 4">'
    fake_ollama.script = [
        {"tool_calls": [{"name": "memory_search", "arguments": {"query": "sourdough starter"}}]},
        {"text": answer, "delay": 0.15},
    ]
    web = http_daemon()
    page = browser.new_page()
    opened = []
    page.on("request", lambda request: opened.append(request.url) if request.url.startswith("obsidian:") else None)

    # The token arrives in the fragment, is kept by the page and taken out of the address bar.
    page.goto(f"{web.url}#token={web.token}")
    # The page runs under its own Content-Security-Policy, so waits use selectors (no script is evaluated).
    expect(page.locator("#state")).to_contain_text("4 notes")
    assert "token" not in page.url and page.locator("#login").is_hidden()

    # Live search: results as you type, the matched words marked, a band, an obsidian:// link.
    page.fill("#q", "sourdough starter")
    page.wait_for_selector(".hit")
    first = page.locator(".hit").first
    assert first.locator(".hit-title").inner_text() == "Sourdough"
    assert "starter" in [m.lower() for m in first.locator("mark").all_inner_texts()]
    assert first.locator(".band").inner_text().startswith(("relevant", "kinda", "maybe"))
    assert first.locator(".hit-path").inner_text() == "Sourdough.md:1"
    assert first.locator(".hit-title").get_attribute("href") == f"obsidian://open?vault={quote(vault.name, safe='')}&file=Sourdough.md"
    shot(page, "desktop-search")

    # Vault text is text: the hostile note's tags are shown, none of them runs or renders.
    page.fill("#q", "clever trick")
    hostile = page.locator(".hit").first
    expect(hostile.locator(".hit-title")).to_have_text(HOSTILE_TITLE)
    assert "<script>window.__pwned = 2</script>" in hostile.locator(".snippet").inner_text()
    assert page.locator("#results img, #results script").count() == 0
    assert page.evaluate("window.__pwned") is None

    # Chat: the reply streams in (text shows while the answer is still coming), tool activity shown.
    page.fill("#message", "how do I start a sourdough bake?")
    page.press("#message", "Enter")
    page.wait_for_selector(".message-assistant.streaming .body:not(:empty)")  # text while the answer still comes
    expect(page.locator(".message-assistant.streaming")).to_have_count(0)
    reply = page.locator(".message-assistant").first
    assert reply.locator(".body").inner_text() == answer
    tools = reply.locator(".tool").all_inner_texts()
    assert tools[0] == "· memory_search(query: sourdough starter)" and tools[1].startswith("· memory_search:")
    assert page.locator("#messages img").count() == 0 and page.evaluate("window.__pwned") is None
    shot(page, "desktop-chat")

    # A click on a result hands its obsidian:// link to the browser, and the page stays. (Last on this
    # page: headless Chromium takes no more input on a page once it has tried an external protocol.)
    with page.expect_request(lambda request: request.url.startswith("obsidian:")):
        page.locator(".hit-title").first.click()
    assert opened == [page.locator(".hit-title").first.get_attribute("href")] and page.url.startswith(web.url)

    # A phone: one view at a time, switched by the tabs; the kept token opens the page without the fragment.
    phone = browser.new_page()
    phone.set_viewport_size(PHONE)
    phone.goto(web.url)
    expect(phone.locator("#state")).to_contain_text("notes")
    assert phone.locator("#search").is_visible() and phone.locator("#chat").is_hidden()
    phone.fill("#q", "bread sourdough")
    phone.wait_for_selector(".hit")
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]  # nothing wider than the screen
    shot(phone, "phone-search")
    phone.click("#tab-chat")
    assert phone.locator("#chat").is_visible() and phone.locator("#search").is_hidden()
    # The conversation goes on from the other page: its messages are shown, the answer's tags as text.
    expect(phone.locator(".message-user .body")).to_have_text(["how do I start a sourdough bake?"])
    earlier = phone.locator(".message-assistant")
    expect(earlier.locator(".body")).to_have_text([answer])
    assert earlier.locator(".tool").all_inner_texts() == ["· memory_search(query: sourdough starter)"]
    assert phone.locator("#messages img").count() == 0 and phone.evaluate("window.__pwned") is None
    assert phone.locator("#chat-note").inner_text() == ""  # all of it is shown: nothing to explain
    fake_ollama.script = [{"text": "Water tomatoes daily in July, in the morning.", "delay": 0.05}]
    phone.fill("#message", "and my tomatoes?")
    phone.click("#send")
    expect(phone.locator(".message-assistant").last.locator(".body")).to_have_text("Water tomatoes daily in July, in the morning.")
    expect(phone.locator(".message-assistant.streaming")).to_have_count(0)
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    shot(phone, "phone-chat")

    # New chat ends the conversation: its session log is written first.
    fake_ollama.script = [{"text": "Baking and tomatoes\n- Sam asked how to start a sourdough bake"}]
    phone.click("#new")
    expect(phone.locator("#chat-note")).to_contain_text("Session log written")
    log = phone.locator("#chat-note").inner_text().split("Session log written: ")[1].split(".md")[0] + ".md"
    assert "Sam asked how to start a sourdough bake" in (vault / log).read_text()

    # Without a kept token the page asks for one; a wrong one is refused.
    phone.evaluate("localStorage.clear()")
    phone.goto(web.url)
    phone.wait_for_selector("#login-form")
    assert phone.locator("header .tabs").is_hidden()  # nothing to switch between on the token form
    phone.fill("#token", "not-the-token-" + "x" * 30)
    phone.press("#token", "Enter")
    expect(phone.locator("#login-error")).to_contain_text("refused")
    phone.fill("#token", web.token)
    phone.press("#token", "Enter")
    phone.wait_for_selector("#app:not([hidden])")
    assert phone.locator("header .tabs").is_visible()


def test_the_chat_stays_in_view_after_a_search_and_the_phone_header_shows_the_whole_status(http_daemon, vault, fake_ollama, browser):
    for n in range(30):
        write(vault, f"Bake {n:02}.md", f"# Bake {n:02}\n\nSourdough bake number {n}: feed the starter, then bake at 250 °C.\n")
    fake_ollama.script = [{"text": "Feed the starter the evening before.", "delay": 0.05}]
    web = http_daemon()
    page = browser.new_page()  # 1280x800
    page.goto(f"{web.url}#token={web.token}")
    expect(page.locator("#state")).to_contain_text("30 notes")

    page.fill("#q", "sourdough bake")
    expect(page.locator(".hit")).to_have_count(20)
    # The results are far longer than the window: they scroll inside their own pane.
    assert page.locator(".hit").last.bounding_box()["y"] > DESKTOP["height"]

    question = 'when do I feed the starter? <img src=x onerror="window.__pwned = 5">'
    page.fill("#message", question)
    page.press("#message", "Enter")
    expect(page.locator(".message-assistant .body")).to_have_text("Feed the starter the evening before.")
    expect(page.locator(".message-assistant.streaming")).to_have_count(0)
    assert page.evaluate("window.scrollY") == 0
    for selector in (".message >> nth=-1", "#message"):
        box = page.locator(selector).bounding_box()
        assert box is not None and 0 <= box["y"] and box["y"] + box["height"] <= DESKTOP["height"], (selector, box)
    shot(page, "desktop-chat-after-search")

    # Opened again, the page shows the conversation so far, as text, its last message in view.
    page.goto(web.url)
    expect(page.locator(".message .body")).to_have_text([question, "Feed the starter the evening before."])
    assert page.locator(".message").first.get_attribute("class") == "message message-user"
    assert page.locator("#messages img").count() == 0 and page.evaluate("window.__pwned") is None
    assert page.locator("#chat-note").inner_text() == ""
    box = page.locator(".message >> nth=-1").bounding_box()
    assert box is not None and 0 <= box["y"] and box["y"] + box["height"] <= DESKTOP["height"], box

    # A phone: the status wraps instead of being cut.
    phone = browser.new_page()
    phone.set_viewport_size(PHONE)
    phone.goto(web.url)
    state = phone.locator("#state")
    expect(state).to_have_text(f"{vault.name} · 30 notes · keywords only")
    box = state.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    assert state.evaluate("node => node.scrollWidth <= node.clientWidth")
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    shot(phone, "phone-header")


def test_rules_the_model_proposed_are_approved_or_rejected_on_the_page(http_daemon, vault, fake_ollama, browser):
    write(vault, "Procedural.md", "# Rules\n- Answer briefly.\n")
    write(vault, "Memory.md", "# Core\n- My locker number is 12\n")
    replace = {"fact": "My locker number is 14", "mode": "replace", "replace_line": "My locker number is 12"}
    fake_ollama.script = [
        {"tool_calls": [{"name": "memory_remember", "arguments": {"fact": "Answer in French", "kind": "procedural"}}]},
        {"tool_calls": [{"name": "memory_remember", "arguments": {"fact": "Use metric units", "kind": "procedural"}}]},
        {"tool_calls": [{"name": "memory_remember", "arguments": replace}]},
        {"text": "I proposed two rules and a change."},
    ]
    web = http_daemon()
    page = browser.new_page()
    page.goto(f"{web.url}#token={web.token}")
    expect(page.locator("#state")).to_contain_text("2 notes ·")
    assert page.locator("#pending-rules").is_hidden()  # nothing waiting: no card

    page.fill("#message", "set my rules")
    page.press("#message", "Enter")
    card = page.locator("#pending-rules")
    expect(card).to_be_visible()
    locker = "In Memory.md, replace your line “My locker number is 12” with “My locker number is 14”"
    expect(card.locator(".pending-text")).to_have_text(["Answer in French", "Use metric units", locker])
    assert "French" not in (vault / "Procedural.md").read_text()  # waiting is not active
    shot(page, "desktop-pending-rules")

    card.locator(".pending-rule", has_text="Answer in French").get_by_role("button", name="Reject").click()
    expect(card.locator(".pending-text")).to_have_text(["Use metric units", locker])
    card.locator(".pending-rule", has_text="locker").get_by_role("button", name="Approve").click()
    expect(card.locator(".pending-text")).to_have_text(["Use metric units"])
    assert "- My locker number is 14 <!-- tars:" in (vault / "Memory.md").read_text()
    card.locator(".pending-rule", has_text="Use metric units").get_by_role("button", name="Approve").click()
    expect(card).to_be_hidden()
    rules = (vault / "Procedural.md").read_text()
    assert "- Use metric units <!-- tars:" in rules and "French" not in rules and "by:model" not in rules


def test_a_tool_call_waits_for_the_users_answer_in_a_card_on_the_page(http_daemon, vault, fake_ollama, browser, tmp_path):
    """Another MCP server's tool that asks first: the answer shows a card with the server, the tool
    and the arguments (as text); Run it runs it, Always… asks once more, Don't does not run it."""
    from harness.daemon import wait_for
    from harness.tool_servers import Journal, stdio_server, toml_config

    journal = Journal(tmp_path / "journal.jsonl")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "config.toml").write_text(toml_config({"tasks": stdio_server("tasks", journal.path)}))
    hostile = "<img src=x onerror=window.__pwned=5> buy milk"
    add = {"tool_calls": [{"name": "tasks_add_tasks", "arguments": {"tasks_to_add": [hostile]}}]}
    fake_ollama.script = [add, {"text": "Added milk."}, add, {"text": "Left it."}]
    web = http_daemon()
    wait_for(lambda: web.daemon.status().tool_servers[0].state == "ready", "the MCP server")
    page = browser.new_page()
    page.goto(f"{web.url}#token={web.token}")
    expect(page.locator("#state")).to_contain_text("0 notes")

    page.fill("#message", "add milk")
    page.press("#message", "Enter")
    card = page.locator(".approval").first
    expect(card.locator(".approval-head")).to_have_text("tasks wants to run add_tasks")
    expect(card.locator(".approval-why")).to_contain_text("not marked read-only by the server")
    assert hostile in card.locator(".approval-arguments").inner_text() and page.locator("#messages img").count() == 0
    assert not journal.calls(tool="add_tasks")  # nothing runs while the card waits
    shot(page, "desktop-tool-approval")
    card.get_by_role("button", name="Run it").click()
    expect(page.locator(".message-assistant .body").last).to_have_text("Added milk.")
    expect(card.locator(".approval-state")).to_have_text("approved")
    assert (
        page.locator(".message-assistant .tool-result").last.inner_text().startswith("· tasks add_tasks: done (approved by you over HTTP")
    )
    assert [c["arguments"]["tasks_to_add"] for c in journal.calls(tool="add_tasks")] == [[hostile]]

    page.fill("#message", "add milk again")
    page.press("#message", "Enter")
    second = page.locator(".approval").nth(1)
    second.get_by_role("button", name="Always…").click()
    expect(second.locator(".approval-actions")).to_contain_text("Always run tasks add_tasks without asking? This adds an allow rule to")
    second.get_by_role("button", name="Cancel").click()
    second.get_by_role("button", name="Don't").click()
    expect(page.locator(".message-assistant .body").last).to_have_text("Left it.")
    expect(second.locator(".approval-state")).to_have_text("declined")
    assert page.locator(".message-assistant .tool-result").last.inner_text() == "· tasks add_tasks: not run: you said no"
    assert len(journal.calls(tool="add_tasks")) == 1 and page.evaluate("window.__pwned") is None
    assert not (tmp_path / "state" / "tool_rules.toml").exists()


def test_a_search_while_the_vault_is_missing_says_so_on_the_page(http_daemon, vault, browser):
    write(vault, "Sourdough.md", "# Sourdough\n\nFeed the starter the evening before.\n")
    web = http_daemon()
    page = browser.new_page()
    page.goto(f"{web.url}#token={web.token}")
    expect(page.locator("#state")).to_contain_text("1 note")
    moved = vault.with_name("vault-moved")
    expect(page.locator("#state")).not_to_contain_text("1 notes")  # one note is not "notes"
    vault.rename(moved)
    try:
        page.fill("#q", "starter")
        expect(page.locator(".hit")).to_have_count(1)  # the index as it was
        expect(page.locator("#search-note")).to_contain_text(f"the vault folder {vault} is missing")
        expect(page.locator("#search-note")).to_contain_text("results come from the index as it was before")
    finally:
        moved.rename(vault)


def test_a_page_on_another_origin_loading_images_cannot_lock_the_user_out(http_daemon, vault, browser, tmp_path):
    """Another site's page in the same browser makes it load images from the listener, four a
    second: GETs from 127.0.0.1 with no Origin and no token. The real page searches on."""
    write(vault, "Garden.md", "# Garden\n\nTomatoes need sun and a deep pot.\n")
    web = http_daemon()
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "index.html").write_text(
        "<!doctype html><title>evil</title><script>"
        "window.loaded = 0; let n = 0;"
        f"setInterval(() => {{ const image = new Image(); image.onerror = () => window.loaded++;"
        f" image.src = {web.url + 'search?q=x'!r} + (n++); }}, 250);"
        "</script>",
        encoding="utf-8",
    )
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.2", "--directory", str(evil)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        port = re.search(r"port (\d+)", server.stdout.readline()).group(1)
        other_site = browser.new_page()
        other_site.goto(f"http://127.0.0.2:{port}/")
        page = browser.new_page()
        page.goto(f"{web.url}#token={web.token}")
        expect(page.locator("#state")).to_contain_text("1 note")
        ends = time.monotonic() + 10
        searches = 0
        while time.monotonic() < ends:
            word = ("tomatoes", "sun", "deep")[searches % 3]
            searches += 1
            page.fill("#q", word)
            expect(page.locator(".hit mark").first).to_have_text(word, ignore_case=True)  # this search's answer
            expect(page.locator(".hit")).to_have_count(1)
            expect(page.locator("#search-note")).not_to_contain_text("too many")
        assert searches >= 5 and other_site.evaluate("window.loaded") >= 30  # both pages were busy all along
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_long_conversation_opens_at_its_end_and_says_what_it_leaves_out(http_daemon, fake_ollama, browser):
    # A long first exchange is compacted at the second; 27 short exchanges follow it: 54 messages after the summary.
    fake_ollama.script = [
        {"text": "A train to Lisbon sounds lovely."},
        {"text": "The Sud Expresso."},
        {"text": "Lisbon train trip\n- Sam plans a train trip to Lisbon in June"},
        *({"text": f"Answer {n}."} for n in range(2, 28)),
    ]
    web = http_daemon(TARS_CHAT_COMPACT_CHARS="1500", TARS_CHAT_KEEP_RECENT="2")
    with web.client() as client:
        client.post("/chat", json={"message": "I am planning a train trip to Lisbon in June. " * 40})
        for n in range(1, 28):
            reply = client.post("/chat", json={"message": f"Question {n}?"})
            assert reply.status_code == 200, reply.text
        assert client.get("/conversations/web/messages").json()["compacted"] == 2

    page = browser.new_page()  # 1280x800
    page.goto(f"{web.url}#token={web.token}")
    expect(page.locator(".message")).to_have_count(51)  # the summary, then the last 50
    summary = page.locator(".message").first
    assert summary.locator(".who").inner_text() == "tars's summary of the earlier messages"
    assert summary.locator(".body").inner_text() == "Lisbon train trip:\n- Sam plans a train trip to Lisbon in June"
    assert page.locator(".message .body").nth(1).inner_text() == "Question 3?"  # questions 1 and 2 and their answers are left out
    expect(page.locator("#chat-note")).to_have_text(
        "Carrying on the conversation “web”: 4 earlier messages are not shown here; tars still takes them into account. "
        "2 before those are summarised at the top; search finds them in the session logs in sessions/."
    )
    # Opened at its end: the last answer in view, the summary scrolled out of it.
    last = page.locator(".message >> nth=-1")
    expect(last.locator(".body")).to_have_text("Answer 27.")
    box, pane = last.bounding_box(), page.locator("#messages").bounding_box()
    assert box is not None and pane["y"] <= box["y"] and box["y"] + box["height"] <= min(pane["y"] + pane["height"], DESKTOP["height"]), box
    shot(page, "desktop-long-conversation")
    assert page.locator("#messages").evaluate("node => node.scrollTop > 0 && node.scrollTop + node.clientHeight >= node.scrollHeight - 1")
    assert page.evaluate("window.scrollY") == 0
