"""The memory tarsd may use, and the settings that keep it inside that budget.

The budget is the least of the machine's memory, the limits of the cgroup tarsd runs in (a
systemd unit's MemoryMax= or MemoryHigh=, a container's limit: cgroup v2 memory.max and
memory.high, cgroup v1 memory.limit_in_bytes, from tarsd's own cgroup up to the root), and
[daemon] memory_mb when it is set.

Under LOW_MEMORY_MB (2 GB: a Raspberry Pi 3, or a service given 1 GB) tarsd keeps less memory where
that costs little time (docs/raspberry-pi.md has the figures): glibc's malloc hands large blocks
back when they are freed and keeps 2 arenas, not up to 8 per core (tarsd/config/heap.py); the
writing SQLite connection caches 16 MB of pages, not 64, and each reader 1, not 2; a long sync
chunks notes in one worker process, not up to three. Under
[embedder] min_memory_mb (512 MB) the local model is not loaded at all: keyword search only.
Two things are left as they are: the embedding runs at once (one per core; two peaked about
100 MB above one on the x86 box, inside the 512 MB test all the same) and the batch size, whose
default of 1 is already the smallest.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tarsd.config.settings import Config

MB = 1024 * 1024
LOW_MEMORY_MB = 2048  # under this (a Pi with 1 or 2 GB, a service given 1 GB), the low-memory settings below
LOW_MALLOC_ARENAS = 2
# Otherwise one malloc arena per core (at least 2), not glibc's 8 per core: each arena keeps
# freed memory of its own, and tarsd's threads mostly wait. Idle with the model, 1,000 notes:
# 172 MB with 2 arenas against 188 with glibc's default (bench/daemon_latency.py rss).
LOW_SQLITE_CACHE_MB = 16
SQLITE_CACHE_MB = 64
LOW_CHUNK_WORKERS = 1
CHUNK_WORKERS = 3
# cgroup v1 writes "no limit" as the largest page-aligned 63-bit number; anything this big is none.
NO_LIMIT = 1 << 60


@dataclass(frozen=True, slots=True)
class Budget:
    bytes: int
    source: str  # where it comes from, for people: "the machine's memory", "cgroup v2 memory.max of /user.slice/..."

    @property
    def mb(self) -> int:
        return self.bytes // MB


@dataclass(frozen=True, slots=True)
class Plan:
    """The settings tarsd runs with, picked from the budget where the config leaves them open."""

    budget: Budget
    low: bool  # under LOW_MEMORY_MB
    chunk_workers: int  # at most this many processes chunk notes in a long sync (and one core stays free)
    sqlite_cache_mb: int  # the writing connection's page cache
    malloc_arenas: int  # glibc's M_ARENA_MAX (its default is 8 per core)
    fixed_mmap_threshold: bool  # glibc's M_MMAP_THRESHOLD kept at its starting value (tarsd/config/heap.py)
    keyword_only: str  # why the local model is not loaded ("" when it is)

    def describe(self) -> str:
        """One line for the log and `tarsctl status`."""
        parts = []
        threshold = "fixed mmap threshold, " if self.fixed_mmap_threshold else ""
        parts.append(f"malloc: {threshold}{self.malloc_arenas} arena{'s' if self.malloc_arenas != 1 else ''}")
        if self.low:
            parts += [
                f"SQLite cache {self.sqlite_cache_mb} MB",
                f"{self.chunk_workers} chunking worker{'s' if self.chunk_workers != 1 else ''}",
            ]
        if self.keyword_only:
            parts.append("keyword search only")
        kind = "low-memory settings" if self.low else "the usual settings"
        return f"{self.budget.mb:,} MB ({self.budget.source}): {kind}" + (f" ({', '.join(parts)})" if parts else "")


def plan_for(config: Config, budget: Budget | None = None) -> Plan:
    budget = memory_budget(config.daemon.memory_mb) if budget is None else budget
    low = budget.mb < LOW_MEMORY_MB
    keyword_only = ""
    needed = config.embedder.min_memory_mb
    if config.embedder.kind == "local" and needed > 0 and budget.mb < needed:
        keyword_only = (
            f"keyword search only: tarsd's memory budget is {budget.mb:,} MB ({budget.source}), under the "
            f"{needed:,} MB the local model needs ([embedder] min_memory_mb); give tarsd more memory, or set "
            "min_memory_mb = 0 to load the model anyway"
        )
    return Plan(
        budget=budget,
        low=low,
        chunk_workers=LOW_CHUNK_WORKERS if low else CHUNK_WORKERS,
        sqlite_cache_mb=LOW_SQLITE_CACHE_MB if low else SQLITE_CACHE_MB,
        malloc_arenas=LOW_MALLOC_ARENAS if low else max(LOW_MALLOC_ARENAS, usable_cores()),
        fixed_mmap_threshold=low,
        keyword_only=keyword_only,
    )


def memory_budget(configured_mb: int = 0, root: Path = Path("/")) -> Budget:
    """The memory tarsd may use: [daemon] memory_mb when set (> 0), else the least of the
    machine's memory and its cgroup limits. ``root`` is where /proc and /sys are (tests)."""
    if configured_mb > 0:
        return Budget(configured_mb * MB, "[daemon] memory_mb")
    best = Budget(physical_memory(), "the machine's memory")
    for limit in cgroup_limits(root):
        if limit.bytes < best.bytes:
            best = limit
    return best


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # a platform without these names: plan for plenty
        return NO_LIMIT


def cgroup_limits(root: Path = Path("/")) -> list[Budget]:
    """The memory limits set on this process's cgroup and its ancestors, v1 and v2 alike."""
    try:
        membership = (root / "proc/self/cgroup").read_text(encoding="utf-8", errors="replace")
        mounts = (root / "proc/self/mountinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:  # not Linux, or no /proc: no cgroups to read
        return []
    paths: dict[str, str] = {}  # "v2" or "v1" -> this process's cgroup path in that hierarchy
    for line in membership.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            paths["v2"] = parts[2]
        elif "memory" in parts[1].split(","):
            paths["v1"] = parts[2]
    found: list[Budget] = []
    for mount_root, mount_point, kind in _cgroup_mounts(mounts):
        level = paths.get(kind)
        if level is None:
            continue
        # Inside a container the mount shows only a subtree of the hierarchy (mount_root and below):
        # the levels above it cannot be read, and their limits show in the ones below as usage only.
        if not level.startswith(mount_root):
            level = mount_root
        base = root / mount_point.lstrip("/")
        files = ("memory.max", "memory.high") if kind == "v2" else ("memory.limit_in_bytes",)
        while True:
            folder = base / os.path.relpath(level, mount_root)
            for name in files:
                value = _read_limit(folder / name)
                if value is not None:
                    found.append(Budget(value, f"cgroup {kind} {name} of {level}"))
            if level == mount_root or level in ("/", ""):
                break
            level = os.path.dirname(level.rstrip("/")) or "/"
    return found


def _cgroup_mounts(mountinfo: str) -> list[tuple[str, str, str]]:
    """(root inside the hierarchy, mount point, "v1" or "v2") of the memory hierarchies."""
    out = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        after = line.split(" - ", 1)[1].split()
        fstype, options = after[0], after[2] if len(after) > 2 else ""
        if fstype == "cgroup2":
            out.append((fields[3], fields[4], "v2"))
        elif fstype == "cgroup" and "memory" in options.split(","):
            out.append((fields[3], fields[4], "v1"))
    return out


def _read_limit(file: Path) -> int | None:
    try:
        text = file.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    if not text.isdigit():  # "max" (v2: no limit), or a file that is not a limit
        return None
    value = int(text)
    return value if 0 < value < NO_LIMIT else None


def usable_cores() -> int:
    """The cores this process may run on (a cgroup or taskset may allow fewer than the machine has)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1
