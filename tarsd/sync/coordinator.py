"""Two machines, one vault: what this tarsd does so that a vault synced between machines that both run
tars loses nothing and does nothing twice (docs/two-machines.md).

At each look (every TICK_SECONDS while another tarsd shares the vault or a sync tool is seen, every
QUIET_TICK_SECONDS otherwise, and at once when the watcher reports a conflict copy or a memory file):

- **heartbeat**: this machine's file in ``.tars/machines/`` is written every BEAT_SECONDS, and the
  other machines' are read (tarsd/vault/heartbeat.py);
- **conflict copies** (tarsd/vault/conflicts.py): a copy of a file tars writes (tarsd/sync/files.py)
  is merged into it (tarsd/sync/merging.py), reported in the log, the inbox and status. The first
  live machine in line (the lowest machine id) merges at once; another waits MERGE_GRACE_SECONDS
  for it, then merges what is still there (a merge of a copy already merged changes nothing). A
  copy of a note of yours is listed, never merged;
- **lines a copy dropped** (a newest-wins copying tool keeps one whole version): put back from
  tars's journal by the machine that never had them (tarsd/sync/replay.py);
- **proposals** the memory files show done already are closed (tarsd/memory/settled.py);
- **Telegram**: which machine polls (tarsd/sync/lease.py); the poller is started and stopped
  through ``Poller`` (the daemon hands it the channel: tarsd/daemon/main.py);
- **routines**: a warning when another live machine runs a routine of the same name as this one.

File work runs in a worker thread, one look at a time; the poller is started and stopped on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from tarsctl.protocol import ConflictInfo, MachineInfo, MergeInfo, SyncStatus
from tarsd.config.settings import Config
from tarsd.memory.files import MemoryFiles
from tarsd.memory.journal import Journal
from tarsd.memory.settled import settle
from tarsd.routines.ledger import Ledger
from tarsd.sync.files import FileKinds
from tarsd.sync.lease import Decision, who_polls
from tarsd.sync.merging import MergeDone, merge_copy
from tarsd.sync.replay import Replay
from tarsd.vault.conflicts import ConflictCopy, SyncTool, conflict_copy, find_conflict_copies, sync_tools, uses_icloud
from tarsd.vault.files import OutsideVault, owned_file
from tarsd.vault.heartbeat import (
    BEAT_SECONDS,
    FOLDER,
    TELEGRAM_OFF,
    TELEGRAM_POLLING,
    TELEGRAM_STANDBY,
    Beat,
    Liveness,
    machine_identity,
    read_beats,
    write_beat,
)
from tarsd.vault.root import VaultMissing, make_folders, vault_problem

log = logging.getLogger(__name__)

TICK_SECONDS = 5.0
QUIET_TICK_SECONDS = 30.0
SCAN_SECONDS = 600.0  # a full look for conflict copies and sync tools; the watcher brings new copies at once
MERGE_GRACE_SECONDS = 20.0
SETTLE_SECONDS = 0.5  # a conflict copy unchanged for this long is whole
# A copy is merged once it is this old (by this machine's clock) and no journal changed for JOURNAL_QUIET_SECONDS:
# tars writes a line's journal entry with the file, and the sync tool brings the two in either order.
COPY_AGE_SECONDS = 3.0
JOURNAL_QUIET_SECONDS = 1.0
INBOX_SOURCE = "sync:merge"
KEEP_MERGES = 20


class Poller(Protocol):
    """What the coordinator needs of the Telegram channel (the daemon adapts it)."""

    bot: str  # which bot: a hash of its numeric id ("" when the token cannot be read)

    async def start_polling(self) -> None: ...

    async def stop_polling(self) -> None: ...

    def offset(self) -> int:
        """The next update id this machine would ask for."""

    def set_offset(self, offset: int) -> None: ...


def bot_hash(token: str) -> str:
    """Which bot a token is for, as heartbeats say it: a hash of its numeric id (never the token)."""
    bot_id = token.split(":", 1)[0].strip()
    return hashlib.sha256(f"tars-telegram-bot:{bot_id}".encode()).hexdigest()[:12] if bot_id.isdigit() else ""


@dataclass
class _Seen:
    first: float  # when this machine first noticed it (monotonic)
    stamp: tuple[int, int] | None = None  # (size, mtime_ns) at the last look


class SyncCoordinator:
    def __init__(
        self,
        config: Config,
        memory: MemoryFiles,
        ledger: Ledger,
        routine_names: Callable[[], list[str]],
        note_templates: Callable[[], list[str]],
        reindex: Callable[[str], None],
        version: str = "",
    ):
        self.config = config
        self.vault = config.vault_path
        self.memory = memory
        self.ledger = ledger
        self.routine_names = routine_names
        self.note_templates = note_templates
        self.reindex = reindex
        self.version = version
        self.machine, self.name = machine_identity(config.db_path.with_suffix(".machine"))
        self.journal = Journal(self.vault, self.machine)
        memory.journal = self.journal
        self.replay = Replay(memory, self.journal)
        self.kinds = FileKinds(config.memory, self._all_note_templates)
        self.started_at = time.time()
        self.liveness = Liveness()
        self.beats: list[tuple[Beat, bool]] = []  # the other machines' heartbeats, and whether each is live
        self.beat_problems: list[str] = []
        self.tools: list[SyncTool] = []
        self.copies: dict[str, ConflictCopy] = {}
        self.noticed: dict[str, _Seen] = {}  # conflict copies by path: when first noticed, their last stat
        self.merges: deque[MergeDone] = deque(maxlen=KEEP_MERGES)
        self.merged = 0
        self.closed: list[str] = []
        self.problems: dict[str, str] = {}  # what could not be done lately, by what, for status
        self.poller: Poller | None = None
        self.telegram = TELEGRAM_OFF
        self.telegram_since = 0.0
        self.telegram_why = ""
        self._beat = int(time.time() * 1000)  # counts up from a new number at each start: a restart is a new beat
        self._beat_at = float("-inf")  # monotonic time of the last write
        self._said: tuple = ()  # what the last heartbeat said of routines, notes and Telegram
        self._scanned_at = float("-inf")
        self._memory_stamps: dict[str, object] = {}
        self._journal_signature: tuple = ()
        self._journal_changed = float("-inf")  # monotonic time a journal was last seen changing
        self._lock = threading.Lock()  # the state status reads
        self._hints: set[str] = set()  # paths the watcher reported, for the next look
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._stopping = False

    # ---- start and stop ----

    def prepare(self) -> None:
        """tars's folders in the vault, made before the watcher starts: a folder made under a running
        watcher makes it rescan the vault."""
        for folder in ("machines", "journal", f"merged/{self.machine}"):
            try:
                make_folders(self.vault, owned_file(self.vault, f"{FOLDER}/{folder}"))
            except (OSError, OutsideVault, VaultMissing) as exc:
                self._problem("folders", f"cannot make tars's folder {FOLDER}/{folder} in the vault: {exc}")
                return

    async def start(self) -> None:
        """Looks from now on: the first at once (in the background: it walks the vault for conflict
        copies while tarsd already answers), then one at each tick."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._wake.set()
        self._task = asyncio.create_task(self._run(), name="two-machines")

    async def stop(self) -> None:
        """No more looks; the last heartbeat says this machine stopped (another may poll Telegram now)."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.telegram = TELEGRAM_OFF
        await asyncio.to_thread(self._write_beat, True)

    async def _run(self) -> None:
        assert self._wake is not None
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self._tick())
            self._wake.clear()
            try:
                await asyncio.to_thread(self.look)
                await self._lease()
            except Exception:  # a look must never end the looks
                log.exception("a look at the other machines of the vault failed")

    def _tick(self) -> float:
        busy = self.tools or any(live for _, live in self.beats) or self.copies
        return TICK_SECONDS if busy else QUIET_TICK_SECONDS

    def path_changed(self, rel: str) -> None:
        """A watcher event (any thread): a conflict copy or a memory file is looked at now."""
        interesting = rel in (self.config.memory.semantic_file, self.config.memory.procedural_file) or conflict_copy(rel) is not None
        if not interesting and uses_icloud(self.tools):
            interesting = conflict_copy(rel, True, lambda original: (self.vault / original).is_file()) is not None
        if not interesting:
            return
        with self._lock:
            self._hints.add(rel)
        if self._loop is not None and self._wake is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    # ---- a look ----

    def look(self) -> None:
        if vault_problem(self.vault):
            return  # nothing is read or written in a vault that is not there; status says why
        self._read_beats()
        if time.monotonic() - self._beat_at >= BEAT_SECONDS or self._said != self._saying():
            self._write_beat(False)  # at its time, or at once when what it says changed (a routine added)
        self._find_copies()
        self._merge_copies()
        for rel in (self.config.memory.semantic_file, self.config.memory.procedural_file):
            self._follow_journal(rel)
        self._settle_proposals()

    def _read_beats(self) -> None:
        beats, problems = read_beats(self.vault)
        others = [(beat, self.liveness.live(beat)) for beat in beats if beat.machine != self.machine]
        with self._lock:
            self.beats, self.beat_problems = others, problems

    def _my_beat(self, stopped: bool = False) -> Beat:
        routines = []
        if self.config.routines.enabled:
            with contextlib.suppress(Exception):
                routines = self.routine_names()
        return Beat(
            machine=self.machine,
            name=self.name,
            pid=os.getpid(),
            started_at=self.started_at,
            beat=self._beat,
            beat_at=time.time(),
            stopped=stopped,
            version=self.version,
            routines=routines,
            note_targets=self._own_note_templates(),
            telegram=self.telegram,
            telegram_since=self.telegram_since,
            bot=self.poller.bot if self.poller is not None else "",
            telegram_offset=self._offset(),
        )

    def _saying(self) -> tuple:
        beat = self._my_beat()
        return beat.routines, beat.note_targets, beat.telegram

    def _offset(self) -> int:
        if self.poller is None:
            return 0
        try:
            return self.poller.offset()
        except Exception:  # the database being closed at the very end: the offset is only a help
            return 0

    def _write_beat(self, stopped: bool) -> None:
        self._beat += 1
        self._said = self._saying()
        try:
            write_beat(self.vault, self._my_beat(stopped))
        except (OSError, OutsideVault) as exc:
            self._problem("heartbeat", f"cannot write this machine's heartbeat in {FOLDER}/machines: {exc}")
        else:
            self.problems.pop("heartbeat", None)
        self._beat_at = time.monotonic()

    def _find_copies(self) -> None:
        """Conflict copies: every one at a full scan (at start, then every SCAN_SECONDS), the watcher's in between."""
        with self._lock:
            hints, self._hints = self._hints, set()
        icloud = uses_icloud(self.tools)
        if time.monotonic() - self._scanned_at >= SCAN_SECONDS:
            self._scanned_at = time.monotonic()
            self.tools = sync_tools(self.vault)
            icloud = uses_icloud(self.tools)
            found = {copy.path: copy for copy in find_conflict_copies(self.vault, icloud)}
        else:
            found = dict(self.copies)
            for rel in hints:
                copy = conflict_copy(rel, icloud, lambda original: (self.vault / original).is_file())
                if copy is not None:
                    found[rel] = copy
        present = {}
        for rel, copy in found.items():
            if (self.vault / rel).is_file():
                present[rel] = copy
        with self._lock:
            self.copies = present
            self.noticed = {rel: seen for rel, seen in self.noticed.items() if rel in present}
            for rel in present:
                self.noticed.setdefault(rel, _Seen(time.monotonic()))

    def _first_in_line(self) -> bool:
        return all(beat.machine > self.machine for beat, live in self.beats if live)

    def _merge_copies(self) -> None:
        first = self._first_in_line()
        signature = self.journal.signature()
        if signature != self._journal_signature:
            self._journal_signature, self._journal_changed = signature, time.monotonic()
        journal_quiet = time.monotonic() - self._journal_changed >= JOURNAL_QUIET_SECONDS
        for rel, copy in sorted(self.copies.items()):
            kind = self.kinds.kind(copy.original)
            seen = self.noticed.get(rel)
            if kind is None or seen is None:
                continue
            try:
                st = os.stat(self.vault / rel)
            except OSError:
                continue
            stamp = (st.st_size, st.st_mtime_ns)
            settled = seen.stamp == stamp and time.time() - st.st_mtime >= SETTLE_SECONDS
            seen.stamp = stamp
            waited = time.monotonic() - seen.first
            if not settled or not journal_quiet or waited < COPY_AGE_SECONDS or (not first and waited < MERGE_GRACE_SECONDS):
                if self._wake is not None and self._loop is not None:
                    self._loop.call_soon_threadsafe(self._loop.call_later, SETTLE_SECONDS, self._wake.set)
                continue
            try:
                done = merge_copy(self.vault, copy, kind, self.memory, self.journal, self.machine, self._max_bytes())
            except (OSError, OutsideVault, ValueError) as exc:
                why = f"could not merge the conflict copy {rel} into {copy.original}: {exc}; tried again at the next look"
                self._problem(f"merge:{rel}", why)
                continue
            self.problems.pop(f"merge:{rel}", None)
            if done is None:
                continue
            with self._lock:
                self.merges.appendleft(done)
                self.merged += 1
                self.copies.pop(rel, None)
            self.reindex(copy.original)
            self.reindex(rel)
            self._tell_inbox(done)

    def _max_bytes(self) -> int:
        return int(self.config.vault.max_file_mb * 1_000_000)

    def _tell_inbox(self, done: MergeDone) -> None:
        lines = [done.describe() + "."]
        for line, why in done.removed[:20]:
            lines.append(f"- left out: {line.strip()} ({why})")
        for line, why in done.kept[:20]:
            lines.append(f"- kept, look at it: {line.strip()} ({why})")
        try:
            self.ledger.post(INBOX_SOURCE, f"merged {done.copy}", "\n".join(lines), [])
        except Exception as exc:  # the inbox is a help: the log and status have it too
            log.warning("could not put the merge of %s in the inbox: %s", done.copy, exc)

    # ---- the journal: lines a copy dropped, lines seen ----

    def _follow_journal(self, rel: str) -> None:
        if not self._steady(rel):
            return
        due_later = self.replay.follow(rel, self._memory_kind(rel))
        if due_later is not None and self._wake is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.call_later, due_later, self._wake.set)
        for what, message in self.replay.problems.items():
            self._problem(what, message)
        self.replay.problems.clear()

    def _memory_kind(self, rel: str) -> str:
        return "semantic" if rel == self.config.memory.semantic_file else "procedural"

    def _steady(self, rel: str) -> bool:
        """Whether ``rel`` can be judged by what it holds now: it is there (a sync tool resolving a
        conflict moves it aside for a moment), and no conflict copy of it waits to be merged."""
        return (self.vault / rel).is_file() and not any(copy.original == rel for copy in self.copies.values())

    # ---- proposals ----

    def _settle_proposals(self) -> None:
        """When a memory file or a journal changed: a replacement is closed only once the journal that
        shows it made has come too (tarsd/memory/settled.py)."""
        stamps: dict[str, object] = {"journal": self.journal.signature()}
        for rel in (self.config.memory.semantic_file, self.config.memory.procedural_file):
            try:
                st = os.stat(self.vault / rel)
                stamps[rel] = (st.st_size, st.st_mtime_ns)
            except OSError:
                stamps[rel] = None
        if stamps == self._memory_stamps:
            return
        self._memory_stamps = stamps
        kinds = {
            self._memory_kind(rel) for rel in (self.config.memory.semantic_file, self.config.memory.procedural_file) if self._steady(rel)
        }
        try:
            closed = settle(self.memory, kinds)
        except Exception as exc:  # the database or the file: tried again when the file changes next
            self._problem("proposals", f"could not check the waiting proposals against the memory files: {exc}")
            return
        with self._lock:
            self.closed.extend(f"#{proposal.id} {proposal.describe()}: {why}" for proposal, why in closed)
            self.closed = self.closed[-20:]

    # ---- Telegram ----

    async def telegram_decision(self, poller: Poller) -> Decision:
        """Whether this machine polls Telegram now, at the channel's start; the coordinator keeps deciding after."""
        self.poller = poller
        self.telegram = TELEGRAM_STANDBY
        await asyncio.to_thread(self._read_beats)
        decision = who_polls(self._my_beat(), self.beats)
        await self._apply(decision, starting=True)
        return decision

    def standing_by(self) -> bool:
        """Telegram is enabled here and another machine polls it."""
        return self.poller is not None and self.telegram == TELEGRAM_STANDBY

    async def _lease(self) -> None:
        if self.poller is None or self._stopping:
            return
        await self._apply(who_polls(self._my_beat(), self.beats))

    async def _apply(self, decision: Decision, starting: bool = False) -> None:
        assert self.poller is not None
        if decision.why != self.telegram_why:
            log.info("Telegram: %s", decision.why)
        self.telegram_why = decision.why
        if decision.poll and self.telegram != TELEGRAM_POLLING:
            handed = max((beat.telegram_offset for beat, _ in self.beats if beat.bot == self.poller.bot), default=0)
            if handed > self._offset():
                self.poller.set_offset(handed)  # where the machine polling before left off: no update answered twice
            self.telegram, self.telegram_since = TELEGRAM_POLLING, time.time()
            if not starting:
                await self.poller.start_polling()
            await asyncio.to_thread(self._write_beat, False)
        elif not decision.poll and self.telegram == TELEGRAM_POLLING:
            await self.poller.stop_polling()
            self.telegram, self.telegram_since = TELEGRAM_STANDBY, 0.0
            await asyncio.to_thread(self._write_beat, False)
        elif not decision.poll and starting:
            await asyncio.to_thread(self._write_beat, False)

    # ---- what status says ----

    def _problem(self, what: str, message: str) -> None:
        if self.problems.get(what) != message:
            log.warning("%s", message)
        self.problems[what] = message

    def _own_note_templates(self) -> list[str]:
        templates = [self.config.routines.note] if self.config.routines.note else []
        with contextlib.suppress(Exception):
            templates += self.note_templates()
        return sorted(set(templates))

    def _all_note_templates(self) -> list[str]:
        return sorted(set(self._own_note_templates()) | {t for beat, _ in self.beats for t in beat.note_targets})

    def status(self) -> SyncStatus:
        with self._lock:
            beats, copies, merges = list(self.beats), dict(self.copies), list(self.merges)
            merged, closed = self.merged, list(self.closed)
        put_back = self.replay.put_back
        me = self._my_beat()
        machines = [_machine_info(me, True, True)] + [_machine_info(beat, live, False) for beat, live in beats]
        conflicts = [
            ConflictInfo(copy.path, copy.original, copy.tool, "merging" if self.kinds.kind(copy.original) else "yours")
            for copy in sorted(copies.values(), key=lambda c: c.path)
        ]
        return SyncStatus(
            machine=self.machine,
            tools=[f"{tool.name} ({tool.marker})" for tool in self.tools],
            machines=machines,
            conflicts=conflicts,
            merges=[_merge_info(done) for done in merges[:10]],
            merged=merged,
            put_back=put_back,
            telegram=self.telegram_why if self.poller is not None else "",
            closed_proposals=closed,
            warnings=self.warnings(),
        )

    def warnings(self) -> list[str]:
        found = list(self.problems.values())
        with self._lock:
            beats, copies = list(self.beats), list(self.copies.values())
        mine = set(self._my_beat().routines)
        for beat, live in beats:
            both = sorted(mine & set(beat.routines)) if live else []
            if both:
                found.append(
                    f"routines: {', '.join(both)} run on this machine and on {beat.label} too, so each fires twice: "
                    "keep it in one machine's routines file, or set [routines] enabled = false on one (docs/two-machines.md)"
                )
        for copy in copies:
            if self.kinds.kind(copy.original) is None:
                found.append(
                    f"sync: {copy.tool} left a conflict copy of your note {copy.original}: {copy.path}; tars does not merge "
                    "your notes: compare the two, keep what you want in one, delete the other"
                )
        found.extend(f"sync: a file in {FOLDER}/machines is not a heartbeat ({problem})" for problem in self.beat_problems)
        return found


def _machine_info(beat: Beat, live: bool, this: bool) -> MachineInfo:
    return MachineInfo(
        machine=beat.machine,
        name=beat.name,
        this=this,
        live=live,
        beat_at=beat.beat_at,
        stopped=beat.stopped,
        telegram=beat.telegram,
        routines=list(beat.routines),
        version=beat.version,
    )


def _merge_info(done: MergeDone) -> MergeInfo:
    return MergeInfo(
        at=done.at,
        file=done.file,
        copy=done.copy,
        kept_at=done.kept_at,
        added=len(done.added),
        duplicates=done.duplicates,
        removed=[f"{line.strip()} ({why})" for line, why in done.removed[:10]],
        kept=[f"{line.strip()} ({why})" for line, why in done.kept[:10]],
    )
