"""The WhatsApp channel: from Meta's webhook delivery to tars's reply reaching the Graph API.

    python bench/whatsapp_roundtrip.py [--messages N]

Every figure comes from real processes: a real tarsd on a temporary vault (embedder none) with its
HTTP listener and the WhatsApp channel on; deliveries in Meta's format, signed with the app secret,
posted over HTTP (httpx, one connection kept open, as Meta's own are); the fake Graph API of the
tests (tests/harness/fake_graph.py) recording when each reply arrives; and the fake Ollama server
(tests/harness/fake_llm.py: a model that answers "ok" at once) behind the real ollama client, so
that only tars's own work is timed. One message at a time, each from the same allowed sender (one
conversation, as a user's); the first five warm up.

What is timed:
- webhook answer: the POST's round trip: the signature checked, the payload read, the message id
  recorded in the database, 200 sent (Meta wants it fast: it delivers again after a timeout).
- receipt to send: from just before the POST to the fake Graph API receiving the reply text:
  the answer above, the read mark with its typing indicator, the chat turn through the dispatcher
  (opening search, prompt, the model's stream), WhatsApp's formatting, the send.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO / "tests"))

from common import log, met, percentile, print_table  # noqa: E402
from daemon_latency import Daemon, load  # noqa: E402

from harness import meta  # noqa: E402
from harness.fake_graph import FakeGraph  # noqa: E402
from harness.fake_llm import FakeOllama  # noqa: E402

PHONE_NUMBER_ID = "123456789"
SENDER = "353870000001"
SECRET, TOKEN = "bench-app-secret", "EAAGbenchtoken"
ACK_P50_MS = 25.0  # Meta delivers again when no 200 comes in time: the answer must not wait for the model
ROUND_TRIP_P50_MS = 200.0  # with a model that answers at once, what tars adds to a reply
MAX_MESSAGES = 2000
DEADLINE_SECONDS = 600.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200)
    args = parser.parse_args()
    count = max(10, min(args.messages, MAX_MESSAGES))
    log(load())
    with (
        tempfile.TemporaryDirectory(prefix="tars-whatsapp-bench-") as scratch,
        FakeOllama() as ollama,
        FakeGraph(PHONE_NUMBER_ID, TOKEN) as graph,
    ):
        root = Path(scratch)
        vault, state = root / "vault", root / "state"
        vault.mkdir()
        (vault / "Note.md").write_text("# Note\n\nA note.\n")
        env = {
            "TARS_CHAT_OLLAMA_HOST": ollama.url,
            "TARS_CHAT_OLLAMA_MODEL": "fake-chat",
            "TARS_HTTP_ENABLED": "true",
            "TARS_HTTP_PORT": "0",
        }
        daemon = Daemon(vault, 1, "none", 100, state, env)
        for name, value in (("whatsapp_app_secret", SECRET), ("whatsapp_access_token", TOKEN), ("whatsapp_verify_token", "bench")):
            (state / name).write_text(value + "\n")
            (state / name).chmod(0o600)
        (state / "config.toml").write_text(
            f'[whatsapp]\nenabled = true\nphone_number_id = "{PHONE_NUMBER_ID}"\n'
            f"allowed_senders = {json.dumps([SENDER])}\ngraph_url = {json.dumps(graph.url)}\n"
        )
        daemon.start()
        try:
            url = daemon.status().http.url
            if not url:
                raise RuntimeError(f"the HTTP listener is not listening: {daemon.status().http.error}")
            hook = meta.Meta(url, SECRET)
            acks, round_trips = [], []
            deadline = time.monotonic() + DEADLINE_SECONDS
            log(f"{count} messages, one at a time ...")
            for n in range(count + 5):
                if time.monotonic() > deadline:
                    raise RuntimeError("the bench ran past its deadline")
                ollama.script = [{"text": "ok"}]
                payload = meta.messages(PHONE_NUMBER_ID, meta.text(SENDER, f"message {n}"))
                done = len(graph.texts(SENDER))
                began = time.time()
                answer = hook.deliver(payload)
                acked = time.time()
                if answer.status_code != 200:
                    raise RuntimeError(f"the webhook answered {answer.status_code}: {answer.text}")
                while len(graph.texts(SENDER)) <= done:
                    if time.monotonic() > deadline:
                        raise RuntimeError("no reply reached the Graph API")
                    time.sleep(0.0005)
                sent = [s for s in graph.sends(SENDER) if s.status == 200][done]
                if n >= 5:
                    acks.append((acked - began) * 1000)
                    round_trips.append((sent.at - began) * 1000)
            hook.close()
        finally:
            daemon.stop()

    a50, a99 = percentile(acks, 50), percentile(acks, 99)
    r50, r90, r99 = percentile(round_trips, 50), percentile(round_trips, 90), percentile(round_trips, 99)
    print_table(
        ["", "messages", "p50 ms", "p90 ms", "p99 ms", "p50 target", "met"],
        [
            [
                "webhook answer (200)",
                len(acks),
                f"{a50:.1f}",
                f"{percentile(acks, 90):.1f}",
                f"{a99:.1f}",
                f"<= {ACK_P50_MS:g}",
                met(a50 <= ACK_P50_MS),
            ],
            [
                "receipt to Graph API send",
                len(round_trips),
                f"{r50:.1f}",
                f"{r90:.1f}",
                f"{r99:.1f}",
                f"<= {ROUND_TRIP_P50_MS:g}",
                met(r50 <= ROUND_TRIP_P50_MS),
            ],
        ],
        title=f"A WhatsApp message through tarsd with a model that answers at once ({count} messages)",
    )


if __name__ == "__main__":
    main()
