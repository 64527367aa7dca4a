"""Tools from other MCP servers: what a tool round trip through tarsd costs over calling the MCP
server directly, and tarsd's memory with two servers connected.

    python bench/tools_roundtrip.py [--calls N]

Every figure comes from real processes: a real tarsd on a temporary vault (embedder none), two
real MCP servers on stdio built with the SDK (tests/harness/tool_server.py), the fake Ollama
server of the tests (tests/harness/fake_llm.py: a model that answers at once, so only tars's own
work is timed) behind the real ollama client, and the SDK's own client for the direct calls.

What is timed:
- direct: ``call_tool("echo")`` from the SDK's Client in this process on a session already open:
  JSON-RPC over stdio, the server's work, the result's validation.
- through tarsd: a chat whose model calls the same tool once; the time between the tool_activity
  events "call" and "result" on the socket client: the policy, the hop from the chat thread to
  the tool servers' loop, the same call_tool, the result cut and wrapped as data, the events
  framed and sent. The overhead is its percentile less the direct call's.
- tarsd's RSS (VmRSS) idle with no server configured, and with the two servers connected after
  the calls (the MCP SDK is imported only when a server is configured).
- a 50 MB result over stdio (``big``; a 100 MB line, as the SDK's servers send the text twice: as
  content and as structured content): the time from the model's call to its result, and how far
  tarsd's peak RSS (VmHWM) rose for it; it reaches the model cut to 20,000 characters.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO / "tests"))

import anyio  # noqa: E402
from common import log, met, percentile, print_table  # noqa: E402
from daemon_latency import PYTHON, Daemon, load, proc_status  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

from harness.fake_llm import FakeOllama  # noqa: E402
from harness.tool_servers import stdio_server, toml_config  # noqa: E402
from tarsctl.protocol import Chat, ChatDone, Error, Status, ToolActivity  # noqa: E402

# Targets: what tars adds to a call should be small beside the call itself and the model's own time.
OVERHEAD_P50_MS = 10.0
OVERHEAD_P99_MS = 50.0
RSS_WITH_SERVERS_MB = 80.0  # more than tarsd idle without any: the SDK, two connections, their loop
BIG_RESULT_MB = 50
BIG_RESULT_SECONDS = 10.0  # the line is cut as it streams in: linear, not the SDK reader's quadratic joins
BIG_RESULT_PEAK_MB = 50.0  # tarsd's peak RSS may rise this much for it: the cut message and a chunk, not the line
MAX_CALLS = 2000
DEADLINE_SECONDS = 600.0


def direct_calls(calls: int, workdir: Path) -> list[float]:
    """call_tool("echo") from the SDK's client, on one open session: milliseconds each."""
    params = StdioServerParameters(
        command=PYTHON, args=["-m", "harness.tool_server", "direct"], cwd=str(REPO / "tests"), env={"TOOL_SERVER_JOURNAL": ""}
    )
    timings: list[float] = []

    async def run() -> None:
        async with Client(params, mode="legacy", cache=None) as client:
            for n in range(5):  # warm up
                await client.call_tool("echo", {"text": f"warm {n}"})
            for n in range(calls):
                began = time.perf_counter()
                await client.call_tool("echo", {"text": f"ping {n}"})
                timings.append((time.perf_counter() - began) * 1000)

    anyio.run(run)
    return timings


def through_tarsd(daemon: Daemon, fake: FakeOllama, calls: int) -> tuple[list[float], list[float]]:
    """Chats whose model calls tasks_echo once: (call -> result event ms, tarsd's own call_tool ms)."""
    round_trips, inside = [], []
    deadline = time.monotonic() + DEADLINE_SECONDS
    with daemon.client(timeout=60) as client:
        for n in range(calls + 5):
            if time.monotonic() > deadline:
                raise RuntimeError("the bench ran past its deadline")
            fake.script = [{"tool_calls": [{"name": "tasks_echo", "arguments": {"text": f"ping {n}"}}]}, {"text": "ok"}]
            client.send(Chat(id=n + 1, conversation=f"bench-{n}", message="echo"))
            called = None
            while True:
                reply = client.receive()
                if isinstance(reply, ToolActivity) and reply.phase == "call":
                    called = time.perf_counter()
                elif isinstance(reply, ToolActivity) and reply.phase == "result":
                    if reply.outcome != "ok":
                        raise RuntimeError(f"the call did not succeed: {reply.outcome}: {reply.result}")
                    if n >= 5:  # the first five warm up
                        round_trips.append((time.perf_counter() - called) * 1000)
                        inside.append(reply.duration_ms)
                elif isinstance(reply, (ChatDone, Error)):
                    if isinstance(reply, Error):
                        raise RuntimeError(f"chat failed: {reply.message}")
                    break
    return round_trips, inside


def big_result(daemon: Daemon, fake: FakeOllama) -> tuple[float, int]:
    """A chat whose model calls tasks_big for BIG_RESULT_MB: (seconds from call to result, its characters)."""
    fake.script = [{"tool_calls": [{"name": "tasks_big", "arguments": {"megabytes": BIG_RESULT_MB}}]}, {"text": "ok"}]
    with daemon.client(timeout=300) as client:
        client.send(Chat(id=1, conversation="bench-big", message="big"))
        called, took, chars = time.perf_counter(), 0.0, 0
        while True:
            reply = client.receive()
            if isinstance(reply, ToolActivity) and reply.phase == "call":
                called = time.perf_counter()
            elif isinstance(reply, ToolActivity) and reply.phase == "result":
                if reply.outcome != "ok":
                    raise RuntimeError(f"the big call did not succeed: {reply.outcome}: {reply.result}")
                took, chars = time.perf_counter() - called, reply.chars
            elif isinstance(reply, (ChatDone, Error)):
                return took, chars


def rss_mb(pid: int) -> float:
    return proc_status(pid)["VmRSS"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    calls = max(10, min(args.calls, MAX_CALLS))
    log(load())
    with tempfile.TemporaryDirectory(prefix="tars-tools-bench-") as scratch, FakeOllama() as fake:
        root = Path(scratch)
        vault = root / "vault"
        vault.mkdir()
        (vault / "Note.md").write_text("# Note\n\nA note.\n")
        env = {"TARS_CHAT_OLLAMA_HOST": fake.url, "TARS_CHAT_OLLAMA_MODEL": "fake-chat"}

        log("tarsd with no MCP server ...")
        bare = Daemon(vault, 1, "none", 100, root / "bare", env)
        bare.start()
        time.sleep(2)
        rss_bare = rss_mb(bare.pid)
        bare.stop()

        log("tarsd with two MCP servers on stdio ...")
        journal = root / "journal.jsonl"
        daemon = Daemon(vault, 1, "none", 100, root / "tools", env)
        servers = {"tasks": stdio_server("tasks", journal), "other": stdio_server("other", journal)}
        (root / "tools" / "config.toml").write_text(toml_config(servers))
        daemon.start()
        try:
            end = time.monotonic() + 60
            while time.monotonic() < end:
                with daemon.client() as client:
                    states = [s.state for s in client.call(Status(id=1)).tool_servers]
                if states == ["ready", "ready"]:
                    break
                time.sleep(0.1)
            else:
                raise RuntimeError(f"the servers did not become ready: {states}")
            rss_connected = rss_mb(daemon.pid)
            log(f"{calls} chats with one tool call each ...")
            round_trips, inside = through_tarsd(daemon, fake, calls)
            rss_after = rss_mb(daemon.pid)
            log(f"a {BIG_RESULT_MB} MB result over stdio ...")
            peak_before = proc_status(daemon.pid)["VmHWM"]
            big_seconds, big_chars = big_result(daemon, fake)
            peak_rise = proc_status(daemon.pid)["VmHWM"] - peak_before
        finally:
            daemon.stop()
        log(f"{calls} direct calls ...")
        direct = direct_calls(calls, root)

    d50, d99 = percentile(direct, 50), percentile(direct, 99)
    t50, t99 = percentile(round_trips, 50), percentile(round_trips, 99)
    i50, i99 = percentile(inside, 50), percentile(inside, 99)
    print_table(
        ["echo call", "calls", "p50 ms", "p99 ms"],
        [
            ["direct (SDK client, open session)", len(direct), f"{d50:.2f}", f"{d99:.2f}"],
            ["through tarsd: call -> result event", len(round_trips), f"{t50:.2f}", f"{t99:.2f}"],
            ["  of which call_tool inside tarsd", len(inside), f"{i50:.2f}", f"{i99:.2f}"],
        ],
        title=f"A tool round trip through tarsd against the MCP server called directly ({calls} calls each)",
    )
    print_table(
        ["overhead", "ms", "target", "met"],
        [
            ["p50", f"{t50 - d50:.2f}", f"<= {OVERHEAD_P50_MS:g}", met(t50 - d50 <= OVERHEAD_P50_MS)],
            ["p99", f"{t99 - d99:.2f}", f"<= {OVERHEAD_P99_MS:g}", met(t99 - d99 <= OVERHEAD_P99_MS)],
        ],
        title="tarsd's overhead (through tarsd less direct, per percentile)",
    )
    grown = rss_after - rss_bare
    print_table(
        ["tarsd", "VmRSS MB"],
        [
            ["idle, no MCP server configured", f"{rss_bare:.0f}"],
            ["two MCP servers connected", f"{rss_connected:.0f}"],
            [f"the same after {calls} calls", f"{rss_after:.0f}"],
            [f"more than with none (target <= {RSS_WITH_SERVERS_MB:g})", f"{grown:.0f} ({met(grown <= RSS_WITH_SERVERS_MB)})"],
        ],
        title="tarsd's memory (embedder none; the servers' own processes not counted)",
    )
    print_table(
        ["a 50 MB result over stdio", "figure", "target", "met"],
        [
            ["call to result, s", f"{big_seconds:.1f}", f"<= {BIG_RESULT_SECONDS:g}", met(big_seconds <= BIG_RESULT_SECONDS)],
            ["characters (reach the model cut to 20,000)", f"{big_chars:,}", "", ""],
            ["tarsd's peak RSS rise, MB", f"{peak_rise:.0f}", f"<= {BIG_RESULT_PEAK_MB:g}", met(peak_rise <= BIG_RESULT_PEAK_MB)],
        ],
        title="A large result, cut while it streams in",
    )


if __name__ == "__main__":
    main()
