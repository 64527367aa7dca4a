"""Incremental sync of the vault into the index, by content hash.

Per file: an unchanged (mtime, size) is skipped without reading; a changed one is hashed,
and an unchanged hash only updates the stat. Otherwise the note is re-chunked and written
in one transaction, taking vectors from the embedding cache where the chunk's content hash
is known. Embedding of the rest happens afterwards, in batches, outside any write
transaction, so a slow model never blocks readers or the next file.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable

from .chunker import chunk_note
from .config import Config
from .embed import Embedder, EmbedderUnavailable
from .store import FileMeta, FileState, Store
from .vault import DiskFile, is_conflict_copy, memory_type, read_note, stat_note, walk

log = logging.getLogger(__name__)

CHUNKER_VERSION = 2
# Pending chunks per embedding round (the model sees them in config.batch_size batches).
# Small rounds let the daemon slip a freshly saved note in between (under a second each here).
EMBED_ROUND = 8

Progress = Callable[[str, int, int], None]  # (phase, done, total)


@dataclass(slots=True)
class SyncReport:
    scanned: int = 0
    indexed: int = 0  # files (re-)chunked
    unchanged: int = 0
    touched: int = 0  # stat changed, content did not
    deleted: int = 0
    skipped: int = 0  # recorded with a problem and no chunks
    chunks: int = 0  # chunks written
    vectors_from_cache: int = 0
    vectors_embedded: int = 0
    pending_vectors: int = 0
    embedder_error: str | None = None
    problems: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


class Indexer:
    def __init__(self, config: Config, store: Store, embedder: Embedder):
        self.config = config
        self.root: Path = config.vault_path
        self.store = store
        self.embedder = embedder
        self.max_bytes = int(config.vault.max_file_mb * 1_000_000)
        # Set to stop a sync between two files (each file's transaction always completes).
        self.stop = threading.Event()

    # ---- the embedder's state decides chunk sizes and the vector space ----

    def _prepare_embedder(self) -> bool:
        """True when vectors can be made now. Switches the vector table to this embedder."""
        if not self.embedder.available():
            return False
        assert self.embedder.fingerprint is not None
        if self.store.use_vector_space(self.embedder.fingerprint, self.embedder.dims):
            log.info("vector space is now %s: re-using cached vectors, embedding the rest", self.embedder.fingerprint)
            self.store.attach_cached(self.embedder.fingerprint)
        return True

    def _chunking(self):
        counter, budget = self.embedder.counter()
        if self.config.index.chunk_tokens > 0:
            budget = min(budget, self.config.index.chunk_tokens)
        fingerprint = f"v{CHUNKER_VERSION}:{counter.fingerprint}:{budget}:{self.config.index.overlap:g}"
        return counter, budget, fingerprint

    # ---- sync ----

    def sync(
        self, paths: list[str] | None = None, *, full: bool = False, embed: bool = True, progress: Progress | None = None
    ) -> SyncReport:
        """Bring the index in line with the vault (or with just ``paths``, relative to it).
        ``full`` re-reads and re-chunks every file, still re-using cached vectors."""
        started = time.perf_counter()
        report = SyncReport()
        can_embed = self._prepare_embedder()
        chunking = self._chunking()
        fingerprint = self.embedder.fingerprint if can_embed else None

        if paths is None:
            disk = walk(self.root)
            known = self.store.file_states()
            gone = [p for p in known if p not in disk]
            todo = list(disk.values())
        else:
            wanted = dict.fromkeys(_relative(self.root, p) for p in paths)  # in order, once each
            disk_files = [(p, stat_note(self.root, p)) for p in wanted]
            known = {p: s for p, _ in disk_files if (s := self.store.file_state(p)) is not None}
            gone = [p for p, d in disk_files if d is None and p in known]
            todo = [d for _, d in disk_files if d is not None]

        report.scanned = len(todo)
        with self.store.batch() as tick:
            for done, disk_file in enumerate(todo, 1):
                if self.stop.is_set():
                    break
                tick()
                self._sync_file(disk_file, known.get(disk_file.path), chunking, fingerprint, full, report)
                if progress and (done % 200 == 0 or done == len(todo)):
                    progress("scan", done, len(todo))
            for path in gone:
                if self.stop.is_set():
                    break
                tick()
                if self.store.delete_file(path):
                    report.deleted += 1
        if paths is None and not self.stop.is_set():
            self.store.prune_cache()

        if embed and self.embedder.enabled:
            self.embed_pending(report, progress)
        if self.embedder.enabled and not self.embedder.available():
            report.embedder_error = self.embedder.error
        report.pending_vectors = self.store.counts()["pending_vectors"] if self.embedder.enabled else 0
        report.seconds = time.perf_counter() - started
        return report

    def _sync_file(
        self, disk: DiskFile, state: FileState | None, chunking, fingerprint: str | None, full: bool, report: SyncReport
    ) -> None:
        counter, budget, chunker_fp = chunking
        path = disk.path
        kind = memory_type(path, self.config.vault)
        fresh_chunking = state is not None and state.chunker == chunker_fp
        if (
            not full
            and state is not None
            and (state.mtime_ns, state.size) == (disk.mtime_ns, disk.size)
            and (fresh_chunking or state.skipped)
        ):
            report.unchanged += 1
            return
        note = read_note(self.root, path, self.max_bytes)
        if note.text is None:
            if note.problem == "vanished before it could be read":
                if self.store.delete_file(path):
                    report.deleted += 1
                return
            self.store.record_skipped(path, disk.mtime_ns, disk.size, note.content_hash, note.problem or "unreadable", kind)
            report.skipped += 1
            report.problems[path] = note.problem or "unreadable"
            return
        if not full and state is not None and not state.skipped and fresh_chunking and state.content_hash == note.content_hash:
            self.store.touch_file(path, disk.mtime_ns, disk.size)
            report.touched += 1
            return
        try:
            parsed = chunk_note(note.text, counter, budget, self.config.index.overlap, fallback_title=Path(path).stem)
        except Exception as exc:  # a note that defeats the chunker must not stop the sync
            log.exception("cannot chunk %s", path)
            problem = f"could not be chunked: {exc}"
            self.store.record_skipped(path, disk.mtime_ns, disk.size, note.content_hash, problem, kind)
            report.skipped += 1
            report.problems[path] = problem
            return
        cached = self.store.cached_vectors(fingerprint, (c.content_hash for c in parsed.chunks))
        meta = FileMeta(
            path=path,
            title=parsed.title,
            memory_type=kind,
            content_hash=note.content_hash,
            mtime_ns=disk.mtime_ns,
            size=disk.size,
            chunker=chunker_fp,
            tags=parsed.tags,
            aliases=parsed.aliases,
            conflict=is_conflict_copy(path),
            problem=note.problem,
        )
        self.store.replace_file(meta, parsed.chunks, cached, replacing=state is not None)
        report.indexed += 1
        report.chunks += len(parsed.chunks)
        report.vectors_from_cache += sum(1 for c in parsed.chunks if c.content_hash in cached)
        if note.problem:
            report.problems[path] = note.problem

    def embed_pending(self, report: SyncReport | None = None, progress: Progress | None = None, rounds: int | None = None) -> int:
        """Embed chunks that have no vector yet: all of them, or ``rounds`` batches of
        EMBED_ROUND. Stops (keeping the rest pending) if the embedder fails; the next sync
        tries again."""
        report = report if report is not None else SyncReport()
        if not self._prepare_embedder():
            report.embedder_error = self.embedder.error
            return 0
        fingerprint = self.embedder.fingerprint
        total = self.store.counts()["pending_vectors"] if progress else 0
        done = 0
        for round_number, batch in enumerate(self.store.pending_batches(EMBED_ROUND)):
            if self.stop.is_set() or (rounds is not None and round_number >= rounds):
                break
            try:
                vectors = self.embedder.embed([text for _, text in batch])
            except EmbedderUnavailable as exc:
                report.embedder_error = str(exc)
                break
            except Exception as exc:  # onnxruntime and friends raise their own types
                log.exception("embedding failed")
                self.embedder.mark_failed(f"embedding failed: {exc}")
                report.embedder_error = self.embedder.error
                break
            if len(vectors) != len(batch):
                report.embedder_error = f"the embedder returned {len(vectors)} vectors for {len(batch)} texts"
                break
            attached = self.store.store_vectors(fingerprint, {h: v.tobytes() for (h, _), v in zip(batch, vectors, strict=True)})
            report.vectors_embedded += len(batch)
            done += attached
            if progress:
                progress("embed", min(done, total), total)
        return report.vectors_embedded


def _relative(root: Path, path: str) -> str:
    """A vault-relative, normalised path; a path outside the vault is refused."""
    candidate = Path(os.path.normpath(root / path))  # an absolute path replaces root
    try:
        return candidate.relative_to(root).as_posix()
    except ValueError:
        raise ValueError(f"{path} is not inside the vault {root}") from None
