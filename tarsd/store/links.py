"""The note graph: each note's links (what link resolution and backlinks read, see
tarsd/search/graph.py), its tags (what tag filters read) and its names. Rows are written
with the note's file row and deleted with it (ON DELETE CASCADE).

note_aliases holds a note's names besides its file name: its front-matter aliases and its
front-matter title (Dendron names notes by title; Obsidian treats neither as more than the other)."""

from __future__ import annotations

from tarsd.markdown.links import Link
from tarsd.store.connection import Connections


class NoteGraph:
    """links, note_tags and note_aliases, written inside the caller's write."""

    def __init__(self, db: Connections):
        self.db = db

    def delete(self, file_id: int) -> None:
        for table in ("links", "note_tags", "note_aliases"):
            self.db.conn.execute(f"DELETE FROM {table} WHERE file_id = ?", (file_id,))

    def insert(self, file_id: int, links: list[Link], tags: list[str], names: list[str]) -> None:
        """A note's links, tags and names: what link resolution, backlinks and tag filters use."""
        if not links and not tags and not names:
            return
        conn = self.db.conn
        conn.executemany(
            """INSERT INTO links(file_id, line, kind, target, target_key, label_key, heading, label, exact)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            [(file_id, k.line, k.kind, k.target, k.key, k.label_key, k.heading, k.label, int(k.exact)) for k in links],
        )
        conn.executemany("INSERT OR IGNORE INTO note_tags(file_id, tag) VALUES (?, ?)", [(file_id, tag.lower()) for tag in tags if tag])
        conn.executemany("INSERT OR IGNORE INTO note_aliases(file_id, alias) VALUES (?, ?)", [(file_id, a) for a in names if a.strip()])
