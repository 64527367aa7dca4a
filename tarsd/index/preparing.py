"""Turning a note's text into what the index stores: its title, tags, aliases, chunks and links.

This is pure work on text (tokenizing, chunking, parsing), the same for every note and
independent between notes, so a long sync hands it to worker processes, on the other cores,
while the indexing thread reads files and writes rows (a cold index of 10,000 notes ran about
1.7 times faster on two cores: bench/index_cost.py). A short sync does it in place: starting
a worker costs more than a few notes.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

from tarsd.config.budget import CHUNK_WORKERS
from tarsd.markdown.chunker import Chunk, TokenCounter, chunk_note, parse_front_matter
from tarsd.markdown.links import Link, parse_links
from tarsd.markdown.tags import parse_tags

# Syncs with at least this many notes to chunk use worker processes (at most the memory budget's
# chunk_workers, tarsd/config/budget.py, and one core left for the indexing thread).
PARALLEL_MIN_NOTES = 400
PARENT_CHECK_SECONDS = 1.0


@dataclass(slots=True)
class PreparedNote:
    title: str
    tags: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # what links may call it besides its file name: front-matter title and aliases
    chunks: list[Chunk] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)


def prepare_note(text: str, path: str, counter: TokenCounter, budget: int, overlap: float) -> PreparedNote:
    parsed = chunk_note(text, counter, budget, overlap, fallback_title=Path(path).stem)
    lines = text.splitlines()
    if not parsed.chunks:
        parsed.chunks.append(title_chunk(parsed.title, lines))
    tags = list(dict.fromkeys([*parsed.tags, *parse_tags(lines)]))
    names = list(dict.fromkeys(name for name in (parsed.front_title, *parsed.aliases) if name.strip()))
    return PreparedNote(parsed.title, tags, parsed.aliases, names, parsed.chunks, parse_links(lines, 1, path))


def title_chunk(title: str, lines: list[str]) -> Chunk:
    """The one chunk of a note with no body (front matter only, or empty): its title, and its
    description when the front matter has one, so it can be found by name like any note."""
    front, end = parse_front_matter(lines)
    about = next((str(front[key]).strip() for key in ("description", "desc", "summary") if front.get(key)), "")
    text = "\n".join(part for part in (title, about) if part)
    return Chunk(
        seq=0,
        start_line=1,
        end_line=max(1, end),
        heading_path="",
        text=text,
        embed_text=text,
        content_hash=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        tokens=0,
    )


class Preparer:
    """Prepares notes in place, or in worker processes when there are many."""

    def __init__(self, counter: TokenCounter, budget: int, overlap: float, notes: int, max_workers: int = CHUNK_WORKERS):
        self.chunking = (counter, budget, overlap)
        workers = min(max_workers, max(1, (os.cpu_count() or 1) - 1))
        self._pool: ProcessPoolExecutor | None = None
        if notes >= PARALLEL_MIN_NOTES:
            # spawn, not fork: the daemon has threads, and a forked copy of their locks can hang.
            self._pool = ProcessPoolExecutor(
                workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_worker,
                initargs=(*self.chunking, os.getpid()),
            )

    @property
    def in_place(self) -> bool:
        """Notes are chunked in this thread, inside submit()."""
        return self._pool is None

    def submit(self, text: str, path: str) -> Future:
        if self._pool is not None:
            try:
                return self._pool.submit(_prepare_in_worker, text, path)
            except (BrokenProcessPool, RuntimeError):
                self._pool = None  # a worker died (out of memory?): carry on in place
        future: Future = Future()
        try:
            future.set_result(prepare_note(text, path, *self.chunking))
        except Exception as exc:  # the caller records the note as skipped, with this reason
            future.set_exception(exc)
        return future

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


_worker_chunking: tuple[TokenCounter, int, float] | None = None


def _start_worker(counter: TokenCounter, budget: int, overlap: float, parent: int) -> None:
    global _worker_chunking
    _worker_chunking = (counter, budget, overlap)
    # Ctrl-C in a terminal reaches the whole process group: only tarsd decides when to stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A worker waits on a queue whose writing end it holds itself, so it never sees tarsd die:
    # after a kill -9 it would wait forever. It leaves once its parent is gone (which may be
    # before this line runs: hence the pid tarsd passed, not the one found now).
    threading.Thread(target=_exit_with_parent, args=(parent,), name="parent-watch", daemon=True).start()


def _exit_with_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_SECONDS)
    os._exit(0)


def _prepare_in_worker(text: str, path: str) -> PreparedNote:
    assert _worker_chunking is not None
    return prepare_note(text, path, *_worker_chunking)
