"""tarsd: run the daemon in the foreground (launchd and systemd supervise it; it never forks).

Start-up order: signal handlers (the very first thing), config, one-daemon-per-vault lock,
database, socket, watcher, the HTTP listener (when [http] enabled, with the WhatsApp channel's webhook
when [whatsapp] is enabled too), the Telegram channel's poller (when [telegram] enabled), then READY=1 to systemd,
then the MCP servers whose tools the chat may call ([mcp.servers], in the background).
Nothing waits for the first reconcile or the embedding model: both run in the background
while tarsd already answers (search replies say how complete the index is). SIGTERM or
SIGINT (or `tarsctl stop`) stops within a few seconds at any moment: the HTTP listener
closes first (chats streaming over it end cancelled, other open requests are cut after
2 s), the file being written finishes or rolls back, the socket is removed and tarsd exits
0. SIGHUP retries the embedding model at once and rescans the vault.

Only the standard library is imported at module level, so the signal handlers are in place
before the heavy imports (numpy, onnxruntime, apsw) start.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import logging
import os
import shlex
import signal
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from tarsctl.shown import shown_text

if TYPE_CHECKING:
    from tarsctl.protocol import Coverage
    from tarsd.channels.telegram import Telegram
    from tarsd.channels.whatsapp import WhatsApp
    from tarsd.chat.assistant import Assistant
    from tarsd.config.budget import Plan
    from tarsd.config.settings import Config
    from tarsd.index.sync_queue import SyncQueue
    from tarsd.index.watcher import VaultWatcher
    from tarsd.search.engine import Engine
    from tarsd.serve.http import HttpDoor
    from tarsd.sync.coordinator import SyncCoordinator
    from tarsd.tools.servers import ToolServers

log = logging.getLogger("tarsd")

EXIT_CONFIG = 2
EXIT_ALREADY_RUNNING = 3
EXIT_FAILED = 1
# How long a stop waits for the indexing workers to reach a safe point before exiting anyway
# (an unfinished transaction is rolled back by SQLite); the whole stop stays under 5 s.
STOP_GRACE_SECONDS = 2.5
THREAD_GRACE_SECONDS = 0.5
LEFTOVER_TASKS_SECONDS = 1.0  # for the tasks still running after the daemon stopped to end, once cancelled

# A signal that arrived before the event loop took the signals over.
_early_stop: str | None = None


def _note_early_signal(signum: int, _frame: object) -> None:
    global _early_stop
    _early_stop = signal.Signals(signum).name


class AlreadyRunning(Exception):
    pass


def acquire_lock(lock_path: Path, vault: Path) -> int:
    """An flock held for the daemon's lifetime; the kernel drops it even after kill -9."""
    from tarsd.store.database import StoreError, explain

    try:
        lock_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot create the lock file {lock_path}: {explain(exc, lock_path)}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise AlreadyRunning(
            f"another tarsd (pid {holder}) is already serving the vault {vault}; stop it with `tarsctl stop` first"
        ) from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
    except OSError:
        pass  # the pid is only for the "already running" message; a full disk must not stop tarsd here
    return fd


class Daemon:
    def __init__(self, config: Config, config_file: Path | None = None, plan: Plan | None = None):
        from tarsd.config.settings import config_file_path
        from tarsd.daemon.notify import SystemdNotifier

        self.config = config
        self.plan = plan  # the memory budget's settings (tarsd/config/budget.py); None: the engine works them out
        self.config_file = config_file_path(config_file)  # the HTTP token lives beside it
        self.vault = config.vault_path
        self.started_at = time.time()
        self.notifier = SystemdNotifier()
        self._stop = asyncio.Event()
        self.engine: Engine
        self.queue: SyncQueue
        self.watcher: VaultWatcher
        self.assistant: Assistant
        self.tool_servers: ToolServers
        self.http: HttpDoor | None = None
        self.http_error = ""  # why the enabled HTTP listener is not listening
        self.whatsapp: WhatsApp | None = None  # the WhatsApp channel, on the HTTP listener
        self.whatsapp_error = ""  # why the enabled channel is not served
        self.telegram: Telegram | None = None  # the Telegram channel: it polls the Bot API, no listener needed
        self.telegram_error = ""  # why the enabled channel is not running
        self.runner = None  # routines' runner (tarsd/speaking/runner.py), once the channels are up
        self.deliveries = None
        self.clock = None  # routines' clock (tarsd/routines/clock.py); None when [routines] enabled = false
        self.routines_skipped: list[str] = []  # runs missed past their grace at start
        self.sync: SyncCoordinator | None = None  # other machines on this vault: heartbeats, merges, who polls Telegram

    def request_stop(self, why: str) -> None:
        if not self._stop.is_set():
            log.info("stopping: %s", why)
        self._stop.set()

    def retry(self) -> None:
        """SIGHUP: try the embedding model again now, and rescan the vault."""
        log.info("SIGHUP: retrying the embedder and rescanning the vault")
        self.engine.embedder.retry_now()
        self.queue.request_reconcile()

    async def run(self) -> None:
        from tarsd.chat.assistant import Assistant
        from tarsd.chat.tools import OWN_TOOL_NAMES
        from tarsd.daemon.scheduler import start_scheduler
        from tarsd.index.sync_queue import SyncQueue
        from tarsd.index.watcher import VaultWatcher
        from tarsd.search.engine import Engine
        from tarsd.serve.socket_server import Server
        from tarsd.tools.rules import AlwaysRules, rules_path
        from tarsd.tools.servers import ToolServers
        from tarsd.vault.files import remove_litter

        loop = asyncio.get_running_loop()
        self._loop = loop
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop, signal.Signals(sig).name)
        from tarsd.serve.socket_server import AcceptErrorFilter, raise_fd_limit

        loop.set_exception_handler(AcceptErrorFilter())
        raise_fd_limit()
        if _early_stop is not None:
            self.request_stop(f"{_early_stop} during start-up")
            return
        lock_fd = acquire_lock(self.config.db_path.with_suffix(".lock"), self.vault)
        socket_path = self.config.socket_path
        server = scheduler = supervisor = None
        workers: list[asyncio.Task] = []
        try:
            self.engine = await asyncio.to_thread(Engine, self.config, self.plan)  # the model loads in the background
            if self._stop.is_set():
                return
            daemon = self.config.daemon
            self.queue = SyncQueue(self.engine.indexer, daemon.debounce_ms / 1000, daemon.retry_seconds, daemon.retry_max_seconds)
            rules = AlwaysRules(rules_path(self.config.mcp.rules_file, self.config_file))
            self.tool_servers = ToolServers(self.config.mcp, rules, OWN_TOOL_NAMES)
            self.assistant = Assistant(
                self.config,
                self.engine,
                lambda rel: self._reindex_from_thread(rel, loop),
                reindex_soon=self.queue.touch_now,
                tool_servers=self.tool_servers,
            )
            # Before any door opens: an approval a kill interrupted is finished, so no one sees it both ways.
            await asyncio.to_thread(self.assistant.finish_decisions)
            self._open_routines()
            self.sync = self._open_sync()
            self.watcher = VaultWatcher(self.vault, self._path_changed, self.queue.request_reconcile)
            loop.add_signal_handler(signal.SIGHUP, self.retry)

            litter = asyncio.create_task(asyncio.to_thread(remove_litter, self.vault, self.started_at))
            litter.add_done_callback(_log_litter)
            server = Server(self)
            await server.start(socket_path)
            # Watch first, then reconcile: nothing changed in between can be missed.
            self.watcher.start()
            self.queue.request_reconcile()
            # The heartbeat tells the other machines that this one is up (who polls Telegram, below);
            # conflict copies found at start are merged in the background.
            await self.sync.start()
            workers = [
                asyncio.create_task(self.queue.run(), name="keyword-worker"),
                asyncio.create_task(self.queue.run_vectors(), name="vector-worker"),
            ]
            # Restarts a deaf watcher and follows the vault folder going away and coming back.
            supervisor = asyncio.create_task(self.watcher.supervise(daemon.watcher_check_seconds), name="watcher-supervisor")
            scheduler = start_scheduler(self.config, self.queue, self.assistant, self._clock_check)
            if self.config.http.enabled:
                await self._start_http(server)
            elif self.config.whatsapp.enabled:
                self.whatsapp_error = "the WhatsApp channel's webhook is served on the HTTP listener: set [http] enabled = true as well"
                log.error("WhatsApp channel not started: %s", self.whatsapp_error)
            if self.config.telegram.enabled and not self.config.telegram.webhook_url:
                await self._start_telegram(server)
            elif self.config.telegram.enabled and not self.config.http.enabled:
                self.telegram_error = (
                    "[telegram] webhook_url is set, and the webhook is served on the HTTP listener: set [http] enabled = true "
                    "as well, or empty webhook_url to have tars poll"
                )
                log.error("Telegram channel not started: %s", self.telegram_error)
            await self._start_routines(server)
            log.info("tarsd %s serving %s on %s (database %s)", self._version(), self.vault, socket_path, self.config.db_path)
            # Ready means "answers": the first scan and the model continue in the background,
            # and every search reply says how complete the index is.
            self.notifier.send("READY=1", f"STATUS=serving {self.vault}")
            # Other MCP servers start only now, on a loop of their own: none of them delays the
            # start, a search, or a chat that needs none of them.
            self.tool_servers.start()
            pinger = asyncio.create_task(self._report_to_systemd())
            await self._stop.wait()
            pinger.cancel()
        finally:
            self.notifier.send("STOPPING=1")
            if getattr(self, "tool_servers", None) is not None:
                self.tool_servers.begin_stop()  # beside the rest of the stop: waited for below
            if scheduler is not None:
                scheduler.shutdown(wait=False)
            await self._stop_routines()
            if supervisor is not None:
                supervisor.cancel()
            if getattr(self, "watcher", None) is not None:
                self.watcher.stop()
            if self.http is not None:
                await self.http.close()  # before the socket server: its requests run through the socket's dispatcher
            if self.telegram is not None:
                await self.telegram.stop()  # as the HTTP listener: its chats run through the socket's dispatcher
            if self.sync is not None:
                await self.sync.stop()  # after Telegram: its last heartbeat says this machine polls no more
            if server is not None:
                await server.close()
                socket_path.unlink(missing_ok=True)
            if getattr(self, "tool_servers", None) is not None:
                await asyncio.to_thread(self.tool_servers.stop)
            if getattr(self, "assistant", None) is not None:
                self.assistant.close()
            stopped = await self._stop_workers(workers)
            if stopped and getattr(self, "engine", None) is not None:
                self.engine.close()
            elif not stopped:
                log.warning("an indexing step was still running; its unfinished transaction is rolled back")
            os.close(lock_fd)
        log.info("stopped")

    async def _start_routines(self, server) -> None:
        """Routines and reminders (docs/routines.md): the book, the ledger and the inbox always (they
        are listed and read on every machine); the clock and the runner only with [routines] enabled.
        Runs missed while tarsd was stopped run once now, late, or are skipped past their grace."""
        from tarsd.routines.clock import RoutineClock
        from tarsd.speaking.deliveries import Deliveries
        from tarsd.speaking.runner import RoutineRunner

        settings = self.config.routines
        for run in await asyncio.to_thread(self.ledger.interrupted):
            log.warning(
                "routine %s: its run due %s was cut off when tarsd stopped; it is not run again", run.routine, _at(run.scheduled_at)
            )
        self.deliveries = Deliveries(self.ledger, self._relays, self.vault, settings, self.routine_tz)
        self.runner = RoutineRunner(
            settings, self.routine_book, self.ledger, server.dispatch, self.deliveries, self._relays, self.routine_tz
        )
        self.runner.start()
        self.deliveries.start()
        if not settings.enabled:
            log.info("[routines] enabled = false: no routine runs on this machine")
            return
        self.clock = RoutineClock(
            self.routine_book,
            self.ledger,
            self.routine_tz,
            self.runner.fire,
            reminder_grace=timedelta(hours=settings.reminder_grace_hours),
            routine_grace=timedelta(minutes=settings.grace_minutes),
        )
        # Never raises for a routine (each routine's error is its own, named in status) nor for the
        # database (said in status, tried again at the next check): tarsd serves whatever the file holds.
        self.routines_skipped = await self.clock.start()
        for line in self.routines_skipped:
            log.warning("%s", line)

    def _open_routines(self) -> None:
        """The routines file and the ledger, before any door opens: a request may ask for them at once."""
        from tarsd.routines.book import Book, routines_path
        from tarsd.routines.ledger import Ledger
        from tarsd.routines.schedule import user_timezone

        settings = self.config.routines
        self.routine_tz = user_timezone(settings.timezone)
        self.routine_book = Book(
            routines_path(settings.file, self.config_file), self.routine_tz, settings.min_interval_seconds, self.config.vault_path
        )
        self.ledger = Ledger(self.engine.store)
        self.assistant.open_routines(self.routine_book, self._routines_changed)

    def _open_sync(self) -> SyncCoordinator:
        """Other machines on this vault (docs/two-machines.md): the heartbeat, the journal of memory
        lines, conflict copies merged, proposals the vault shows done, who polls Telegram."""
        from tarsd.sync.coordinator import SyncCoordinator

        book = self.routine_book
        coordinator = SyncCoordinator(
            self.config,
            self.assistant.memory,
            self.ledger,
            routine_names=lambda: [r.name for r in book.load() if not r.is_reminder and not r.paused],
            note_templates=lambda: [r.note for r in book.load() if r.note],
            reindex=self.queue.touch_now,
            version=self._version(),
        )
        coordinator.prepare()
        return coordinator

    def sync_status(self):
        from tarsctl.protocol import SyncStatus

        return self.sync.status() if self.sync is not None else SyncStatus()

    def _routines_changed(self) -> None:
        """A proposal approved on a worker thread added a routine. The book tells the clock of every
        write already (Book.on_written); this only makes sure, at the cost of a stat."""
        if self.clock is not None:
            self._loop.call_soon_threadsafe(self.clock.rearm)

    def _relays(self) -> dict:
        """The running channels' relays, by target name, for routines' messages."""
        relays = {}
        for name in ("whatsapp", "telegram"):
            channel = getattr(self, name)
            if channel is not None:
                relays[name] = channel.relay
        return relays

    def _clock_check(self) -> None:
        """The reconcile tick: routines due while the machine slept are run now (the clock's timer
        counts monotonic time, which stands still during a suspend)."""
        if self.clock is not None:
            self.clock.check()

    async def run_routine(self, routine):
        if self.runner is None:
            raise ValueError("tarsd is still starting: run it again in a moment")
        return await self.runner.run_now(routine)

    async def _stop_routines(self) -> None:
        if self.clock is not None:
            await self.clock.stop()
        if getattr(self, "runner", None) is not None:
            self.runner.stop()
        if getattr(self, "deliveries", None) is not None:
            await self.deliveries.stop()

    async def _start_http(self, server) -> None:
        """The HTTP listener; its web framework is imported here, only when enabled. A listener that
        cannot start (a taken port, a bad token file) is logged and shown in status: the socket,
        the index and the chat go on without it."""
        from tarsd.setup.http_tokens import mcp_token_path, token_path

        try:
            from tarsd.serve.http import HttpDoor, HttpStartError
        except ImportError as exc:
            self.http_error = f"the HTTP listener needs FastAPI and uvicorn ({exc}): reinstall tars (uv tool install --reinstall .)"
            log.error("HTTP listener not started: %s", self.http_error)
            return
        # Other apps served on the listener behind the same checks and token: MCP over streamable HTTP.
        mounts: list = []
        if self.config.http.mcp:
            from tarsd.serve.mcp_http import mcp_mount

            mounts.append(mcp_mount)
        whatsapp = None
        if self.config.whatsapp.enabled:
            # The channel is loaded only when enabled; its webhook checks Meta's signature itself.
            from tarsd.channels.whatsapp import WhatsApp
            from tarsd.serve.http_app import Mount

            whatsapp = WhatsApp(self.config.whatsapp, self.config_file, self.engine.store, server.dispatch)
            mounts.append(lambda _dispatch: Mount(whatsapp.path, whatsapp.webhook, lifespan=whatsapp.running, authenticates=True))
        telegram = None
        if self.config.telegram.enabled and self.config.telegram.webhook_url:
            # Webhook mode: Telegram posts updates to the listener; the webhook checks Telegram's secret token itself.
            from tarsd.serve.http_app import Mount

            try:
                from tarsd.channels.telegram import Telegram
            except ImportError as exc:
                self.telegram_error = (
                    f"the Telegram channel needs python-telegram-bot ({exc}): reinstall tars (uv tool install --reinstall .)"
                )
                log.error("Telegram channel not started: %s", self.telegram_error)
            else:
                telegram = Telegram(self.config.telegram, self.config_file, self.engine.store, server.dispatch)
                mounts.append(lambda _dispatch: Mount(telegram.path, telegram.webhook, lifespan=telegram.running, authenticates=True))
        door = HttpDoor(
            server,
            self.config.http,
            token_path(self.config.http.token_file, self.config_file),
            mounts,
            mcp_token_file=mcp_token_path(self.config.http.mcp_token_file, self.config_file),
        )
        try:
            await door.start()
        except HttpStartError as exc:
            self.http_error = str(exc)
            self.whatsapp_error = f"the HTTP listener it is served on did not start: {exc}"
            if telegram is not None:
                self.telegram_error = f"the HTTP listener its webhook is served on did not start: {exc}"
            log.error("HTTP listener not started: %s", exc)
            if whatsapp is not None:
                await whatsapp.graph.aclose()
            return
        self.http = door
        self.whatsapp = whatsapp
        self.telegram = telegram

    async def _start_telegram(self, server) -> None:
        """The Telegram channel; the library is imported here, only when enabled. A channel that
        cannot start is logged and shown in status: the rest of tarsd goes on without it."""
        try:
            from tarsd.channels.telegram import Telegram
        except ImportError as exc:
            self.telegram_error = f"the Telegram channel needs python-telegram-bot ({exc}): reinstall tars (uv tool install --reinstall .)"
            log.error("Telegram channel not started: %s", self.telegram_error)
            return
        self.telegram = Telegram(self.config.telegram, self.config_file, self.engine.store, server.dispatch)
        # Two machines on one vault: one polls (tarsd/sync/lease.py); the other keeps the channel for
        # sending (routines, reminders) and stands by, taking over when the one polling stops.
        decision = await self.sync.telegram_decision(_TelegramPoller(self.telegram))
        await self.telegram.start(poll=decision.poll)

    def http_status(self):
        from tarsctl.protocol import HttpStatus

        if self.http is not None:
            return self.http.describe()
        return HttpStatus(enabled=self.config.http.enabled, error=self.http_error)

    def channels_status(self) -> list:
        from tarsctl.protocol import ChannelStatus

        channels = []
        if self.whatsapp is not None:
            channels.append(self.whatsapp.status())
        elif self.config.whatsapp.enabled:
            channels.append(ChannelStatus(name="whatsapp", path="/channels/whatsapp", error=self.whatsapp_error))
        if self.telegram is not None:
            telegram = self.telegram.status()
            if self.sync is not None and self.sync.standing_by():
                telegram.receives = "long polling by another machine of this vault (this one stands by, and sends)"
            channels.append(telegram)
        elif self.config.telegram.enabled:
            channels.append(ChannelStatus(name="telegram", title="Telegram", receives="long polling", error=self.telegram_error))
        return channels

    async def _stop_workers(self, workers: list[asyncio.Task]) -> bool:
        """True when both workers reached a safe point within the grace period."""
        if getattr(self, "queue", None) is None:
            return True
        await self.queue.stop()
        if not workers:
            return True
        _, unfinished = await asyncio.wait(workers, timeout=STOP_GRACE_SECONDS)
        for task in unfinished:
            task.cancel()
        return not unfinished and not self.queue.busy

    def _path_changed(self, rel: str) -> None:
        """A watcher event (the observer's thread): index the path; the memory files are also
        checked for lines a write race lost, and a sync tool's conflict copy is merged or listed."""
        self.queue.touch(rel)
        self.assistant.file_changed(rel)
        if self.sync is not None:
            self.sync.path_changed(rel)

    def _reindex_from_thread(self, rel: str, loop: asyncio.AbstractEventLoop) -> None:
        """Index a file tars just wrote, from a worker thread, through the single writer: at once,
        even in the middle of a long sync."""
        asyncio.run_coroutine_threadsafe(self.queue.refresh([rel], timeout=60), loop).result(timeout=70)

    async def _report_to_systemd(self) -> None:
        """STATUS= lines while indexing, and WATCHDOG=1 pings while the loop is responsive
        (a wedged loop then gets restarted)."""
        if not self.notifier.enabled:
            return
        interval = min(5.0, self.notifier.watchdog_interval() or 5.0)
        while True:
            coverage = self.coverage()
            if not coverage.reconciled and coverage.scan_total:
                state = f"indexing: {coverage.scan_done} of {coverage.scan_total} notes checked"
            elif coverage.pending_vectors and coverage.embedder == "ready":
                state = f"embedding: {coverage.pending_vectors} passages to go"
            else:
                state = f"serving {self.vault}"
            self.notifier.send("WATCHDOG=1", f"STATUS={state}")
            await asyncio.sleep(interval)

    @staticmethod
    def _version() -> str:
        from tarsd import __version__

        return __version__

    def coverage(self) -> Coverage:
        from tarsd.serve.status import coverage

        return coverage(self.queue, self.engine, self.watcher)


class _TelegramPoller:
    """The Telegram channel as the two-machine coordinator starts and stops its polling (tarsd/sync)."""

    def __init__(self, telegram: Telegram):
        from tarsd.sync.coordinator import bot_hash

        self.telegram = telegram
        try:
            token = telegram.token_file.get()
        except Exception:  # no token yet: the channel says why; machines then tell bots apart by nothing
            token = ""
        self.bot_id = token.split(":", 1)[0].strip()
        self.bot = bot_hash(token)

    async def start_polling(self) -> None:
        self.telegram.start_polling()

    async def stop_polling(self) -> None:
        await self.telegram.stop_polling()

    def offset(self) -> int:
        return self.telegram.offsets.get(self.bot_id) if self.bot_id else 0

    def set_offset(self, offset: int) -> None:
        if self.bot_id:
            self.telegram.offsets.set(self.bot_id, offset)


def _at(when: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(when))


def _log_litter(task: asyncio.Task) -> None:
    if task.cancelled():
        return
    if task.exception() is not None:
        log.warning("could not clean up temp files in the vault: %s", task.exception())
    elif task.result():
        log.info("removed %d temp file(s) left by a killed tarsd: %s", len(task.result()), ", ".join(task.result()[:5]))


def _memory_plan(config: Config) -> Plan:
    """The settings for tarsd's memory budget, logged once; malloc's settings go in before the
    threads that would each take an arena start."""
    from tarsd.config.budget import plan_for
    from tarsd.config.heap import fix_mmap_threshold, limit_arenas

    plan = plan_for(config)
    limit_arenas(plan.malloc_arenas)
    if plan.fixed_mmap_threshold:
        fix_mmap_threshold()
    log.info("memory budget %s", plan.describe())
    if plan.keyword_only:
        log.warning("%s", plan.keyword_only)
    return plan


class _ShownFormatter(logging.Formatter):
    """Log lines cleaned as tarsctl cleans what it prints (tarsctl/shown.py): they name notes, tool
    servers and what those said, and tarsd's stderr is a terminal when it runs in the foreground
    (or is shown by `tarsctl service logs`). A traceback keeps its lines."""

    def format(self, record: logging.LogRecord) -> str:
        return shown_text(super().format(record), keep_newlines=True)


def _setup_logging(level: str) -> None:
    supervised = "INVOCATION_ID" in os.environ or "JOURNAL_STREAM" in os.environ or "XPC_SERVICE_NAME" in os.environ
    # journald and launchd's log files add their own timestamps.
    fmt = "%(levelname)s %(name)s: %(message)s" if supervised else "%(asctime)s %(levelname)s %(name)s: %(message)s"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_ShownFormatter(fmt))
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), handlers=[handler])
    logging.getLogger("apscheduler").setLevel(logging.WARNING)


def _exit_lingering(code: int) -> int:
    """Exit without waiting for a worker thread still inside a long step (a download that never
    answers, a huge note): its SQLite transaction is rolled back, so the index stays whole.
    Daemon threads count too: one inside onnxruntime (the model loading) while the interpreter
    finalises aborts the process."""
    deadline = time.monotonic() + THREAD_GRACE_SECONDS
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() for t in threading.enumerate() if t is not threading.main_thread()):
        logging.shutdown()
        sys.stderr.flush()
        os._exit(code)
    return code


def main(argv: list[str] | None = None) -> int:
    # The very first thing: a stop asked for during start-up is honoured, never a crash.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _note_early_signal)
    parser = argparse.ArgumentParser(prog="tarsd", description="Keep an Obsidian vault indexed and answer tarsctl over a Unix socket.")
    parser.add_argument("--vault", help="the vault folder (default: [vault] path in the config, or TARS_VAULT)")
    parser.add_argument("--config", type=Path, help="a TOML config file (default: the platform config dir's tars/config.toml)")
    parser.add_argument("--socket", help="the Unix socket to listen on")
    parser.add_argument("--log-level", type=str.lower, help="debug, info, warning or error")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    args = parser.parse_args(argv)
    if args.version:
        from tarsd import __version__

        print(f"tarsd {__version__}")
        return 0

    from tarsd.config.settings import ConfigError, load_config

    try:
        config = load_config(args.config, vault_path=args.vault, daemon_socket=args.socket, daemon_log_level=args.log_level)
        vault = config.vault_path
        if not vault.exists():
            raise ConfigError(
                f"the vault {vault} does not exist: pass the folder your notes are in (--vault, TARS_VAULT or [vault] path), "
                f"or create it with `mkdir -p {shlex.quote(str(vault))}` for a new vault"
            )
        if not vault.is_dir():
            raise ConfigError(f"the vault {vault} is not a directory but a file: pass the folder your notes are in")
    except ConfigError as exc:
        print(f"tarsd: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    _setup_logging(config.daemon.log_level)
    plan = _memory_plan(config)

    from tarsd.serve.socket_server import SocketInUse, UnsafeSocketDir
    from tarsd.store.database import StoreError

    loop = asyncio.new_event_loop()
    code = 0
    try:
        loop.run_until_complete(Daemon(config, args.config, plan).run())
    except (AlreadyRunning, SocketInUse) as exc:
        log.error("%s", exc)
        code = EXIT_ALREADY_RUNNING
    except (StoreError, UnsafeSocketDir, ValueError, FileNotFoundError) as exc:
        log.error("%s", exc)
        code = EXIT_FAILED
    finally:
        # Not asyncio.run: it would wait, unbounded, for every worker thread to finish. Tasks that
        # libraries leave running (sse_starlette's shutdown watcher, started by MCP over HTTP,
        # polls for ever) are cancelled as asyncio.run would: otherwise each is destroyed pending.
        leftover = asyncio.all_tasks(loop)
        for task in leftover:
            task.cancel()
        if leftover:
            loop.run_until_complete(asyncio.wait(leftover, timeout=LEFTOVER_TASKS_SECONDS))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    return _exit_lingering(code)


if __name__ == "__main__":
    sys.exit(main())
