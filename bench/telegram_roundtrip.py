"""The Telegram channel: from an update reaching tars's long poll to its reply reaching sendMessage,
and what the channel costs in memory.

    python bench/telegram_roundtrip.py [--messages N] [--idle-seconds S]

Every figure comes from real processes: a real tarsd on a temporary vault (embedder none) with the
Telegram channel on, polling the fake Bot API of the tests (tests/harness/fake_telegram.py: its
getUpdates holds the poll open and answers the moment an update arrives, as Telegram's does)
through the real python-telegram-bot client; the fake Ollama server (tests/harness/fake_llm.py:
a model that answers "ok" at once) behind the real ollama client, so that only tars's own work is
timed. One message at a time, each from the same allowed user (one conversation, as a user's);
the first five warm up.

What is timed, and measured:
- update to send: from the update handed to the waiting poll to the fake receiving the reply's
  sendMessage: the poll's answer parsed, the update recorded (once-only) and its offset kept,
  the typing action, the chat turn through the dispatcher, the HTML, the send.
- idle RSS: tarsd's VmRSS after it has been idle ``--idle-seconds`` (index done, nothing asked),
  without a channel, with Telegram polling, and with both Telegram and WhatsApp enabled (before
  any message: the libraries and their HTTP clients loaded).
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

from harness.fake_graph import FakeGraph  # noqa: E402
from harness.fake_llm import FakeOllama  # noqa: E402
from harness.fake_telegram import FakeTelegram  # noqa: E402

TOKEN = "7700112233:AAbenchTOKENbenchTOKENbenchTOKEN00000"
USER = 4_100_000_001
PHONE_NUMBER_ID, GRAPH_TOKEN = "123456789", "EAAGbenchtoken"  # the WhatsApp channel beside it, for the RSS with both
ROUND_TRIP_P50_MS = 200.0  # with a model that answers at once, what tars adds to a reply
MAX_MESSAGES = 2000
DEADLINE_SECONDS = 600.0


def idle_rss(daemon: Daemon, seconds: float) -> float:
    """VmRSS (MiB) after the first sync and ``seconds`` of nothing asked."""
    end = time.monotonic() + 120
    while not daemon.status().coverage.reconciled:
        if time.monotonic() > end:
            raise RuntimeError("the vault was never reconciled")
        time.sleep(0.1)
    time.sleep(seconds)
    return daemon.memory()["VmRSS"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--idle-seconds", type=float, default=5.0)
    args = parser.parse_args()
    count = max(10, min(args.messages, MAX_MESSAGES))
    log(load())
    with (
        tempfile.TemporaryDirectory(prefix="tars-telegram-bench-") as scratch,
        FakeOllama() as ollama,
        FakeTelegram(TOKEN) as telegram,
        FakeGraph(PHONE_NUMBER_ID, GRAPH_TOKEN) as graph,
    ):
        root = Path(scratch)
        vault = root / "vault"
        vault.mkdir()
        (vault / "Note.md").write_text("# Note\n\nA note.\n")
        env = {"TARS_CHAT_OLLAMA_HOST": ollama.url, "TARS_CHAT_OLLAMA_MODEL": "fake-chat"}

        log("tarsd without the channel, idle ...")
        bare = Daemon(vault, 1, "none", 100, root / "bare", env)
        bare.start()
        try:
            rss_without = idle_rss(bare, args.idle_seconds)
        finally:
            bare.stop()

        log("tarsd with both channels (Telegram polling, WhatsApp on the HTTP listener), idle ...")
        both_state = root / "both"
        both = Daemon(vault, 1, "none", 100, both_state, {**env, "TARS_HTTP_ENABLED": "true", "TARS_HTTP_PORT": "0"})
        secrets = {
            "telegram_token": TOKEN,
            "whatsapp_app_secret": "bench-app-secret",
            "whatsapp_access_token": GRAPH_TOKEN,
            "whatsapp_verify_token": "bench",
        }
        for name, value in secrets.items():
            (both_state / name).write_text(value + "\n")
            (both_state / name).chmod(0o600)
        (both_state / "config.toml").write_text(
            f"[telegram]\nenabled = true\nallowed_users = [{USER}]\napi_url = {json.dumps(telegram.url)}\npoll_timeout_seconds = 30\n\n"
            f'[whatsapp]\nenabled = true\nphone_number_id = "{PHONE_NUMBER_ID}"\nallowed_senders = ["353870000001"]\n'
            f"graph_url = {json.dumps(graph.url)}\n"
        )
        both.start()
        try:
            rss_both = idle_rss(both, args.idle_seconds)
            channels = {channel.name: channel.error for channel in both.status().channels}
            if set(channels) != {"telegram", "whatsapp"} or any(channels.values()):
                raise RuntimeError(f"both channels should be up without a problem: {channels}")
        finally:
            both.stop()

        log("tarsd with the channel, idle, then the messages ...")
        state = root / "state"
        daemon = Daemon(vault, 1, "none", 100, state, env)
        (state / "telegram_token").write_text(TOKEN + "\n")
        (state / "telegram_token").chmod(0o600)
        (state / "config.toml").write_text(
            f"[telegram]\nenabled = true\nallowed_users = [{USER}]\napi_url = {json.dumps(telegram.url)}\npoll_timeout_seconds = 30\n"
        )
        daemon.start()
        try:
            rss_with = idle_rss(daemon, args.idle_seconds)
            if not telegram.called("getMe"):
                raise RuntimeError(f"tarsd never polled the fake Bot API: {daemon.log_tail()}")
            round_trips = []
            deadline = time.monotonic() + DEADLINE_SECONDS
            log(f"{count} messages, one at a time ...")
            for n in range(count + 5):
                if time.monotonic() > deadline:
                    raise RuntimeError("the bench ran past its deadline")
                ollama.script = [{"text": "ok"}]
                done = len(telegram.texts(USER))
                began = time.time()
                telegram.text(USER, f"message {n}")
                while len(telegram.texts(USER)) <= done:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"no reply reached sendMessage: {daemon.log_tail()}")
                    time.sleep(0.0005)
                sent = [c for c in telegram.called("sendMessage") if c.status == 200][done]
                if n >= 5:
                    round_trips.append((sent.at - began) * 1000)
            rss_after = daemon.memory()["VmRSS"]
        finally:
            daemon.stop()

    r50, r90, r99 = percentile(round_trips, 50), percentile(round_trips, 90), percentile(round_trips, 99)
    print_table(
        ["", "messages", "p50 ms", "p90 ms", "p99 ms", "p50 target", "met"],
        [
            [
                "update to sendMessage",
                len(round_trips),
                f"{r50:.1f}",
                f"{r90:.1f}",
                f"{r99:.1f}",
                f"<= {ROUND_TRIP_P50_MS:g}",
                met(r50 <= ROUND_TRIP_P50_MS),
            ]
        ],
        title=f"A Telegram message through tarsd with a model that answers at once ({count} messages)",
    )
    print_table(
        ["tarsd (embedder none, 1 note)", "RSS MiB"],
        [
            ["idle, no channel", f"{rss_without:.1f}"],
            ["idle, Telegram polling", f"{rss_with:.1f}"],
            ["idle, Telegram polling and WhatsApp on the HTTP listener", f"{rss_both:.1f}"],
            [f"after {count + 5} messages", f"{rss_after:.1f}"],
        ],
        title="tarsd's memory with the Telegram channel beside without it",
    )


if __name__ == "__main__":
    main()
