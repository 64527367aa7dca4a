"""A reminder delivered to WhatsApp by a real tarsd, outside the 24-hour window (the user never
wrote): only a template message may be sent, and the fake Graph API checks its payload as Meta
does (tests/harness/fake_graph.py: the template known, its language, one body parameter with no
line breaks). The deliveries' own cases (inside the window, no template, a refusal) are in
tests/channels/test_speaking_first.py."""

from __future__ import annotations

import json
import time
from pathlib import Path

from harness.daemon import TarsDaemon, wait_for
from harness.fake_graph import FakeGraph
from harness.paths import MODEL_DIR
from harness.vault_files import write
from tarsctl.protocol import Inbox, InboxReply, Remind, RoutineSaved

PHONE_NUMBER_ID = "123456789"
APP_SECRET = "0123456789abcdef0123456789abcdef"
ACCESS_TOKEN = "EAAGtestpermanenttoken"
ME = "353870000071"


def private(path: Path, text: str) -> None:
    path.write_text(text + "\n")
    path.chmod(0o600)


def test_a_reminder_outside_the_window_goes_as_the_configured_template(tmp_path):
    vault, state = tmp_path / "vault", tmp_path / "state"
    vault.mkdir()
    state.mkdir()
    write(vault, "Bike.md", "# Bike\n\nThe chain was replaced in May.\n")
    private(state / "whatsapp_app_secret", APP_SECRET)
    private(state / "whatsapp_access_token", ACCESS_TOKEN)
    private(state / "whatsapp_verify_token", "verify-tars-webhook")
    with FakeGraph(PHONE_NUMBER_ID, ACCESS_TOKEN, templates={"tars_message": {"en"}}) as graph:
        config = f'[whatsapp]\nenabled = true\nphone_number_id = "{PHONE_NUMBER_ID}"\nallowed_senders = ["+{ME}"]\n'
        config += f'graph_url = {json.dumps(graph.url)}\ntemplate = "tars_message"\ntemplate_language = "en"\n'
        (state / "config.toml").write_text(config)
        env = {"TARS_HTTP_ENABLED": "true", "TARS_HTTP_PORT": "0"}
        daemon = TarsDaemon(vault, state, MODEL_DIR, "none", env).start()
        try:
            start = time.time()
            with daemon.client() as client:
                saved = client.call(Remind(id=1, when="in 1 s", text="call the plumber\nabout the sink", to=["whatsapp"]))
            assert isinstance(saved, RoutineSaved) and saved.routine.deliver == ["whatsapp"]
            [template] = wait_for(lambda: graph.templates_sent(ME, start), "the template message")
            assert template == {
                "name": "tars_message",
                "language": {"code": "en"},
                "components": [
                    {"type": "body", "parameters": [{"type": "text", "text": "*Reminder* · call the plumber · about the sink"}]}
                ],
            }
            assert not graph.texts(ME)  # no free text outside the window

            def sent():
                with daemon.client() as client:
                    reply = client.call(Inbox(id=1))
                assert isinstance(reply, InboxReply)
                return [m for m in reply.messages if m.deliveries and m.deliveries[0].state == "sent"]

            [message] = wait_for(sent, "the delivery to count as sent")
            assert message.text == "call the plumber\nabout the sink" and message.source.startswith("reminder:")
        finally:
            daemon.stop()
            daemon.cleanup()
