"""Giving freed heap memory back to the system once a burst of work is over.

Embedding and long syncs allocate in bursts; glibc's malloc keeps the freed pages for the
process, so an idle daemon would stay at its peak. ``malloc_trim`` hands them back (about
60 MB after an embedding backlog: bench/daemon_latency.py rss). Other C libraries (macOS,
musl) return memory on their own and have no malloc_trim: there this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


@functools.cache
def _malloc_trim():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):
        return None


def return_freed_memory() -> None:
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
