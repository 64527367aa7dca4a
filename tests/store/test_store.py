"""The database itself: schema version, WAL, the vec extension, and newer-schema refusal."""

from __future__ import annotations

import threading

import apsw
import numpy as np
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


def test_the_first_vector_search_never_waits_for_the_writers_lock(tmp_path):
    """A writer applies its commit to the in-memory vectors while holding the store's lock; the
    first search loads those vectors holding theirs. The load must not need the store's lock, or
    the first search after the first vectors are written deadlocks (seen as a vec search that
    timed out for a minute)."""
    store = Store(tmp_path / "db.sqlite3")
    try:
        store.use_vector_space("local:test", 4)  # the table exists, no vector yet: the load reads the dims
        found: list[object] = []

        def first_search() -> None:
            found.append(store.vec_search(np.ones(4, np.float32).tobytes(), 5))
            found.append(store.chunk_notes([1, 2]))  # the passages' notes load the same way (passage_notes.py)

        searcher = threading.Thread(target=first_search, daemon=True)
        with store.lock:  # a writer mid-commit
            searcher.start()
            searcher.join(10)
            assert not searcher.is_alive(), "the first vector search waited for the writer's lock"
        assert found == [[], {}] and store.vector_index().dims == 4
    finally:
        store.close()


def test_the_vectors_load_into_arrays_made_once_and_grow_for_rows_committed_meanwhile():
    """The first load fills a matrix sized by a count taken just before; rows committed after the
    count still land, a row of another vector space never does, and later puts and drops apply."""
    from tarsd.store.matrix import LoadedVectors, VectorIndex

    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((2500, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    loaded = LoadedVectors(8, capacity=2000)  # 500 more rows arrive than were counted
    for chunk, vector in enumerate(vectors, start=1):
        loaded.append(chunk, vector.tobytes())
    loaded.append(9999, np.ones(4, np.float32).tobytes())  # another space's width
    index = VectorIndex()
    index.load_with(lambda: loaded)
    index.load_with(lambda: pytest.fail("the vectors were read again"))  # loaded once: a second search waits, then finds them
    assert len(index) == 2500 and 9999 not in dict(index.search(np.ones(8, np.float32) / 8**0.5, 2500))
    for probe in (0, 1999, 2000, 2499):
        [(chunk, cosine)] = index.search(vectors[probe], 1)
        assert chunk == probe + 1 and cosine == pytest.approx(1.0, abs=2e-3)  # rows are rounded to 8 bits
    index.apply([("put", [(3000, vectors[0].tobytes())]), ("drop", [1])])
    assert index.search(vectors[0], 1)[0][0] == 3000  # the new row, past the grown capacity
    assert 1 not in dict(index.search(vectors[0], 2600)) and len(index) == 2500


def _unit_rows(rng, rows: int, dims: int) -> np.ndarray:
    vectors = rng.standard_normal((rows, dims)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.mark.parametrize("rows", [1, 7, 30_000])
def test_the_8_bit_rows_score_within_a_thousandth_of_the_float_product(rows):
    """The rounded rows give each row's cosine to about 0.001 of float32's, in the scan (query
    rounded too) and in the re-score (query as it is), for the model's 384 dimensions."""
    from tarsd.store.quantized import Scan, exact_scores, quantize_rows

    rng = np.random.default_rng(rows)
    vectors, query = _unit_rows(rng, rows, 384), _unit_rows(rng, 1, 384)[0]
    codes, scales = quantize_rows(vectors)
    assert codes.dtype == np.uint8 and codes.shape == vectors.shape
    truth = vectors @ query
    scanned = Scan(2)(codes, scales, query)
    assert scanned.shape == (rows,) and np.abs(scanned - truth).max() < 0.004
    assert np.abs(exact_scores(codes, scales, query) - truth).max() < 0.002


def test_the_scan_model_kept_as_bytes_is_the_graph_built_with_onnx():
    """tarsd runs SCAN_MODEL without importing onnx; it must be what build_scan_model makes."""
    import onnx

    from tarsd.store.quantized import SCAN_MODEL, build_scan_model

    assert onnx.load_from_string(SCAN_MODEL) == onnx.load_from_string(build_scan_model())
    onnx.checker.check_model(onnx.load_from_string(SCAN_MODEL))


def test_the_scan_never_overflows_at_the_extremes():
    """Rows at the ends of the uint8 range against a query at the ends of its own: x86 CPUs
    without VNNI add uint8 × int8 pairs in 16 bits, so the query is rounded to ±63. (A CPU with
    VNNI, as this project's box has, adds in 32 bits: there the bound below is what guards.)"""
    from tarsd.store.quantized import QUERY_LEVELS, Scan, quantize_rows

    assert 2 * 255 * QUERY_LEVELS <= 2**15 - 1  # a pair of products fits a signed 16-bit sum

    dims = 384
    vectors = np.ones((4, dims), np.float32)
    vectors[1], vectors[2, ::2], vectors[3] = -1.0, -1.0, 0.0
    vectors[:3] /= np.sqrt(dims)
    query = np.ones(dims, np.float32) / np.sqrt(dims)
    codes, scales = quantize_rows(vectors)
    np.testing.assert_allclose(Scan(1)(codes, scales, query), [1.0, -1.0, 0.0, 0.0], atol=1e-3)


def test_the_vector_search_ranks_as_the_float_product_does():
    """The scan picks candidates with the query rounded, the re-score orders them: the top 10 of
    200 random queries over 20,000 rows are float32's top 10, and in its order, wherever float32's
    scores differ by more than 0.004 (twice the rounding), and every score is within 0.002 of its
    float value."""
    from tarsd.store.matrix import LoadedVectors, VectorIndex

    rng = np.random.default_rng(11)
    vectors = _unit_rows(rng, 20_000, 384)
    loaded = LoadedVectors(384, capacity=len(vectors))
    for chunk, vector in enumerate(vectors):
        loaded.append(chunk, vector.tobytes())
    index = VectorIndex()
    index.load_with(lambda: loaded)
    # Queries near a row, as a search's are near its answers: the top scores spread out.
    queries = _unit_rows(rng, 200, 384) * 0.5 + vectors[rng.integers(0, len(vectors), 200)]
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    for query in queries:
        truth = vectors @ query
        got = index.search(query, 10)
        assert [chunk for chunk, _ in got] == sorted([chunk for chunk, _ in got], key=lambda c: -truth[c]) or _close(truth, got)
        assert np.abs(np.array([cosine for _, cosine in got]) - truth[[chunk for chunk, _ in got]]).max() < 0.002
        tenth = np.sort(truth)[-10]
        assert all(truth[chunk] >= tenth - 0.004 for chunk, _ in got)  # nothing from far below the true top 10
        assert set(np.flatnonzero(truth > tenth + 0.004)) <= {chunk for chunk, _ in got}  # nothing clearly above it missed


def _close(truth: np.ndarray, got: list[tuple[int, float]]) -> bool:
    """Neighbours in ``got`` out of float32's order only where their float scores are within the rounding."""
    return all(truth[a] >= truth[b] - 0.004 for (a, _), (b, _) in zip(got, got[1:], strict=False))


def _note(path: str, passages: int, seed: str):
    from tarsd.markdown.chunker import Chunk
    from tarsd.store.files import FileMeta

    meta = FileMeta(path, path, "note", seed, 1, 1, "test", [], [], False)
    chunks = [Chunk(i, i + 1, i + 1, "", f"{seed} passage {i}", "", f"{seed}-{i}", 3) for i in range(passages)]
    return meta, chunks


def _owners_in_sqlite(store: Store) -> dict[int, tuple[int, str]]:
    rows = store.conn.execute("SELECT c.id, c.file_id, f.path FROM chunks c JOIN files f ON f.id = c.file_id").fetchall()
    return {chunk: (file_id, path) for chunk, file_id, path in rows}


def test_the_passage_notes_in_memory_follow_every_commit_and_no_rollback(tmp_path):
    """Search turns passages into their notes from memory, not SQLite: after writes, rewrites,
    deletes, a rename (a new file row) and a batch that rolled back, it answers for every
    passage id ever used exactly what SQLite holds, and nothing for a passage that is gone."""
    store = Store(tmp_path / "db.sqlite3")
    try:
        for i in range(5):
            store.replace_file(*_note(f"n{i}.md", 3, f"first{i}"), {})
        ever_used = set(_owners_in_sqlite(store))
        assert store.chunk_notes(sorted(ever_used)) == _owners_in_sqlite(store)  # loaded here, from SQLite
        store.notes.load_with(lambda: pytest.fail("the passages' notes were read again"))

        store.replace_file(*_note("n1.md", 5, "rewritten"), {})  # new passages, same file row
        store.delete_file("n2.md")
        store.delete_file("n4.md")  # the highest file id: SQLite may give it to the next new file
        store.replace_file(*_note("renamed.md", 2, "moved"), {})
        with pytest.raises(RuntimeError), store.batch() as batch:
            batch.tick()
            store.replace_file(*_note("n0.md", 4, "lost"), {})
            store.delete_file("n3.md")
            raise RuntimeError("the sync failed")
        ever_used |= set(_owners_in_sqlite(store)) | {max(ever_used) + 50}
        truth = _owners_in_sqlite(store)
        assert store.chunk_notes(sorted(ever_used)) == truth
        assert {path for _, path in truth.values()} == {"n0.md", "n1.md", "n3.md", "renamed.md"}
    finally:
        store.close()
