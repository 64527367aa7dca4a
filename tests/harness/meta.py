"""Meta's side of the WhatsApp webhook: payloads in the documented format (the ``messages``
webhook: text, interactive button replies, images, reactions, statuses) and deliveries signed as
Meta signs them (``X-Hub-Signature-256: sha256=`` and the hex HMAC-SHA256 of the raw body with the
app secret), posted to a real tarsd's listener with httpx."""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import time

import httpx

WABA_ID = "102290129340398"
BUSINESS_NUMBER = "15550783881"
_ids = itertools.count(1)


def message_id(sender: str = "0") -> str:
    """A message id shaped like Meta's: ``wamid.`` and base64 of bytes that hold the sender's number."""
    raw = b"\x18\x0c" + sender.encode() + b"\x15\x02\x00\x12\x18\x14" + f"{time.monotonic_ns()}x{next(_ids)}".encode()
    return "wamid." + base64.b64encode(raw).decode()


def envelope(phone_number_id: str, value: dict) -> dict:
    """``{"object": "whatsapp_business_account", "entry": [{"id", "changes": [{"value", "field": "messages"}]}]}``"""
    value = {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": BUSINESS_NUMBER, "phone_number_id": phone_number_id},
        **value,
    }
    return {"object": "whatsapp_business_account", "entry": [{"id": WABA_ID, "changes": [{"value": value, "field": "messages"}]}]}


def inbound(
    sender: str,
    kind: str,
    content: dict,
    mid: str | None = None,
    at: float | None = None,
    context: dict | None = None,
    user_id: str | None = None,
) -> dict:
    """One message a user sent, as the ``messages`` array holds it. ``sender`` is their phone
    number (``from``), or "" for a user Meta names by their BSUID alone (``from_user_id``)."""
    message = {
        **({"from": sender} if sender else {}),
        **({"from_user_id": user_id} if user_id else {}),
        "id": mid or message_id(sender or user_id or "0"),
        "timestamp": str(int(at if at is not None else time.time())),
        "type": kind,
        kind: content,
    }
    if context:
        message["context"] = context
    return message


def text(sender: str, body: str, mid: str | None = None, at: float | None = None, user_id: str | None = None) -> dict:
    return inbound(sender, "text", {"body": body}, mid, at, user_id=user_id)


def id_changed(old_user_id: str, new_user_id: str, name: str = "Sam", phone: str = "", new_phone: str = "") -> dict:
    """The system message of Meta's system messages webhook reference: ``user_changed_user_id`` (a
    new BSUID, no number), or ``user_changed_number`` when ``new_phone`` is given (from ``phone``)."""
    system = {
        "body": f"User {name} changed from {phone or old_user_id} to {new_phone or new_user_id}",
        "user_id": new_user_id,
        "previous_user_id": old_user_id,
        "type": "user_changed_number" if new_phone else "user_changed_user_id",
    }
    if new_phone:
        system["wa_id"] = new_phone
    message = {"id": message_id(old_user_id), "timestamp": str(int(time.time())), "type": "system", "system": system}
    if phone:
        message["from"] = phone
    return message


def button_reply(sender: str, button_id: str, title: str, mid: str | None = None) -> dict:
    reply = {"type": "button_reply", "button_reply": {"id": button_id, "title": title}}
    return inbound(sender, "interactive", reply, mid, context={"from": BUSINESS_NUMBER, "id": "wamid.question"})


def messages(phone_number_id: str, *items: dict, name: str = "Sam") -> dict:
    """A delivery of ``items`` (each from ``text``, ``button_reply``, ``inbound``), with the contacts
    Meta adds (``wa_id`` only when the number is shared, ``user_id`` whenever Meta sent one; a system
    message has no contacts)."""
    contacts = []
    for m in items:
        if m.get("type") == "system":
            continue
        contact = {"profile": {"name": name}}
        if m.get("from"):
            contact["wa_id"] = m["from"]
        if m.get("from_user_id"):
            contact["user_id"] = m["from_user_id"]
        if contact not in contacts:
            contacts.append(contact)
    value = {"messages": list(items)}
    if contacts:
        value = {"contacts": contacts, **value}
    return envelope(phone_number_id, value)


def status(phone_number_id: str, mid: str, recipient: str, state: str, errors: list[dict] | None = None) -> dict:
    entry = {"id": mid, "status": state, "timestamp": str(int(time.time())), "recipient_id": recipient}
    if errors:
        entry["errors"] = errors
    return envelope(phone_number_id, {"statuses": [entry]})


def sign(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def encode(payload: dict) -> bytes:
    return json.dumps(payload).encode()


class Meta:
    """Posts deliveries to tarsd's webhook as Meta would (signed with ``secret``)."""

    def __init__(self, base_url: str, secret: str, path: str = "/channels/whatsapp"):
        self.url = base_url.rstrip("/") + path
        self.secret = secret
        self.client = httpx.Client(timeout=30)

    def close(self) -> None:
        self.client.close()

    def deliver(self, payload: dict | bytes, signature: str | None = "", headers: dict | None = None) -> httpx.Response:
        """POST ``payload``: signed with the secret (``signature=""``), with a given header value, or with none (None)."""
        body = payload if isinstance(payload, bytes) else encode(payload)
        sent = {"Content-Type": "application/json", **(headers or {})}
        if signature is not None:
            sent["X-Hub-Signature-256"] = signature or sign(body, self.secret)
        return self.client.post(self.url, content=body, headers=sent)

    def verify(self, mode: str, token: str, challenge: str) -> httpx.Response:
        return self.client.get(self.url, params={"hub.mode": mode, "hub.verify_token": token, "hub.challenge": challenge})
