"""Live file watching with watchdog. Events are hints, never the truth.

inotify drops events on overflow, editors save by writing a temp file and renaming it over
the note, and folders move wholesale. So every event only names paths to look at again (a
move names both ends) and folder events ask for a reconcile scan of the real tree.

A watcher can also go deaf while looking alive: a storm of folder swaps floods the kernel's
queue, watchdog reads the backlog for many seconds, then its rebuild after the overflow dies
of a KeyError in its reader thread while the observer thread runs on. So the supervisor
replaces the observer (and tarsd rescans the vault) when any of its threads died (heard
through threading.excepthook, and seen by a look at each thread), when the kernel's queue
overflowed, or when a cookie (below) waited too long for its event (a search's, or its own
probe, made while events flow in); and it follows the vault
folder going away and coming back (tarsd/vault/root.py). Status and every search reply say
so until the rescan after the restart is done.

A search must see a save made a moment before it, even one whose event is still on its way.
As watchman does, the watcher can be asked to catch up: it creates a cookie file in the
vault root (``.tars-sync-*``, hidden, never indexed, deleted at once) and waits for that
file's own event; events of one inotify instance arrive in order, so every change made
before the cookie has been reported by then.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

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
from watchdog.observers.api import BaseObserver, EventDispatcher
from watchdog.utils import BaseThread, UnsupportedLibcError

try:  # Linux
    from watchdog.observers.inotify import InotifyEmitter
    from watchdog.observers.inotify_c import InotifyFD
except (ImportError, UnsupportedLibcError):  # macOS: FSEvents, through watchdog's Observer
    InotifyEmitter = InotifyFD = None

from tarsd.vault.files import is_ignored
from tarsd.vault.root import VaultRoot

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
_EMITTER_LOGGER = "watchdog.observers.inotify"
_STOP_NOISE = "InotifyEmitter.queue_events() called when the thread is inactive"
COOKIE_PREFIX = ".tars-sync-"
# A watcher that dies again at once (a storm of folder swaps going on) is replaced at most this
# often; one that cannot start (the inotify watch limit) is tried again this often.
RESTART_GAP_SECONDS = 1.0
FAILED_START_GAP_SECONDS = 30.0
# A watcher whose cookie (see caught_up) is not reported within this long is replaced.
BEHIND_LIMIT_SECONDS = 2.0


class _OverflowListener(logging.Handler):
    def __init__(self, watcher: VaultWatcher):
        super().__init__(level=logging.WARNING)
        self.watcher = watcher

    def emit(self, record: logging.LogRecord) -> None:
        if _OVERFLOW_TEXT in record.getMessage().lower():
            self.watcher.overflows += 1
            self.watcher.needs_restart("the kernel's inotify event queue overflowed and events were lost")


class _StopNoise(logging.Filter):
    """watchdog logs this at ERROR when its emitter thread reads once more while being stopped,
    as on every restart; nothing went wrong."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != _STOP_NOISE


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


class _Cookie(NamedTuple):
    made: float  # monotonic
    seen: Callable[[], None]


# Watchers told when a thread dies of an exception (threading.excepthook is process-wide).
_watchers: weakref.WeakSet[VaultWatcher] = weakref.WeakSet()
_chained_excepthook = threading.excepthook


def _thread_died(args: threading.ExceptHookArgs) -> None:
    for watcher in list(_watchers):
        watcher.thread_died(args)
    _chained_excepthook(args)  # the traceback still goes to the log


def _listen(watcher: VaultWatcher) -> None:
    """Hear the deaths of observer threads, and quiet watchdog's noise about stopping them."""
    global _chained_excepthook
    if threading.excepthook is not _thread_died:
        _chained_excepthook, threading.excepthook = threading.excepthook, _thread_died
    emitter_log = logging.getLogger(_EMITTER_LOGGER)
    if not any(isinstance(f, _StopNoise) for f in emitter_log.filters):
        emitter_log.addFilter(_StopNoise())
    _watchers.add(watcher)


class VaultWatcher:
    def __init__(self, root: Path, on_path: Callable[[str], None], on_rescan: Callable[[], None]):
        self.root = root
        self.vault = VaultRoot(root)
        self.on_path = on_path
        self.on_rescan = on_rescan
        self.observer: BaseObserver | None = None
        self._reader: BaseThread | None = None  # inotify's reader thread, owned here so it is always closed
        self.events = 0
        self._events_checked = 0  # the event count at the last check
        self.restarts = 0
        self.last_event_at: float | None = None
        self.error: str | None = None
        self.overflows = 0
        self.restarted_at: float | None = None
        self.restart_reason = ""
        self.trouble = ""  # why the running observer must be replaced (from its own threads)
        self._lock = threading.RLock()  # start, stop and check run in different threads
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._overflow_listener = _OverflowListener(self)
        self._cookies: dict[str, _Cookie] = {}  # made, not reported yet
        self._cookies_lock = threading.Lock()
        self._cookie_numbers = itertools.count()
        _listen(self)

    async def caught_up(self, timeout: float) -> bool:
        """Wait until every change made in the vault before this call has been reported.
        False when that cannot be known (no watcher, a read-only vault) or took too long."""
        if not self.alive:
            return False
        loop = asyncio.get_running_loop()
        seen = loop.create_future()
        if not self._send_cookie(lambda: loop.call_soon_threadsafe(lambda: seen.done() or seen.set_result(True))):
            return False
        try:
            await asyncio.wait_for(seen, timeout)
            return True
        except TimeoutError:
            # Still awaited: the supervisor replaces a watcher that stays this far behind.
            self.wake()
            return False

    def _send_cookie(self, seen: Callable[[], None]) -> bool:
        """Make a cookie; ``seen`` is called when its event arrives. False if it cannot be made."""
        name = f"{COOKIE_PREFIX}{os.getpid()}-{next(self._cookie_numbers)}"
        with self._cookies_lock:
            self._cookies[name] = _Cookie(time.monotonic(), seen)
        try:
            cookie = self.root / name
            os.close(os.open(cookie, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            os.unlink(cookie)
            return True
        except OSError:
            with self._cookies_lock:
                self._cookies.pop(name, None)
            return False

    def cookie_seen(self, name: str) -> None:
        """From the observer thread: a cookie's event arrived."""
        with self._cookies_lock:
            cookie = self._cookies.pop(name, None)
        if cookie is not None:
            cookie.seen()

    def _behind(self) -> float:
        """How long the oldest cookie has waited for its event (0.0: none waits)."""
        with self._cookies_lock:
            oldest = min((cookie.made for cookie in self._cookies.values()), default=None)
        return 0.0 if oldest is None else time.monotonic() - oldest

    def hint(self, absolute: str) -> None:
        try:
            rel = Path(absolute).relative_to(self.root).as_posix()
        except ValueError:
            return
        if not is_ignored(rel):
            self.on_path(rel)

    def start(self) -> None:
        with self._lock:
            if self.vault.error:
                self.error = self.vault.error
                return
            logging.getLogger(_OVERFLOW_LOGGER).addHandler(self._overflow_listener)
            self.trouble = ""
            try:
                observer = self._new_observer()
                observer.schedule(_Handler(self), str(self.root), recursive=True, event_filter=_EVENT_FILTER)
                observer.start()
            except OSError as exc:
                # Typically the inotify watch limit: the periodic reconcile still keeps the index right.
                self.error = (
                    f"cannot watch {self.root}: {exc} (raise fs.inotify.max_user_watches); changes are picked up by the periodic reconcile"
                )
                log.error("%s", self.error)
                self._halt(None)
                return
            self.observer, self.error = observer, None

    def _new_observer(self) -> BaseObserver:
        if InotifyFD is None:
            return Observer()
        # On Linux, a BaseObserver with an inotify reader of our own (InotifyObserver keeps its
        # reader to itself): its liveness is checked, and it is closed even when watchdog's
        # clean-up fails.
        self._reader = InotifyFD()
        self._reader.start()
        return BaseObserver(InotifyEmitter, inotify_fd=self._reader)

    @property
    def alive(self) -> bool:
        """The observer and all its threads run, and no event was lost since it started."""
        observer, reader = self.observer, self._reader
        if observer is None or self.trouble:
            return False
        threads = [observer, *observer.emitters, *([reader] if reader is not None else [])]
        return all(thread.is_alive() for thread in threads)

    def needs_restart(self, why: str) -> None:
        """From any thread: the observer is deaf or lost events; replace it at once."""
        self.trouble = self.trouble or why
        self.wake()

    def thread_died(self, args: threading.ExceptHookArgs) -> None:
        """threading.excepthook: one of our observer's threads died of an exception (watchdog's
        inotify reader dies of a KeyError when folders are swapped faster than it reads)."""
        observer = self.observer
        ours = {self._reader, observer, *(observer.emitters if observer is not None else ())}
        if args.thread in ours:
            self.needs_restart(f"a watchdog thread died: {args.exc_type.__name__}: {args.exc_value}")

    def wake(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:  # the loop is closed: tarsd is stopping
                pass

    async def supervise(self, interval: float) -> None:
        """Check the watcher and the vault folder every ``interval`` seconds, and at once when an
        observer thread dies or the kernel's queue overflows."""
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), interval)
            except TimeoutError:
                pass
            self._wake.clear()
            await asyncio.to_thread(self.check)

    def check(self) -> None:
        """Replace a dead or lossy observer, follow the vault folder going and coming back, and
        reconcile what the watcher may have missed."""
        with self._lock:
            change = self.vault.check()
            if change == "missing":
                log.error("%s: searches answer from the index as it was; nothing is written until it is back", self.vault.error)
                self._halt(self.observer)
                self.error = self.vault.error
                return
            if self.vault.error:
                return
            if change == "back":
                self._restart(f"the vault folder {self.root} is there again")
                return
            behind = self._behind()
            if not behind and self.events != self._events_checked:
                # Busy since the last look: probe whether it keeps up, even when no search asks.
                self._send_cookie(lambda: None)
            self._events_checked = self.events
            if behind >= BEHIND_LIMIT_SECONDS:
                # Its threads may all run, yet it reports nothing new: the kernel's queue holds a
                # flood of events (and its overflow) that would take many seconds to read.
                self.trouble = self.trouble or f"it fell {behind:.0f} s behind the changes in the vault"
            if self.alive:
                return
            # A watcher that dies again at once (the storm goes on) or cannot start (the watch
            # limit) is not replaced in a tight loop.
            gap = RESTART_GAP_SECONDS if self.trouble else FAILED_START_GAP_SECONDS if self.error else 0.0
            if self.restarted_at is not None and time.time() - self.restarted_at < gap:
                return
            why = self.trouble or self.error or "the observer thread stopped"
            log.warning("replacing the file watcher (%s) and rescanning the vault", why)
            self._restart(why)

    def _restart(self, why: str) -> None:
        self._halt(self.observer)
        with self._cookies_lock:
            self._cookies.clear()  # the rescan finds what they waited for
        self.restarts += 1
        self.restarted_at, self.restart_reason = time.time(), why
        self.start()
        self.on_rescan()

    def stop(self) -> None:
        with self._lock:
            self._halt(self.observer)

    def _halt(self, observer: BaseObserver | None) -> None:
        """Stop the observer and close its inotify instance, even when watchdog's own clean-up
        fails: after folders were swapped its path maps are inconsistent and its stop raises."""
        logging.getLogger(_OVERFLOW_LOGGER).removeHandler(self._overflow_listener)
        reader, self.observer, self._reader = self._reader, None, None
        if observer is not None:
            try:
                observer.stop()
            except Exception as exc:  # a KeyError from watchdog's bookkeeping
                log.debug("watchdog could not unschedule its watches cleanly: %r", exc)
                with contextlib.suppress(queue.Full):
                    observer.event_queue.put_nowait(EventDispatcher.stop_event)  # what its stop() did not reach
        if reader is not None:
            try:
                reader.stop()
            except Exception as exc:
                log.debug("watchdog could not close its inotify watches cleanly: %r", exc)
        for thread in (observer, reader):
            if thread is not None and thread.ident is not None:
                thread.join(timeout=5)

    def describe(self) -> dict[str, object]:
        return {
            "alive": self.alive,
            "events": self.events,
            "restarts": self.restarts,
            "overflows": self.overflows,
            "last_event_at": self.last_event_at,
            "last_restart_at": self.restarted_at,
            "last_restart_reason": self.restart_reason,
            "error": self.error,
        }
