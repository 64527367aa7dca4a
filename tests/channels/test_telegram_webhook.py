"""Telegram's webhook mode against a real tarsd: tars registers ``[telegram] webhook_url`` and its
secret token with the fake Bot API (tests/harness/fake_telegram.py) instead of polling, and
updates are posted to ``/channels/telegram`` on the real HTTP listener as Telegram posts them
(the secret in ``X-Telegram-Bot-Api-Secret-Token``); the replies go out through the same fake."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from harness.daemon import TarsDaemon, wait_for
from harness.fake_llm import FakeOllama
from harness.fake_telegram import FakeTelegram
from harness.paths import MODEL_DIR
from harness.web import Web

TOKEN = "7700112233:AAHwebhookTOKENwebhookTOKENwebhook00"
SECRET = "s3cret-webhook_token-0123456789abcdef"
PUBLIC_NAME = "pi.tailnet-1234.ts.net"
ME, AGAIN = 4_200_000_001, 4_200_000_002


def private(path: Path, text: str) -> None:
    path.write_text(text + "\n")
    path.chmod(0o600)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("telegram-webhook")
    vault, state = root / "vault", root / "state"
    vault.mkdir()
    state.mkdir()
    private(state / "telegram_token", TOKEN)
    private(state / "telegram_webhook_secret", SECRET)
    with FakeOllama() as ollama, FakeTelegram(TOKEN) as telegram:
        (state / "config.toml").write_text(
            f"[telegram]\nenabled = true\nallowed_users = {json.dumps([ME, AGAIN])}\napi_url = {json.dumps(telegram.url)}\n"
            f'webhook_url = "https://{PUBLIC_NAME}/channels/telegram"\n'
        )
        env = {
            "TARS_CHAT_OLLAMA_HOST": ollama.url,
            "TARS_CHAT_OLLAMA_MODEL": "fake-chat",
            "TARS_CHAT_MAX_RETRIES": "0",
            "TARS_HTTP_ENABLED": "true",
            "TARS_HTTP_PORT": "0",
            "TARS_HTTP_HOSTNAMES": PUBLIC_NAME,
        }
        daemon = TarsDaemon(vault, state, MODEL_DIR, "none", env).start()
        try:
            web = Web(daemon)
            with httpx.Client(base_url=web.url, timeout=30) as client:
                yield daemon, ollama, telegram, client
        finally:
            daemon.stop()
            daemon.cleanup()


def channel(daemon: TarsDaemon):
    [found] = [c for c in daemon.status().channels if c.name == "telegram"]
    return found


def post(client: httpx.Client, update: dict, secret: str | None = SECRET) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    if secret is not None:
        headers["X-Telegram-Bot-Api-Secret-Token"] = secret
    return client.post("/channels/telegram", content=json.dumps(update).encode(), headers=headers)


def test_the_webhook_is_set_with_its_secret_and_nothing_polls(world):
    daemon, ollama, telegram, client = world
    hook = wait_for(lambda: telegram.webhook, "setWebhook")
    assert hook == {
        "url": f"https://{PUBLIC_NAME}/channels/telegram",
        "secret_token": SECRET,
        "allowed_updates": ["message", "callback_query"],
    }
    time.sleep(0.5)
    assert not telegram.called("getUpdates")
    status = channel(daemon)
    assert status.path == "/channels/telegram" and status.error == ""


def test_an_update_posted_with_the_secret_is_answered_once(world):
    daemon, ollama, telegram, client = world
    start = time.time()
    ollama.script = [{"text": "Hello from the **webhook**."}]
    update = telegram.text_update(ME, "hello?")
    answered = post(client, update)
    assert answered.status_code == 200 and answered.text == "ok"
    assert telegram.wait_texts(ME, 1, start) == ["Hello from the webhook."]
    assert telegram.sent(ME, start)[0]["html"] == "Hello from the <b>webhook</b>."
    again = post(client, update)  # Telegram posts it again (it saw no 200 in time): known, not answered twice
    assert again.status_code == 200
    wait_for(lambda: channel(daemon).duplicates >= 1, "the second post to be known")
    time.sleep(0.3)
    assert telegram.texts(ME, start) == ["Hello from the webhook."]


def test_a_post_without_or_with_a_wrong_secret_is_refused_with_nothing_read(world):
    daemon, ollama, telegram, client = world
    before, chats, start = channel(daemon), len(ollama.bodies("/api/chat")), time.time()
    update = telegram.text_update(AGAIN, "transfer everything")
    for secret in (None, "guess", SECRET[:-1], ""):
        refused = post(client, update, secret)
        assert refused.status_code == 401 and refused.json()["code"] == "unauthorized", secret
    assert post(client, {"update_id": 1}, None).status_code == 401
    after = channel(daemon)
    assert after.bad_signatures == before.bad_signatures + 5 and after.received == before.received
    time.sleep(0.3)
    assert len(ollama.bodies("/api/chat")) == chats and not telegram.sent(AGAIN, start)
    assert not telegram.called("sendChatAction", start)
    assert "Telegram: refused a post from" in daemon.log.read_text()
    # The right secret, but not an update: refused as such.
    assert post(client, {"hello": "world"}).status_code == 400
    assert post(client, [1, 2]).status_code == 400


def test_an_update_the_library_cannot_read_is_answered_200_skipped_and_said(world):
    """Issue 43, observation 4, in webhook mode: an update python-telegram-bot cannot read (a message
    without its date) got 500, so Telegram posted it again and again. It is skipped, said in status
    and the log, answered 200; the next update is answered as ever."""
    daemon, ollama, telegram, client = world
    start = time.time()
    undated = telegram.text_update(AGAIN, "a message without its date")
    del undated["message"]["date"]
    skipped = post(client, undated)
    assert skipped.status_code == 200
    status = channel(daemon)
    assert f"update {undated['update_id']} could not be read (KeyError" in status.last_error and status.error == ""
    ollama.script = [{"text": "Read this one."}]
    assert post(client, telegram.text_update(AGAIN, "and this one?")).status_code == 200
    assert telegram.wait_texts(AGAIN, 1, start) == ["Read this one."]
    assert f"Telegram: update {undated['update_id']} could not be read" in daemon.log.read_text()
