"""Every passage vector in one in-memory matrix, kept in step with the index's commits.

sqlite-vec keeps the vectors on disk (the index is one file, rebuilt from the vault); its
brute-force KNN reads them all on every query (about 25 ms for 30,000 passages here). A
float32 matrix in memory answers the same question with one matrix product (about 1 ms),
gives any passage's exact similarity (hybrid search needs it for keyword hits the vector
top-k missed), and applies filters as a mask before the top-k cut.

The store records what each write does to the vectors and applies it here only after the
outermost transaction has committed: a batch that fails or rolls back never shows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tarsd.config.budget import usable_cores

GROWTH = 1.5
# The product of the matrix and the query runs in slices of at least this many rows, one per
# core, on threads of this module's own; BLAS itself runs on one thread. OpenBLAS's threads spin
# for a while after each product, and beside a hybrid search's keyword query and the next
# query's embedding they took the CPU both needed (10,000 notes, bench/search_latency.py: hybrid
# p50 27 ms with OpenBLAS's two threads, 17 ms this way); these threads sleep when idle. One
# thread does 30,000 rows in about 1.5 ms here, two 0.9 ms; 400,000 rows 40 ms and 20 ms.
SLICE_ROWS = 8_192


def blas_on_one_thread() -> None:
    """Keep numpy's BLAS to the calling thread, for the whole process (threadpoolctl knows
    OpenBLAS, MKL and BLIS; a numpy built on a Mac's Accelerate is left as it is)."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


class Product:
    """matrix[:rows] @ query, in slices on ``workers`` threads (the caller's among them)."""

    def __init__(self, workers: int):
        self.workers = max(1, workers)
        self._pool = ThreadPoolExecutor(max_workers=self.workers - 1, thread_name_prefix="vec-product") if self.workers > 1 else None

    def __call__(self, matrix: np.ndarray, rows: int, query: np.ndarray) -> np.ndarray:
        out = np.empty(rows, dtype=np.float32)
        slices = min(self.workers, max(1, rows // SLICE_ROWS))
        bounds = [rows * i // slices for i in range(slices + 1)]
        others = [
            self._pool.submit(np.matmul, matrix[start:end], query, out=out[start:end])
            for start, end in zip(bounds[1:-1], bounds[2:], strict=True)
        ]
        np.matmul(matrix[: bounds[1]], query, out=out[: bounds[1]])
        for other in others:
            other.result()
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)


class LoadedVectors:
    """The rows read from the index for a first load, filled into arrays allocated once."""

    def __init__(self, dims: int, capacity: int = 0):
        self.dims = dims
        self.matrix = np.zeros((capacity, dims), dtype=np.float32)
        self.ids = np.full(capacity, -1, dtype=np.int64)
        self.used = 0

    def append(self, chunk: int, blob: bytes) -> None:
        vector = np.frombuffer(blob, dtype=np.float32)
        if vector.shape[0] != self.dims:
            return  # from another vector space: never mixed in
        if self.used == len(self.ids):  # rows committed since they were counted
            capacity = max(1024, int(len(self.ids) * GROWTH))
            self.matrix = np.concatenate([self.matrix, np.zeros((capacity - len(self.ids), self.dims), np.float32)])
            self.ids = np.concatenate([self.ids, np.full(capacity - len(self.ids), -1, np.int64)])
        self.matrix[self.used] = vector
        self.ids[self.used] = chunk
        self.used += 1


class VectorIndex:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._product = Product(usable_cores())
        self.dims = 0
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._ids = np.zeros(0, dtype=np.int64)  # chunk id per row; -1: a free row
        self._rows: dict[int, int] = {}
        self._free: list[int] = []
        self._used = 0  # rows ever used (free rows are below this too)
        self.loaded = False

    def __len__(self) -> int:
        return len(self._rows)

    def close(self) -> None:
        """Let the product's threads go (the store is closing)."""
        self._product.close()

    @property
    def nbytes(self) -> int:
        return self._matrix.nbytes + self._ids.nbytes

    # ---- changes (from the store, after a commit) ----

    def _install(self, loaded: LoadedVectors) -> None:
        self.dims = loaded.dims
        self._matrix, self._ids = loaded.matrix, loaded.ids
        self._rows = {chunk: row for row, chunk in enumerate(loaded.ids[: loaded.used].tolist())}
        self._free, self._used, self.loaded = [], loaded.used, True

    def load_with(self, read: Callable[[], LoadedVectors]) -> None:
        """Load what ``read`` returns, once, holding the lock throughout: a commit applied
        meanwhile waits, and lands on top of what was read (its changes apply twice, harmlessly);
        a search that came meanwhile finds it loaded."""
        with self._lock:
            if self.loaded:
                return
            blas_on_one_thread()
            self._install(read())

    def apply(self, changes: list[tuple[str, object]]) -> None:
        """Committed changes: ("put", [(chunk id, bytes)]), ("drop", [chunk ids]), ("reset", dims);
        other kinds are passage_notes.py's. Before the first load there is nothing to change: the
        load reads the committed state."""
        with self._lock:
            if not self.loaded:
                return
            for kind, payload in changes:
                if kind == "put":
                    self._put(payload)
                elif kind == "drop":
                    self._drop(payload)
                elif kind == "reset":
                    self._install(LoadedVectors(payload))

    def _put(self, items: list[tuple[int, bytes]]) -> None:
        for chunk, blob in items:
            vector = np.frombuffer(blob, dtype=np.float32)
            if vector.shape[0] != self.dims:
                continue  # from another vector space, in flight while the space changed
            row = self._rows.get(chunk)
            if row is None:
                row = self._free.pop() if self._free else self._grow()
                self._rows[chunk] = row
                self._ids[row] = chunk
            self._matrix[row] = vector

    def _drop(self, chunks: Iterable[int]) -> None:
        for chunk in chunks:
            row = self._rows.pop(chunk, None)
            if row is not None:
                self._ids[row] = -1
                self._matrix[row] = 0.0
                self._free.append(row)

    def _grow(self) -> int:
        if self._used == len(self._ids):
            capacity = max(1024, int(len(self._ids) * GROWTH))
            matrix = np.zeros((capacity, self.dims), dtype=np.float32)
            matrix[: self._used] = self._matrix[: self._used]
            ids = np.full(capacity, -1, dtype=np.int64)
            ids[: self._used] = self._ids[: self._used]
            self._matrix, self._ids = matrix, ids
        self._used += 1
        return self._used - 1

    # ---- queries ----

    def search(self, query: np.ndarray, k: int, allowed: set[int] | None = None) -> list[tuple[int, float]]:
        """The ``k`` passages most similar to ``query`` (a unit vector), best first, as
        (chunk id, cosine); ``allowed`` limits them to those chunk ids before the cut."""
        with self._lock:
            used = self._used
            if used == 0 or query.shape[0] != self.dims:
                return []
            scores = self._product(self._matrix, used, query)
            ids = self._ids[:used]
            scores[ids < 0] = -np.inf
            if allowed is not None:
                mask = np.isin(ids, np.fromiter(allowed, dtype=np.int64, count=len(allowed)), invert=True)
                scores[mask] = -np.inf
            k = min(k, used)
            top = np.argpartition(-scores, k - 1)[:k] if k < used else np.arange(used)
            top = top[np.argsort(-scores[top], kind="stable")]
            return [(int(ids[i]), float(scores[i])) for i in top if scores[i] != -np.inf]

    def similarities(self, query: np.ndarray, chunks: Iterable[int]) -> dict[int, float]:
        """The exact cosine of each given passage that has a vector."""
        with self._lock:
            rows = [(chunk, row) for chunk in chunks if (row := self._rows.get(chunk)) is not None]
            if not rows or query.shape[0] != self.dims:
                return {}
            values = self._matrix[[row for _, row in rows]] @ query
        return {chunk: float(value) for (chunk, _), value in zip(rows, values, strict=True)}
