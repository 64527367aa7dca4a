"""Which note each passage belongs to, held in memory and kept in step with the index's commits.

A search turns up to 600 passages (300 from each list) into their notes, to keep one passage
per note. Asked of SQLite, that was about 0.5 ms for a vector search's 300 and 1 ms for a
hybrid search's 600 (10,000 notes, bench/search_latency.py), a sixth of a vector search with
its query vector known. Here it is two lookups per passage: a chunk id's file id in an array
indexed by chunk id (4 bytes a passage: 2.6 MB at 100,000 notes), and that file's path in a
list indexed by file id (about 7 MB at 100,000 notes, the paths themselves most of it; a dict
was 14).

A passage's note never changes: a note written again gets new passages, and a renamed note is
a new file row. Like the matrix (matrix.py), the store records what each write does here and
applies it only after the outermost transaction has committed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

import numpy as np

from tarsd.store.matrix import grown

GROWTH = 1.5

# The changes the store records (connection.Connections._change): a note's new passages, a
# note's passages deleted, a note deleted.
PASSAGES_ADDED = "passages added"
PASSAGES_DROPPED = "passages dropped"
NOTE_DROPPED = "note dropped"


class PassageNotes:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._file_of = np.zeros(0, dtype=np.int32)  # chunk id -> file id; 0: no such passage
        self._paths: list[str | None] = []  # file id -> path; None: no such note
        self.loaded = False

    def load_with(self, read: Callable[[], tuple[np.ndarray, np.ndarray, Iterable[tuple[int, str]]]]) -> None:
        """Load what ``read`` returns (chunk ids, their file ids, each file's path), once, holding
        the lock throughout: a commit applied meanwhile waits, and lands on top of what was read;
        a search that came meanwhile finds it loaded."""
        with self._lock:
            if self.loaded:
                return
            chunks, files, paths = read()
            self._file_of = np.zeros(int(int(chunks.max(initial=0)) * GROWTH) + 1024, dtype=np.int32)
            self._file_of[chunks] = files
            self._paths = []
            for file_id, path in paths:
                self._set_path(file_id, path)
            self.loaded = True

    def apply(self, changes: list[tuple[str, object]]) -> None:
        """Committed changes (other kinds are the matrix's). Before the first load there is
        nothing to change: the load reads the committed state."""
        with self._lock:
            if not self.loaded:
                return
            for kind, payload in changes:
                if kind == PASSAGES_ADDED:
                    file_id, path, chunks = payload
                    self._set_path(file_id, path)
                    for chunk in chunks:
                        self._set(chunk, file_id)
                elif kind == PASSAGES_DROPPED:
                    known = [chunk for chunk in payload if chunk < len(self._file_of)]
                    self._file_of[known] = 0
                elif kind == NOTE_DROPPED and 0 <= payload < len(self._paths):
                    self._paths[payload] = None

    def owners(self, chunks: list[int]) -> dict[int, tuple[int, str]]:
        """chunk id -> (file id, path) of each passage that exists."""
        with self._lock:
            ids = np.array(chunks, dtype=np.int64)
            inside = (ids >= 0) & (ids < len(self._file_of))
            files = np.zeros(len(ids), dtype=np.int32)
            files[inside] = self._file_of[ids[inside]]
            found = {}
            for chunk, file_id in zip(chunks, files.tolist(), strict=True):
                path = self._paths[file_id] if file_id < len(self._paths) else None  # 0 has none: file ids start at 1
                if path is not None:
                    found[chunk] = (file_id, path)
            return found

    def file_ids(self, chunks: np.ndarray) -> np.ndarray:
        """Each passage's file id (0: no such passage), for many passages at once."""
        with self._lock:
            inside = (chunks >= 0) & (chunks < len(self._file_of))
            files = np.zeros(len(chunks), dtype=np.int32)
            files[inside] = self._file_of[chunks[inside]]
            return files

    def _set_path(self, file_id: int, path: str) -> None:
        if file_id >= len(self._paths):
            self._paths.extend([None] * (max(1024, int((file_id + 1) * GROWTH)) - len(self._paths)))
        self._paths[file_id] = path

    def _set(self, chunk: int, file_id: int) -> None:
        if chunk >= len(self._file_of):
            self._file_of = grown(self._file_of, max(1024, int((chunk + 1) * GROWTH)))
        self._file_of[chunk] = file_id
