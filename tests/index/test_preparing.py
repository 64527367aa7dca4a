"""Notes prepared in worker processes, NOTES_PER_TASK to a task: each note gets its own result,
in order; a note that defeats the chunker fails alone; a worker that dies costs no note."""

from __future__ import annotations

import os
from concurrent.futures.process import BrokenProcessPool

import pytest

from tarsd.index.preparing import NOTES_PER_TASK, PARALLEL_MIN_NOTES, ChunkingFailed, Preparer, prepare_note
from tarsd.markdown.chunker import HeuristicCounter

BUDGET, OVERLAP = 64, 0.1


class TroubleCounter(HeuristicCounter):
    """The heuristic counter, except on two words: 'defeat' raises, as a chunker bug would, and
    'perish' ends the process it runs in, as the kernel's out-of-memory killer would."""

    def count(self, texts: list[str]) -> list[int]:
        for text in texts:
            if "defeat" in text:
                raise RecursionError("maximum recursion depth exceeded")
            if "perish" in text and os.environ.get("TARS_TEST_WORKER") == "1":
                os._exit(9)
        return super().count(texts)


def _note(i: int) -> str:
    return f"# Note {i}\n\n" + " ".join(f"word{i}x{j}" for j in range(5 + i % 40)) + "\n\n## More\n\nThe end of note " + str(i) + ".\n"


@pytest.fixture
def worker_env(monkeypatch):
    # Spawned workers inherit the environment: only they may die on 'perish'.
    monkeypatch.setenv("TARS_TEST_WORKER", "1")


def test_batched_notes_each_get_their_own_chunks_in_order(worker_env):
    counter = HeuristicCounter()
    preparer = Preparer(counter, BUDGET, OVERLAP, PARALLEL_MIN_NOTES)
    try:
        assert not preparer.in_place
        count = NOTES_PER_TASK * 2 + 5  # two full tasks and a part one, sent by flush()
        futures = [preparer.submit(_note(i), f"n{i}.md") for i in range(count)]
        assert not futures[-1].done()  # held back until its task fills or is flushed
        preparer.flush()
        for i, future in enumerate(futures):
            prepared = future.result(timeout=60)
            expected = prepare_note(_note(i), f"n{i}.md", counter, BUDGET, OVERLAP)
            assert prepared == expected, f"note {i}"
    finally:
        preparer.close()


def test_a_note_that_defeats_the_chunker_fails_alone(worker_env):
    preparer = Preparer(TroubleCounter(), BUDGET, OVERLAP, PARALLEL_MIN_NOTES)
    try:
        texts = [_note(i) for i in range(NOTES_PER_TASK)]
        texts[3] = "# Bad\n\nthis note will defeat the chunker\n"
        futures = [preparer.submit(text, f"n{i}.md") for i, text in enumerate(texts)]  # one full task: sent
        with pytest.raises(ChunkingFailed, match="RecursionError: maximum recursion depth exceeded"):
            futures[3].result(timeout=60)
        for i, future in enumerate(futures):
            if i != 3:
                assert future.result(timeout=60).title == f"Note {i}"
    finally:
        preparer.close()


def test_a_worker_that_dies_fails_its_task_and_later_notes_are_prepared_in_place(worker_env):
    preparer = Preparer(TroubleCounter(), BUDGET, OVERLAP, PARALLEL_MIN_NOTES)
    try:
        doomed = [preparer.submit("# Doomed\n\nthis worker will perish\n", "doomed.md")]
        doomed += [preparer.submit(_note(i), f"n{i}.md") for i in range(3)]
        preparer.flush()
        for future in doomed:  # the indexer prepares these again in place (Indexer._write)
            with pytest.raises(BrokenProcessPool):
                future.result(timeout=60)
        later = preparer.submit(_note(7), "n7.md")
        preparer.flush()
        assert preparer.in_place
        assert later.result(timeout=5).title == "Note 7"
    finally:
        preparer.close()


def test_close_cancels_notes_held_back(worker_env):
    preparer = Preparer(HeuristicCounter(), BUDGET, OVERLAP, PARALLEL_MIN_NOTES)
    held = preparer.submit(_note(1), "n1.md")
    preparer.close()
    assert held.cancelled()
