"""Forward migrations: a version-1 index (before conversations, links and memory vectors) opens
and keeps its data; a version-6 index (its keyword table holding a copy of every passage) gets
the contentless keyword table, and its notes are found again after the next sync."""

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
        assert store.conn.execute("PRAGMA user_version").fetchall()[0][0] == SCHEMA_VERSION == 7
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


def _version_6_index(path, vault, chunker):
    """An index as tars wrote it at schema version 6: one note, its passage and keyword row,
    chunked as this tars would chunk it (so only the migration can make the sync re-chunk it)."""
    conn = apsw.Connection(str(path))
    with conn:
        for version in range(1, 7):
            conn.execute(MIGRATIONS[version])
        conn.execute("PRAGMA user_version = 6")
        conn.execute("INSERT INTO collections(id, name, root) VALUES (1, 'vault', '')")
        info = (vault / "Sourdough.md").stat()
        conn.execute(
            """INSERT INTO files(id, collection_id, path, title, content_hash, mtime_ns, size, indexed_at, chunker)
               VALUES (1, 1, 'Sourdough.md', 'Sourdough', 'old', ?, ?, 0, ?)""",
            (info.st_mtime_ns, info.st_size, chunker),
        )
        conn.execute(
            """INSERT INTO chunks(id, file_id, seq, content_hash, start_line, end_line, heading_path, text, embed_text)
               VALUES (1, 1, 0, 'h', 1, 2, '', 'levain rises overnight', 'levain rises overnight')"""
        )
        conn.execute("INSERT INTO chunks_fts(rowid, title, headings, body) VALUES (1, 'sourdough', '', 'levain rises overnight')")
    conn.close()


def test_version_6_keyword_table_becomes_contentless_and_notes_are_found_after_the_sync(make_engine, vault, tmp_path):
    (vault / "Sourdough.md").write_text("# Sourdough\n\nThe levain rises overnight in a cool kitchen.\n", encoding="utf-8")
    db = tmp_path / "index" / "tars.sqlite3"
    chunker = make_engine("none", index_db_path=tmp_path / "probe.sqlite3").indexer.chunking_fingerprint()
    db.parent.mkdir()
    _version_6_index(db, vault, chunker)

    engine = make_engine("none")
    conn = engine.store.conn
    assert conn.execute("PRAGMA user_version").fetchall()[0][0] == 7
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "chunks_fts_content" not in tables  # no copy of the passages' text any more
    # The migration marks every note for re-chunking, though its stat is unchanged.
    report = engine.indexer.sync()
    assert report.indexed == 1
    hits = engine.searcher.search("levain", mode="fts", limit=5).results
    assert [h.path for h in hits] == ["Sourdough.md"]

    # A changed note's old words leave the contentless table (contentless_delete).
    (vault / "Sourdough.md").write_text("# Sourdough\n\nA starter fed twice a day.\n", encoding="utf-8")
    engine.indexer.sync(["Sourdough.md"])
    assert engine.searcher.search("levain", mode="fts", limit=5).results == []
    assert [h.path for h in engine.searcher.search("starter", mode="fts", limit=5).results] == ["Sourdough.md"]
    assert conn.execute("SELECT count(*) FROM chunks_fts_docsize").fetchall()[0][0] == 1
