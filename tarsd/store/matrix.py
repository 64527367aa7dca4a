"""Every passage vector in memory, as 8-bit rows (quantized.py), kept in step with the index's commits.

sqlite-vec keeps the vectors on disk (the index is one file, rebuilt from the vault); its
brute-force KNN reads them all on every query (about 25 ms for 30,000 passages here). The rows
in memory answer the same question with one integer product (about 0.5 ms for 30,000 rows, 8 ms
for 400,000), give any passage's similarity (hybrid search needs it for keyword hits the vector
top-k missed), and apply filters as a mask before the top-k cut.

The store records what each write does to the vectors and applies it here only after the
outermost transaction has committed: a batch that fails or rolls back never shows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

import numpy as np

from tarsd.config.budget import usable_cores
from tarsd.config.heap import return_freed_memory
from tarsd.store.quantized import ZERO, Scan, exact_scores, quantize_rows

GROWTH = 1.5
# Rows rounded at a time while the vectors load: the float rows waiting are 6 MB at 384 dimensions.
LOAD_BLOCK = 4_096
# The scan ranks every row with the query rounded; this many of its best (twice the asked-for,
# and at least 64 more) are scored again with the query as it is before the cut. The query's
# rounding moves a score by about 0.001: a passage outside these never belonged in the top k.
RESCORE_FACTOR = 2
RESCORE_EXTRA = 64
# What a write records for the vectors in memory (connection.Connections._change): the passages'
# ("put", "drop") and the line units' (line_units.py); "reset" (a new vector space) empties both.
PUT, DROPPED, RESET = "put", "drop", "reset"
LINES_PUT, LINES_DROPPED = "line put", "line drop"


def blas_on_one_thread() -> None:
    """Keep numpy's BLAS to the calling thread, for the whole process (threadpoolctl knows
    OpenBLAS, MKL and BLIS; a numpy built on a Mac's Accelerate is left as it is). The re-scoring
    products are small, and OpenBLAS's threads spin for a while after each one: beside a hybrid
    search's keyword query and the next query's embedding they took the CPU both needed."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


class LoadedVectors:
    """The rows read from the index for a first load, rounded a block at a time into arrays
    allocated once (``flush`` rounds the last block)."""

    def __init__(self, dims: int, capacity: int = 0):
        self.dims = dims
        self.codes = np.zeros((capacity, dims), dtype=np.uint8)
        self.scales = np.zeros(capacity, dtype=np.float32)
        self.ids = np.full(capacity, -1, dtype=np.int32)  # chunk ids index arrays here and in passage_notes.py: they fit
        self.used = 0
        self._block = np.empty((LOAD_BLOCK, dims), dtype=np.float32)
        self._block_ids: list[int] = []

    def append(self, chunk: int, blob: bytes) -> None:
        vector = np.frombuffer(blob, dtype=np.float32)
        if vector.shape[0] != self.dims:
            return  # from another vector space: never mixed in
        self._block[len(self._block_ids)] = vector
        self._block_ids.append(chunk)
        if len(self._block_ids) == LOAD_BLOCK:
            self.flush()

    def flush(self) -> None:
        count = len(self._block_ids)
        if not count:
            return
        end = self.used + count
        if end > len(self.ids):  # rows committed since they were counted
            capacity = max(1024, int(end * GROWTH))
            self.codes = grown(self.codes, capacity)
            self.scales = grown(self.scales, capacity)
            self.ids = grown(self.ids, capacity, fill=-1)
        self.codes[self.used : end], self.scales[self.used : end] = quantize_rows(self._block[:count])
        self.ids[self.used : end] = self._block_ids
        self.used = end
        self._block_ids = []


def grown(array: np.ndarray, capacity: int, fill: int = 0) -> np.ndarray:
    """``array`` copied into a bigger one of ``capacity`` rows, the new rows ``fill``."""
    grown = np.full((capacity, *array.shape[1:]), fill, dtype=array.dtype)
    grown[: len(array)] = array
    return grown


class VectorIndex:
    def __init__(self, put: str = PUT, drop: str = DROPPED) -> None:
        self._put_kind, self._drop_kind = put, drop  # the changes meant for this index
        self._lock = threading.Lock()
        self._scan: Scan | None = None  # made at the first load: onnxruntime is imported then
        self.dims = 0
        self._codes = np.zeros((0, 0), dtype=np.uint8)
        self._scales = np.zeros(0, dtype=np.float32)
        self._ids = np.zeros(0, dtype=np.int32)  # chunk id per row; -1: a free row
        # chunk id -> its row; -1: no vector. An array, not a dict: a dict of 398,234 ints was
        # 43 MB, this is 2.4 MB (with room for new chunk ids).
        self._row_of = np.zeros(0, dtype=np.int32)
        self._count = 0
        self._free: list[int] = []
        self._used = 0  # rows ever used (free rows are below this too)
        self.loaded = False

    def __len__(self) -> int:
        return self._count

    @property
    def nbytes(self) -> int:
        return self._codes.nbytes + self._scales.nbytes + self._ids.nbytes + self._row_of.nbytes

    # ---- changes (from the store, after a commit) ----

    def _install(self, loaded: LoadedVectors) -> None:
        loaded.flush()
        self.dims = loaded.dims
        self._codes, self._scales, self._ids = loaded.codes, loaded.scales, loaded.ids
        ids = loaded.ids[: loaded.used]
        self._row_of = np.full(int(int(ids.max(initial=0)) * GROWTH) + 1024, -1, dtype=np.int32)
        self._row_of[ids] = np.arange(loaded.used, dtype=np.int32)
        self._count, self._free, self._used, self.loaded = loaded.used, [], loaded.used, True

    def load_with(self, read: Callable[[], LoadedVectors]) -> None:
        """Load what ``read`` returns, once, holding the lock throughout: a commit applied
        meanwhile waits, and lands on top of what was read (its changes apply twice, harmlessly);
        a search that came meanwhile finds it loaded."""
        with self._lock:
            if self.loaded:
                return
            blas_on_one_thread()
            if self._scan is None:
                self._scan = Scan(usable_cores())
            self._install(read())
        # Reading 400,000 rows made and freed as many Python objects: glibc keeps that memory.
        return_freed_memory()

    def apply(self, changes: list[tuple[str, object]]) -> None:
        """Committed changes: (put, [(chunk id, bytes)]), (drop, [chunk ids]) of this index's kinds,
        ("reset", dims); other kinds are another index's or passage_notes.py's. Before the first load
        there is nothing to change: the load reads the committed state."""
        with self._lock:
            if not self.loaded:
                return
            for kind, payload in changes:
                if kind == self._put_kind:
                    self._put(payload)
                elif kind == self._drop_kind:
                    self._drop(payload)
                elif kind == RESET:
                    self._install(LoadedVectors(payload))

    def _put(self, items: list[tuple[int, bytes]]) -> None:
        # A vector of another space is in flight while the space changed: never mixed in.
        items = [(chunk, blob) for chunk, blob in items if len(blob) == 4 * self.dims]
        if not items:
            return
        codes, scales = quantize_rows(np.frombuffer(b"".join(blob for _, blob in items), dtype=np.float32).reshape(len(items), self.dims))
        for (chunk, _), row_codes, scale in zip(items, codes, scales, strict=True):
            row = self._row(chunk)
            if row < 0:
                row = self._free.pop() if self._free else self._grow()
                self._set_row(chunk, row)
                self._ids[row] = chunk
                self._count += 1
            self._codes[row], self._scales[row] = row_codes, scale

    def _drop(self, chunks: Iterable[int]) -> None:
        for chunk in chunks:
            row = self._row(chunk)
            if row >= 0:
                self._row_of[chunk] = -1
                self._ids[row] = -1
                self._scales[row] = 0.0
                self._free.append(row)
                self._count -= 1

    def _row(self, chunk: int) -> int:
        return int(self._row_of[chunk]) if 0 <= chunk < len(self._row_of) else -1

    def _set_row(self, chunk: int, row: int) -> None:
        if chunk >= len(self._row_of):
            self._row_of = grown(self._row_of, max(1024, int((chunk + 1) * GROWTH)), fill=-1)
        self._row_of[chunk] = row

    def _grow(self) -> int:
        if self._used == len(self._ids):
            capacity = max(1024, int(len(self._ids) * GROWTH))
            self._codes = grown(self._codes, capacity)
            self._scales = grown(self._scales, capacity)
            self._ids = grown(self._ids, capacity, fill=-1)
        self._used += 1
        return self._used - 1

    # ---- queries ----

    def search(self, query: np.ndarray, k: int, allowed: set[int] | None = None) -> list[tuple[int, float]]:
        """The ``k`` passages most similar to ``query`` (a unit vector), best first, as
        (chunk id, cosine); ``allowed`` limits them to those chunk ids before the cut."""
        with self._lock:
            used = self._used
            if used == 0 or query.shape[0] != self.dims or self._scan is None:
                return []
            query = np.ascontiguousarray(query, dtype=np.float32)
            scores = self._scan(self._codes[:used], self._scales[:used], query)
            ids = self._ids[:used]
            scores[ids < 0] = -np.inf
            if allowed is not None:
                mask = np.isin(ids, np.fromiter(allowed, dtype=np.int64, count=len(allowed)), invert=True)
                scores[mask] = -np.inf
            wanted = min(used, k * RESCORE_FACTOR + RESCORE_EXTRA)
            rows = np.argpartition(-scores, wanted - 1)[:wanted] if wanted < used else np.arange(used)
            rows = rows[scores[rows] != -np.inf]
            exact = exact_scores(self._codes[rows], self._scales[rows], query)
            best = np.argsort(-exact, kind="stable")[:k]
            return [(int(ids[rows[i]]), float(exact[i])) for i in best]

    def similarities(self, query: np.ndarray, chunks: Iterable[int]) -> dict[int, float]:
        """The cosine of each given passage that has a vector."""
        with self._lock:
            rows = [(chunk, row) for chunk in chunks if (row := self._row(chunk)) >= 0]
            if not rows or query.shape[0] != self.dims:
                return {}
            picked = [row for _, row in rows]
            values = exact_scores(self._codes[picked], self._scales[picked], np.asarray(query, dtype=np.float32))
        return {chunk: float(value) for (chunk, _), value in zip(rows, values, strict=True)}

    def mean(self, chunks: Iterable[int]) -> np.ndarray | None:
        """The unit mean of the given passages' vectors (those that have one), or None. A note's
        meaning as one vector: the rows are read as stored (the rounding moves a cosine by about
        0.001), one product for the whole note (10,000 passages: a few ms)."""
        with self._lock:
            rows = np.array([row for chunk in chunks if (row := self._row(chunk)) >= 0], dtype=np.int64)
            if not len(rows):
                return None
            scales = self._scales[rows]
            # row = (codes - 128) * scale, summed over the rows without a float copy of each.
            total = scales @ self._codes[rows].astype(np.float32) - np.float32(ZERO) * scales.sum()
        norm = float(np.linalg.norm(total))
        return (total / norm).astype(np.float32) if norm > 0 else None

    def scores(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every passage's approximate cosine with ``query`` (a unit vector), as (chunk ids,
        scores) in no order: for ranking whole notes, where a top-k of passages would fill up with
        one long note's (``search`` scores its best again exactly; ``similarities`` does that here)."""
        with self._lock:
            used = self._used
            if used == 0 or query.shape[0] != self.dims or self._scan is None:
                return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32)
            scores = self._scan(self._codes[:used], self._scales[:used], np.ascontiguousarray(query, dtype=np.float32))
            ids = self._ids[:used].copy()
        live = ids >= 0
        return ids[live], scores[live]
