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
from tarsd.markdown.chunker import Chunk, TokenCounter, chunk_note, note_lines, parse_front_matter
from tarsd.markdown.line_units import LineUnit, line_units
from tarsd.markdown.links import Link, parse_links
from tarsd.markdown.note_dates import note_date
from tarsd.markdown.tags import parse_tags

# Syncs with at least this many notes to chunk use worker processes (at most the memory budget's
# chunk_workers, tarsd/config/budget.py, and one core left for the indexing thread).
PARALLEL_MIN_NOTES = 400
PARENT_CHECK_SECONDS = 1.0
# Notes sent to a worker in one task. Each task costs the parent about 0.1 ms of Python (futures,
# queue, wake-ups: 10.6 s of CPU for 100,000 empty tasks on this box), and that Python competes
# for the GIL with the thread writing the index: one note per task held a cold 100,000-note index
# to ~1,300 notes/s.
NOTES_PER_TASK = 32
# ... or fewer, once the notes held back hold this much text (a few long notes should not wait).
TASK_CHARS = 256_000


@dataclass(slots=True)
class PreparedNote:
    title: str
    tags: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # what links may call it besides its file name: front-matter title and aliases
    chunks: list[Chunk] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    units: list[LineUnit] = field(default_factory=list)  # each line on its own, for a note recalled by lines (line_units.py)
    date: float | None = None  # when the note took place, when it says (markdown/note_dates.py)


def prepare_note(text: str, path: str, counter: TokenCounter, budget: int, overlap: float, by_lines: bool = False) -> PreparedNote:
    """``by_lines``: the note is recalled by its lines (a session log), so each gets a unit of its own."""
    parsed = chunk_note(text, counter, budget, overlap, fallback_title=Path(path).stem)
    lines = text.splitlines()
    if not parsed.chunks:
        parsed.chunks.append(title_chunk(parsed.title, lines))
    tags = list(dict.fromkeys([*parsed.tags, *parse_tags(lines)]))
    names = list(dict.fromkeys(name for name in (parsed.front_title, *parsed.aliases) if name.strip()))
    numbered = note_lines(text)  # numbered as the chunker numbers them
    units = line_units(numbered, counter, budget) if by_lines else []
    date = note_date(path, parse_front_matter(numbered)[0])
    return PreparedNote(parsed.title, tags, parsed.aliases, names, parsed.chunks, parse_links(lines, 1, path), units, date)


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
        context="",
        content_hash=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        tokens=0,
    )


def prepare_into(
    future: Future, text: str, path: str, counter: TokenCounter, budget: int, overlap: float, by_lines: bool = False
) -> Future:
    """Prepare a note right here: its PreparedNote, or the error that stopped it, goes into
    ``future`` (the caller records such a note as skipped, with the reason)."""
    try:
        future.set_result(prepare_note(text, path, counter, budget, overlap, by_lines))
    except Exception as exc:
        future.set_exception(exc)
    return future


class ChunkingFailed(Exception):
    """A note a worker could not prepare: the error's type and message, as text (any exception
    crosses back from the worker this way, pickled or not)."""


def failure_reason(exc: Exception) -> str:
    """Why a note could not be prepared, the same whether it failed here or in a worker."""
    return str(exc) if isinstance(exc, ChunkingFailed) else f"{type(exc).__name__}: {exc}"


class Preparer:
    """Prepares notes in place, or in worker processes when there are many.

    Workers get notes NOTES_PER_TASK at a time: ``submit`` holds a note back until its task is
    full, so whoever waits on a note's future calls ``flush`` first (the indexer does)."""

    def __init__(self, counter: TokenCounter, budget: int, overlap: float, notes: int, max_workers: int = CHUNK_WORKERS):
        self.chunking = (counter, budget, overlap)
        workers = min(max_workers, max(1, (os.cpu_count() or 1) - 1))
        self._pool: ProcessPoolExecutor | None = None
        self._held: list[tuple[str, str, bool, Future]] = []  # (text, path, by lines, its future) not yet sent
        self._held_chars = 0
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

    def submit(self, text: str, path: str, by_lines: bool = False) -> Future:
        """The note's PreparedNote, as a future: done at once in place; with workers, once its
        task is sent (when full, or on ``flush``) and done."""
        future: Future = Future()
        if self._pool is None:
            return prepare_into(future, text, path, *self.chunking, by_lines)
        self._held.append((text, path, by_lines, future))
        self._held_chars += len(text)
        if len(self._held) >= NOTES_PER_TASK or self._held_chars >= TASK_CHARS:
            self.flush()
        return future

    def flush(self) -> None:
        """Send the notes held back to a worker now."""
        held, self._held, self._held_chars = self._held, [], 0
        if not held:
            return
        if self._pool is not None:
            try:
                task = self._pool.submit(_prepare_in_worker, [(text, path, by_lines) for text, path, by_lines, _ in held])
            except (BrokenProcessPool, RuntimeError):
                self._pool = None  # a worker died (out of memory?): carry on in place
            else:
                task.add_done_callback(lambda task: _settle(task, [future for *_, future in held]))
                return
        for text, path, by_lines, future in held:
            prepare_into(future, text, path, *self.chunking, by_lines)

    def close(self) -> None:
        for *_, future in self._held:
            future.cancel()
        self._held, self._held_chars = [], 0
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def _settle(task: Future, futures: list[Future]) -> None:
    """Hand a worker task's outcome to each of its notes' futures (in the pool's own thread)."""
    if task.cancelled():
        for future in futures:
            future.cancel()
        return
    error = task.exception()
    if error is not None:  # the task as a whole failed (a worker died): every note gets the error
        for future in futures:
            future.set_exception(error)
        return
    outcomes = task.result()
    if len(outcomes) != len(futures):  # never seen: a worker answers for each note it was sent
        outcomes = [ChunkingFailed(f"the worker returned {len(outcomes)} notes for {len(futures)}")] * len(futures)
    for future, outcome in zip(futures, outcomes, strict=True):
        if isinstance(outcome, Exception):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)


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


def _prepare_in_worker(notes: list[tuple[str, str, bool]]) -> list[PreparedNote | ChunkingFailed]:
    """Each note prepared, or why it could not be: one note's error never costs the others."""
    assert _worker_chunking is not None
    outcomes: list[PreparedNote | ChunkingFailed] = []
    for text, path, by_lines in notes:
        try:
            outcomes.append(prepare_note(text, path, *_worker_chunking, by_lines))
        except Exception as exc:
            outcomes.append(ChunkingFailed(failure_reason(exc)))
    return outcomes
