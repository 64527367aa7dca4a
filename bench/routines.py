"""Routines at rest and at work: what 1,000 routines cost tarsd in start-up time, idle memory and
wake-ups, and whether tarsd stays responsive with 10,000 routines and one firing all the time.

    python bench/routines.py [--routines 1000] [--starts 3] [--idle-seconds 120] [--strace-seconds 120]
    python bench/routines.py --clock-only [--routines 1000]
    python bench/routines.py --busy [--routines 10000] [--every-seconds 1] [--busy-seconds 60]

Every figure comes from real tarsd processes (bench/daemon_latency.py's Daemon) on a temporary
one-note vault, embedder none, the routines' time zone UTC, with a routines.toml of none or of
``--routines`` entries written just before each start: daily crons ("M H * * *", some on weekdays
only) spread over the day, "every N h" (6 to 48 h), one-shots next year, and reminders (daily
crons and one-shots). None is due while the bench runs: the crons skip the hours from a few
minutes before now to EXCLUDED_HOURS after it, and every entry is created at the start, so none
has a missed run to catch up on either.

- start-up: from the exec of tarsd to its socket answering a status request, its log saying it
  serves (written once the routines' clock is started), its status counting every routine with
  one next, and then a routines request answering with every routine and its next run: the
  median of ``--starts`` starts each (none and the routines
  alternating, after one warm-up start), each on a fresh state folder.
- idle RSS: VmRSS once the first sync is done and tarsd has been idle ``--idle-seconds``.
- wake-ups per idle hour, measured over an idle window in which nothing is asked of tarsd:
  * context switches: voluntary + nonvoluntary, summed over /proc/PID/task/*/status at the
    window's start and end (a thread that ends in the window takes its count with it; the table
    says how many threads there were);
  * with strace (when it is installed), in a second window: the event loop's wake-ups (the main
    thread's epoll_wait returns) and every thread's returns from a blocking wait (epoll_wait,
    futex waits, select, poll, sleeps). strace stops each thread at each system call, so its own
    window comes after the context switches' window, never during it.
  Four cases in this order: none, the routines, none again (the spread between the two runs of
  none is the noise), and one reminder "every 1 min" (it must show about 60 more wake-ups an hour
  of the event loop, and more context switches: the measure sees a routine that is due).

- the clock's own work (``--clock-only`` alone, or after the rest): the routines' clock in this
  process on a real Book and Ledger (a temporary index database), timed as tarsd runs it: its
  start (reading the file and computing every routine's times, in a worker thread, then arming),
  what one fire holds the event loop for (the due routine's next time computed and pushed on the
  heap, its claim handed to a worker thread), what a change of the file holds the loop for (the
  file read and the changed routine's times computed in a worker thread; the loop only applies
  them) and the check of the reconcile tick.

- busy (``--busy``): one tarsd with ``--routines`` routines (default 10,000, the mix above) and one
  reminder ``every --every-seconds`` (default 1 s, at or below any minimum interval; its
  runs_per_day set high, so that every fire posts a message to the inbox): the start-up (exec to
  every routine listed with its next run), pings answered over ``--busy-seconds`` while the
  reminder fires (a client sends one every 50 ms and times its answer: the event loop's
  responsiveness; p50, p99, max), and `tarsctl routines` listing every routine: the whole
  command as a user types it (a new tarsctl process), median of 3, and the request alone.

The claim measured (docs/routines.md): an idle tarsd with routines wakes only when one is due,
one timer for the earliest routine and one for the earliest delivery retry, no polling.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import tomli_w

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import log, met, print_table  # noqa: E402
from daemon_latency import Daemon, cpu_seconds, load  # noqa: E402

from tarsctl.client import Client, RemoteError  # noqa: E402
from tarsctl.protocol import Routines, Status  # noqa: E402
from tarsctl.transport import DaemonNotRunning  # noqa: E402

# ---- targets ----
STARTUP_ADDED_SECONDS = 0.5  # what --routines routines may add to tarsd's start-up
BUSY_PING_P99_MS = 50.0  # busy: a ping's answer while a routine fires every --every-seconds beside 10,000
BUSY_START_SECONDS = 5.0  # busy: exec to every routine listed with its next run
BUSY_LIST_SECONDS = 2.0  # busy: `tarsctl routines` listing every routine, the whole command
IDLE_RSS_ADDED_MIB = 10.0
# The routines may add no wake-ups: their figure may exceed none's by its noise at most, which is the
# spread between the two runs of none, and at least NOISE_FLOOR of none's figure (two runs that
# happened to agree closely would otherwise make any jitter a failure).
NOISE_FLOOR = 0.05
EVERY_MINUTE_PER_HOUR = 60.0  # the reminder every minute: what it must add to the event loop's wake-ups, at least half of it

# ---- bounds ----
EXCLUDED_HOURS = 4  # no cron fires from a few minutes before now to this many hours after it
START_DEADLINE_SECONDS = 120.0
START_POLL_SECONDS = 0.005
READY_DEADLINE_SECONDS = 120.0
SETTLE_SECONDS = 5.0  # after the first sync, before an idle window: the start's garbage and threads settle
MAX_ROUTINES = 20_000
PING_EVERY_SECONDS = 0.05
BUSY_POLL_SECONDS = 0.05
LIST_REPEATS = 3
CLOCK_REPEATS = 5
SERVING = re.compile(r"tarsd \S+ serving ")
# The blocking calls a thread returns from when it wakes (strace -f, one line per call).
WAITS = {"epoll_wait", "epoll_pwait", "epoll_pwait2", "select", "pselect6", "poll", "ppoll", "clock_nanosleep", "nanosleep"}
EVENT_LOOP_WAITS = {"epoll_wait", "epoll_pwait", "epoll_pwait2"}
STRACE_LINE = re.compile(r"^(?P<tid>\d+)\s+(?P<rest>.*)$")
RESUMED = re.compile(r"^<\.\.\. (?P<call>\w+) resumed>")
UNFINISHED = " <unfinished ...>"
# The last argument of epoll_wait and poll, the timeout in ms: 0 only looks, it never sleeps.
TIMEOUT = re.compile(r",\s*(?P<ms>-?\d+)\)\s*=")


# ---- the routines file ----


def routines_file(count: int, now: datetime) -> dict:
    """``count`` routines and reminders (the mix in the module's docstring), none due in the next
    EXCLUDED_HOURS, created ``now``."""
    entries: dict[str, dict[str, dict]] = {"routine": {}, "reminder": {}}
    crons, everys, once, reminder_crons = round(count * 0.6), round(count * 0.2), round(count * 0.05), round(count * 0.05)
    reminder_once = count - crons - everys - once - reminder_crons
    # Minutes of the day a cron may fire at: all but the window from 10 minutes ago to EXCLUDED_HOURS from now.
    first_allowed = (now.hour * 60 + now.minute + EXCLUDED_HOURS * 60) % 1440
    allowed_minutes = 1440 - EXCLUDED_HOURS * 60 - 10

    def cron(k: int, of: int, weekdays: bool) -> str:
        minute_of_day = (first_allowed + k * allowed_minutes // max(of, 1)) % 1440
        return f"{minute_of_day % 60} {minute_of_day // 60} * * {'1-5' if weekdays else '*'}"

    def next_year(k: int) -> str:
        day = datetime(now.year + 1, 1, 1, tzinfo=UTC) + timedelta(days=k % 365, minutes=(k * 7) % 1440)
        return f"{day:%Y-%m-%d %H:%M}"

    for k in range(crons):
        entries["routine"][f"cron-{k:05d}"] = {"schedule": cron(k, crons, weekdays=k % 4 == 0), "prompt": f"Brief number {k}."}
    for k in range(everys):
        entries["routine"][f"every-{k:05d}"] = {"schedule": f"every {(6, 8, 12, 24, 48)[k % 5]}h", "prompt": f"Check number {k}."}
    for k in range(once):
        entries["routine"][f"once-{k:05d}"] = {"schedule": next_year(k), "prompt": f"Review number {k}."}
    for k in range(reminder_crons):
        entries["reminder"][f"daily-{k:05d}"] = {"schedule": cron(k, reminder_crons, weekdays=False), "text": f"Stretch, {k}."}
    for k in range(reminder_once):
        entries["reminder"][f"remind-{k:05d}"] = {"schedule": next_year(k + 100), "text": f"Call number {k}."}
    for table in entries.values():
        for entry in table.values():
            entry["created"] = now.replace(microsecond=0)
    return {table: found for table, found in entries.items() if found}


def busy_file(count: int, every_seconds: int, now: datetime) -> dict:
    """``count`` routines (the mix of ``routines_file``) and one reminder every ``every_seconds``,
    allowed to fire all day (runs_per_day far above what the bench's minutes need)."""
    entries = routines_file(count, now)
    pulse = {"schedule": f"every {every_seconds} s", "text": "Pulse.", "runs_per_day": 1_000_000, "created": now.replace(microsecond=0)}
    entries.setdefault("reminder", {})["pulse"] = pulse
    return entries


def every_minute_file(now: datetime) -> dict:
    return {"reminder": {"tea": {"schedule": "every 1 min", "text": "Tea.", "created": now.replace(microsecond=0)}}}


# ---- one tarsd ----


class Case:
    """A tarsd with a given routines file, on its own fresh state folder."""

    def __init__(self, root: Path, vault: Path, pycache: Path, name: str, routines: dict, poll_seconds: float = START_POLL_SECONDS):
        self.name = name
        self.poll_seconds = poll_seconds  # between two readiness checks while it starts
        self.state = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=root))
        self.daemon = Daemon(vault, 1, "none", 100, self.state)
        # Bytecode cached (this machine sets PYTHONDONTWRITEBYTECODE), as an installed tarsd's is.
        self.daemon.env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.daemon.env["PYTHONPYCACHEPREFIX"] = str(pycache)
        # The minimum interval at 1 s (the least it may be set to): --busy's reminder every --every-seconds is at it or above.
        (self.state / "config.toml").write_text('[routines]\ntimezone = "UTC"\nmin_interval_seconds = 1\n')
        (self.state / "routines.toml").write_text(tomli_w.dumps(routines))
        self.expected = sum(len(table) for table in routines.values())

    def start(self) -> float:
        """Start tarsd; the seconds from its exec until it answers, serves and has armed every routine."""
        daemon = self.daemon
        began = time.perf_counter()
        with open(daemon.log_path, "ab") as err:
            daemon.process = subprocess.Popen(
                [sys.executable, "-m", "tarsd.daemon.main", "--vault", str(daemon.vault)],
                env=daemon.env,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        client = None
        try:
            while True:
                if daemon.process.poll() is not None:
                    raise RuntimeError(f"tarsd [{self.name}] exited with {daemon.process.returncode}:\n{daemon.log_tail()}")
                if time.perf_counter() - began > START_DEADLINE_SECONDS:
                    raise RuntimeError(f"tarsd [{self.name}] was not ready within {START_DEADLINE_SECONDS:.0f} s:\n{daemon.log_tail()}")
                if client is None:
                    try:
                        client = Client(daemon.socket, timeout=30).__enter__()
                    except (OSError, DaemonNotRunning):  # not listening yet
                        client = None
                        time.sleep(START_POLL_SECONDS)
                        continue
                if self._ready(client):
                    return time.perf_counter() - began
                time.sleep(self.poll_seconds)
        finally:
            if client is not None:
                client.__exit__(None, None, None)

    def _ready(self, client: Client) -> bool:
        """Serving, and every routine listed with its next run. Status (cheap) is asked until its
        routines are all counted and one is next, then the listing of every routine once (a
        listing every few milliseconds would be most of what tarsd does while it starts)."""
        status = client.call(Status(id=client.next_id())).routines
        if not SERVING.search(self.daemon.log_path.read_text(errors="replace")):
            return False
        if status.problem:
            raise RuntimeError(f"tarsd [{self.name}] could not use the routines file: {status.problem}")
        if self.expected and (status.routines + status.reminders != self.expected or not status.next_at):
            return False
        try:
            reply = client.call(Routines(id=client.next_id()))
        except RemoteError as exc:
            raise RuntimeError(f"tarsd [{self.name}] refused the routines request: {exc}") from exc
        return len(reply.routines) == self.expected and all(r.next_run > 0 for r in reply.routines)

    def wait_synced(self) -> None:
        """Until the first sync of the vault is done (then nothing more is queued)."""
        end = time.monotonic() + READY_DEADLINE_SECONDS
        with self.daemon.client() as client:
            while True:
                reply = client.call(Status(id=client.next_id()))
                if reply.coverage.reconciled and reply.queue_depth == 0 and not reply.indexing:
                    return
                if time.monotonic() > end:
                    raise RuntimeError(f"tarsd [{self.name}] never finished its first sync:\n{self.daemon.log_tail()}")
                time.sleep(0.1)

    def next_due(self) -> tuple[str, float]:
        with self.daemon.client() as client:
            reply = client.call(Status(id=client.next_id()))
        return reply.routines.next_name, reply.routines.next_at

    def stop(self) -> None:
        self.daemon.cleanup()
        problems = [line for line in self.daemon.log_issues() if "routine" in line.lower() or "Traceback" in line]
        if problems:
            log(f"[{self.name}] tarsd's log has problems:\n" + "\n".join(problems[:10]))


# ---- wake-ups ----


def context_switches(pid: int) -> dict[int, int]:
    """Voluntary + nonvoluntary context switches of each thread of pid, by thread id."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            text = (task / "status").read_text(encoding="ascii")
        except OSError:  # the thread ended meanwhile
            continue
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        found[int(task.name)] = int(fields["voluntary_ctxt_switches"]) + int(fields["nonvoluntary_ctxt_switches"])
    return found


@dataclass
class Idle:
    name: str
    pid: int
    seconds: float = 0.0
    switches: int = 0
    threads: tuple[int, int] = (0, 0)  # at the window's start and end
    threads_gone: int = 0  # ended in the window: their switches are not counted
    by_thread: Counter = field(default_factory=Counter)
    rss_mib: float = 0.0
    strace_seconds: float = 0.0
    loop_wakes: int = 0
    wait_returns: int = 0
    waits_by_thread: dict[int, Counter] = field(default_factory=dict)
    armed: str = ""  # what its routines' clock said was next

    def per_hour(self, count: int, seconds: float) -> float:
        return count * 3600 / seconds if seconds > 0 else float("nan")


def measure_idle(case: Case, idle_seconds: float, strace_seconds: float) -> Idle:
    pid = case.daemon.pid
    idle = Idle(case.name, pid)
    case.wait_synced()
    name, at = case.next_due()
    idle.armed = f"{name} at {datetime.fromtimestamp(at, UTC):%Y-%m-%d %H:%M} UTC" if name else "nothing"
    time.sleep(SETTLE_SECONDS)
    before = context_switches(pid)
    began = time.monotonic()
    time.sleep(idle_seconds)
    after = context_switches(pid)
    idle.seconds = time.monotonic() - began
    idle.rss_mib = case.daemon.memory()["VmRSS"]
    for tid, count in after.items():
        idle.by_thread[tid] = count - before.get(tid, 0)
    idle.switches = sum(idle.by_thread.values())
    idle.threads = (len(before), len(after))
    idle.threads_gone = len(set(before) - set(after))
    if strace_seconds > 0:
        strace_window(case, idle, strace_seconds)
    return idle


def strace_window(case: Case, idle: Idle, seconds: float) -> None:
    """The blocking waits each thread returned from in ``seconds``, by strace -f on the running tarsd."""
    out = case.state / "strace.txt"
    tracer = subprocess.Popen(
        ["strace", "-f", "-qq", "-p", str(case.daemon.pid), "-o", str(out), "-e", "trace=" + ",".join(sorted(WAITS | {"futex"}))],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    began = time.monotonic()
    try:
        tracer.wait(timeout=seconds)
        raise RuntimeError(f"strace ended early: {tracer.stderr.read().decode(errors='replace')[-1000:]}")
    except subprocess.TimeoutExpired:
        pass
    tracer.send_signal(signal.SIGINT)  # strace detaches and leaves tarsd as it was
    tracer.wait(timeout=30)
    idle.strace_seconds = time.monotonic() - began
    by_thread = waits_returned(out.read_text(errors="replace"))
    idle.waits_by_thread = by_thread
    main = by_thread.get(case.daemon.pid, Counter())
    idle.loop_wakes = sum(main[call] for call in EVENT_LOOP_WAITS)
    idle.wait_returns = sum(sum(counter.values()) for counter in by_thread.values())


def waits_returned(trace: str) -> dict[int, Counter]:
    """Of strace -f's lines, the blocking waits each thread returned from, by thread and call: an
    epoll_wait or poll that could sleep (its timeout not 0: the event loop's iterations that only
    look are not wake-ups), a futex wait, a select, a sleep. A call another thread's line cut in
    two (unfinished, then resumed) is joined first."""
    pending: dict[int, str] = {}
    by_thread: dict[int, Counter] = {}
    for line in trace.splitlines():
        match = STRACE_LINE.match(line)
        if match is None:
            continue
        tid, rest = int(match["tid"]), match["rest"]
        if rest.endswith(UNFINISHED):
            pending[tid] = rest[: -len(UNFINISHED)]
            continue
        resumed = RESUMED.match(rest)
        if resumed is not None:
            rest = pending.pop(tid, resumed["call"] + "(") + rest[resumed.end() :]
        call = rest.split("(", 1)[0]
        if call in EVENT_LOOP_WAITS or call in ("poll", "ppoll"):
            timeout = TIMEOUT.search(rest)
            if timeout is None or timeout["ms"] == "0":
                continue  # only looked (or was cut off by strace's detach)
        elif call == "futex":
            if "FUTEX_WAIT" not in rest:
                continue  # a wake or a lock handed over, not a wait
        elif call not in WAITS:
            continue
        by_thread.setdefault(tid, Counter())[call] += 1
    return by_thread


# ---- the clock's own work ----


def clock_cost(n: int, repeats: int = CLOCK_REPEATS) -> dict[str, float]:
    """Milliseconds (median of ``repeats``) of the routines' clock with n routines and one reminder
    every second: its start, what a fire and a change of the file hold the event loop for, a check."""
    import asyncio
    from zoneinfo import ZoneInfo

    from tarsd.routines.book import Book
    from tarsd.routines.clock import RoutineClock
    from tarsd.routines.ledger import Ledger
    from tarsd.store.database import Store

    class Timed(RoutineClock):
        """The clock, timing what it does on the event loop: a fire (_on_timer) and applying a change (_apply)."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.on_timer: list[float] = []
            self.applied: list[float] = []

        def _on_timer(self) -> None:
            began = time.perf_counter()
            super()._on_timer()
            self.on_timer.append(time.perf_counter() - began)

        def _apply(self, *args, **kwargs) -> None:
            began = time.perf_counter()
            super()._apply(*args, **kwargs)
            self.applied.append(time.perf_counter() - began)

    async def timed() -> dict[str, list[float]]:
        times: dict[str, list[float]] = {"start": [], "fire": [], "change": [], "change_loop": [], "check": []}
        with tempfile.TemporaryDirectory(prefix="tars-routines-clock-") as scratch:
            root = Path(scratch)
            store = Store(root / "index.sqlite3")
            try:
                for _ in range(repeats):
                    path = root / "routines.toml"
                    path.write_text(tomli_w.dumps(busy_file(n, 1, datetime.now(UTC))))
                    utc = ZoneInfo("UTC")
                    book = Book(path, utc)
                    ledger = Ledger(store)

                    async def fire(routine, when, late, ledger=ledger) -> None:
                        run = await asyncio.to_thread(ledger.run_for, routine.name, when.timestamp())
                        await asyncio.to_thread(ledger.finish, run.id, "reminded")

                    clock = Timed(book, ledger, utc, fire, timedelta(hours=24), timedelta(minutes=120))
                    began = time.perf_counter()
                    await clock.start()
                    times["start"].append(time.perf_counter() - began)
                    applied = len(clock.applied)
                    deadline = time.monotonic() + 30
                    while len(clock.on_timer) < 4:  # the reminder every second fires
                        if time.monotonic() > deadline:
                            raise RuntimeError("the reminder every second did not fire")
                        await asyncio.sleep(0.05)
                    times["fire"].append(statistics.median(clock.on_timer))
                    # A change written through the book, as tarsd does (in a worker thread): the clock hears of it.
                    began = time.perf_counter()
                    await asyncio.to_thread(book.update, "cron-00000", prompt="A new prompt.")
                    await clock.refresh()
                    times["change"].append(time.perf_counter() - began)
                    if len(clock.applied) <= applied:
                        raise RuntimeError("the clock did not read the change of the file")
                    times["change_loop"].append(clock.applied[-1])
                    began = time.perf_counter()
                    clock.check()
                    times["check"].append(time.perf_counter() - began)
                    await clock.stop()
                    path.unlink()
            finally:
                store.close()
        return times

    return {what: statistics.median(values) * 1000 for what, values in asyncio.run(timed()).items()}


def report_clock(n: int) -> None:
    cost = clock_cost(n)
    print_table(
        ["the clock's work", f"{n:,} routines + 1 every second, ms (median of {CLOCK_REPEATS})"],
        [
            ["start: read the file, compute every routine's times (worker thread), arm", f"{cost['start']:.1f}"],
            ["a fire: the event loop held (the due routine's next time, the heap, its claim handed on)", f"{cost['fire']:.3f}"],
            [
                "a change written through the book: the file written, read again, what changed computed (worker threads)",
                f"{cost['change']:.1f}",
            ],
            ["    of which the event loop held (applying the change)", f"{cost['change_loop']:.1f}"],
            ["check: the reconcile tick's (a stat handed to a worker thread)", f"{cost['check']:.3f}"],
        ],
        title="The routines' clock in this process (a real Book and Ledger; tarsd runs the same)",
    )


# ---- busy ----


def run_busy(n: int, every_seconds: int, seconds: float) -> None:
    """One tarsd with n routines and a reminder every ``every_seconds``: start-up, pings while it
    fires, and the listing of every routine (the module's docstring)."""
    from tarsctl.protocol import Inbox, Ping

    with tempfile.TemporaryDirectory(prefix="tars-routines-busy-") as scratch:
        root = Path(scratch)
        vault = root / "vault"
        vault.mkdir()
        (vault / "Note.md").write_text("# Note\n\nA note.\n")
        # tarsd with no routine first (twice: the first compiles the bytecode): the routines' figures are beside it.
        for k in range(2):
            bare = Case(root, vault, root / "pycache", f"busy-none-{k}", {}, poll_seconds=BUSY_POLL_SECONDS)
            try:
                bare_started = bare.start()
                bare_cpu = cpu_seconds(bare.daemon.pid)
            finally:
                bare.stop()
        # Asked every 50 ms while it starts: each status request with 10,000 routines is work of its own.
        case = Case(root, vault, root / "pycache", "busy", busy_file(n, every_seconds, datetime.now(UTC)), poll_seconds=BUSY_POLL_SECONDS)
        try:
            started = case.start()
            started_cpu = cpu_seconds(case.daemon.pid)  # what the start cost, whatever else the machine did meanwhile
            log(f"[busy] {n:,} routines + 1 every {every_seconds} s: ready after {started:.3f} s ({started_cpu:.2f} s of CPU)")
            case.wait_synced()
            with case.daemon.client() as client:
                before = client.call(Inbox(id=client.next_id(), limit=1)).unread
                pings: list[float] = []
                end = time.monotonic() + seconds
                while time.monotonic() < end:
                    began = time.perf_counter()
                    client.call(Ping(id=client.next_id()))
                    pings.append(time.perf_counter() - began)
                    time.sleep(max(0.0, PING_EVERY_SECONDS - (time.perf_counter() - began)))
                fired = client.call(Inbox(id=client.next_id(), limit=1)).unread - before
                requests = []
                for _ in range(LIST_REPEATS):
                    began = time.perf_counter()
                    listed = client.call(Routines(id=client.next_id()))
                    requests.append(time.perf_counter() - began)
            commands = []
            for _ in range(LIST_REPEATS):
                began = time.perf_counter()
                ran = subprocess.run(
                    [sys.executable, "-m", "tarsctl", "routines"], env=case.daemon.env, capture_output=True, text=True, timeout=120
                )
                commands.append(time.perf_counter() - began)
                if ran.returncode != 0 or ran.stdout.count("\n") < n:
                    raise RuntimeError(f"tarsctl routines failed ({ran.returncode}): {ran.stderr[-1000:]}")
        finally:
            case.stop()
    ms = sorted(p * 1000 for p in pings)
    p50, p99 = statistics.median(ms), ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    command, request = statistics.median(commands), statistics.median(requests)
    print_table(
        ["what", "measured", "target", "met"],
        [
            [
                "start-up: exec to every routine listed with its next run, s",
                f"{started:.3f}",
                f"< {BUSY_START_SECONDS:g}",
                met(started < BUSY_START_SECONDS),
            ],
            ["    tarsd's CPU time by then (user + system), s: the start's cost without the machine's load", f"{started_cpu:.2f}", "", ""],
            ["    the same with no routine: wall / CPU, s", f"{bare_started:.3f} / {bare_cpu:.2f}", "", ""],
            [
                f"ping while it fires, p99 ms ({len(ms):,} pings over {seconds:.0f} s)",
                f"{p99:.1f}",
                f"< {BUSY_PING_P99_MS:g}",
                met(p99 < BUSY_PING_P99_MS),
            ],
            ["    p50 / max, ms", f"{p50:.1f} / {ms[-1]:.1f}", "", ""],
            [
                f"`tarsctl routines` listing all {len(listed.routines):,}, the whole command, s (median of {LIST_REPEATS})",
                f"{command:.3f}",
                f"< {BUSY_LIST_SECONDS:g}",
                met(command < BUSY_LIST_SECONDS),
            ],
            ["    the request alone, s", f"{request:.3f}", "", ""],
            [f"the reminder's messages in the {seconds:.0f} s (due {seconds / every_seconds:.0f} times)", f"{fired:,}", "", ""],
        ],
        title=f"tarsd with {n:,} routines and a reminder every {every_seconds} s "
        f"({os.cpu_count()} cores, Python {sys.version.split()[0]}, {load()})",
    )


# ---- the run ----


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--routines", type=int, default=1000)
    parser.add_argument("--starts", type=int, default=3, help="start-ups timed for each of none and the routines")
    parser.add_argument("--idle-seconds", type=float, default=120.0)
    parser.add_argument("--strace-seconds", type=float, default=None, help="the strace window (default: --idle-seconds; 0: none)")
    parser.add_argument("--clock-only", action="store_true", help="only the clock's own work, in this process")
    parser.add_argument(
        "--busy", action="store_true", help="only the busy tarsd: --routines (default 10,000) and one every --every-seconds"
    )
    parser.add_argument("--every-seconds", type=int, default=1, help="busy: the reminder's interval (at or below the minimum interval)")
    parser.add_argument("--busy-seconds", type=float, default=60.0, help="busy: how long pings are timed while it fires")
    args = parser.parse_args()
    if args.busy and args.routines == parser.get_default("routines"):
        args.routines = 10_000
    if not 1 <= args.routines <= MAX_ROUTINES or args.starts < 1 or args.idle_seconds < 10:
        parser.error(f"--routines must be 1 to {MAX_ROUTINES:,}, --starts at least 1 and --idle-seconds at least 10")
    strace_seconds = args.idle_seconds if args.strace_seconds is None else args.strace_seconds
    if strace_seconds > 0 and shutil.which("strace") is None:
        log("strace is not installed: the event loop's wake-ups are left out (context switches only)")
        strace_seconds = 0.0
    n = args.routines
    log(load())
    if args.clock_only:
        report_clock(n)
        return
    if args.busy:
        if args.every_seconds < 1 or args.busy_seconds < 10:
            parser.error("--every-seconds must be 1 or more and --busy-seconds at least 10")
        run_busy(n, args.every_seconds, args.busy_seconds)
        report_clock(n)
        return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally blocks stop every tarsd
    with tempfile.TemporaryDirectory(prefix="tars-routines-bench-") as scratch:
        root = Path(scratch)
        vault = root / "vault"
        vault.mkdir()
        (vault / "Note.md").write_text("# Note\n\nA note.\n")
        pycache = root / "pycache"

        def case(name: str, routines_of_now) -> Case:
            return Case(root, vault, pycache, name, routines_of_now(datetime.now(UTC)))

        # ---- start-up ----
        starts: dict[str, list[float]] = {"none": [], "routines": []}
        warm = case("warm-up", lambda now: {})
        try:
            warm.start()
        finally:
            warm.stop()
        for k in range(args.starts):
            for label, make in (("none", lambda now: {}), ("routines", lambda now: routines_file(n, now)))[:: 1 if k % 2 == 0 else -1]:
                started = case(f"start-{label}-{k}", make)
                try:
                    seconds = started.start()
                finally:
                    started.stop()
                starts[label].append(seconds)
                log(f"start {k + 1}/{args.starts}, {label}: ready after {seconds:.3f} s")

        # ---- idle ----
        cases = [
            ("none", lambda now: {}),
            (f"{n:,} routines", lambda now: routines_file(n, now)),
            ("none, again", lambda now: {}),
            ('1 reminder "every 1 min"', every_minute_file),
        ]
        idles: list[Idle] = []
        for label, make in cases:
            running = case(re.sub(r"\W+", "-", label).strip("-"), make)
            try:
                running.start()
                log(f"[{label}] idle for {args.idle_seconds:.0f} s, then {strace_seconds:.0f} s under strace ...")
                idles.append(measure_idle(running, args.idle_seconds, strace_seconds))
                idles[-1].name = label
            finally:
                running.stop()

    report(args, n, starts, idles, strace_seconds > 0)
    report_clock(n)


def report(args: argparse.Namespace, n: int, starts: dict[str, list[float]], idles: list[Idle], traced: bool) -> None:
    none_start, routines_start = statistics.median(starts["none"]), statistics.median(starts["routines"])
    added = routines_start - none_start
    print_table(
        ["what", "none", f"{n:,} routines", "added", "target", "met"],
        [
            [
                f"start-up to answering with every routine armed, s (median of {args.starts})",
                f"{none_start:.3f}",
                f"{routines_start:.3f}",
                f"{added:+.3f}",
                f"< {STARTUP_ADDED_SECONDS:g}",
                met(added < STARTUP_ADDED_SECONDS),
            ],
            [
                "    each start, s",
                " ".join(f"{s:.3f}" for s in starts["none"]),
                " ".join(f"{s:.3f}" for s in starts["routines"]),
                "",
                "",
                "",
            ],
        ],
        title=f"tarsd's start-up with {n:,} routines beside none ({os.cpu_count()} cores, Python {sys.version.split()[0]}, {load()})",
    )

    none, routines, none_again, every_minute = idles
    rss_added = routines.rss_mib - (none.rss_mib + none_again.rss_mib) / 2
    print_table(
        ["what", "none", f"{n:,} routines", "none, again", "added", "target", "met"],
        [
            [
                f"idle RSS after the first sync and {args.idle_seconds:.0f} s idle, MiB",
                f"{none.rss_mib:.1f}",
                f"{routines.rss_mib:.1f}",
                f"{none_again.rss_mib:.1f}",
                f"{rss_added:+.1f}",
                f"< {IDLE_RSS_ADDED_MIB:g}",
                met(rss_added < IDLE_RSS_ADDED_MIB),
            ]
        ],
        title="tarsd's idle memory with the routines beside none",
    )

    def hourly(idle: Idle, what: str) -> float:
        if what == "switches":
            return idle.per_hour(idle.switches, idle.seconds)
        return idle.per_hour(idle.loop_wakes if what == "loop" else idle.wait_returns, idle.strace_seconds)

    measures = [("switches", "context switches, all threads")]
    if traced:
        measures += [("loop", "event loop wake-ups (epoll_wait returns)"), ("waits", "blocking-wait returns, all threads")]
    rows = []
    for what, label in measures:
        a, b = hourly(none, what), hourly(none_again, what)
        base = (a + b) / 2
        noise = max(abs(a - b), NOISE_FLOOR * base)
        with_routines = hourly(routines, what) - base
        with_minute = hourly(every_minute, what) - base
        rows.append(
            [
                f"{label}, per hour",
                f"{a:,.0f} / {b:,.0f}",
                f"{hourly(routines, what):,.0f}",
                f"{with_routines:+,.0f}",
                f"<= +{noise:,.0f}",
                met(with_routines <= noise),
                f"{hourly(every_minute, what):,.0f}",
                f"{with_minute:+,.0f}",
            ]
        )
    every_loop_ok = not traced or hourly(every_minute, "loop") - (hourly(none, "loop") + hourly(none_again, "loop")) / 2 >= (
        EVERY_MINUTE_PER_HOUR / 2
    )
    print_table(
        ["wake-ups", "none / again", f"{n:,} routines", "added", "target", "met", "every 1 min", "added"],
        rows,
        title=(
            f"Idle wake-ups scaled to an hour: context switches over {args.idle_seconds:.0f} s"
            + (f", strace over {idle_strace(idles):.0f} s after it" if traced else "")
            + f"; noise: the spread of the two runs of none, at least {NOISE_FLOOR:.0%} of none"
        ),
    )
    if traced:
        print(
            f'the reminder "every 1 min" adds at least {EVERY_MINUTE_PER_HOUR / 2:g} event-loop wake-ups an hour '
            f"(it is due {EVERY_MINUTE_PER_HOUR:g} times): {met(every_loop_ok)}"
        )
    for idle in idles:
        print(
            f"{idle.name}: next due {idle.armed}; threads {idle.threads[0]} -> {idle.threads[1]}"
            + (f" ({idle.threads_gone} ended in the window, uncounted)" if idle.threads_gone else "")
        )
    if traced:
        breakdown(none, routines)


def idle_strace(idles: list[Idle]) -> float:
    return statistics.median(idle.strace_seconds for idle in idles)


def breakdown(none: Idle, routines: Idle) -> None:
    """Where the wake-ups of none come from, thread by thread, beside the routines' run (threads
    are matched by their rank: the main thread first, then by how often each woke)."""

    def ranked(idle: Idle) -> list[tuple[str, Counter]]:
        main = idle.pid  # the main thread's id is the process's
        rest = sorted((tid for tid in idle.waits_by_thread if tid != main), key=lambda tid: -sum(idle.waits_by_thread[tid].values()))
        return [("main (event loop)", idle.waits_by_thread.get(main, Counter()))] + [
            (f"thread {k}", idle.waits_by_thread[tid]) for k, tid in enumerate(rest, 1)
        ]

    def shown(counter: Counter, seconds: float) -> str:
        return ", ".join(f"{call} {count * 3600 / seconds:,.0f}" for call, count in counter.most_common(3)) or "-"

    a, b = ranked(none), ranked(routines)
    rows = []
    for k in range(max(len(a), len(b))):
        name = a[k][0] if k < len(a) else b[k][0]
        rows.append(
            [
                name,
                shown(a[k][1], none.strace_seconds) if k < len(a) else "-",
                shown(b[k][1], routines.strace_seconds) if k < len(b) else "-",
            ]
        )
    headers = ["thread", "none: waits returned per hour", "routines: waits returned per hour"]
    print_table(headers, rows, title="Where the idle wake-ups come from")


if __name__ == "__main__":
    main()
