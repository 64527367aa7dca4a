"""Live file watching with watchdog. Events are hints, never the truth.

inotify drops events on overflow, editors save by writing a temp file and renaming it over
the note, and folders move wholesale. So every event only names paths to look at again (a
move names both ends), folder events ask for a reconcile scan of the real tree, and a dead
observer is replaced, followed by a reconcile.

A search must see a save made a moment before it, even one whose event is still on its way.
As watchman does, the watcher can be asked to catch up: it creates a cookie file in the
vault root (``.tars-sync-*``, hidden, never indexed, deleted at once) and waits for that
file's own event; events of one inotify instance arrive in order, so every change made
before the cookie has been reported by then.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from .vault import is_ignored

log = logging.getLogger(__name__)

# Only what can change a note: subscribing to opens and reads (watchdog's default) lets one
# `rg` over a large vault overflow the kernel's event queue and lose real saves. A write ends
# with close-after-write (or a rename, for atomic saves), so "modified" is not needed either.
_EVENT_FILTER = [
    FileCreatedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    FileClosedEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
]
_CHANGES = {"created", "deleted", "moved", "closed"}
# watchdog reports a kernel queue overflow only in its log (it rebuilds its own watches);
# the events lost with it are found again by a reconcile.
_OVERFLOW_LOGGER = "watchdog.observers.inotify_c"
_OVERFLOW_TEXT = "queue overflow"
COOKIE_PREFIX = ".tars-sync-"


class _OverflowListener(logging.Handler):
    def __init__(self, watcher: VaultWatcher):
        super().__init__(level=logging.WARNING)
        self.watcher = watcher

    def emit(self, record: logging.LogRecord) -> None:
        if _OVERFLOW_TEXT in record.getMessage().lower():
            self.watcher.overflows += 1
            self.watcher.on_rescan()


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: VaultWatcher):
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type not in _CHANGES:
            return
        name = os.path.basename(os.fsdecode(event.src_path))
        if name.startswith(COOKIE_PREFIX):
            self.watcher.cookie_seen(name)
            return
        self.watcher.events += 1
        self.watcher.last_event_at = time.time()
        if event.is_directory:
            if event.event_type in ("moved", "deleted", "created"):
                # A folder moved in or out brings no events for the notes inside it.
                self.watcher.on_rescan()
            return
        for raw in (event.src_path, getattr(event, "dest_path", "")):
            if raw:
                self.watcher.hint(os.fsdecode(raw))


class VaultWatcher:
    def __init__(self, root: Path, on_path: Callable[[str], None], on_rescan: Callable[[], None]):
        self.root = root
        self.on_path = on_path
        self.on_rescan = on_rescan
        self.observer: Observer | None = None
        self.events = 0
        self.restarts = 0
        self.last_event_at: float | None = None
        self.error: str | None = None
        self.overflows = 0
        self._overflow_listener = _OverflowListener(self)
        self._cookies: dict[str, Callable[[], None]] = {}
        self._cookies_lock = threading.Lock()
        self._cookie_numbers = itertools.count()

    async def caught_up(self, timeout: float) -> bool:
        """Wait until every change made in the vault before this call has been reported.
        False when that cannot be known (no watcher, a read-only vault) or took too long."""
        if not self.alive:
            return False
        loop = asyncio.get_running_loop()
        seen = loop.create_future()
        name = f"{COOKIE_PREFIX}{os.getpid()}-{next(self._cookie_numbers)}"
        with self._cookies_lock:
            self._cookies[name] = lambda: loop.call_soon_threadsafe(lambda: seen.done() or seen.set_result(True))
        try:
            cookie = self.root / name
            os.close(os.open(cookie, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            os.unlink(cookie)
            await asyncio.wait_for(seen, timeout)
            return True
        except (OSError, TimeoutError):
            return False
        finally:
            with self._cookies_lock:
                self._cookies.pop(name, None)

    def cookie_seen(self, name: str) -> None:
        """From the observer thread: a cookie's event arrived."""
        with self._cookies_lock:
            callback = self._cookies.pop(name, None)
        if callback is not None:
            callback()

    def hint(self, absolute: str) -> None:
        try:
            rel = Path(absolute).relative_to(self.root).as_posix()
        except ValueError:
            return
        if not is_ignored(rel):
            self.on_path(rel)

    def start(self) -> None:
        observer = Observer()
        logging.getLogger(_OVERFLOW_LOGGER).addHandler(self._overflow_listener)
        try:
            observer.schedule(_Handler(self), str(self.root), recursive=True, event_filter=_EVENT_FILTER)
            observer.start()
        except OSError as exc:
            # Typically the inotify watch limit: the periodic reconcile still keeps the index right.
            self.error = (
                f"cannot watch {self.root}: {exc} (raise fs.inotify.max_user_watches); changes are picked up by the periodic reconcile"
            )
            log.error("%s", self.error)
            return
        self.observer, self.error = observer, None

    @property
    def alive(self) -> bool:
        return self.observer is not None and self.observer.is_alive()

    def check(self) -> None:
        """Replace a dead observer and reconcile what it may have missed."""
        if self.alive:
            return
        log.warning("the file watcher stopped (%s); restarting it and reconciling", self.error or "observer thread died")
        self.stop()
        self.restarts += 1
        self.start()
        self.on_rescan()

    def stop(self) -> None:
        logging.getLogger(_OVERFLOW_LOGGER).removeHandler(self._overflow_listener)
        if self.observer is not None:
            try:
                self.observer.stop()
                self.observer.join(timeout=5)
            except RuntimeError:
                pass
            self.observer = None

    def describe(self) -> dict[str, object]:
        return {
            "alive": self.alive,
            "events": self.events,
            "restarts": self.restarts,
            "overflows": self.overflows,
            "last_event_at": self.last_event_at,
            "error": self.error,
        }
