"""A memory cgroup to run a process in: a hard limit, its peak, and whether the OOM killer struck.

cgroup v1's memory controller (a folder under /sys/fs/cgroup/memory with memory.limit_in_bytes)
when it is mounted and writable (root), else cgroup v2 (a folder with memory.max) when this
process's own cgroup lets a child take the memory controller. The new cgroup sits under this
process's own one, so whatever limits that has still apply. Used by the memory test
(tests/daemon/test_memory_budget.py) and bench/daemon_memory.py.
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

_serial = itertools.count()
V1_MOUNT = Path("/sys/fs/cgroup/memory")
V2_MOUNT = Path("/sys/fs/cgroup")


class CgroupUnavailable(Exception):
    """No memory cgroup can be made here; the message says why."""


def _own_path(controller: str) -> str:
    """This process's cgroup path for a v1 controller ("memory") or in v2 ("")."""
    for line in Path("/proc/self/cgroup").read_text(encoding="utf-8").splitlines():
        _, controllers, path = line.split(":", 2)
        if (controller == "" and controllers == "") or controller in controllers.split(","):
            return path.lstrip("/")
    return ""


class MemoryCgroup:
    def __init__(self, folder: Path, version: int):
        self.folder, self.version = folder, version

    @classmethod
    def create(cls, name: str, limit_bytes: int) -> MemoryCgroup:
        """A new cgroup limited to limit_bytes (no swap beyond it); raises CgroupUnavailable."""
        if not Path("/proc/self/cgroup").is_file():
            raise CgroupUnavailable("no /proc/self/cgroup: not Linux, or /proc is not mounted")
        if (V1_MOUNT / "memory.limit_in_bytes").is_file():
            folder = V1_MOUNT / _own_path("memory") / f"{name}-{os.getpid()}-{next(_serial)}"
            cgroup = cls(folder, 1)
            # memsw counts swap too (where the kernel accounts it): no swapping past the limit.
            limits = [("memory.limit_in_bytes", limit_bytes), ("memory.memsw.limit_in_bytes", limit_bytes)]
        elif (V2_MOUNT / "cgroup.controllers").is_file():
            parent = V2_MOUNT / _own_path("")
            # (Written for cgroup v2 but not run on this project's machines, whose memory controller is v1's.)
            if "memory" not in (parent / "cgroup.subtree_control").read_text(encoding="utf-8").split():
                raise CgroupUnavailable(
                    f"cgroup v2: this process's cgroup {parent} does not hand the memory controller to its children "
                    "(cgroup.subtree_control), so no child of it can have a memory limit"
                )
            folder = parent / f"{name}-{os.getpid()}-{next(_serial)}"
            cgroup = cls(folder, 2)
            limits = [("memory.max", limit_bytes), ("memory.swap.max", 0)]
        else:
            raise CgroupUnavailable("no cgroup memory controller is mounted (neither /sys/fs/cgroup/memory nor cgroup v2)")
        try:
            folder.mkdir()
        except OSError as exc:
            raise CgroupUnavailable(f"cannot create the cgroup {folder} ({exc.strerror}): this needs root, or a delegated cgroup") from exc
        try:
            for index, (file, value) in enumerate(limits):
                if index == 0 or (folder / file).exists():  # the swap file only where swap is accounted
                    (folder / file).write_text(str(value), encoding="ascii")
        except OSError as exc:
            cgroup.remove()
            raise CgroupUnavailable(f"cannot set the memory limit in {folder} ({exc.strerror})") from exc
        return cgroup

    @property
    def procs_file(self) -> Path:
        """Writing a pid here moves that process in; its children then start inside."""
        return self.folder / "cgroup.procs"

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in self.procs_file.read_text(encoding="ascii").split()]
        except OSError:
            return []

    def rss_bytes(self) -> int:
        """The resident memory of every process in the cgroup now (what the processes hold; the
        cgroup's own usage also counts page cache, which the kernel reclaims before it kills)."""
        total = 0
        for pid in self.pids():
            try:
                status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        return total

    def peak_bytes(self) -> int:
        """The cgroup's peak usage, page cache included (memory.max_usage_in_bytes / memory.peak)."""
        file = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        try:
            return int((self.folder / file).read_text(encoding="ascii"))
        except (OSError, ValueError):
            return 0

    def oom_kills(self) -> int:
        """Processes the OOM killer ended in this cgroup (oom_kill in memory.oom_control / memory.events)."""
        file = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            text = (self.folder / file).read_text(encoding="ascii")
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def remove(self) -> None:
        """Remove the cgroup once its processes have gone (waits a little for the kernel to notice)."""
        for _ in range(100):
            try:
                self.folder.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"cannot remove the cgroup {self.folder}: processes {self.pids()} are still in it; stop them first")
