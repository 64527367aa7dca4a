"""Giving freed heap memory back to the system once a burst of work is over, and keeping
less of it meanwhile under a small memory budget.

Embedding and long syncs allocate in bursts; glibc's malloc keeps the freed pages for the
process, so an idle daemon would stay at its peak. ``malloc_trim`` hands them back (about
60 MB after an embedding backlog: bench/daemon_latency.py rss).

tarsd caps glibc's arenas at start: one per core (at least 2; glibc's default is up to 8 per
core, each keeping freed memory of its own), 2 under a small budget. Under a small budget it
also fixes the mmap threshold (bench/daemon_memory.py levers has the figures). glibc serves a
block over a threshold with a mapping of its own, which goes back to the system when freed; but
each time such a block is freed it raises the threshold to that block's size (up to 32 MB).
Once tarsd has freed one large array (the vector matrix outgrowing itself, a search's scores),
the model's activations of 1 to 3 MB per run come from the heap instead, where freed memory
stays: a 10,000-note backlog inside 512 MB grew into the limit that way. A fixed threshold
turns that off. Other C libraries (macOS, musl) return memory on their own and have neither
call: there these do nothing.
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


def limit_arenas(arenas: int) -> bool:
    """At most ``arenas`` malloc arenas. True when glibc took it."""
    mallopt = getattr(_libc(), "mallopt", None)
    return mallopt is not None and bool(mallopt(M_ARENA_MAX, arenas))


def fix_mmap_threshold() -> bool:
    """glibc's mmap threshold kept at its starting value (see above). True when glibc took it."""
    mallopt = getattr(_libc(), "mallopt", None)
    return mallopt is not None and bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))


def return_freed_memory() -> None:
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is not None:
        trim(0)
