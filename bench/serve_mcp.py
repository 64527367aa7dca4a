"""MCP benchmarks: the search round trip through `tarsctl mcp` against `tarsctl search` for the same
queries, the bridge's start-up until `initialize` is answered, memory with two MCP clients, and
what the new command costs the other commands' start-up (python -X importtime).

    python bench/serve_mcp.py [--notes N] [--queries N] [--runs N] [--embedder none|local]

Every figure comes from a real tarsd subprocess on a temporary vault (bench/common.py's
build_vault: SciFact abstracts and dendron-site notes), real `tarsctl mcp` subprocesses driven by
the MCP SDK's own client (stdio_client + ClientSession), and real `tarsctl search` processes. The
queries are SciFact's, in file order. Child Pythons run with their bytecode cached under a
temporary PYTHONPYCACHEPREFIX, as an installed tarsctl would (bench/daemon_latency.py's child_env).

What is timed:
- MCP search: one `tools/call search` on a session already initialized (JSON-RPC over stdio, the
  bridge's argument checks, one socket request, the rendering), as an AI tool calls it.
- tarsctl search: the whole process (start, connect, hello, search, print) for each query, as a
  shell alias runs it; and the socket round trip alone from this process (the floor both share).
- MCP start-up: spawning `tarsctl mcp` until the `initialize` reply arrives (the SDK import is
  most of it: it builds its pydantic models at import).

Measured on this project's shared 2-core box (load average about 5 from other work), 50 SciFact
queries: 300 notes with the local model, hybrid: MCP p50 30.1 ms, tarsctl search 144.4 ms, the
socket request alone 11.8 ms, the same hits for 50 of 50; 1,000 notes without a model, fts: 17.7
/ 119.3 / 11.1 ms. `tarsctl mcp` until initialize: p50 1,044 ms (tarsctl --version 110 ms).
tarsd 346 MB before and with two MCP clients searching at once; each bridge 69 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio  # noqa: E402
from common import build_vault, log, percentile, print_table, scifact_queries  # noqa: E402
from daemon_latency import PYTHON, Daemon, child_env, load, proc_status, tarsctl_command  # noqa: E402
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402

from tarsctl.protocol import Search  # noqa: E402

# Bounds: every loop below is bounded in count, and each wait in time.
MAX_QUERIES = 300
MAX_RUNS = 50
DEADLINE_SECONDS = 900.0


def ms(seconds: float) -> float:
    return seconds * 1000


def figures(values: list[float]) -> list[str]:
    return [f"{len(values)}", f"{percentile(values, 50):.1f}", f"{percentile(values, 90):.1f}", f"{min(values):.1f}"]


def session_params(env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=PYTHON, args=["-m", "tarsctl.cli", "mcp"], env=env)


async def mcp_round_trips(env: dict[str, str], queries: list[str], mode: str) -> tuple[list[float], list[list[str]]]:
    """One warm-up call, then each query once: (round trips in ms, the paths each returned)."""
    times, paths = [], []
    async with stdio_client(session_params(env)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await session.call_tool("search", {"query": queries[0], "mode": mode})
            for query in queries:
                started = time.perf_counter()
                result = await session.call_tool("search", {"query": query, "mode": mode})
                times.append(ms(time.perf_counter() - started))
                if result.is_error:
                    raise RuntimeError(f"MCP search failed: {result.content[0].text}")
                paths.append([hit["path"] for hit in result.structured_content["results"]])
    return times, paths


async def mcp_startup(env: dict[str, str]) -> float:
    started = time.perf_counter()
    async with stdio_client(session_params(env)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return ms(time.perf_counter() - started)


async def two_clients(env: dict[str, str], queries: list[str], daemon: Daemon) -> dict[str, float]:
    """The daemon's and the bridges' RSS while two MCP clients search at once."""
    async with stdio_client(session_params(env)) as (r1, w1), stdio_client(session_params(env)) as (r2, w2):
        async with ClientSession(r1, w1) as first, ClientSession(r2, w2) as second:
            await first.initialize()
            await second.initialize()
            async with anyio.create_task_group() as group:
                for session in (first, second):

                    async def searches(session=session) -> None:
                        for query in queries:
                            await session.call_tool("search", {"query": query})

                    group.start_soon(searches)
            bridges = _children("tarsctl.cli mcp")
            return {
                "daemon with two clients": daemon.memory()["VmRSS"],
                **{f"bridge {n}": proc_status(pid)["VmRSS"] for n, pid in enumerate(bridges, 1)},
            }


def _children(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid() and marker in cmdline:
                found.append(int(entry))
    return found


def importtime(env: dict[str, str], argv: list[str], runs: int = 7) -> tuple[float, int, list[str]]:
    """Median ms in top-level imports of `python -X importtime -m tarsctl.cli ARGV`, the module count,
    and any MCP SDK modules among them."""
    totals, modules = [], set()
    for _ in range(runs):
        done = subprocess.run([PYTHON, "-X", "importtime", "-m", "tarsctl.cli", *argv], env=env, capture_output=True, text=True, timeout=60)
        total = 0
        modules = set()
        for line in done.stderr.splitlines():
            if line.startswith("import time:") and "[us]" not in line:
                _self_us, cumulative, name = line[len("import time:") :].split("|")
                modules.add(name.strip())
                if name.startswith(" ") and not name.startswith("  "):  # one space: a top-level import
                    total += int(cumulative)
        totals.append(total / 1000)
    sdk = sorted(m for m in modules if m.split(".")[0] in ("mcp", "mcp_types", "pydantic", "anyio", "jsonschema"))
    return percentile(totals, 50), len(modules), sdk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--runs", type=int, default=10, help="MCP start-ups and importtime runs")
    parser.add_argument("--embedder", choices=("none", "local"), default="none")
    args = parser.parse_args()
    queries = list(scifact_queries().values())[: min(args.queries, MAX_QUERIES)]
    runs = min(args.runs, MAX_RUNS)
    tmp = Path(tempfile.mkdtemp(prefix="mcp-bench-"))
    daemon = None
    try:
        vault = tmp / "vault"
        vault.mkdir()
        build_vault(vault, args.notes)
        daemon = Daemon(vault, args.notes, args.embedder, 200, tmp / "state")
        daemon.start()
        log(f"indexing {args.notes:,} notes ({args.embedder})")
        daemon.wait_ready(args.notes, need_vectors=args.embedder == "local", deadline_seconds=DEADLINE_SECONDS)
        env = {**child_env(tmp / "pycache"), "TARS_SOCKET": str(daemon.socket)}
        mode = "hybrid" if args.embedder == "local" else "fts"
        tarsctl = tarsctl_command()

        # Warm the bytecode cache and the daemon's query path once.
        subprocess.run([*tarsctl, "search", "--mode", mode, queries[0]], env=env, capture_output=True, timeout=60)
        anyio.run(mcp_startup, env)

        log(f"timing {len(queries)} queries: MCP, tarsctl search, socket")
        mcp_times, mcp_paths = anyio.run(mcp_round_trips, env, queries, mode)
        cli_times, cli_paths = [], []
        for query in queries:
            started = time.perf_counter()
            done = subprocess.run(
                [*tarsctl, "search", "--json", "--mode", mode, query], env=env, capture_output=True, text=True, timeout=60
            )
            cli_times.append(ms(time.perf_counter() - started))
            if done.returncode != 0:
                raise RuntimeError(f"tarsctl search failed: {done.stderr}")
            cli_paths.append([json.loads(line)["path"] for line in done.stdout.splitlines()])
        socket_times = []
        with daemon.client() as client:
            for query in queries:
                started = time.perf_counter()
                client.call(Search(id=client.next_id(), query=query, mode=mode))
                socket_times.append(ms(time.perf_counter() - started))
        same = sum(1 for a, b in zip(mcp_paths, cli_paths, strict=True) if a == b)
        print_table(
            ["path", "queries", "p50 ms", "p90 ms", "min ms"],
            [
                ["MCP tools/call search (session open)", *figures(mcp_times)],
                ["tarsctl search --json (whole process)", *figures(cli_times)],
                ["socket request alone (in-process client)", *figures(socket_times)],
            ],
            f"Search round trip, mode {mode}, {args.notes:,} notes ({args.embedder}); the same hits for {same} of {len(queries)} "
            f"queries; MCP p50 / tarsctl p50 = {percentile(mcp_times, 50) / percentile(cli_times, 50):.2f}; {load()}",
        )

        log(f"timing {runs} MCP start-ups")
        startups = [anyio.run(mcp_startup, env) for _ in range(runs)]
        versions = []
        for _ in range(runs):
            started = time.perf_counter()
            subprocess.run([*tarsctl, "--version"], env=env, capture_output=True, timeout=60)
            versions.append(ms(time.perf_counter() - started))
        print_table(
            ["command", "runs", "p50 ms", "p90 ms", "min ms"],
            [["tarsctl mcp: spawn until initialize answered", *figures(startups)], ["tarsctl --version (for scale)", *figures(versions)]],
            "Start-up (bytecode cached)",
        )

        before = daemon.memory()["VmRSS"]
        memory = {"daemon before the clients": before, **anyio.run(two_clients, env, queries[:20], daemon)}
        print_table(
            ["process", "VmRSS MB"],
            [[name, f"{value:.0f}"] for name, value in memory.items()],
            f"Memory with two MCP clients searching at once ({args.embedder}): one model and one index, in tarsd",
        )

        rows = []
        for label, argv in (
            ("tarsctl --version", ["--version"]),
            ("tarsctl search (no daemon)", ["--socket", "/nonexistent", "search", "x"]),
        ):
            total, count, sdk = importtime(env, argv, runs)
            rows.append([label, f"{total:.1f}", count, ", ".join(sdk) or "none"])
        print_table(["command", "top-level imports ms (p50)", "modules", "MCP SDK modules loaded"], rows, "python -X importtime")
    finally:
        if daemon is not None:
            daemon.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
