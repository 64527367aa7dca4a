"""Giving freed heap memory back to the system once a burst of work is over, and keeping
less of it meanwhile under a small memory budget.

Embedding and long syncs allocate in bursts; glibc's malloc keeps the freed pages for the
process, so an idle daemon would stay at its peak. ``malloc_trim`` hands them back (about
60 MB after an embedding backlog: bench/daemon_latency.py rss). glibc also gives each thread
that contends for the heap an arena of its own (up to 8 per core), each keeping freed memory:
``limit_malloc_arenas`` caps them (about 50 MB less while embedding, bench/daemon_memory.py).
Other C libraries (macOS, musl) return memory on their own and have neither: there these do
nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


@functools.cache
def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


# mallopt's parameter number for the arena cap (glibc's malloc.h).
M_ARENA_MAX = -8


def limit_malloc_arenas(arenas: int | None) -> bool:
    """Cap glibc's malloc arenas (None: leave glibc's default). True when the cap was set."""
    mallopt = getattr(_libc(), "mallopt", None)
    if arenas is None or mallopt is None:
        return False
    return bool(mallopt(M_ARENA_MAX, arenas))


def return_freed_memory() -> None:
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is not None:
        trim(0)
