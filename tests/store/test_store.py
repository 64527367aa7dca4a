"""The database itself: schema version, WAL, the vec extension, and newer-schema refusal."""

from __future__ import annotations

import apsw
import pytest

from tarsd.store.database import SCHEMA_VERSION, Store, StoreError


def test_schema_wal_and_extensions(tmp_path):
    store = Store(tmp_path / "db.sqlite3")
    try:
        conn = store.conn
        assert conn.execute("PRAGMA user_version").fetchall()[0][0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchall()[0][0] == "wal"
        assert store.vec_version.startswith("v")
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert {"collections", "files", "chunks", "chunks_fts", "embedding_cache", "meta"} <= tables
    finally:
        store.close()


def test_reopening_keeps_data_and_does_not_migrate_twice(tmp_path):
    Store(tmp_path / "db.sqlite3").close()
    store = Store(tmp_path / "db.sqlite3")
    store.set_meta("k", "v")
    store.close()
    again = Store(tmp_path / "db.sqlite3")
    assert again.get_meta("k") == "v"
    again.close()


def test_a_newer_schema_is_refused_with_advice(tmp_path):
    path = tmp_path / "db.sqlite3"
    conn = apsw.Connection(str(path))
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer than this tars.*delete the file"):
        Store(path)


def test_unwritable_location_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError, match="cannot create .* for the index.*db_path"):
        Store(blocker / "db.sqlite3")
