"""The WhatsApp channel's parts on their own: WhatsApp's formatting, cutting a long reply, reading
Meta's payloads (whatever they hold), the signature check, the Graph API client's retries against
the fake Graph API, the webhook app over httpx's ASGI transport, the setup checks; and a daemon
with the channel but without the HTTP listener."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import random

import httpx

from harness import meta
from harness.fake_graph import FakeGraph
from tarsd.channels.channel import ChoiceIn, Counters, IdChanged, OtherIn, TextIn
from tarsd.channels.seen import SeenMessages
from tarsd.channels.whatsapp import WhatsApp
from tarsd.channels.whatsapp_graph import MAX_ATTEMPTS, Graph, GraphError
from tarsd.channels.whatsapp_text import MAX_MESSAGE_CHARS, split, to_whatsapp
from tarsd.channels.whatsapp_webhook import Webhook, parse, signature, signature_ok
from tarsd.config.settings import load_config
from tarsd.setup.private_files import SecretFile
from tarsd.setup.whatsapp import number
from tarsd.store.database import Store

PNID = "123456789"


def test_markdown_becomes_whatsapp_formatting():
    assert (
        to_whatsapp("**bold**, __bold__, *italic*, _italic_, ~~gone~~, ***both***")
        == "*bold*, *bold*, _italic_, _italic_, ~gone~, *_both_*"
    )
    assert to_whatsapp("## A **heading** ##\ntext") == "*A heading*\ntext"
    assert to_whatsapp("* one\n+ two\n  * nested\n1. first") == "- one\n- two\n  - nested\n1. first"
    assert to_whatsapp('[the docs](https://example.org/a_b "title") and <https://x.org> and [https://y.org](https://y.org)') == (
        "the docs (https://example.org/a_b) and https://x.org and https://y.org"
    )
    assert to_whatsapp("![a cat](http://i.example/cat.png)") == "a cat (http://i.example/cat.png)"
    # What is not formatting stays as it is: arithmetic, names with underscores, code.
    assert to_whatsapp("2*3*4 = 24 and snake_case_name and a * b") == "2*3*4 = 24 and snake_case_name and a * b"
    assert to_whatsapp("`**not bold**` and ``a `tick` b``") == "`**not bold**` and ```a `tick` b```"
    code = "```python\ndef f(**kw):\n    return kw  # **kept** [x](y)\n\n\n\n```"
    assert to_whatsapp(code) == "```\ndef f(**kw):\n    return kw  # **kept** [x](y)\n\n\n\n```"
    assert to_whatsapp("```\nnever closed\n**x**") == "```\nnever closed\n**x**\n```"
    assert to_whatsapp("a\r\n\r\n\r\n\r\nb   \n---\n> **quote**") == "a\n\nb\n⎯⎯⎯\n> *quote*"
    assert to_whatsapp("") == "" and to_whatsapp("\n\n  \n") == ""


def test_a_long_reply_is_cut_between_paragraphs_then_lines_then_words():
    paragraphs = [f"Paragraph {n}. " + "word " * 20 for n in range(60)]
    text = "\n\n".join(p.strip() for p in paragraphs)
    parts = split(text)
    assert len(parts) == 2 and all(len(p) <= MAX_MESSAGE_CHARS for p in parts)
    assert "\n\n".join(parts) == text and parts[1].startswith("Paragraph ")
    assert split("short") == ["short"] and split("  ") == []

    one_paragraph = "\n".join(f"line {n} " + "x" * 70 for n in range(100))  # no blank line at all
    parts = split(one_paragraph)
    assert all(len(p) <= MAX_MESSAGE_CHARS for p in parts) and "\n".join(parts) == one_paragraph

    sentences = " ".join(f"Sentence number {n} ends here." for n in range(300))
    parts = split(sentences)
    assert all(len(p) <= MAX_MESSAGE_CHARS for p in parts) and parts[0].endswith(".") and " ".join(parts) == sentences

    word = "z" * 9000
    assert [len(p) for p in split(word)] == [4096, 4096, 808] and "".join(split(word)) == word

    code = "Here:\n\n```\n" + "\n".join(f"print({n})" + " " * 60 for n in range(200)) + "\n```\n\nDone."
    parts = split(code)
    assert all(len(p) <= MAX_MESSAGE_CHARS for p in parts)
    blocks = [p for p in parts if "print(" in p]
    assert len(blocks) >= 3 and all(b.count("```") % 2 == 0 for b in blocks)  # each part a closed block
    assert sum(b.count("print(") for b in blocks) == 200


def test_a_batch_is_read_whole_whatever_its_lists_hold():
    first, second = meta.text("1", "one"), meta.text("2", "two")
    tap = meta.button_reply("1", "nonce:yes", "Run it")
    payload = meta.messages(PNID, first, tap)
    payload["entry"][0]["changes"].append(
        meta.status(PNID, "wamid.x", "1", "failed", [{"code": 131047, "title": "Re-engagement message"}])["entry"][0]["changes"][0]
    )
    payload["entry"].append(meta.messages(PNID, second)["entry"][0])
    payload["entry"].append(meta.messages("555", meta.text("3", "not ours"))["entry"][0])
    payload["entry"][0]["changes"].append({"field": "account_update", "value": {}})
    found = parse(payload, PNID)
    assert [type(e) for e in found.events] == [TextIn, ChoiceIn, TextIn]
    assert [e.text for e in found.events if isinstance(e, TextIn)] == ["one", "two"]
    assert found.events[1].choice == "nonce:yes" and found.elsewhere == 1
    assert [(s.status, s.errors) for s in found.statuses] == [("failed", [(131047, "Re-engagement message")])]
    assert found.problems == ["a change of a field tars does not use: account_update"]

    image = meta.inbound("1", "image", {"id": "9", "mime_type": "image/jpeg"})
    reaction = meta.inbound("1", "reaction", {"message_id": "wamid.a", "emoji": "👍"})
    [picture, thumbs] = parse(meta.messages(PNID, image, reaction), PNID).events
    assert isinstance(picture, OtherIn) and (picture.kind, picture.quiet) == ("image", False)
    assert isinstance(thumbs, OtherIn) and thumbs.quiet


def test_no_payload_makes_the_reader_fail():
    """Random JSON shapes, and Meta's payload with parts replaced by junk: read, never an exception."""
    rng = random.Random(7)

    keys = ["entry", "changes", "value", "messages", "statuses", "from", "id", "type", "text", "metadata", "errors", "interactive"]

    def junk(depth: int = 0):
        kind = rng.randrange(7 if depth < 4 else 4)
        if kind == 0:
            return rng.choice([None, True, 0, -1, 1e308, float("nan")])
        if kind == 1:
            return "x" * rng.randrange(5)
        if kind == 2:
            return rng.random()
        if kind == 3:
            return rng.randrange(-5, 5)
        if kind == 4:
            return [junk(depth + 1) for _ in range(rng.randrange(3))]
        if kind == 5:
            return {rng.choice(keys): junk(depth + 1) for _ in range(rng.randrange(4))}
        return {"object": "whatsapp_business_account", "entry": [junk(depth + 1)]}

    good = meta.messages(PNID, meta.text("1", "hello"))
    value = ("entry", 0, "changes", 0, "value")
    paths = [("entry",), ("entry", 0, "changes"), value, (*value, "metadata"), (*value, "messages"), (*value, "messages", 0),
             (*value, "messages", 0, "text"), (*value, "messages", 0, "timestamp"), (*value, "statuses")]  # fmt: skip
    for _ in range(1000):
        parse(junk(), PNID)
        broken = json.loads(json.dumps(good))
        *where, last = rng.choice(paths)
        holder = broken
        for key in where:
            holder = holder[key]
        holder[last] = junk()
        parse(broken, PNID)


def test_the_signature_is_meta_hmac_sha256_of_the_raw_body():
    body, secret = b'{"object": "whatsapp_business_account"}', b"app-secret"
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    assert signature(secret, body) == expected
    assert signature_ok(secret, body, expected) and signature_ok(secret, body, expected.upper().replace("SHA256=", "sha256="))
    for wrong in ("", "sha256=", expected[:-1], expected.removeprefix("sha256="), expected + "0", "sha256=" + "0" * 64, "sha256=ü"):
        assert not signature_ok(secret, body, wrong), wrong
    assert not signature_ok(secret, body + b" ", expected) and not signature_ok(b"other", body, expected)


def test_a_number_is_read_as_whatsapp_writes_it():
    assert number("+353 87-123 4567") == "353871234567" and number("(353) 87.1234567") == "353871234567"


def test_a_sender_is_named_by_number_bsuid_or_both_and_an_id_change_is_read():
    """Meta's webhooks since April 2026 (docs/whatsapp.md): ``from`` is the number (absent for a user
    with a username whose number is not shared), ``from_user_id`` the BSUID; a system message
    ``user_changed_user_id`` gives the old BSUID and the new one."""
    bsuid, other = "US.13491208655302741918", "US.23491208655302741919"
    found = parse(
        meta.messages(
            PNID,
            meta.text("", "no number", user_id=bsuid),
            meta.text("353870000001", "both", user_id=bsuid),
            meta.text("353870000002", "number only"),
            meta.id_changed(bsuid, other),
            meta.id_changed(bsuid, other, phone="353870000001", new_phone="353870000009"),
        ),
        PNID,
    )
    assert not found.problems, found.problems
    only, both, number_only, changed, moved = found.events
    assert isinstance(only, TextIn) and only.sender == bsuid and only.ids == (bsuid,)
    assert both.sender == "353870000001" and both.ids == ("353870000001", bsuid)  # replies go to the number
    assert number_only.ids == ("353870000002",)
    assert isinstance(changed, IdChanged) and changed.ids == (bsuid,) and changed.new_ids == (other,) and changed.new_address == other
    assert isinstance(moved, IdChanged) and moved.ids == ("353870000001", bsuid) and moved.new_address == "353870000009"
    assert moved.new_ids == ("353870000009", other)
    # Another kind of system message is nothing to answer; one without its ids is a problem, not a crash.
    odd = parse(
        meta.messages(
            PNID,
            {"id": "wamid.x", "timestamp": "1", "type": "system", "system": {"type": "customer_identity_changed", "body": "x"}},
            {"id": "wamid.y", "timestamp": "1", "type": "system", "system": {"type": "user_changed_user_id", "body": "x"}},
        ),
        PNID,
    )
    assert [e.kind for e in odd.events] == ["system"] and odd.events[0].quiet
    assert odd.problems == ["a user_changed_user_id system message without its old ids, its new ones, or its id"]
    # A message sent to a BSUID is reported with recipient_user_id alone.
    failed = {"id": "wamid.z", "status": "failed", "timestamp": "1", "recipient_user_id": bsuid, "errors": [{"code": 131047, "title": "x"}]}
    [note] = parse(meta.envelope(PNID, {"statuses": [failed]}), PNID).statuses
    assert note.recipient == bsuid and note.errors == [(131047, "x")]


def test_allowed_senders_are_phone_numbers_or_bsuids_and_a_bad_entry_is_named_by_its_place(tmp_path):
    config = tmp_path / "config.toml"
    config.touch()
    entries = "+353 87 000 0001, US.13491208655302741918, US.ENT.11815799212886844830, 12ab, us.1234, 123"
    settings = load_config(config, env={"TARS_WHATSAPP_ENABLED": "true", "TARS_WHATSAPP_ALLOWED_SENDERS": entries}).whatsapp
    store = Store(tmp_path / "index.sqlite3")
    try:
        channel = WhatsApp(settings, config, store, lambda *_: None)
        assert channel.allowed == {"353870000001", "US.13491208655302741918"}
        problems = channel.status().error
        assert "allowed_senders entry 3 is a parent BSUID (with .ENT.)" in problems
        for place in (4, 5, 6):
            assert f"allowed_senders entry {place} is neither a phone number with country code" in problems
        # The entries themselves never reach status or the log: they are numbers and ids.
        assert "12ab" not in problems and "us.1234" not in problems and "11815799212886844830" not in problems
    finally:
        store.close()


def test_a_reply_goes_to_a_number_in_to_and_to_a_bsuid_in_recipient():
    with FakeGraph("42", "token") as fake:

        async def send(to: str) -> None:
            graph = Graph(fake.url, "42", lambda: "token")
            try:
                await graph.send_text(to, "hi")
                await graph.send_buttons(to, "yes?", [("a", "Yes")])
            finally:
                await graph.aclose()

        asyncio.run(send("353870000001"))
        asyncio.run(send("US.13491208655302741918"))
        by_number, by_number_too, by_bsuid, by_bsuid_too = (s.body for s in fake.sends())
        assert by_number["to"] == by_number_too["to"] == "353870000001" and "recipient" not in by_number
        assert by_bsuid["recipient"] == by_bsuid_too["recipient"] == "US.13491208655302741918" and "to" not in by_bsuid
        assert all(s.status == 200 for s in fake.sends())


def test_the_graph_api_is_tried_again_only_when_trying_again_can_help():
    """Against the fake Graph API over real HTTP: 5xx, 429 and Meta's throttling codes are tried again,
    up to MAX_ATTEMPTS in all; any other refusal at once, with Meta's error text."""
    with FakeGraph("42", "token") as fake:

        async def send(script: list[dict]) -> tuple[str | GraphError, int]:
            fake.script = list(script)
            before = len(fake.sends())
            graph = Graph(fake.url, "42", lambda: "token", first_delay=0.001)
            try:
                return await graph.send_text("353870000000", "hi"), len(fake.sends()) - before
            except GraphError as exc:
                return exc, len(fake.sends()) - before
            finally:
                await graph.aclose()

        fail = {"status": 500, "code": 131000}
        sent, attempts = asyncio.run(send([fail] * (MAX_ATTEMPTS - 1)))
        assert isinstance(sent, str) and sent.startswith("wamid.") and attempts == MAX_ATTEMPTS
        error, attempts = asyncio.run(send([fail] * MAX_ATTEMPTS))
        assert isinstance(error, GraphError) and error.status == 500 and attempts == MAX_ATTEMPTS
        throttled = {"status": 400, "code": 130429, "message": "(#130429) Rate limit hit"}  # a 400 that asks to wait
        sent, attempts = asyncio.run(send([throttled, {"status": 429, "code": 4}]))
        assert isinstance(sent, str) and attempts == 3
        refused = {"status": 400, "code": 131047, "message": "(#131047) Re-engagement message", "details": "more than 24 hours"}
        error, attempts = asyncio.run(send([refused]))
        assert attempts == 1 and error.window_closed and not error.retryable
        assert str(error) == "(#131047) Re-engagement message: more than 24 hours (HTTP 400, fbtrace_id AbCdEfGhIjK)"

        async def wrong_token() -> GraphError:
            graph = Graph(fake.url, "42", lambda: "stale")
            try:
                await graph.send_text("353870000000", "hi")
            except GraphError as exc:
                return exc
            finally:
                await graph.aclose()
            raise AssertionError("sent with a wrong token")

        error = asyncio.run(wrong_token())
        assert error.token_refused and not error.retryable and "(#190)" in str(error)


def test_a_delivery_that_cannot_be_recorded_is_answered_500_for_meta_to_send_again(tmp_path):
    """The webhook app itself, over httpx's ASGI transport: signed, read, then its recording fails."""
    secret, verify = tmp_path / "secret", tmp_path / "verify"
    for path in (secret, verify):
        path.write_text("s3cret\n")
        path.chmod(0o600)
    taken = []

    async def failing(delivery) -> None:
        taken.append(delivery)
        raise OSError("disk I/O error")

    hook = Webhook(SecretFile(verify, "verify", ""), SecretFile(secret, "secret", ""), PNID, failing, Counters())
    body = meta.encode(meta.messages(PNID, meta.text("1", "hello")))

    async def post(signature_value: str | None) -> httpx.Response:
        headers = {"X-Hub-Signature-256": signature_value} if signature_value is not None else {}
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=hook), base_url="http://tarsd") as client:
            return await client.post("/channels/whatsapp", content=body, headers=headers)

    assert asyncio.run(post(None)).status_code == 401 and not taken
    answer = asyncio.run(post(meta.sign(body, "s3cret")))
    assert answer.status_code == 500 and answer.json()["code"] == "internal" and len(taken) == 1


def test_the_channel_says_what_its_setup_lacks(tmp_path):
    config = tmp_path / "config.toml"
    config.touch()
    settings = load_config(
        config,
        env={
            "TARS_WHATSAPP_ENABLED": "true",
            "TARS_WHATSAPP_ALLOWED_SENDERS": "+353 87 000 0001, 353870000002",
            "TARS_WHATSAPP_GRAPH_URL": "ftp://x",
        },
    ).whatsapp
    assert settings.enabled and settings.allowed_senders == ["+353 87 000 0001", "353870000002"]
    store = Store(tmp_path / "index.sqlite3")
    try:
        channel = WhatsApp(settings, config, store, lambda *_: None)
        assert channel.allowed == {"353870000001", "353870000002"}
        problems = channel.status().error
        assert "[whatsapp] phone_number_id is not set" in problems and "graph_url 'ftp://x' is not an http(s) address" in problems
        assert f"[whatsapp] app_secret_file {tmp_path / 'whatsapp_app_secret'} does not exist" in problems
        assert "access_token_file" in problems and "verify_token_file" in problems
        nobody = WhatsApp(load_config(config, env={}).whatsapp, config, store, lambda *_: None)
        assert "allowed_senders is empty: nobody can talk to tars" in nobody.status().error
    finally:
        store.close()


def test_whatsapp_without_the_http_listener_says_so(start_daemon):
    daemon = start_daemon(TARS_WHATSAPP_ENABLED="true")
    [channel] = daemon.status().channels
    assert "set [http] enabled = true as well" in channel.error
    assert "warning    whatsapp: the WhatsApp channel's webhook is served on the HTTP listener" in daemon.tarsctl("status").stdout


def test_message_ids_are_kept_a_day_and_each_is_let_in_once(tmp_path):
    store = Store(tmp_path / "index.sqlite3")
    try:
        seen = SeenMessages(store)
        day = 24 * 3600
        assert seen.take("whatsapp", "wamid.a", "1", "plan my week", now=1000.0)
        assert not seen.take("whatsapp", "wamid.a", "1", "plan my week", now=1000.0 + day - 1)  # Meta's retry, within the day
        assert seen.take("whatsapp", "wamid.b", "1", "x" * 100, now=1000.0 + 10)
        assert [(m.message_id, m.preview) for m in seen.unanswered("whatsapp", before=2000.0)] == [
            ("wamid.a", "plan my week"),
            ("wamid.b", "x" * 60 + "…"),
        ]
        seen.mark("whatsapp", "wamid.a", "answered")
        assert [m.message_id for m in seen.unanswered("whatsapp", before=2000.0)] == ["wamid.b"]
        assert not seen.unanswered("whatsapp", before=1005.0)  # only what came in before this start
        assert seen.take("whatsapp", "wamid.a", "1", "", now=1000.0 + day + 700)  # a day on, forgotten
    finally:
        store.close()
