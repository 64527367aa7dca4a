"""Giving freed heap memory back to the system once a burst of work is over, and keeping
less of it meanwhile under a small memory budget.

Embedding and long syncs allocate in bursts; glibc's malloc keeps the freed pages for the
process, so an idle daemon would stay at its peak. ``malloc_trim`` hands them back (about
60 MB after an embedding backlog: bench/daemon_latency.py rss).

Under a small budget tarsd also calls ``keep_heap_small`` at start (bench/daemon_memory.py
levers has the figures). glibc serves a block over a threshold with a mapping of its own, which
goes back to the system when freed; but each time such a block is freed it raises the threshold
to that block's size (up to 32 MB). Once tarsd has freed one large array (the vector matrix
outgrowing itself, a search's scores), the model's activations of 1 to 3 MB per run come from
the heap instead, where freed memory stays: a 10,000-note backlog inside 512 MB grew into the
limit that way. A fixed threshold turns that off. It also caps glibc's arenas (up to 8 per core,
each keeping freed memory of its own) at 2. Other C libraries (macOS, musl) return memory on
their own and have neither call: there these do nothing.
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


# mallopt's parameter numbers (glibc's malloc.h).
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
MMAP_THRESHOLD_BYTES = 128 * 1024  # glibc's own starting value, kept fixed


def keep_heap_small(arenas: int) -> bool:
    """A fixed mmap threshold and at most ``arenas`` malloc arenas. True when glibc took both."""
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None:
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(mallopt(M_ARENA_MAX, arenas))


def return_freed_memory() -> None:
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is not None:
        trim(0)
