"""Incremental sync against a real temp vault, real SQLite + sqlite-vec and the real model."""

from __future__ import annotations

import os
import shutil

import pytest

from harness.vault_files import write
from tarsd.search.searcher import SearchError

GARDEN = """
    # Garden

    Tomatoes want six hours of direct sun and deep watering twice a week.
"""


def consistent(engine) -> dict[str, int]:
    counts = engine.store.counts()
    assert counts["chunks"] == counts["fts_rows"], counts
    assert counts["vectors"] + counts["pending_vectors"] == counts["chunks"], counts
    return counts


def paths(engine, query, mode="fts", **options):
    return [r.path for r in engine.searcher.search(query, mode=mode, **options).results]


def test_add_edit_delete(make_engine, vault):
    engine = make_engine()
    write(vault, "garden.md", GARDEN)
    write(vault, "cooking/pasta.md", "# Pasta\n\nBoil the water, salt it, then add the spaghetti.\n")
    report = engine.indexer.sync()
    assert (report.indexed, report.deleted, report.pending_vectors) == (2, 0, 0)
    assert consistent(engine)["files"] == 2
    assert paths(engine, "spaghetti") == ["cooking/pasta.md"]
    assert paths(engine, "how much sun do tomato plants need", mode="vec")[0] == "garden.md"

    write(vault, "cooking/pasta.md", "# Pasta\n\nRisotto needs arborio rice and patience.\n")
    report = engine.indexer.sync()
    assert (report.indexed, report.unchanged) == (1, 1)
    assert paths(engine, "spaghetti") == []
    assert paths(engine, "arborio") == ["cooking/pasta.md"]

    (vault / "garden.md").unlink()
    report = engine.indexer.sync()
    assert report.deleted == 1
    assert paths(engine, "tomatoes") == []
    assert consistent(engine) | {} and engine.store.counts()["files"] == 1


def test_unchanged_files_are_not_read_and_a_touch_is_not_rechunked(make_engine, vault):
    engine = make_engine(kind="none")
    note = write(vault, "garden.md", GARDEN)
    engine.indexer.sync()
    assert engine.indexer.sync().unchanged == 1
    stat = note.stat()
    os.utime(note, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    report = engine.indexer.sync()
    assert (report.touched, report.indexed) == (1, 0)
    assert engine.indexer.sync().unchanged == 1


def test_only_changed_chunks_are_embedded(make_engine, vault):
    engine = make_engine()
    sections = [f"## Part {i}\n\n" + " ".join(f"topic{i} detail{j}" for j in range(60)) for i in range(4)]
    write(vault, "long.md", "# Long\n\n" + "\n\n".join(sections) + "\n")
    first = engine.indexer.sync()
    assert first.chunks >= 4 and first.vectors_embedded == first.chunks
    sections[2] = "## Part 2\n\nThis part was rewritten entirely."
    write(vault, "long.md", "# Long\n\n" + "\n\n".join(sections) + "\n")
    second = engine.indexer.sync()
    assert second.indexed == 1
    assert 1 <= second.vectors_embedded < second.chunks
    assert second.vectors_from_cache == second.chunks - second.vectors_embedded
    consistent(engine)


def test_rename_and_copy_reuse_embeddings(make_engine, vault):
    engine = make_engine()
    write(vault, "garden.md", GARDEN)
    engine.indexer.sync()
    os.rename(vault / "garden.md", vault / "plants.md")
    report = engine.indexer.sync()
    assert (report.indexed, report.deleted, report.vectors_embedded) == (1, 1, 0)
    assert report.vectors_from_cache == report.chunks > 0
    shutil.copy(vault / "plants.md", vault / "copy.md")
    report = engine.indexer.sync()
    assert (report.indexed, report.vectors_embedded) == (1, 0)
    assert sorted(paths(engine, "tomatoes")) == ["copy.md", "plants.md"]
    consistent(engine)


def test_embedder_change_reembeds_and_never_mixes_vector_spaces(make_engine, vault, fake_ollama):
    write(vault, "garden.md", GARDEN)
    write(vault, "pasta.md", "# Pasta\n\nBoil the water, salt it, then add the spaghetti.\n")
    local = make_engine()
    local.indexer.sync()
    local_space = local.store.get_meta("vector_fingerprint")
    local.close()

    remote = make_engine(kind="ollama", embedder_ollama_host=fake_ollama.url, embedder_model="fake-embed")
    report = remote.indexer.sync()
    assert remote.store.get_meta("vector_fingerprint").startswith("ollama:fake-embed:d64")
    assert report.vectors_embedded == report.chunks == 2  # new chunking (other tokenizer), all embedded
    assert fake_ollama.embed_calls() >= 2
    assert paths(remote, "spaghetti water", mode="vec")[0] == "pasta.md"
    consistent(remote)
    remote.close()

    back = make_engine()
    report = back.indexer.sync()
    assert back.store.get_meta("vector_fingerprint") == local_space
    assert report.vectors_embedded == 0  # every vector came back from the cache
    assert paths(back, "how much sun do tomato plants need", mode="vec")[0] == "garden.md"
    consistent(back)


def test_ignored_files_are_not_indexed(make_engine, vault):
    engine = make_engine(kind="none")
    for rel in [
        ".obsidian/workspace.md",
        ".trash/old.md",
        ".git/notes.md",
        ".stversions/a.md",
        "sub/.hidden/b.md",
        ".syncthing.note.md.tmp",
        "~syncthing~note.md.tmp",
        ".note.md.icloud",
        "picture.png",
        "notes.txt",
    ]:
        write(vault, rel, "secret tomatoes")
    write(vault, "real.md", "tomatoes")
    engine.indexer.sync()
    assert paths(engine, "tomatoes") == ["real.md"]


def test_sync_conflict_copies_are_indexed_and_flagged(make_engine, vault):
    engine = make_engine(kind="none")
    write(vault, "note.md", "tomatoes")
    write(vault, "note.sync-conflict-20240101-120000-ABCDEFG.md", "tomatoes and basil")
    write(vault, "note (conflicted copy 2024-01-01).md", "tomatoes and mint")
    engine.indexer.sync()
    assert engine.store.counts()["conflicts"] == 2
    assert len(paths(engine, "tomatoes")) == 3


def test_bad_files_are_recorded_and_never_stop_a_sync(make_engine, vault):
    engine = make_engine(kind="none", vault_max_file_mb=0.01)
    (vault / "binary.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR tomatoes")
    (vault / "latin1.md").write_bytes("Caf\xe9 tomatoes".encode("latin-1"))
    (vault / "huge.md").write_text("tomatoes " * 5000, encoding="utf-8")
    os.mkfifo(vault / "pipe.md")  # reading it would block forever: not a regular file
    os.symlink(vault / "nowhere.md", vault / "dangling.md")
    write(vault, "good.md", "tomatoes")

    report = engine.indexer.sync()
    assert "binary" in report.problems["binary.md"]
    assert "too large" in report.problems["huge.md"] and "max_file_mb" in report.problems["huge.md"]
    assert "invalid UTF-8" in report.problems["latin1.md"]
    assert sorted(paths(engine, "tomatoes")) == ["good.md", "latin1.md"]
    hit = engine.searcher.search("tomatoes", mode="fts").results
    assert any("\ufffd" in r.text for r in hit if r.path == "latin1.md")
    problems = {path: (skipped, problem) for path, skipped, problem in engine.store.problems()}
    assert problems["binary.md"][0] and problems["huge.md"][0] and not problems["latin1.md"][0]

    # A skipped file is retried once it changes.
    write(vault, "huge.md", "tomatoes, trimmed")
    engine.indexer.sync()
    assert "huge.md" in paths(engine, "tomatoes")


def test_a_file_that_vanishes_is_dropped(make_engine, vault):
    engine = make_engine(kind="none")
    write(vault, "a.md", "tomatoes")
    engine.indexer.sync()
    (vault / "a.md").unlink()
    assert engine.indexer.sync(paths=["a.md"]).deleted == 1
    assert engine.store.counts()["files"] == 0


def test_memory_type_comes_from_the_path(make_engine, vault):
    engine = make_engine(kind="none", vault_episodic=["journal/"])
    for rel in ["Memory.md", "Procedural.md", "procedural/git.md", "journal/2024-01-01.md", "sessions/x.md", "ideas.md"]:
        write(vault, rel, "tomatoes")
    engine.indexer.sync()
    kinds = {r.path: r.memory_type for r in engine.searcher.search("tomatoes", mode="fts", limit=20).results}
    assert kinds == {
        "Memory.md": "semantic",
        "Procedural.md": "procedural",
        "procedural/git.md": "procedural",
        "journal/2024-01-01.md": "episodic",
        "sessions/x.md": "note",
        "ideas.md": "note",
    }


def test_missing_model_degrades_to_keywords_and_recovers(make_engine, vault, model_dir, tmp_path):
    empty = tmp_path / "model"
    empty.mkdir()
    engine = make_engine(embedder_model_dir=empty)
    write(vault, "garden.md", GARDEN)
    report = engine.indexer.sync()
    assert str(empty) in report.embedder_error and "TARS_MODEL_DIR" in report.embedder_error
    assert report.pending_vectors == 1
    assert paths(engine, "tomatoes") == ["garden.md"]
    hybrid = engine.searcher.search("tomatoes")
    assert hybrid.mode == "fts" and "vector search unavailable" in hybrid.warnings[0]
    assert [r.path for r in hybrid.results] == ["garden.md"]
    with pytest.raises(SearchError, match="vector search is unavailable"):
        engine.searcher.search("tomatoes", mode="vec")

    for item in model_dir.iterdir():
        os.symlink(item, empty / item.name)
    engine.embedder.retry_now()  # what `tarsctl index` does, as the error says: no waiting out the back-off
    report = engine.indexer.sync()
    assert report.embedder_error is None and report.pending_vectors == 0
    assert report.indexed == 1  # re-chunked with the model's own tokenizer
    assert paths(engine, "how much sun do tomato plants need", mode="vec") == ["garden.md"]
    consistent(engine)


def test_unreachable_ollama_says_how_to_fix_it(make_engine, vault, fake_ollama):
    write(vault, "garden.md", GARDEN)
    down = make_engine(kind="ollama", embedder_ollama_host="http://127.0.0.1:9", embedder_model="fake-embed")
    report = down.indexer.sync()
    assert "cannot reach Ollama" in report.embedder_error and "ollama serve" in report.embedder_error
    assert paths(down, "tomatoes") == ["garden.md"]
    down.close()
    missing = make_engine(kind="ollama", embedder_ollama_host=fake_ollama.url, embedder_model="not-pulled")
    assert "ollama pull not-pulled" in missing.indexer.sync().embedder_error


def test_the_index_is_a_cache(make_engine, vault, tmp_path):
    engine = make_engine(kind="none")
    write(vault, "garden.md", GARDEN)
    engine.indexer.sync()
    engine.close()
    for file in (tmp_path / "index").iterdir():
        file.unlink()
    rebuilt = make_engine(kind="none")
    assert rebuilt.indexer.sync().indexed == 1
    assert paths(rebuilt, "tomatoes") == ["garden.md"]


def test_full_sync_rechunks_everything(make_engine, vault):
    engine = make_engine()
    write(vault, "garden.md", GARDEN)
    engine.indexer.sync()
    report = engine.indexer.sync(full=True)
    assert (report.indexed, report.vectors_embedded, report.vectors_from_cache) == (1, 0, 1)


def test_a_database_inside_the_vault_is_refused(make_engine, vault):
    with pytest.raises(ValueError, match="must not live inside the vault"):
        make_engine(kind="none", index_db_path=vault / "tars.sqlite3")


def test_paths_outside_the_vault_are_refused(make_engine, vault, tmp_path):
    engine = make_engine(kind="none")
    outside = tmp_path / "outside.md"
    outside.write_text("secret tomatoes")
    for path in (str(outside), "../outside.md"):
        with pytest.raises(ValueError, match="not inside the vault"):
            engine.indexer.sync(paths=[path])
    write(vault, "sub/a.md", "tomatoes")
    assert engine.indexer.sync(paths=[str(vault / "sub" / "a.md"), "sub/../sub/a.md"]).indexed == 1


class SavesDuringTheSync:
    """Hands the indexer a few "just saved" paths on its first check between files, as the
    daemon's queue does when notes are saved in the middle of a long sync."""

    def __init__(self, paths: list[str]):
        self.paths, self.finished_paths = paths, []

    def waiting(self) -> bool:
        return bool(self.paths)

    def take(self) -> list[str]:
        taken, self.paths = self.paths, []
        return taken

    def finished(self, paths: list[str]) -> None:
        self.finished_paths.extend(paths)


def test_saves_committed_in_the_middle_of_a_long_sync_are_not_indexed_twice(make_engine, vault):
    engine = make_engine(kind="none")
    for i in range(40):
        write(vault, f"n{i:02}.md", f"# Note {i}\n\nmarker{i}\n")
    urgent = SavesDuringTheSync(["n35.md", "n05.md"])  # one the sync has not reached yet, one it has
    engine.indexer.sync(embed=False, urgent=urgent)
    assert urgent.finished_paths == ["n35.md", "n05.md"]
    counts = consistent(engine)
    assert counts["files"] == counts["chunks"] == 40
    assert paths(engine, "marker35") == ["n35.md"]


def test_a_note_that_becomes_a_folder_is_not_a_skipped_note(make_engine, vault):
    engine = make_engine(kind="none")
    write(vault, "thing.md", "first a file")
    engine.indexer.sync()
    (vault / "thing.md").unlink()
    (vault / "thing.md").mkdir()
    write(vault, "thing.md/inside.md", "tomatoes inside")
    engine.indexer.sync(paths=["thing.md"])  # the watcher's event for the old name
    assert engine.store.problems() == []
    engine.indexer.sync()
    assert paths(engine, "tomatoes") == ["thing.md/inside.md"] and engine.store.problems() == []
