"""The watchdog observer: events become path hints, and a dead observer is replaced."""

from __future__ import annotations

import logging
import os

from conftest import write
from daemon_harness import wait_for
from tarsd.watcher import VaultWatcher


def test_events_become_hints_and_a_dead_observer_is_replaced(vault):
    seen: list[str] = []
    rescans: list[bool] = []
    watcher = VaultWatcher(vault.resolve(), seen.append, lambda: rescans.append(True))
    watcher.start()
    try:
        write(vault, "a.md", "one")
        wait_for(lambda: "a.md" in seen, "the create event")
        os.rename(vault / "a.md", vault / "b.md")
        wait_for(lambda: "b.md" in seen, "both ends of a move")
        write(vault, ".obsidian/workspace.md", "ignored")
        write(vault, "picture.png", "ignored")

        watcher.observer.stop()  # the observer thread dies, as on an inotify error
        watcher.observer.join(timeout=10)
        assert not watcher.alive
        before = len(rescans)
        watcher.check()
        assert watcher.alive and watcher.restarts == 1 and len(rescans) == before + 1
        write(vault, "c.md", "three")
        wait_for(lambda: "c.md" in seen, "events from the new observer")
        assert not any(path.startswith(".obsidian") or path.endswith(".png") for path in seen)
    finally:
        watcher.stop()


def test_a_kernel_queue_overflow_asks_for_a_reconcile(vault):
    rescans: list[bool] = []
    watcher = VaultWatcher(vault.resolve(), lambda path: None, lambda: rescans.append(True))
    watcher.start()
    try:
        # watchdog reports an overflow only in its log; the events lost with it are unknown.
        logging.getLogger("watchdog.observers.inotify_c").warning("Inotify queue overflowed; filesystem events were lost")
        assert rescans == [True] and watcher.describe()["overflows"] == 1
    finally:
        watcher.stop()
    logging.getLogger("watchdog.observers.inotify_c").warning("Inotify queue overflowed; filesystem events were lost")
    assert rescans == [True]  # a stopped watcher no longer listens
