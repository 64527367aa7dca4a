"""Vectors of memory lines (Memory.md, Procedural.md) for dedup, forget and selective recall.

Keyed by (embedder fingerprint, sha256 of the normalised line), so a line is embedded once,
whatever moves around it, and a remember against a file of a thousand lines embeds only the
new fact. The vectors live in a table of their own (schema version 3): a whole-vault sync
prunes the chunk embedding cache down to chunks in use, and a memory line is not a chunk.

Nothing here waits for the model: without it every cosine is unknown (NaN) and callers fall
back to text. Lines not embedded yet get a few vectors at once and the rest in the background.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from tarsd.embed.embedder import Embedder
from tarsd.memory.facts import LONG_LINE_CHARS, clean, key
from tarsd.store.database import Store

log = logging.getLogger(__name__)

# Missing line vectors embedded within a request (about 5 ms each); the rest in the background.
EMBED_NOW = 8
BACKGROUND_BATCH = 16
MEMO_LIMIT = 50_000  # vectors kept in memory (384 floats each: about 75 MB at the limit)
# A vector whose line has left the memory files is kept this long (an undo, a line moved back).
KEEP_SECONDS = 30 * 86400


def _for_model(line: str) -> str:
    """What the model is given: the model reads 256 tokens at most, and tokenizing a hostile
    5 MB line whole would take seconds, so a line is cut at LONG_LINE_CHARS first."""
    return (clean(line) or line)[:LONG_LINE_CHARS]


@lru_cache(maxsize=65536)
def line_hash(line: str) -> str:
    return hashlib.sha256(key(line).encode()).hexdigest()


class LineVectors:
    def __init__(self, store: Store, embedder: Embedder):
        self.store = store
        self.embedder = embedder
        self._memo: dict[str, np.ndarray] = {}  # line hash -> vector, for _fingerprint
        self._fingerprint: str | None = None
        self._lock = threading.Lock()
        self._queue: dict[str, str] = {}  # line hash -> text, waiting for the background thread
        self._worker: threading.Thread | None = None
        self._closed = False

    def ready(self) -> bool:
        """Vectors can be made now (never waits for a model that is loading)."""
        return self.embedder.enabled and self.embedder.available() and self.embedder.fingerprint is not None

    def close(self) -> None:
        self._closed = True

    def embed(self, text: str) -> np.ndarray | None:
        """One text (a new fact, a query, a message): not stored."""
        if not self.ready():
            return None
        try:
            return np.asarray(self.embedder.embed([_for_model(text)])[0], dtype=np.float32)
        except Exception as exc:  # a failing model must not fail a remember
            log.warning("cannot embed for memory: %s", exc)
            return None

    def cosines(self, text: str, lines: Sequence[str], embed_missing: int = EMBED_NOW) -> np.ndarray | None:
        """Cosine of ``text`` with each line (NaN for a line without a vector yet), or None
        without the model."""
        query = self.embed(text)
        if query is None:
            return None
        vectors = self.vectors(lines, embed_missing)
        out = np.full(len(lines), np.nan, dtype=np.float32)
        known = [i for i, v in enumerate(vectors) if v is not None]
        if known:
            out[known] = np.stack([vectors[i] for i in known]) @ query
        return out

    def vectors(self, lines: Sequence[str], embed_missing: int = EMBED_NOW) -> list[np.ndarray | None]:
        """Each line's vector from memory, the database, or the model (a few now, the rest
        queued for the background); None where there is none yet."""
        if not self.ready():
            return [None] * len(lines)
        fingerprint = self._current()
        hashes = [line_hash(line) for line in lines]
        with self._lock:
            missing = [h for h in dict.fromkeys(hashes) if h not in self._memo]
        if missing:
            self._load(fingerprint, missing)
            with self._lock:
                missing = [h for h in missing if h not in self._memo]
        if missing:
            texts = {h: _for_model(line) for h, line in zip(hashes, lines, strict=True) if h in set(missing)}
            now, later = missing[:embed_missing], missing[embed_missing:]
            self._embed_and_save(fingerprint, {h: texts[h] for h in now})
            if later:
                self._queue_background({h: texts[h] for h in later})
        with self._lock:
            return [self._memo.get(h) for h in hashes]

    def warm(self, lines: Sequence[str]) -> None:
        """Make sure every line has a vector, in the background (after a file changed)."""
        if not self.ready() or self._closed:
            return
        fingerprint = self._current()
        hashes = {line_hash(line): _for_model(line) for line in lines}
        with self._lock:
            wanted = {h: t for h, t in hashes.items() if h not in self._memo}
        if wanted:
            self._load(fingerprint, list(wanted))
            with self._lock:
                wanted = {h: t for h, t in wanted.items() if h not in self._memo}
            if wanted:
                self._queue_background(wanted)

    def _current(self) -> str:
        """The embedder's fingerprint; vectors of another one are dropped from memory."""
        fingerprint = self.embedder.fingerprint
        assert fingerprint is not None
        with self._lock:
            if fingerprint != self._fingerprint:
                self._memo.clear()
                self._queue.clear()
                self._fingerprint = fingerprint
        return fingerprint

    # ---- storage ----

    def _load(self, fingerprint: str, hashes: list[str]) -> None:
        found: dict[str, np.ndarray] = {}
        try:
            reader = self.store.reader()
            for start in range(0, len(hashes), 500):
                batch = hashes[start : start + 500]
                marks = ",".join("?" * len(batch))
                for line, vector in reader.execute(
                    f"SELECT line_hash, vector FROM memory_line_vectors WHERE fingerprint = ? AND line_hash IN ({marks})",
                    (fingerprint, *batch),
                ):
                    found[line] = np.frombuffer(vector, dtype=np.float32)
        except Exception as exc:  # the index is a cache: without it, embed again
            log.debug("memory vectors not read: %s", exc)
        self._remember(fingerprint, found)

    def _embed_and_save(self, fingerprint: str, texts: dict[str, str]) -> None:
        if not texts:
            return
        try:
            vectors = self.embedder.embed(list(texts.values()))
        except Exception as exc:
            log.warning("cannot embed memory lines: %s", exc)
            return
        made = {h: np.asarray(v, dtype=np.float32) for h, v in zip(texts, vectors, strict=True)}
        self._remember(fingerprint, made)
        try:
            now = time.time()
            with self.store.lock, self.store.conn:
                self.store.conn.executemany(
                    "INSERT OR REPLACE INTO memory_line_vectors(fingerprint, line_hash, vector, created_at) VALUES (?, ?, ?, ?)",
                    [(fingerprint, h, v.tobytes(), now) for h, v in made.items()],
                )
        except Exception as exc:  # kept in memory all the same
            log.debug("memory vectors not saved: %s", exc)

    def _remember(self, fingerprint: str, vectors: dict[str, np.ndarray]) -> None:
        with self._lock:
            if fingerprint != self._fingerprint:
                return
            if len(self._memo) + len(vectors) > MEMO_LIMIT:
                self._memo.clear()
            self._memo.update(vectors)

    def prune(self, lines: Sequence[str]) -> int:
        """Forget stored vectors of lines gone from the memory files for a while."""
        keep = {line_hash(line) for line in lines}
        try:
            with self.store.lock, self.store.conn:
                old = self.store.conn.execute(
                    "SELECT fingerprint, line_hash FROM memory_line_vectors WHERE created_at < ?", (time.time() - KEEP_SECONDS,)
                ).fetchall()
                gone = [(f, h) for f, h in old if h not in keep]
                self.store.conn.executemany("DELETE FROM memory_line_vectors WHERE fingerprint = ? AND line_hash = ?", gone)
            return len(gone)
        except Exception as exc:
            log.debug("memory vectors not pruned: %s", exc)
            return 0

    # ---- the background thread ----

    def _queue_background(self, texts: dict[str, str]) -> None:
        with self._lock:
            self._queue.update(texts)
            if self._worker is not None:
                return  # the running thread takes them (it only stops under this lock, queue empty)
            # Not a daemon thread: one killed inside onnxruntime at interpreter exit aborts the
            # process. It stops at the next batch once the main thread has finished.
            self._worker = threading.Thread(target=self._work, name="memory-vectors")
            self._worker.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                batch = dict(list(self._queue.items())[:BACKGROUND_BATCH])
                for h in batch:
                    del self._queue[h]
                fingerprint = self._fingerprint
                stopping = self._closed or not threading.main_thread().is_alive()
                if not batch or stopping or fingerprint is None or fingerprint != self.embedder.fingerprint:
                    self._queue.clear()
                    self._worker = None
                    return
            self._embed_and_save(fingerprint, batch)

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def known(self) -> int:
        """Line vectors held in memory now."""
        with self._lock:
            return len(self._memo)
