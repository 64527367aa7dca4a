"""tarsd: run the daemon in the foreground (launchd and systemd supervise it; it never forks).

Start-up order: config, one-daemon-per-vault lock, database, socket, watcher, first
reconcile, scheduler, then READY=1 to systemd. SIGTERM or SIGINT (or `tarsctl stop`) stops
after the current file's transaction, removes the socket and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import logging
import os
import platform
import signal
import sys
import time
from pathlib import Path

import apsw

from tarsctl.protocol import PROTOCOL_VERSION, StatusReply

from . import __version__
from .chat.assistant import Assistant
from .config import Config, ConfigError, load_config
from .engine import Engine
from .notify import SystemdNotifier
from .scheduler import start_scheduler
from .server import FrameError, Server, SocketInUse
from .store import StoreError
from .sync_queue import SyncQueue
from .watcher import VaultWatcher

log = logging.getLogger("tarsd")

EXIT_CONFIG = 2
EXIT_ALREADY_RUNNING = 3
EXIT_FAILED = 1


class AlreadyRunning(Exception):
    pass


def acquire_lock(lock_path: Path, vault: Path) -> int:
    """An flock held for the daemon's lifetime; the kernel drops it even after kill -9."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise AlreadyRunning(
            f"another tarsd (pid {holder}) is already serving the vault {vault}; stop it with `tarsctl stop` first"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


class Daemon:
    def __init__(self, config: Config):
        self.config = config
        self.vault = config.vault_path
        self.started_at = time.time()
        self.notifier = SystemdNotifier()
        self._stop = asyncio.Event()
        self.engine: Engine
        self.queue: SyncQueue
        self.watcher: VaultWatcher
        self.assistant: Assistant

    def request_stop(self, why: str) -> None:
        log.info("stopping: %s", why)
        self._stop.set()

    def vault_relative(self, path: str) -> str:
        candidate = Path(path)
        resolved = candidate if candidate.is_absolute() else self.vault / candidate
        try:
            return Path(os.path.normpath(resolved)).relative_to(self.vault).as_posix()
        except ValueError:
            raise FrameError("bad_request", f"{path} is not inside the vault {self.vault}", "give paths inside the vault") from None

    async def run(self) -> None:
        lock_fd = acquire_lock(self.config.db_path.with_suffix(".lock"), self.vault)
        socket_path = self.config.socket_path
        server = None
        scheduler = None
        try:
            self.engine = await asyncio.to_thread(Engine, self.config)
            self.queue = SyncQueue(self.engine.indexer, self.config.daemon.debounce_ms / 1000)
            self.watcher = VaultWatcher(self.vault, self.queue.touch, self.queue.request_reconcile)
            loop = asyncio.get_running_loop()
            self.assistant = Assistant(self.config, self.engine, lambda rel: self._reindex_from_thread(rel, loop))
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.request_stop, signal.Signals(sig).name)

            server = Server(self)
            await server.start(socket_path)
            # Watch first, then reconcile: nothing changed in between can be missed.
            self.watcher.start()
            worker = asyncio.create_task(self.queue.run(), name="sync-worker")
            log.info("tarsd %s serving %s on %s (database %s)", __version__, self.vault, socket_path, self.config.db_path)
            # Keyword search is ready after this; vectors follow in background rounds.
            first = await self.queue.index(None, embed=False)
            log.info(
                "first reconcile: %d files, %d indexed, %d deleted in %.2fs", first.scanned, first.indexed, first.deleted, first.seconds
            )
            scheduler = start_scheduler(self.config, self.queue, self.watcher, self.assistant)
            self.notifier.send("READY=1", f"STATUS=serving {self.vault}")
            pinger = asyncio.create_task(self._watchdog_pings()) if self.notifier.watchdog_interval() else None

            await self._stop.wait()
            self.notifier.send("STOPPING=1")
            if pinger:
                pinger.cancel()
            await self.queue.stop()
            await asyncio.wait_for(worker, timeout=60)
        finally:
            if scheduler is not None:
                scheduler.shutdown(wait=False)
            if getattr(self, "watcher", None) is not None:
                self.watcher.stop()
            if server is not None:
                await server.close()
                socket_path.unlink(missing_ok=True)
            if getattr(self, "engine", None) is not None:
                self.engine.close()
            os.close(lock_fd)
        log.info("stopped")

    def _reindex_from_thread(self, rel: str, loop: asyncio.AbstractEventLoop) -> None:
        """Index a file tars just wrote, from a worker thread, through the single writer."""
        asyncio.run_coroutine_threadsafe(self.queue.index([rel]), loop).result(timeout=300)

    async def _watchdog_pings(self) -> None:
        interval = self.notifier.watchdog_interval() or 30.0
        while True:
            # Ping only while the loop is responsive; a wedged loop then gets restarted.
            self.notifier.send("WATCHDOG=1", f"STATUS=serving {self.vault}, queue {self.queue.depth}")
            await asyncio.sleep(interval)

    def status(self, request_id: int) -> StatusReply:
        import sqlite_vec

        store = self.engine.store
        db = self.config.db_path
        size = sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists())
        report = self.queue.last_report
        last_sync: dict[str, object] = {"at": self.queue.last_sync_at, "error": self.queue.last_error}
        if report is not None:
            last_sync.update(indexed=report.indexed, deleted=report.deleted, seconds=round(report.seconds, 3))
        problems = [[path, "skipped" if skipped else "repaired", problem] for path, skipped, problem in store.problems()]
        embedder = self.engine.embedder.describe()
        warnings = []
        if embedder.get("error"):
            warnings.append(f"embedder: {embedder['error']}")
        if self.watcher.error:
            warnings.append(f"watcher: {self.watcher.error}")
        warnings.extend(self.assistant.warnings())
        return StatusReply(
            id=request_id,
            vault=str(self.vault),
            database=str(db),
            database_bytes=size,
            counts=store.counts(),
            embedder=embedder,
            queue_depth=self.queue.depth,
            indexing=self.queue.busy,
            last_sync=last_sync,
            watcher=self.watcher.describe(),
            problems=problems,
            uptime=round(time.time() - self.started_at, 1),
            versions={
                "tars": __version__,
                "protocol": str(PROTOCOL_VERSION),
                "python": platform.python_version(),
                "sqlite": apsw.sqlite_lib_version(),
                "sqlite_vec": getattr(sqlite_vec, "__version__", store.vec_version),
                "apsw": apsw.apsw_version(),
            },
            warnings=warnings,
        )


def _setup_logging(level: str) -> None:
    supervised = "INVOCATION_ID" in os.environ or "JOURNAL_STREAM" in os.environ or "XPC_SERVICE_NAME" in os.environ
    # journald and launchd's log files add their own timestamps.
    fmt = "%(levelname)s %(name)s: %(message)s" if supervised else "%(asctime)s %(levelname)s %(name)s: %(message)s"
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), format=fmt, stream=sys.stderr)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tarsd", description="Keep an Obsidian vault indexed and answer tarsctl over a Unix socket.")
    parser.add_argument("--vault", help="the vault folder (default: [vault] path in the config, or TARS_VAULT)")
    parser.add_argument("--config", type=Path, help="a TOML config file (default: the platform config dir's tars/config.toml)")
    parser.add_argument("--socket", help="the Unix socket to listen on")
    parser.add_argument("--log-level", help="debug, info, warning or error")
    parser.add_argument("--version", action="version", version=f"tarsd {__version__}")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config, vault_path=args.vault, daemon_socket=args.socket, daemon_log_level=args.log_level)
        vault = config.vault_path
        if not vault.is_dir():
            raise ConfigError(f"the vault {vault} is not a directory")
    except ConfigError as exc:
        print(f"tarsd: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    _setup_logging(config.daemon.log_level)
    try:
        asyncio.run(Daemon(config).run())
    except (AlreadyRunning, SocketInUse) as exc:
        log.error("%s", exc)
        return EXIT_ALREADY_RUNNING
    except (StoreError, ValueError, FileNotFoundError) as exc:
        log.error("%s", exc)
        return EXIT_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
