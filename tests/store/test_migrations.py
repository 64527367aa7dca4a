"""Forward migrations: a version-1 index (before conversations, links and memory vectors) opens and keeps its data."""

from __future__ import annotations

import apsw

from tarsd.store.database import MIGRATIONS, SCHEMA_VERSION, Store


def test_version_1_database_is_migrated_forward(tmp_path):
    path = tmp_path / "old.sqlite3"
    conn = apsw.Connection(str(path))
    with conn:
        conn.execute(MIGRATIONS[1])
        conn.execute("PRAGMA user_version = 1")
        conn.execute("INSERT INTO meta(key, value) VALUES ('kept', 'yes')")
    conn.close()

    store = Store(path)
    try:
        assert store.conn.execute("PRAGMA user_version").fetchall()[0][0] == SCHEMA_VERSION == 6
        assert store.get_meta("kept") == "yes"
        tables = {r[0] for r in store.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {
            "conversations",
            "messages",
            "links",
            "note_tags",
            "note_aliases",
            "chunks_vocab",
            "memory_line_vectors",
            "pending_rules",
            "channel_messages",
        } <= tables
    finally:
        store.close()
