"""The note graph held in the index: links and backlinks resolved the way Obsidian does,
unresolved links, and related notes (the notes nearest in meaning, as Smart Connections
shows them). Reads only: the indexer writes the links table with each note.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from tarsd.markdown.links import Link, Resolver
from tarsd.store.database import Store


@dataclass(frozen=True, slots=True)
class LinkRow:
    source: str  # the linking note
    line: int
    kind: str  # wiki | embed | markdown
    target: str  # as written
    heading: str
    label: str
    resolved: str | None  # the note it leads to, None when no note answers


@dataclass(frozen=True, slots=True)
class Neighbour:
    path: str
    title: str
    similarity: float
    linked: bool  # already linked, either way


class NoteGraph:
    def __init__(self, store: Store):
        self.store = store
        # One resolver for every thread, made again once a commit has changed the index. Made per
        # thread, each of the daemon's worker threads held its own: 31 MB each at 100,000 notes.
        self._lock = threading.Lock()
        self._names: tuple[int, Resolver, dict[str, list[str]]] | None = None
        self._unresolved: tuple[int, list[LinkRow]] | None = None

    def _current(self) -> tuple[int, Resolver, dict[str, list[str]]]:
        """(the store's generation, the resolver, each note's aliases), for the index as it is."""
        with self._lock:
            # Read before the tables: a commit landing meanwhile only makes the next call read again.
            generation = self.store.generation
            if self._names is not None and self._names[0] == generation:
                return self._names
            reader = self.store.reader()
            paths = [row[0] for row in reader.execute("SELECT path FROM files WHERE skipped = 0")]
            aliases: dict[str, list[str]] = {}
            for path, alias in reader.execute("SELECT f.path, a.alias FROM note_aliases a JOIN files f ON f.id = a.file_id"):
                aliases.setdefault(path, []).append(alias)
            self._names = (generation, Resolver(paths, aliases), aliases)
            return self._names

    def resolver(self) -> Resolver:
        """Every note and its names (front-matter title and aliases), rebuilt only after the index changed."""
        return self._current()[1]

    def find_note(self, name: str) -> str | None:
        """A note named by its vault path, its file name, or its front-matter title or an alias (as a
        wikilink from the root would: a file name wins over another note's title or alias)."""
        return self.resolver().resolve(Link(0, "wiki", name.strip().removeprefix("./")), "")

    def titled(self, name: str, paths: list[str]) -> str | None:
        """The one note among ``paths`` whose shown title (front-matter title, else its first "# "
        heading) is ``name``, case aside; None when no note or several are. A session note titled
        "# Raspberry Pi backups" is called that in every hit, though no link can name it so."""
        if not paths:
            return None
        marks = ",".join("?" * len(paths))
        wanted = name.strip().casefold()  # in Python: SQLite's lower() folds ASCII only
        rows = self.store.reader().execute(f"SELECT path, title FROM files WHERE skipped = 0 AND path IN ({marks})", paths)
        found = [path for path, title in rows if title.strip().casefold() == wanted]
        return found[0] if len(found) == 1 else None

    def links_from(self, path: str) -> list[LinkRow]:
        resolver = self.resolver()
        rows = self.store.reader().execute(
            """SELECT l.line, l.kind, l.target, l.heading, l.label, l.exact FROM links l JOIN files f ON f.id = l.file_id
               WHERE f.path = ? ORDER BY l.line""",
            (path,),
        )
        return [self._row(path, row, resolver) for row in rows]

    def links_to(self, path: str) -> list[LinkRow]:
        """Backlinks: every link, in any note, that resolves to ``path``."""
        _, resolver, names = self._current()
        aliases = names.get(path, [])
        keys = sorted(resolver.keys_for(path, aliases))
        marks = ",".join("?" * len(keys))
        rows = self.store.reader().execute(
            f"""SELECT f.path, l.line, l.kind, l.target, l.heading, l.label, l.exact FROM links l JOIN files f ON f.id = l.file_id
                WHERE l.target_key IN ({marks}) OR l.label_key IN ({marks}) OR (l.target = '' AND f.path = ?)
                ORDER BY f.path, l.line""",
            (*keys, *keys, path),
        )
        found = [self._row(row[0], row[1:], resolver) for row in rows]
        return [row for row in found if row.resolved == path and not (row.source == path and not row.target)]

    def unresolved(self) -> list[LinkRow]:
        """Links that lead to no note (yet): notes to write, or typos. Worked out again only after
        the index changed: status asks often."""
        generation, resolver, _ = self._current()
        cached = self._unresolved
        if cached is not None and cached[0] == generation:
            return cached[1]
        rows = self.store.reader().execute(
            """SELECT f.path, l.line, l.kind, l.target, l.heading, l.label, l.exact FROM links l JOIN files f ON f.id = l.file_id
               ORDER BY f.path, l.line"""
        )
        found = [link for link in (self._row(row[0], row[1:], resolver) for row in rows) if link.resolved is None]
        self._unresolved = (generation, found)
        return found

    def link_count(self) -> int:
        return self.store.reader().execute("SELECT count(*) FROM links").fetchall()[0][0]

    def linked_pairs(self, paths: list[str]) -> set[tuple[str, str]]:
        """(source, target) links among ``paths``: for ranking notes that the other hits point to."""
        if len(paths) < 2:
            return set()
        resolver = self.resolver()
        wanted = set(paths)
        marks = ",".join("?" * len(paths))
        rows = self.store.reader().execute(
            f"""SELECT f.path, l.line, l.kind, l.target, l.heading, l.label, l.exact FROM links l JOIN files f ON f.id = l.file_id
                WHERE f.path IN ({marks})""",
            paths,
        )
        pairs = set()
        for row in rows:
            link = self._row(row[0], row[1:], resolver)
            if link.resolved in wanted and link.resolved != link.source:
                pairs.add((link.source, link.resolved))
        return pairs

    def related(self, path: str, limit: int = 10) -> list[Neighbour]:
        """The notes nearest in meaning to ``path``, best first: each other note by its passage
        nearest the note's mean vector, the note's own passages left out. A note of 10 passages
        and one of 10,000 saying the same get the same answer."""
        found = self.store.reader().execute("SELECT id FROM files WHERE path = ? AND skipped = 0", (path,)).fetchall()
        if not found or not self.store.has_vector_table():
            return []
        centre = self.store.note_vector(found[0][0])
        if centre is None:
            return []
        hits = self.store.nearest_notes(centre, limit, skip_file=found[0][0])
        owners = self.store.chunk_rows([chunk for chunk, _ in hits])
        linked = {link.resolved for link in self.links_from(path)} | {link.source for link in self.links_to(path)}
        neighbours = []
        for chunk, similarity in hits:
            row = owners.get(chunk)
            if row is not None and row.path != path:  # None: the passage went meanwhile
                neighbours.append(Neighbour(row.path, row.title, round(max(0.0, similarity), 4), row.path in linked))
        return neighbours

    def why_none_related(self, path: str) -> str:
        """Why ``related`` lists nothing for ``path``, in words for the user."""
        reader = self.store.reader()
        found = reader.execute("SELECT id, skipped FROM files WHERE path = ?", (path,)).fetchall()
        if not found:
            return "it is not in the index"
        file_id, skipped = found[0]
        if skipped:
            return "it is not indexed (`tarsctl status --files` says why)"
        counted = reader.execute("SELECT count(*), coalesce(sum(embedded), 0) FROM chunks WHERE file_id = ?", (file_id,))
        passages, with_vectors = counted.fetchall()[0]
        if not passages:
            return "it has no text to compare"
        if not with_vectors:
            have = f"its {passages:,} passages have" if passages != 1 else "its 1 passage has"
            return f"{have} no vector yet, and related notes are found by vectors (see `tarsctl status` for the embedder)"
        others, waiting = reader.execute(
            "SELECT coalesce(sum(embedded), 0), count(*) - coalesce(sum(embedded), 0) FROM chunks WHERE file_id != ?", (file_id,)
        ).fetchall()[0]
        if not others and waiting:
            return f"no other note has a passage with a vector yet ({waiting:,} waiting: see `tarsctl status`)"
        if not others:
            return "no other note has a passage with a vector to compare with"
        return "no other note came near it"  # not expected: every note with a vector is ranked

    @staticmethod
    def _row(source: str, row: tuple, resolver: Resolver) -> LinkRow:
        line, kind, target, heading, label, exact = row
        link = Link(line, kind, target, heading, label, bool(exact))
        return LinkRow(source, line, kind, target, heading, label, resolver.resolve(link, source))
