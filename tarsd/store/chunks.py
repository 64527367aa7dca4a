"""The passages: the chunks table (one row per chunk of a note, with its text and the context
line the embedder sees before it), the ids new chunks get, and writing or deleting a note's chunks together
with their keyword rows (fts.py) and vectors (vectors.py), so the three never disagree."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from tarsd.markdown.chunker import Chunk
from tarsd.markdown.line_units import LineUnit
from tarsd.store.connection import Connections
from tarsd.store.fts import Keywords
from tarsd.store.line_units import LineUnits
from tarsd.store.matrix import RESCORE_EXTRA, RESCORE_FACTOR
from tarsd.store.passage_notes import PASSAGES_ADDED, PASSAGES_DROPPED, PassageNotes
from tarsd.store.vectors import Vectors

# A line recall reads longer than this is cut (a megabyte on one line is a paste, not a turn).
MAX_LINE_CHARS = 2_000
# Passages ranked first when related notes are looked for: widened until they hold enough notes.
NOTE_CANDIDATES = 4_096


@dataclass(frozen=True, slots=True)
class ChunkRow:
    id: int
    path: str
    title: str
    memory_type: str
    heading_path: str
    start_line: int
    end_line: int
    text: str


@dataclass(slots=True)
class NoteLines:
    """A note as recall reads it: what it is, when, and the lines of some of its passages."""

    path: str
    title: str
    memory_type: str
    date: float | None  # when the note took place, when it says (files.note_date)
    mtime: float  # when it last changed
    lines: dict[int, str]  # 1-based line -> its text, for the lines of the passages read


class Chunks:
    """The chunks table, and with it the passages' rows in chunks_fts and chunk_vectors, and the
    note's line units (line_units.py)."""

    def __init__(self, db: Connections, keywords: Keywords, vectors: Vectors, lines: LineUnits):
        self.db = db
        self.keywords = keywords
        self.vectors = vectors
        self.lines = lines

    def delete(self, file_id: int) -> None:
        """A note's chunks, their keyword rows and vectors, and its line units, inside the caller's write."""
        conn = self.db.conn
        self.lines.delete(file_id)
        ids = [r[0] for r in conn.execute("SELECT id FROM chunks WHERE file_id = ?", (file_id,))]
        if not ids:
            return
        marks = ",".join("?" * len(ids))
        self.keywords.drop(ids, marks)
        self.vectors.drop(ids, marks)
        conn.execute("DELETE FROM chunks WHERE file_id = ?", (file_id,))
        self.db._change(PASSAGES_DROPPED, ids)

    def insert(
        self,
        file_id: int,
        path: str,
        titles: str,
        chunks: list[Chunk],
        cached: dict[str, bytes],
        has_vectors: bool,
        units: list[LineUnit] = (),
    ) -> int:
        """A note's new chunks with their keyword rows, its line units, and the vectors ``cached``
        holds for them (by content hash), inside the caller's write. Returns the number left pending."""
        waiting = self.lines.insert(file_id, list(units), cached, has_vectors)
        first_id = self._take_chunk_ids(len(chunks))
        vectors = [cached.get(chunk.content_hash) if has_vectors else None for chunk in chunks]
        self.db.conn.executemany(
            """INSERT INTO chunks(id, file_id, seq, content_hash, start_line, end_line, heading_path, text, embed_context, embedded)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            [
                (
                    first_id + i,
                    file_id,
                    c.seq,
                    c.content_hash,
                    c.start_line,
                    c.end_line,
                    c.heading_path,
                    c.text,
                    c.context,
                    int(vectors[i] is not None),
                )
                for i, c in enumerate(chunks)
            ],
        )
        self.keywords.add(first_id, titles, chunks)
        self.db._change(PASSAGES_ADDED, (file_id, path, range(first_id, first_id + len(chunks))))
        found = [(first_id + i, vector) for i, vector in enumerate(vectors) if vector is not None]
        self.vectors.add(found)
        return len(chunks) - len(found) + waiting

    def _take_chunk_ids(self, count: int) -> int:
        """The first of ``count`` new chunk ids, above every id used so far (embedding goes
        newest first, by id). Counted here rather than asked of SQLite for every file."""
        if self.db.next_chunk_id is None:
            self.db.next_chunk_id = self.db.conn.execute("SELECT coalesce(max(id), 0) + 1 FROM chunks").fetchall()[0][0]
        first = self.db.next_chunk_id
        self.db.next_chunk_id += count
        return first

    def chunk_rows(self, ids: list[int]) -> dict[int, ChunkRow]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = (
            self.db.reader()
            .execute(
                f"""SELECT c.id, f.path, f.title, f.memory_type, c.heading_path, c.start_line, c.end_line, c.text
                FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.id IN ({marks})""",
                ids,
            )
            .fetchall()
        )
        return {r[0]: ChunkRow(*r) for r in rows}

    def note_lines(self, wanted: dict[int, set[int]]) -> dict[int, NoteLines]:
        """For each file id, the note and the lines of each of its passages that holds one of the
        wanted lines or the line next to one (so a wanted line's neighbours are there too)."""
        if not wanted:
            return {}
        reader = self.db.reader()
        ids = sorted(wanted)
        marks = ",".join("?" * len(ids))
        sql = f"SELECT id, path, title, memory_type, note_date, mtime_ns FROM files WHERE id IN ({marks})"
        notes = {r[0]: NoteLines(r[1], r[2], r[3], r[4], r[5] / 1e9, {}) for r in reader.execute(sql, ids)}
        for file_id, note in notes.items():
            near = sorted({n for line in wanted[file_id] for n in (line - 1, line, line + 1)})
            pieces: dict[int, list[str]] = {}
            sql = "SELECT start_line, end_line, text FROM chunks WHERE file_id = ? AND end_line >= ? AND start_line <= ? ORDER BY seq"
            for start, end, text in reader.execute(sql, (file_id, near[0], near[-1])):
                lines = text.split("\n")
                if len(lines) != end - start + 1:
                    continue  # not the note's own lines (the title chunk of a note with no body)
                first = bisect.bisect_left(near, start)
                if first < len(near) and near[first] <= end:
                    for i, line in enumerate(lines):
                        seen = pieces.setdefault(start + i, [])
                        if line not in seen:  # an overlap repeats a line; a line too long for one chunk comes in pieces
                            seen.append(line)
            for number, parts in pieces.items():
                line = "".join(parts) if len(parts) > 1 else parts[0]
                note.lines[number] = line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 1] + "…"
        return notes

    def chunk_notes(self, ids: list[int]) -> dict[int, tuple[int, str]]:
        """chunk id -> (file id, path), for collapsing results to one per note."""
        return self._passage_notes().owners(ids)

    def _passage_notes(self) -> PassageNotes:
        notes = self.db.notes
        if not notes.loaded:
            notes.load_with(self._read_passage_notes)
        return notes

    def note_vector(self, file_id: int) -> bytes | None:
        """The unit mean vector of a note's passages that have one (None: none has), from the
        vectors in memory: a note of 10,000 passages costs one product, not 10,000 reads."""
        ids = [row[0] for row in self.db.reader().execute("SELECT id FROM chunks WHERE file_id = ? AND embedded = 1", (file_id,))]
        mean = self.vectors.vector_index().mean(ids)
        return None if mean is None else mean.tobytes()

    def nearest_notes(self, vector: bytes, limit: int, skip_file: int) -> list[tuple[int, float]]:
        """The ``limit`` notes nearest to ``vector`` by their best passage, other than ``skip_file``'s,
        as (that passage's chunk id, its cosine), best first. Every passage is scored and each note
        keeps only its best, so no note's many passages crowd the others out: a top-k of passages
        came back all the note's own for a note of 11,395 passages (issue 37)."""
        query = np.frombuffer(vector, dtype=np.float32)
        index = self.vectors.vector_index()
        ids, scores = index.scores(query)
        files = self._passage_notes().file_ids(ids)
        keep = (files != 0) & (files != skip_file)
        ids, scores, files = ids[keep], scores[keep], files[keep]
        # The best notes by the scan's rounded scores, more than asked for, are scored again exactly
        # (as search does passages). Sorting every score took 120 ms at 400,000 passages; the best
        # few thousand usually hold enough notes, and every note with a passage among them has its
        # best there, while a note with none ranks below them all.
        wanted = limit * RESCORE_FACTOR + RESCORE_EXTRA
        top = NOTE_CANDIDATES
        while True:
            if top >= len(scores):
                order = np.argsort(-scores, kind="stable")
            else:
                order = np.argpartition(-scores, top - 1)[:top]
                order = order[np.argsort(-scores[order], kind="stable")]
            _, first = np.unique(files[order], return_index=True)  # the position of each note's best passage
            if len(first) >= wanted or top >= len(scores):
                break
            top *= 8
        best = order[np.sort(first)[:wanted]]
        exact = index.similarities(query, ids[best].tolist())
        return sorted(exact.items(), key=lambda item: -item[1])[:limit]

    def _read_passage_notes(self) -> tuple[np.ndarray, np.ndarray, Iterable[tuple[int, str]]]:
        # Runs holding the map's lock, through this thread's reader only (as vectors.py's read:
        # the store's lock is held by a writer applying its commit here). The pairs stream
        # into one array, never a list of Python tuples (646,000 of them at 100,000 notes).
        reader = self.db.reader()
        pairs = np.fromiter(itertools.chain.from_iterable(reader.execute("SELECT id, file_id FROM chunks")), dtype=np.int64)
        pairs = pairs.reshape(-1, 2)
        # The paths as a cursor, read one row at a time: a list of 100,000 row tuples, freed
        # once read, left holes among the paths kept, which Python's allocator never handed back.
        return pairs[:, 0], pairs[:, 1], reader.execute("SELECT id, path FROM files")
