"""Forward migrations: a version-1 index (before conversations, links and memory vectors) opens
and keeps its data; a version-6 index (its keyword table holding a copy of every passage) gets
the contentless keyword table, and its notes are found again after the next sync."""

from __future__ import annotations

import hashlib

import apsw

from tarsd.store.database import MIGRATIONS, SCHEMA_VERSION, Store, load_vec_extension


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
        assert store.conn.execute("PRAGMA user_version").fetchall()[0][0] == SCHEMA_VERSION == 12
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
            "proposals",
            "channel_messages",
            "line_units",
            "line_vectors",
        } <= tables
    finally:
        store.close()


def _version_6_index(path, vault, probe):
    """An index as tars wrote it at schema version 6: the vault's note, chunked and embedded as
    this tars would (``probe``: an engine that indexed the same vault with the model), its
    passages with their text twice, keyword rows holding the text, vectors in chunk_vectors and
    in the embedding cache."""
    conn = apsw.Connection(str(path))
    load_vec_extension(conn)
    source = probe.store.conn
    with conn:
        for version in range(1, 7):
            conn.execute(MIGRATIONS[version])
        conn.execute("PRAGMA user_version = 6")
        conn.execute("INSERT INTO collections(id, name, root) VALUES (1, 'vault', '')")
        for key, value in source.execute("SELECT key, value FROM meta WHERE key IN ('vector_fingerprint', 'vector_dims')"):
            conn.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (key, value))
        conn.execute(
            """INSERT INTO files(id, collection_id, path, title, content_hash, mtime_ns, size, indexed_at, chunker)
               SELECT 1, 1, ?, ?, ?, ?, ?, 0, ?""",
            source.execute("SELECT path, title, content_hash, mtime_ns, size, chunker FROM files").fetchall()[0],
        )
        dims = int(probe.embedder.dims)
        conn.execute(f"CREATE VIRTUAL TABLE chunk_vectors USING vec0(embedding float[{dims}])")
        rows = source.execute(
            """SELECT c.id, c.content_hash, c.heading_path, c.text, c.embed_context, v.embedding
               FROM chunks c JOIN chunk_vectors v ON v.rowid = c.id ORDER BY c.id"""
        ).fetchall()
        for seq, (chunk_id, content_hash, heading_path, text, context, vector) in enumerate(rows):
            conn.execute(
                """INSERT INTO chunks(id, file_id, seq, content_hash, start_line, end_line, heading_path, text, embed_text, embedded)
                   VALUES (?, 1, ?, ?, 1, 3, ?, ?, ?, 1)""",
                (chunk_id, seq, content_hash, heading_path, text, f"{context}\n\n{text}" if context else text),
            )
            conn.execute("INSERT INTO chunks_fts(rowid, title, headings, body) VALUES (?, 'sourdough', '', ?)", (chunk_id, text))
            conn.execute("INSERT INTO chunk_vectors(rowid, embedding) VALUES (?, ?)", (chunk_id, vector))
        conn.executemany(
            "INSERT INTO embedding_cache(fingerprint, content_hash, vector) VALUES (?, ?, ?)",
            source.execute("SELECT fingerprint, content_hash, vector FROM embedding_cache").fetchall(),
        )
    conn.close()
    return len(rows)


def test_version_6_passages_are_written_again_once_with_their_vectors_from_the_cache(make_engine, vault, tmp_path):
    (vault / "Sourdough.md").write_text("# Sourdough\n\nThe levain rises overnight in a cool kitchen.\n", encoding="utf-8")
    probe = make_engine("local", index_db_path=tmp_path / "probe.sqlite3")
    assert probe.indexer.sync().vectors_embedded > 0
    db = tmp_path / "index" / "tars.sqlite3"
    db.parent.mkdir()
    passages = _version_6_index(db, vault, probe)

    engine = make_engine("local")
    conn = engine.store.conn
    assert conn.execute("PRAGMA user_version").fetchall()[0][0] == SCHEMA_VERSION
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "chunks_fts_content" not in tables  # the keyword table keeps no text
    assert "embed_text" not in {r[1] for r in conn.execute("PRAGMA table_info(chunks)")}
    assert conn.execute("SELECT count(*) FROM chunks").fetchall()[0][0] == 0  # written again by the sync
    # The migration marks the note for re-chunking, though its stat and chunking are unchanged;
    # its vectors come back from the cache, none is made again.
    report = engine.indexer.sync()
    assert (report.indexed, report.chunks, report.vectors_from_cache, report.vectors_embedded) == (1, passages, passages, 0)
    assert [h.path for h in engine.searcher.search("levain", mode="fts", limit=5).results] == ["Sourdough.md"]
    assert [h.path for h in engine.searcher.search("bread dough proving at night", mode="vec", limit=5).results] == ["Sourdough.md"]
    assert engine.store.pending_count() == 0

    # A changed note's old words leave the contentless table (contentless_delete), and its new
    # passage waits for its vector with the text the chunker made for the embedder.
    # (No heading now: the embedder sees the note's name as a context line before the text.)
    (vault / "Sourdough.md").write_text("A starter fed twice a day.\n", encoding="utf-8")
    engine.indexer.sync(["Sourdough.md"], embed=False)
    assert engine.searcher.search("levain", mode="fts", limit=5).results == []
    assert [h.path for h in engine.searcher.search("starter", mode="fts", limit=5).results] == ["Sourdough.md"]
    assert conn.execute("SELECT count(*) FROM chunks_fts_docsize").fetchall()[0][0] == 1
    [(content_hash, pending_text)] = next(engine.store.pending_batches(8))
    assert pending_text == "Sourdough\n\nA starter fed twice a day."
    # The chunker hashed the text it made for the embedder: the text read back is that text.
    assert hashlib.sha256(pending_text.encode("utf-8")).hexdigest() == content_hash


def test_version_7_pending_rules_become_proposals_with_their_ids_and_ids_are_never_reused(tmp_path):
    """Issue 36, observation 5: an id freed by a rejection was given to the next proposal, so a card
    left open approved another rule. Version 8 keeps the waiting rules under their ids, and new
    proposals take ids after every id ever used."""
    from tarsd.memory.pending_rules import PendingRules

    path = tmp_path / "v7.sqlite3"
    conn = apsw.Connection(str(path))
    with conn:
        for version in range(1, 8):
            if version == 7:
                load_vec_extension(conn)
            conn.execute(MIGRATIONS[version])
        conn.execute("PRAGMA user_version = 7")
        conn.execute(
            "INSERT INTO pending_rules(id, rule, rule_key, conversation, proposed_at) VALUES (4, 'Answer briefly', 'k', 'cli', 1.0)"
        )
    conn.close()
    store = Store(path)
    try:
        pending = PendingRules(store)
        [kept] = pending.list()
        assert (kept.id, kept.rule, kept.conversation, kept.action) == (4, "Answer briefly", "cli", "rule")
        second, _ = pending.propose("Use metric units")
        assert second.id == 5
        pending.claim(second.id, approve=False)  # rejected: its id is never given out again
        third, _ = pending.propose("Prefer British spelling")
        assert third.id == 6
    finally:
        store.close()
